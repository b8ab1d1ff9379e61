"""Measuring processes on this machine (Linux ``/proc``): resident memory and CPU time of a
server process and its descendants, a free loopback port to start one on, and a server of a
source tree started for a benchmark (:func:`serve_tree`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path


def rss_kb(pid: int, *, descendants: bool = True) -> int | None:
    """Resident memory of a process and (unless told not to) its living descendants (the
    workers of ``serve --workers``) in KiB (Linux), or None if it cannot be read."""
    total = None
    for member in _family(pid) if descendants else {pid}:
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
    for member in _family(pid):
        member_fields = fields if member == pid else _stat(member)
        if member_fields is not None:
            ticks += int(member_fields[11]) + int(member_fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _family(pid: int) -> set[int]:
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


async def wait_listening(port: int, process: asyncio.subprocess.Process, within_s: float) -> None:
    """Return once something listens on loopback ``port``.

    Raises:
        RuntimeError: ``process`` exited first, or nothing listened within ``within_s``.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError(f"the server did not listen within {within_s:g} s")


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
    port = free_port()
    settings = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": url,
        "TRIPEAKS_DAILY_SECRET": secrets.token_hex(32),
        "TRIPEAKS_WS_RATE_PER_SECOND": "10000",
        "TRIPEAKS_REGISTER_PER_MINUTE": "1000000",
        "TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS": "1000000",
        "TRIPEAKS_MAX_SOCKETS_PER_PLAYER": "8",
        "TRIPEAKS_SOLVER_WORKERS": "0",
        "TRIPEAKS_WORKERS": str(workers),
        **(env or {}),
    }
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("ab")) if log else asyncio.subprocess.DEVNULL
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "server",
            "serve",
            "--port",
            str(port),
            env=settings,
            cwd=tree,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT if log else asyncio.subprocess.DEVNULL,
        )
    try:
        await wait_listening(port, process, 90)
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.returncode is None:
            process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
