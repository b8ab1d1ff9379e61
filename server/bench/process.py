"""Measuring processes on this machine (Linux ``/proc``): resident memory and CPU time of a
server process and its descendants, a free loopback port to start one on, and a real server
process (:class:`ServeProcess`, started and stopped by hand, from this tree or another), which
:func:`server_process` starts from a source tree, waits for and stops afterwards (for
benchmarks that compare trees; :func:`serve_tree` with the limits that would hold a load back
lifted)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

#: Seconds a server process gets to answer ``/readyz`` after it is started (it migrates first).
SERVER_START_S = 90.0


def rss_kb(pid: int, *, descendants: bool = True) -> int | None:
    """Resident memory of a process and (unless told not to) its living descendants (the
    workers of ``serve --workers``) in KiB (Linux), or None if it cannot be read."""
    total = None
    for member in family(pid) if descendants else {pid}:
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total = (total or 0) + int(line.split()[1])
        except OSError:
            continue
    return total


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_s(pid: int, *, descendants: bool = True) -> float | None:
    """CPU time (user + system) a process and (unless told not to) its living descendants
    (the workers of ``serve --workers``, solver processes) have used so far, in seconds
    (Linux), or None."""
    fields = _stat(pid)
    if fields is None:
        return None
    if not descendants:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    ticks = 0
    for member in family(pid):
        member_fields = fields if member == pid else _stat(member)
        if member_fields is not None:
            ticks += int(member_fields[11]) + int(member_fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def family(pid: int) -> set[int]:
    """``pid`` and its living descendants (Linux)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (other := _stat(int(entry))) is not None:
            parents[int(entry)] = int(other[1])
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        family.update(children)
        frontier += children
    return family


def machine_busy() -> tuple[float, float]:
    """The machine's CPU time so far (Linux ``/proc/stat``, every core), in seconds:
    ``(busy, total)``, busy being all but idle and waiting on I/O; two readings' differences
    give the share of the machine used between them."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    total = sum(ticks[:8]) * tick_s  # guest time is already counted in user time
    return total - (ticks[3] + ticks[4]) * tick_s, total


def cpu_since(pid: int, before: float | None) -> float | None:
    """CPU seconds a process has used since it had used ``before`` (from :func:`cpu_s`), or
    None when either reading is missing."""
    now = cpu_s(pid)
    return None if before is None or now is None else now - before


#: Seconds a load process gets to end by itself before it is killed.
JOIN_S = 30.0


@contextlib.asynccontextmanager
async def spawned(
    target: Callable[..., None], *args: object
) -> AsyncIterator[multiprocessing.connection.Connection]:
    """``target(*args, pipe)`` in a process of its own (spawned: a fresh interpreter with its
    own event loop, so that a load generator keeps its own pace), yielding this end of its
    pipe; on exit, joined (killed after :data:`JOIN_S` s)."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=target, args=(*args, theirs), daemon=True)
    process.start()
    try:
        yield ours
    finally:
        await asyncio.to_thread(process.join, JOIN_S)
        if process.is_alive():
            process.kill()


def shares(count: int, parts: int) -> list[int]:
    """``count`` spread over ``parts`` as evenly as it goes (the first ones one more)."""
    return [count // parts + (1 if i < count % parts else 0) for i in range(parts)]


@contextlib.asynccontextmanager
async def spawned_each(
    target: Callable[..., None], arguments: list[tuple[object, ...]]
) -> AsyncIterator[list[multiprocessing.connection.Connection]]:
    """:func:`spawned` once for each of ``arguments`` (``target(*args, pipe)`` each), yielding
    their pipes in that order; on exit, each joined."""
    async with contextlib.AsyncExitStack() as processes:
        yield [await processes.enter_async_context(spawned(target, *args)) for args in arguments]


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def crowd_env(database_url: str, data: Path, daily_secret: str) -> dict[str, str]:
    """The environment of a server process that many simulated players reach from 127.0.0.1:
    the limits on one client address lifted, no solver workers, warnings only."""
    return {
        "DATABASE_URL": database_url,
        "TRIPEAKS_DAILY_SECRET": daily_secret,
        "TRIPEAKS_DATA_DIR": str(data),
        "TRIPEAKS_SOLVER_WORKERS": "0",
        "TRIPEAKS_REGISTER_PER_MINUTE": "100000",
        "TRIPEAKS_WS_RATE_PER_SECOND": "1000",
        "TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS": "100000",
        "TRIPEAKS_LOG_LEVEL": "WARNING",
    }


@dataclass
class ServeProcess:
    """One ``python -m server serve`` process on a free loopback port (a process of its own,
    with its own pools and listener), as an operator starts it.

    Attributes:
        env: its environment's ``TRIPEAKS_*`` variables and ``DATABASE_URL`` (this process's
            are not passed on), and any others to set.
        log: where its stdout and stderr go (appended), or None: nowhere.
        tree: the source tree it runs (its ``PYTHONPATH`` and working directory), or None:
            this process's modules, in its working directory.
        port: the port it listens on (given on its command line).
        process: the process once started.
    """

    env: Mapping[str, str]
    log: Path | None
    tree: Path | None = None
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        """Its HTTP address."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """Its process id (started: see :meth:`start`)."""
        assert self.process is not None, "not started"
        return self.process.pid

    def start(self) -> None:
        """Start it (it migrates first) without waiting for it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPEAKS_")}
        env.pop("DATABASE_URL", None)
        env.update(self.env)
        if self.tree is not None:
            env["PYTHONPATH"] = str(self.tree)
        command = [sys.executable, "-m", "server", "serve", "--port", str(self.port)]
        with contextlib.ExitStack() as files:
            out = files.enter_context(self.log.open("ab")) if self.log else subprocess.DEVNULL
            self.process = subprocess.Popen(
                command, env=env, cwd=self.tree, stdout=out, stderr=subprocess.STDOUT
            )

    async def ready(self, within_s: float = SERVER_START_S) -> None:
        """Wait until it answers ``/readyz`` with 200.

        Raises:
            RuntimeError: it exited or took longer than ``within_s`` (with its log's end).
        """
        assert self.process is not None
        deadline = time.monotonic() + within_s
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"{self.base}/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not become ready:\n{self.text()[-6000:]}")
                await asyncio.sleep(0.1)

    def text(self) -> str:
        """What it has logged so far ("" when its output goes nowhere)."""
        if self.log is None or not self.log.exists():
            return ""
        return self.log.read_text(errors="replace")

    def stop(self, within_s: float = 20.0) -> int | None:
        """SIGTERM, then wait (SIGKILL after ``within_s``); its exit status (None when it was
        never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=within_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@contextlib.asynccontextmanager
async def server_process(
    tree: Path, env: Mapping[str, str], log: Path | None = None
) -> AsyncIterator[ServeProcess]:
    """A :class:`ServeProcess` of the source tree ``tree`` with ``env`` (see its attributes; its
    output appended to ``log``, else discarded), yielded once it is ready and stopped afterwards
    (SIGTERM, then SIGKILL after 30 s).

    Raises:
        RuntimeError: it exited, or did not become ready within :data:`SERVER_START_S`.
    """
    server = ServeProcess(env, log, tree)
    server.start()
    try:
        await server.ready()
        yield server
    finally:
        await asyncio.to_thread(server.stop, 30.0)


@contextlib.asynccontextmanager
async def serve_tree(
    tree: Path,
    url: str,
    workers: int,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> AsyncIterator[ServeProcess]:
    """A real server (``python -m server serve``, ``workers`` processes) of the source tree
    ``tree`` over the database at ``url``, with the limits that would hold a load back lifted
    and the solver off (``env`` adds to or overrides its environment), ready; stopped on exit.
    Its output goes to ``log`` (appended), or nowhere.

    Yields:
        The server (its :attr:`ServeProcess.base` URL, ``http://127.0.0.1:<port>``, and its
        :attr:`ServeProcess.pid`).
    """
    settings = server_env(
        url,
        TRIPEAKS_WS_RATE_PER_SECOND="10000",
        TRIPEAKS_REGISTER_PER_MINUTE="1000000",
        TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS="1000000",
        TRIPEAKS_MAX_SOCKETS_PER_PLAYER="8",
        TRIPEAKS_WORKERS=str(workers),
        **(env or {}),
    )
    async with server_process(tree, settings, log) as server:
        yield server


def server_env(database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a benchmark's server process over ``database_url``: this process's,
    with a daily secret of its own, no solver processes, and ``settings`` (``TRIPEAKS_…``
    variables) on top."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "TRIPEAKS_DAILY_SECRET": secrets.token_hex(32),
        "TRIPEAKS_SOLVER_WORKERS": "0",
        **settings,
    }
