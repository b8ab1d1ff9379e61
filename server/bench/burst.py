"""A burst of connections: players registered beforehand all open their websocket and say hello
at the same moment (a crowd arriving at the daily's release); how long each waits for its
``welcome`` and how many connect per second."""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from server.bench import percentile
from server.bench.crowd import PATIENCE_S, ask
from server.bench.process import cpu_s, cpu_since, shares, spawned_each
from server.bench.stats import Stats

#: Registrations in flight at once while the burst's players are made (before the clock).
REGISTER_CONCURRENCY = 32


async def register(http: aiohttp.ClientSession, base: str, count: int) -> list[str]:
    """``count`` new players' tokens (registered :data:`REGISTER_CONCURRENCY` at a time, each
    coming back when told ``server_busy``)."""
    gate = asyncio.Semaphore(REGISTER_CONCURRENCY)

    async def one() -> str:
        async with gate:
            name = f"burst{secrets.token_hex(5)}"
            while True:  # told server_busy (503 with Retry-After), back when told
                async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
                    if resp.status != 503 or "Retry-After" not in resp.headers:
                        resp.raise_for_status()
                        token: str = (await resp.json())["token"]
                        return token
                    wait_s = float(resp.headers["Retry-After"])
                await asyncio.sleep(wait_s)

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def _open_all(
    http: aiohttp.ClientSession, base: str, tokens: list[str], go: Callable[[], Awaitable[None]]
) -> tuple[Stats, float, list[aiohttp.ClientWebSocketResponse]]:
    """Open a websocket for each of ``tokens`` once ``go`` returns and say hello on it; the
    open-to-welcome times and refusals, when the last was answered (monotonic s) and the
    sockets (open)."""
    stats = Stats()
    sockets: list[aiohttp.ClientWebSocketResponse] = []
    ready = asyncio.Event()

    async def connect(token: str) -> None:
        await ready.wait()
        began = time.monotonic()
        ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws")
        sockets.append(ws)
        reply = await ask(ws, {"type": "hello", "token": token}, stats)
        if reply.get("type") == "welcome":
            stats.latencies_ms.append((time.monotonic() - began) * 1000)
        else:
            stats.errors[reply.get("code", "bad_reply")] += 1

    tasks = [asyncio.create_task(connect(token)) for token in tokens]
    await go()
    ready.set()
    await asyncio.gather(*tasks)
    return stats, time.monotonic(), sockets


def _load_session() -> aiohttp.ClientSession:
    """A burst's client session: no limit on its connections, every request bounded."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=PATIENCE_S * 2),
    )


def _burst_process(
    base: str, count: int, barrier: Any, pipe: multiprocessing.connection.Connection
) -> None:
    """One load process of a split burst: register ``count`` players, wait at ``barrier`` for
    the others, open and greet them all, and send back ``(stats, last answered at)``."""

    async def run() -> None:
        async with _load_session() as http:
            tokens = await register(http, base, count)

            async def go() -> None:
                await asyncio.to_thread(barrier.wait)

            stats, ended, sockets = await _open_all(http, base, tokens, go)
            pipe.send((stats, ended))
            await asyncio.gather(*(ws.close() for ws in sockets))

    asyncio.run(run())


async def burst(base: str, count: int, pid: int | None, clients: int = 1) -> None:
    """Register ``count`` players, then open all their websockets at once and say hello; print
    the time from opening to ``welcome`` (p50, p99, max, ms), the connections per second, the
    ``server_busy`` returns and the server's CPU time per connection (``pid``'s). With
    ``clients`` above 1 the players are spread over that many load processes (so that the
    load generator's own CPU does not set the pace), all starting together."""
    if clients > 1:
        stats, spent, cpu = await _burst_split(base, count, pid, clients)
    else:
        async with _load_session() as http:
            tokens = await register(http, base, count)
            cpu_before: float | None = None
            began = 0.0

            async def go() -> None:  # the clock starts with every connection ready
                nonlocal cpu_before, began
                cpu_before = cpu_s(pid) if pid else None
                began = time.monotonic()

            stats, ended, sockets = await _open_all(http, base, tokens, go)
            spent = ended - began
            cpu = cpu_since(pid, cpu_before) if pid else None
            await asyncio.gather(*(ws.close() for ws in sockets))
    lat = stats.latencies_ms
    print(
        f"burst of {count} connections ({clients} load process{'es' if clients > 1 else ''}): "
        f"all welcomed in {spent:.2f} s = {count / spent:,.0f}/s"
    )
    if lat:
        print(
            f"  open to welcome ms: p50 {statistics.median(lat):.1f}  "
            f"p99 {percentile(lat, 0.99):.1f}  max {max(lat):.1f}"
        )
    print(f"  server_busy returns: {stats.busy_retries}  errors: {dict(stats.errors) or 0}")
    if cpu is not None and count:
        print(f"  server CPU: {cpu / count * 1e6:,.0f} us per connection")


async def _burst_split(
    base: str, count: int, pid: int | None, clients: int
) -> tuple[Stats, float, float | None]:
    """:func:`burst`'s players over ``clients`` load processes: their merged stats, the time
    from the start until the last welcome (s) and the server's CPU time meanwhile (s)."""
    barrier = multiprocessing.get_context("spawn").Barrier(clients + 1)
    stats = Stats()
    arguments: list[tuple[object, ...]] = [
        (base, share, barrier) for share in shares(count, clients)
    ]
    async with spawned_each(_burst_process, arguments) as pipes:
        await asyncio.to_thread(barrier.wait)
        began = time.monotonic()
        cpu_before = cpu_s(pid) if pid else None
        ended = began
        for pipe in pipes:
            theirs, their_end = await asyncio.to_thread(pipe.recv)
            stats.merge(theirs)
            ended = max(ended, their_end)
        cpu = cpu_since(pid, cpu_before) if pid else None
    return stats, ended - began, cpu
