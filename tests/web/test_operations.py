"""The operations port (:mod:`server.web.operations`): health and metrics read at once while
the main port's door holds new connections."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import ClientSession, TCPConnector, web
from aiohttp.test_utils import TestServer

from server.web import operations
from server.web.keys import ARRIVALS
from server.web.operations import OperationsRunner, operations_app
from tests.conftest import ServerFactory
from tests.helpers import WAIT_S, eventually, hold_the_door


@contextlib.asynccontextmanager
async def _operations_port(main: TestServer) -> AsyncIterator[tuple[web.Server, int]]:
    """The operations port of ``main``'s app on a free loopback port, for the block: its
    server and the port."""
    runner = OperationsRunner(operations_app(main.app), handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        assert runner.server is not None
        yield runner.server, runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def test_health_and_metrics_answer_on_the_operations_port_while_the_door_holds(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await make_server()
    app = server.app
    base = str(server.make_url("")).rstrip("/")
    async with _operations_port(server) as (_, port):
        ops_base = f"http://127.0.0.1:{port}"
        async with ClientSession(connector=TCPConnector(force_close=True)) as http:
            busy = hold_the_door(app, monkeypatch)
            probe = asyncio.create_task(http.get(f"{base}/readyz"))
            await eventually(lambda: app[ARRIVALS].waiting == 1, "the probe waits at the door")
            for path, kind in (
                ("/healthz", "application/json"),
                ("/readyz", "application/json"),
                ("/metrics", "text/plain"),
            ):
                async with http.get(f"{ops_base}{path}") as resp:
                    assert resp.status == 200, path
                    assert resp.content_type == kind
                    assert resp.headers["Cache-Control"] == "no-store"
                    body = await resp.text()
            assert "tripeaks_arrivals_held_total" in body  # the main port's process's figures
            async with http.get(f"{ops_base}/readyz") as resp:
                assert await resp.json() == {"status": "ok", "database": "ok"}
            # Nothing else is served there.
            for path in ("/api/v1/daily", "/ws", "/"):
                async with http.get(f"{ops_base}{path}") as resp:
                    assert resp.status == 404, path
            assert not probe.done()  # the main port's probe still waits
            busy[0] = False
            async with await probe as resp:
                assert resp.status == 200


async def test_metrics_turned_off_are_not_on_the_operations_port_either(
    make_server: ServerFactory,
) -> None:
    server = await make_server(metrics=False)
    async with _operations_port(server) as (_, port), ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
            assert resp.status == 404
        async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200


async def test_past_the_most_connections_the_operations_port_closes_the_next_at_once(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of idle connections holds no more of the process than the few it may keep."""
    monkeypatch.setattr(operations, "OPS_CONNECTIONS_MOST", 3)
    async with _operations_port(await make_server(http_header_timeout_s=600)) as (held, port):
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        await eventually(lambda: len(held.connections) == 3, "three held open")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""  # closed as accepted
        writer.close()
        assert len(held.connections) == 3 and not any(r.at_eof() for r, _ in idle)
        for _, idle_writer in idle:
            idle_writer.close()
        await eventually(lambda: not held.connections, "the idle ones gone")
        async with ClientSession() as http, http.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200


async def test_the_operations_port_closes_a_connection_silent_past_the_header_time_out(
    make_server: ServerFactory,
) -> None:
    async with _operations_port(await make_server(http_header_timeout_s=0.5)) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
        writer.close()
