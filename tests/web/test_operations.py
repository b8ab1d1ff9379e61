"""The operations port (:mod:`server.web.operations`): health and metrics read at once while
the main port's door holds new connections."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import ClientSession, TCPConnector
from aiohttp.test_utils import TestServer

from server.web import arrivals as door
from server.web.arrivals import Arrivals
from server.web.keys import ARRIVALS
from server.web.operations import operations_app
from tests.conftest import ServerFactory
from tests.helpers import eventually


async def test_health_and_metrics_answer_on_the_operations_port_while_the_door_holds(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await make_server()
    app = server.app
    ops = TestServer(operations_app(app), host="127.0.0.1")
    await ops.start_server()
    base = str(server.make_url("")).rstrip("/")
    ops_base = str(ops.make_url("")).rstrip("/")
    try:
        async with ClientSession(connector=TCPConnector(force_close=True)) as http:
            busy = [True]
            monkeypatch.setattr(Arrivals, "_busy", lambda self: busy[0])
            monkeypatch.setattr(door, "LET_IN_LEAST", 0)  # nobody let in while it is busy
            app[ARRIVALS]._let_in = 0
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
    finally:
        await ops.close()


async def test_metrics_turned_off_are_not_on_the_operations_port_either(
    make_server: ServerFactory,
) -> None:
    server = await make_server(metrics=False)
    ops = TestServer(operations_app(server.app), host="127.0.0.1")
    await ops.start_server()
    try:
        async with ClientSession() as http:
            async with http.get(str(ops.make_url("/metrics"))) as resp:
                assert resp.status == 404
            async with http.get(str(ops.make_url("/healthz"))) as resp:
                assert resp.status == 200
    finally:
        await ops.close()
