"""Several server processes on one port: ``tripeaks serve --workers N``.

The parent process checks the settings, loads the daily secret and starts the embedded database
when there is no ``DATABASE_URL``; then it starts N worker processes, each a whole server
listening on the same address with ``SO_REUSEPORT`` (the kernel spreads new connections over
them). The workers are the processes of one service, as behind a load balancer: they share the
database, race events cross between them by ``LISTEN/NOTIFY``, and each keeps its own presence
record. The parent only supervises: a worker that dies is started again (one that keeps dying
within seconds of its start stops the whole service), and SIGINT / SIGTERM stop every worker
cleanly before the parent exits.

Each worker leads a process group of its own, which its solver processes
(:mod:`server.services.analysis`) join; when a worker has ended, however it ended, the parent
kills whatever is left of its group (the solver processes also die with their worker on Linux
by ``PR_SET_PDEATHSIG``). The address check before the start binds as the workers' listeners
do, with ``SO_REUSEADDR``, so that the connections the previous instance closed itself, which
linger on the port for up to a minute, do not hold a restart up.

With metrics on (``TRIPEAKS_METRICS``), the parent also gives the workers a private directory
for ``prometheus_client``'s multiprocess mode, in ``PROMETHEUS_MULTIPROC_DIR`` (set before any
worker starts: a spawned worker takes the parent's environment, and reads it when it first
imports ``prometheus_client``). Each worker keeps its metrics in files there, and the worker
that answers a scrape of ``/metrics`` sums them all; a dead worker's open gauges are taken out
of the sums (``mark_process_dead``), and the directory is removed when the parent stops.
"""

from __future__ import annotations

import errno
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from prometheus_client.multiprocess import mark_process_dead

from server.config import Settings

log = logging.getLogger("server")

#: A worker that dies within this many seconds of its start is failing, not crashing once.
EARLY_DEATH_S = 5.0
#: Early deaths in a row of one worker after which the service stops.
MAX_EARLY_DEATHS = 3
#: Seconds the workers get to stop after SIGTERM before they are killed.
STOP_TIMEOUT_S = 20.0
#: Seconds between looks at the workers.
POLL_S = 0.2
#: The environment variable naming ``prometheus_client``'s multiprocess directory.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class PortTaken(Exception):
    """The address cannot be listened on (in use, not ours, not on this machine)."""


def check_port(host: str, port: int) -> None:
    """Fail early when the address cannot be listened on: the workers, which share it with
    ``SO_REUSEPORT``, would otherwise each fail alone.

    Raises:
        PortTaken: naming the address and the reason.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the workers' listeners do (asyncio sets it on POSIX): the connections a previous
        # instance closed itself linger in TIME-WAIT / FIN-WAIT-2 on the port for up to a
        # minute, and only a socket without SO_REUSEADDR is refused for them. A listening
        # socket on the port still refuses this bind (Linux), which is what is checked.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
                raise PortTaken(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            raise


@dataclass
class _Worker:
    number: int
    process: BaseProcess
    started: float = field(default_factory=time.monotonic)
    early_deaths: int = 0


def run_workers(
    count: int,
    settings: Settings,
    daily_secret: bytes,
    target: Callable[[int, dict[str, Any], bytes], None],
) -> int:
    """Start ``count`` workers running ``target(number, settings, daily_secret)`` and supervise
    them until SIGINT or SIGTERM (or a worker that keeps failing).

    Returns:
        The exit status for the parent: 0 after a requested stop, 1 when a worker kept failing.
    """
    if not settings.metrics:
        return _supervise(count, settings, daily_secret, target, None)
    with _metrics_directory() as directory:
        return _supervise(count, settings, daily_secret, target, directory)


@contextmanager
def _metrics_directory() -> Iterator[str]:
    """A fresh private directory for the workers' metrics, named in this process's
    ``PROMETHEUS_MULTIPROC_DIR`` (which the workers inherit) for the block; the variable's
    earlier value comes back and the directory is removed after it."""
    directory = tempfile.mkdtemp(prefix="tripeaks-metrics-")
    previous = os.environ.get(MULTIPROCESS_ENV)
    os.environ[MULTIPROCESS_ENV] = directory
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop(MULTIPROCESS_ENV, None)
        else:
            os.environ[MULTIPROCESS_ENV] = previous
        shutil.rmtree(directory, ignore_errors=True)


def _supervise(
    count: int,
    settings: Settings,
    daily_secret: bytes,
    target: Callable[[int, dict[str, Any], bytes], None],
    metrics_dir: str | None,
) -> int:
    """:func:`run_workers`, with the workers' metrics in ``metrics_dir`` (None: metrics off)."""
    context = multiprocessing.get_context("spawn")
    dumped = settings.model_dump(mode="json")
    stopping: list[int] = []

    def request_stop(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    def start(number: int, early_deaths: int = 0) -> _Worker:
        process = context.Process(
            target=target, args=(number, dumped, daily_secret), name=f"tripeaks-worker-{number}"
        )
        process.start()
        return _Worker(number, process, early_deaths=early_deaths)

    workers = [start(n) for n in range(1, count + 1)]
    log.info("started %d workers on %s:%s", count, settings.host, settings.port)
    status = 0
    try:
        while not stopping:
            time.sleep(POLL_S)
            for i, worker in enumerate(workers):
                code = worker.process.exitcode
                if code is None or stopping:
                    continue
                early = time.monotonic() - worker.started < EARLY_DEATH_S
                deaths = worker.early_deaths + 1 if early else 0
                log.error("worker %d exited with %s", worker.number, code)
                _end_group(worker.process)
                if metrics_dir is not None:
                    _metrics_of_dead(worker.process, metrics_dir)
                if deaths >= MAX_EARLY_DEATHS:
                    log.error(
                        "worker %d failed %d times within %.0f s of its start; stopping",
                        worker.number,
                        deaths,
                        EARLY_DEATH_S,
                    )
                    stopping.append(0)
                    status = 1
                    break
                workers[i] = start(worker.number, deaths)
                log.info("worker %d started again", worker.number)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_all(workers)
    return status


def _metrics_of_dead(process: BaseProcess, metrics_dir: str) -> None:
    """Take a dead worker's gauges out of the sums (its open connections, its pool); its
    counts stay in them."""
    if process.pid is not None:
        mark_process_dead(process.pid, metrics_dir)  # type: ignore[no-untyped-call]


def _stop_all(workers: list[_Worker]) -> None:
    """SIGTERM every worker still running; kill those still running after the stop time-out."""
    for worker in workers:
        if worker.process.exitcode is None and worker.process.pid is not None:
            os.kill(worker.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.exitcode is None:
            log.error("worker %d did not stop in %.0f s; killing it", worker.number, STOP_TIMEOUT_S)
            worker.process.kill()
            worker.process.join()
        _end_group(worker.process)


def _end_group(process: BaseProcess) -> None:
    """Kill what is left of an ended worker's process group (its solver processes, if it was
    killed before it could stop them). The group is the worker's own
    (:func:`detach_from_terminal_signals`), named by its pid, which the kernel does not give
    another process while a member of the group lives; a group already empty is left alone."""
    if sys.platform == "win32" or process.pid is None:
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def detach_from_terminal_signals() -> None:
    """In a worker: leave the terminal's process group for one of its own, so that Ctrl-C
    reaches the parent alone, which then stops every worker once (not each twice), and so that
    the parent can end whatever the worker started (:func:`_end_group`)."""
    if sys.platform != "win32":
        os.setpgid(0, 0)


def stop_with_parent(every_s: float = 1.0) -> None:
    """In a worker: stop cleanly (SIGTERM to itself) if the parent dies without stopping it
    (killed): a worker is never left serving on its own."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        log.error("the supervising process is gone; stopping")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


__all__ = [
    "PortTaken",
    "check_port",
    "detach_from_terminal_signals",
    "run_workers",
    "stop_with_parent",
]
