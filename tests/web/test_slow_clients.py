"""Sockets and bodies that never end: request headers sent a byte at a time, bodies that never
finish, connections that say nothing. Real sockets against a real server; each limit is set
short, and the test waits for what it causes (a close, an answer), not for a fixed time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from aiohttp.test_utils import TestServer
from prometheus_client import REGISTRY

from tests.conftest import ServerFactory
from tests.helpers import TIMEOUT

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
