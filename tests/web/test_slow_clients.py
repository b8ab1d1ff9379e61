"""Sockets and bodies that never end: request headers sent a byte at a time, bodies that never
finish, connections that say nothing. Real sockets against a real server; each limit is set
short, and the test waits for what it causes (a close, an answer), not for a fixed time."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import re
import weakref
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web_protocol import RequestHandler
from prometheus_client import REGISTRY

from server.web import ws as ws_module
from server.web.arrivals import Arrivals
from server.web.keys import SOCKETS
from server.web.per_address import ADDRESS_CONNECTIONS
from tests.conftest import ServerFactory
from tests.helpers import TIMEOUT, eventually

#: The deadlines the tests set: short, so that a close comes soon after them.
DEADLINE_S = 0.5


@contextlib.asynccontextmanager
async def _connection(
    server: TestServer,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    assert server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        yield reader, writer
    finally:
        writer.close()


async def _until_closed(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (fails after TIMEOUT: the
    server's own default deadlines are far longer than the tests')."""
    return await asyncio.wait_for(reader.read(), TIMEOUT)


async def test_a_connection_that_never_finishes_its_headers_is_closed(
    make_server: ServerFactory,
) -> None:
    server = await make_server(http_header_timeout_s=DEADLINE_S)
    async with _connection(server) as (silent, _), _connection(server) as (slow, writer):
        writer.write(b"GET /api/v1/daily HTTP/1.1\r\nHost: x\r\n")

        async def trickle() -> None:
            # A header byte now and then: data keeps arriving, the headers never end.
            with contextlib.suppress(ConnectionError):
                while True:
                    writer.write(b"X")
                    await writer.drain()
                    await asyncio.sleep(DEADLINE_S / 10)

        trickling = asyncio.create_task(trickle())
        try:
            assert await _until_closed(slow) == b""  # closed without an answer
            assert await _until_closed(silent) == b""  # one that sent nothing at all too
        finally:
            trickling.cancel()


async def test_a_kept_alive_connection_has_the_same_time_for_its_next_request(
    make_server: ServerFactory,
) -> None:
    server = await make_server(http_header_timeout_s=DEADLINE_S)
    async with _connection(server) as (reader, writer):
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the next one's half
        rest = await _until_closed(reader)
        assert rest.count(b"HTTP/1.1 ") == 0, rest  # the first answer's tail, no second one


async def test_a_body_that_never_finishes_is_408_and_its_connection_closed(
    make_server: ServerFactory,
) -> None:
    server = await make_server(http_body_timeout_s=DEADLINE_S)
    faults = ("tripeaks_client_faults_total", {"kind": "body_timeout"})
    before = REGISTRY.get_sample_value(*faults) or 0.0
    async with _connection(server) as (reader, writer):
        writer.write(
            b"POST /api/v1/players HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b'{"name": "Sl'
        )
        answer = await _until_closed(reader)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), answer
        assert b'"request_timeout"' in body
    assert REGISTRY.get_sample_value(*faults) == before + 1


async def test_a_chunked_body_that_never_ends_is_408_too(make_server: ServerFactory) -> None:
    server = await make_server(http_body_timeout_s=DEADLINE_S)
    async with _connection(server) as (reader, writer):
        writer.write(
            b"POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"
        )
        assert (await _until_closed(reader)).startswith(b"HTTP/1.1 408 ")


@pytest.mark.parametrize("path", ["/api/v1/daily", "/healthz"])
async def test_a_body_nobody_reads_does_not_hold_its_connection(
    make_server: ServerFactory, path: str
) -> None:
    server = await make_server(http_body_timeout_s=DEADLINE_S)
    async with _connection(server) as (reader, writer):
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n".encode() + b"x"
        )
        answer = await _until_closed(reader)
        assert answer.startswith(b"HTTP/1.1 200 "), answer


# ------------------------------------------------------------------ connections per address


def _refused_for_the_limit() -> float:
    return (
        REGISTRY.get_sample_value("tripeaks_client_faults_total", {"kind": "connection_limit"})
        or 0.0
    )


async def _closed_unanswered(server: TestServer) -> bool:
    """Whether a new connection is closed by the server without a byte sent on it (it sends a
    request, then reads)."""
    async with _connection(server) as (reader, writer):
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            await writer.drain()
            return await _until_closed(reader) == b""
        except ConnectionResetError:  # closed as accepted: the request met a closed socket
            return True


async def test_an_address_at_its_limit_has_new_connections_closed_as_they_are_accepted(
    make_server: ServerFactory, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await make_server(max_connections_per_address=3)
    counts = server.app[ADDRESS_CONNECTIONS]
    before = _refused_for_the_limit()
    at_the_door: list[object] = []  # connections the door was handed
    arrived = Arrivals.arrived

    def counted(self: Arrivals, handler: RequestHandler, transport: asyncio.Transport) -> None:
        at_the_door.append(transport)
        arrived(self, handler, transport)

    monkeypatch.setattr(Arrivals, "arrived", counted)
    async with TestClient(server) as client, _connection(server) as (kept, keeping):
        # A connection accepted before the limit is reached, kept alive.
        keeping.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await kept.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = re.search(rb"(?i)content-length: *([0-9]+)", head)
        assert length is not None
        await kept.readexactly(int(length[1]))
        sockets = [await client.ws_connect("/ws") for _ in range(3)]
        await eventually(lambda: counts.in_use("127.0.0.1") == 3, "three in use")
        handed = len(at_the_door)
        # New connections are closed unanswered: nothing parsed, nothing sent, and the door
        # not asked (they take none of its places).
        assert await _closed_unanswered(server)
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.ws_connect("/ws")
        assert _refused_for_the_limit() == before + 2
        assert len(at_the_door) == handed
        # A request on the connection accepted before is answered 429.
        keeping.write(b"GET /api/v1/daily HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = await _until_closed(kept)
        assert answer.startswith(b"HTTP/1.1 429"), answer
        assert b"too_many_connections" in answer
        assert _refused_for_the_limit() == before + 3
        # A connection closed is one more for its address.
        await sockets.pop().close()
        await eventually(lambda: counts.in_use("127.0.0.1") == 2, "a close seen")
        sockets.append(await client.ws_connect("/ws"))
        for ws in sockets:
            await ws.close()
        await eventually(lambda: counts.addresses == 0, "all closed")
        assert (await client.get("/api/v1/daily")).status == 200
    gc.collect()  # a connection's task that failed says so as it is collected
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def test_bodies_that_never_end_count_against_their_address(
    make_server: ServerFactory,
) -> None:
    server = await make_server(max_connections_per_address=2, http_body_timeout_s=60)
    async with _connection(server) as (_, one), _connection(server) as (_, two):
        for writer in (one, two):
            writer.write(
                b"POST /api/v1/players HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
            )
            await writer.drain()
        await eventually(
            lambda: server.app[ADDRESS_CONNECTIONS].in_use("127.0.0.1") == 2, "both in use"
        )
        assert await _closed_unanswered(server)


async def test_an_ipv6_address_counts_by_its_64_behind_a_trusted_proxy(
    make_server: ServerFactory,
) -> None:
    server = await make_server(max_connections_per_address=1, trust_forwarded_for=True)
    async with TestClient(server) as client:
        first = await client.ws_connect("/ws", headers={"X-Forwarded-For": "2001:db8:1:2::10"})
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"X-Forwarded-For": "2001:db8:1:2:ff::1"})
        assert refused.value.status == 429
        other = await client.ws_connect("/ws", headers={"X-Forwarded-For": "2001:db8:1:3::10"})
        # The proxy's own address is another one too.
        resp = await client.get("/healthz")
        assert resp.status == 200
        for ws in (first, other):
            await ws.close()


# --------------------------------------------------------------- closed sockets are let go


@pytest.mark.parametrize("closed_by", ["hello_timeout", "client"])
async def test_a_closed_websocket_is_let_go_at_once(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, closed_by: str
) -> None:
    """Nothing keeps a closed websocket — its request, buffers, session — alive: sockets closed
    by the thousand (an attacker's that never say hello) leave no memory behind. (aiohttp
    re-armed the heartbeat when the peer's answer to the close came in, which held each one a
    heartbeat and a half: 45 s by default.)"""
    monkeypatch.setattr(ws_module, "HELLO_TIMEOUT_S", 0.2 if closed_by == "hello_timeout" else 60)
    server = await make_server()
    async with TestClient(server) as client:
        ws = await client.ws_connect("/ws")
        await eventually(lambda: len(server.app[SOCKETS]) == 1, "the socket is open")
        (served,) = server.app[SOCKETS]
        gone = weakref.ref(served)
        del served
        if closed_by == "client":
            await ws.close()
        else:
            assert (await ws.receive_json())["code"] == "hello_timeout"
            assert (await ws.receive()).type is aiohttp.WSMsgType.CLOSE
        await eventually(lambda: not server.app[SOCKETS], "the server saw the close")

        def let_go() -> bool:
            gc.collect()
            return gone() is None

        await eventually(let_go, "the closed websocket is let go", within_s=5.0)
        await ws.close()
