"""Measuring processes on this machine (Linux ``/proc``): resident memory and CPU time of a
server process and its descendants, a free loopback port to start one on, a server process
started from a source tree and stopped afterwards (:func:`server_process`, for benchmarks that
compare trees; :func:`serve_tree`, with the limits that would hold a load back lifted), and a
real ``tripeaks serve`` process (:class:`ServeProcess`) as an operator
starts it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

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


def cpu_since(pid: int, before: float | None) -> float | None:
    """CPU seconds a process has used since it had used ``before`` (from :func:`cpu_s`), or
    None when either reading is missing."""
    now = cpu_s(pid)
    return None if before is None or now is None else now - before


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


#: Seconds a started server process has to listen on its port.
LISTEN_WITHIN_S = 60.0


async def _wait_listening(port: int, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + LISTEN_WITHIN_S
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not listen within {LISTEN_WITHIN_S:g} s")


@contextlib.asynccontextmanager
async def server_process(
    tree: Path, env: Mapping[str, str], output: IO[str] | None = None
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """``python -m server serve`` from the source tree ``tree`` (its ``PYTHONPATH`` and working
    directory) on a free loopback port, with ``env`` as its environment (its output written to
    ``output``, else discarded);
    yields the port and the process once it listens, and stops it afterwards (SIGTERM, then
    SIGKILL after 30 s).

    Raises:
        RuntimeError: it exited, or did not listen within :data:`LISTEN_WITHIN_S`.
    """
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server",
        "serve",
        "--port",
        str(port),
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
        stdout=asyncio.subprocess.DEVNULL if output is None else output,
        stderr=asyncio.subprocess.DEVNULL if output is None else output,
    )
    try:
        await _wait_listening(port, process)
        yield port, process
    finally:
        await stop(process)


@contextlib.asynccontextmanager
async def serve_tree(
    tree: Path,
    url: str,
    workers: int,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """A real server (``python -m server serve``, ``workers`` processes) of the source tree
    ``tree`` over the database at ``url``, with the limits that would hold a load back lifted
    and the solver off (``env`` adds to or overrides its environment); stopped on exit. Its
    output goes to ``log`` (appended), or nowhere.

    Yields:
        Its base URL (``http://127.0.0.1:<port>``) and its process.
    """
    settings = server_env(
        tree,
        url,
        TRIPEAKS_WS_RATE_PER_SECOND="10000",
        TRIPEAKS_REGISTER_PER_MINUTE="1000000",
        TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS="1000000",
        TRIPEAKS_MAX_SOCKETS_PER_PLAYER="8",
        TRIPEAKS_WORKERS=str(workers),
        **(env or {}),
    )
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("a")) if log else None
        async with server_process(tree, settings, out) as (port, process):
            yield f"http://127.0.0.1:{port}", process


def server_env(tree: Path, database_url: str, **settings: str) -> dict[str, str]:
    """The environment of a server process started from the source tree ``tree`` over
    ``database_url``: this process's, with a daily secret of its own, no solver processes, and
    ``settings`` (``TRIPEAKS_…`` variables) on top."""
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": database_url,
        "TRIPEAKS_DAILY_SECRET": secrets.token_hex(32),
        "TRIPEAKS_SOLVER_WORKERS": "0",
        **settings,
    }


async def stop(process: asyncio.subprocess.Process) -> None:
    """Stop a server process: SIGTERM (unless it has ended), then SIGKILL if it has not
    ended within 30 s."""
    if process.returncode is None:
        process.terminate()
    try:
        await asyncio.wait_for(process.wait(), 30)
    except TimeoutError:
        process.kill()
        await process.wait()


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
    """One ``tripeaks serve`` process on a free loopback port (a process of its own, with its
    own pools and listener).

    Attributes:
        env: its environment (``TRIPEAKS_*`` and ``DATABASE_URL`` only from here).
        log: where its stdout and stderr go.
    """

    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        """Its HTTP address."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (it migrates first) without waiting for it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPEAKS_")}
        env.pop("DATABASE_URL", None)
        env.update(self.env, TRIPEAKS_PORT=str(self.port))
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "server", "serve"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
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
        """What it has logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> int | None:
        """SIGTERM, then wait (SIGKILL after 20 s); its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode
