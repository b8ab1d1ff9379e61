"""The yardstick of a load run: a bare aiohttp websocket echo server (a process of its own)
answering frames of the sizes the game's players send and receive, driven by the same number
of clients, so a run's throughput can be printed as a share of what this machine can do."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time

import aiohttp

from server.bench.process import cpu_s, cpu_since, free_port
from server.bench.stats import Stats

ECHO_SERVER = """
import sys
from aiohttp import web, WSMsgType

async def ws(request):
    sock = web.WebSocketResponse(max_msg_size=1 << 20)
    await sock.prepare(request)
    reply = None
    async for msg in sock:
        if msg.type is WSMsgType.TEXT:
            if reply is None:
                reply = "x" * int(msg.data.split(":", 1)[0])
            await sock.send_str(reply)
    return sock

app = web.Application()
app.router.add_get("/ws", ws)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


async def _echo_client(url: str, deadline: float, request: str, stats: Stats) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await ws.send_str(request)
            msg = await ws.receive()
            if msg.type is not aiohttp.WSMsgType.TEXT:
                stats.errors["echo_closed"] += 1
                return
            stats.latencies_ms.append((time.perf_counter() - started) * 1000)
            stats.outcomes["accepted"] += 1


async def run_echo(players: int, seconds: float, request_bytes: int, reply_bytes: int) -> Stats:
    """The ceiling: the same clients against a bare aiohttp echo server (its own process)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", ECHO_SERVER, str(port))
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            await asyncio.sleep(0.1)
        request = f"{reply_bytes}:" + "x" * max(0, request_bytes - len(str(reply_bytes)) - 1)
        stats = Stats()
        deadline = time.monotonic() + seconds
        per_client = [Stats() for _ in range(players)]
        cpu_at_go = cpu_s(proc.pid)
        await asyncio.gather(
            *(_echo_client(f"ws://127.0.0.1:{port}/ws", deadline, request, s) for s in per_client)
        )
        stats.server_cpu_s = cpu_since(proc.pid, cpu_at_go)
        for s in per_client:
            stats.merge(s)
        return stats
    finally:
        proc.terminate()
        await proc.wait()
