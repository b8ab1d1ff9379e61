"""A real ``tripeaks serve`` listens with a backlog a storm fits in
(:data:`server.web.serving.LISTEN_BACKLOG`): the kernel keeps the connections waiting to be
accepted rather than dropping their handshakes."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from server.web.serving import ACCEPT_BATCH, LISTEN_BACKLOG, ListeningSite
from tests.helpers import eventually
from tests.pooler import DAILY_SECRET, ServerProcess


def _backlog(port: int) -> int:
    """The listening socket's backlog on ``port``, as ``ss`` shows it (its Send-Q)."""
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[2])


def _somaxconn() -> int:
    """The kernel's cap on a listening socket's backlog."""
    return int(Path("/proc/sys/net/core/somaxconn").read_text())


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read the backlog")
async def test_a_server_process_listens_with_a_backlog_a_storm_fits_in(
    database_url: str, tmp_path: Path
) -> None:
    server = ServerProcess(
        {
            "DATABASE_URL": database_url,
            "TRIPEAKS_DAILY_SECRET": DAILY_SECRET,
            "TRIPEAKS_DATA_DIR": str(tmp_path / "data"),
            "TRIPEAKS_SOLVER_WORKERS": "0",
            "TRIPEAKS_LOG_LEVEL": "WARNING",
        },
        tmp_path / "server.log",
    )
    server.start()
    try:
        await server.ready()
        assert _backlog(server.port) == min(LISTEN_BACKLOG, _somaxconn()) > 128
    finally:
        server.stop()


async def test_connections_waiting_in_the_kernel_are_accepted_a_batch_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """However many connections wait to be accepted, one turn of the loop sets up at most
    ACCEPT_BATCH of them (asyncio takes its batch from the backlog it listens with: at 4,096
    a storm's piled-up pages were set up in one turn of a second)."""
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    loop = asyncio.get_running_loop()
    turn = [0]

    def tick() -> None:
        turn[0] += 1
        loop.call_soon(tick)

    accepted_in: list[int] = []
    connection_made = RequestHandler.connection_made

    def counted(handler: RequestHandler, transport: Any) -> None:
        accepted_in.append(turn[0])
        connection_made(handler, transport)

    monkeypatch.setattr(RequestHandler, "connection_made", counted)

    site = ListeningSite(runner, "127.0.0.1", 0, reuse_port=False)
    await site.start()
    clients: list[socket.socket] = []
    try:
        port = runner.addresses[0][1]
        assert _backlog(port) == min(LISTEN_BACKLOG, _somaxconn())
        count = 3 * ACCEPT_BATCH + 5
        for _ in range(count):  # all wait in the kernel before the loop runs again
            client = socket.create_connection(("127.0.0.1", port))
            clients.append(client)
        loop.call_soon(tick)
        await eventually(lambda: len(accepted_in) == count, "every connection is accepted")
        per_turn = Counter(accepted_in)
        assert max(per_turn.values()) <= ACCEPT_BATCH and len(per_turn) >= 4
    finally:
        for client in clients:
            client.close()
        await runner.cleanup()
