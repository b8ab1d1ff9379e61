"""A burst of connections: players registered beforehand all open their websocket and say hello
at the same moment (a crowd arriving at the daily's release); how long each waits for its
``welcome`` and how many connect per second."""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time

import aiohttp

from server.bench import percentile
from server.bench.crowd import PATIENCE_S, ask
from server.bench.process import cpu_s
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


async def burst(base: str, count: int, pid: int | None) -> None:
    """Register ``count`` players, then open all their websockets at once and say hello; print
    the time from opening to ``welcome`` (p50, p99, max, ms), the connections per second, the
    ``server_busy`` returns and the server's CPU time per connection (``pid``'s)."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=PATIENCE_S * 2)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        tokens = await register(http, base, count)
        stats = Stats()
        sockets: list[aiohttp.ClientWebSocketResponse] = []
        go = asyncio.Event()

        async def connect(token: str) -> None:
            await go.wait()
            began = time.monotonic()
            ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws")
            sockets.append(ws)
            reply = await ask(ws, {"type": "hello", "token": token}, stats)
            if reply.get("type") == "welcome":
                stats.latencies_ms.append((time.monotonic() - began) * 1000)
            else:
                stats.errors[reply.get("code", "bad_reply")] += 1

        tasks = [asyncio.create_task(connect(token)) for token in tokens]
        cpu_before = cpu_s(pid) if pid else None
        began = time.monotonic()
        go.set()
        await asyncio.gather(*tasks)
        spent = time.monotonic() - began
        cpu_after = cpu_s(pid) if pid else None
        cpu = cpu_after - cpu_before if cpu_after is not None and cpu_before is not None else None
        await asyncio.gather(*(ws.close() for ws in sockets))
    lat = stats.latencies_ms
    print(f"burst of {count} connections: all welcomed in {spent:.2f} s = {count / spent:,.0f}/s")
    if lat:
        print(
            f"  open to welcome ms: p50 {statistics.median(lat):.1f}  "
            f"p99 {percentile(lat, 0.99):.1f}  max {max(lat):.1f}"
        )
    print(f"  server_busy returns: {stats.busy_retries}  errors: {dict(stats.errors) or 0}")
    if cpu is not None and count:
        print(f"  server CPU: {cpu / count * 1e6:,.0f} us per connection")
