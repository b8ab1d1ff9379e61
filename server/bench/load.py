"""Load generator (``tripeaks loadtest``): simulated players over real websockets against a
server on this machine.

Each simulated player registers, opens a websocket, starts a free game (or joins the daily) and
plays legal actions (removals, draws, some undos) as fast as the acks arrive, starting a new
game when one ends, until the duration is over. The same run can measure the ceiling: a bare
aiohttp websocket echo server on this machine, answered with frames of the same sizes, driven
by the same number of clients; our throughput is then printed as a share of it.

Targets are loopback addresses only; every loop is bounded by the duration and stops by itself.

The pieces: :mod:`server.bench.crowd` (the simulated players), :mod:`server.bench.paced` (a
human rate), :mod:`server.bench.echo` (the yardstick), :mod:`server.bench.process` (what the
server process uses), :mod:`server.bench.stats` (figures and report).
"""

from __future__ import annotations

import asyncio
import ipaddress
import statistics
import time
from collections import Counter
from urllib.parse import urlsplit

import aiohttp

from server.bench.crowd import connect_player, run_players
from server.bench.echo import run_echo
from server.bench.paced import paced_ladder
from server.bench.process import cpu_s, cpu_since, rss_kb
from server.bench.stats import report


def require_loopback(url: str) -> None:
    """Refuse any target that is not a loopback address.

    Raises:
        ValueError: the URL's host is not ``localhost`` or a loopback IP.
    """
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"load tests target loopback addresses only, not {host!r}")


#: Seconds the server's CPU time is watched while the idle connections stay open.
IDLE_WATCH_S = 10.0


async def idle_connections(base: str, count: int, pid: int | None) -> None:
    """Open ``count`` idle websockets, each authenticated as a player of its own (as real
    players are) and read all along (so the server's pings are answered, as a browser does),
    and report the server's memory per connection and the CPU it spends on them while nothing
    happens (pings and timers only) over :data:`IDLE_WATCH_S`."""
    before = rss_kb(pid) if pid else None
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        sockets: list[aiohttp.ClientWebSocketResponse] = []
        readers: list[asyncio.Task[None]] = []
        try:
            for start in range(0, count, 200):
                opened = await asyncio.gather(
                    *(connect_player(http, base, "idle") for _ in range(min(200, count - start)))
                )
                sockets += opened
                readers += [asyncio.create_task(_drain(ws)) for ws in opened]
            await asyncio.sleep(2)
            after = rss_kb(pid) if pid else None
            print(f"idle connections open: {len(sockets)}")
            if before is not None and after is not None:
                per = (after - before) / max(1, len(sockets))
                print(
                    f"  server RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB: "
                    f"{per:.1f} KiB per connection"
                )
            if pid:
                cpu_before, started = cpu_s(pid), time.monotonic()
                await asyncio.sleep(IDLE_WATCH_S)
                used = cpu_since(pid, cpu_before)
                if used is not None:
                    print(
                        f"  server CPU while idle: {used / (time.monotonic() - started):.2%} of "
                        f"one core over {IDLE_WATCH_S:g} s"
                    )
            closed = Counter(ws.close_code for ws in sockets if ws.closed)
            if closed:
                print(f"  closed by the server meanwhile (by close code): {dict(closed)}")
        finally:
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await asyncio.gather(*(ws.close() for ws in sockets))


async def _drain(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Read a socket until it closes (answering pings on the way)."""
    async for _ in ws:
        pass


async def main_async(
    url: str,
    players: int,
    seconds: float,
    mode: str,
    echo: bool,
    pid: int | None,
    idle: int,
    paced: list[int] | None = None,
    pace: float = 1.0,
    jitter: float = 0.5,
    target_p99_ms: float = 50.0,
) -> int:
    """The ``tripeaks loadtest`` command; returns how many requests failed (0: all answered)."""
    require_loopback(url)
    base = url.rstrip("/")
    if idle:
        await idle_connections(base, idle, pid)
        return 0
    if paced:
        rows = await paced_ladder(base, paced, seconds, pace, jitter, pid, target_p99_ms)
        return sum(row.errors for row in rows)
    before = rss_kb(pid) if pid else None
    stats, spent = await run_players(base, players, seconds, mode, pid)
    after = rss_kb(pid) if pid else None
    rate = report(f"tripeaks ({players} players, mode {mode})", stats, spent)
    if before is not None and after is not None:
        print(f"  server RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after")
    if echo and stats.request_bytes:
        req = int(statistics.median(stats.request_bytes))
        rep = int(statistics.median(stats.reply_bytes))
        echo_stats = await run_echo(players, seconds, req, rep)
        ceiling = report(
            f"echo ceiling ({players} clients, {req} B -> {rep} B)", echo_stats, seconds
        )
        if ceiling:
            print(f"throughput vs echo ceiling: {rate / ceiling:.1%}")
    return sum(stats.errors.values())
