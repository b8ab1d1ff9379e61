"""What any client can make the server log as often as it likes — a request HTTP cannot read,
a body cut off by the client leaving — is logged at INFO without a traceback, at most one line
per kind every few seconds with the number left out, and counted in ``/metrics``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from prometheus_client import REGISTRY

from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.web import faults
from server.web.app import create_app
from server.web.faults import QuietLog
from server.web.per_address import GatedAppRunner
from tests.helpers import eventually

MALFORMED = b"GET /api/v1/daily HTTP/1.1\r\nHost: x\r\nNot A Header\r\n\r\n"
CUT_OFF = (
    b"POST /api/v1/players HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n" + b'{"name": "Half'
)


def _faults(kind: str) -> float:
    return REGISTRY.get_sample_value("tripeaks_client_faults_total", {"kind": kind}) or 0.0


class Clock:
    """A monotonic clock a test moves on."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock_of_the_quiet_log(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A fresh quiet log on a clock of the test's."""
    clock = Clock()
    monkeypatch.setattr(faults, "QUIET", QuietLog(faults.log, clock=clock))
    return clock


@pytest.fixture
async def served(settings: Settings, clock: FakeClock, analyzer: Analyzer) -> AsyncIterator[int]:
    """A server run as ``tripeaks serve`` runs it (:func:`server.web.serving.run_app`'s runner:
    a handler goes on when its client leaves, where the tests' servers cancel it); its port."""
    runner = GatedAppRunner(create_app(settings, clock=clock, analyzer=analyzer), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site.port
    finally:
        await runner.cleanup()


async def _send(port: int, data: bytes, *, read: bool) -> bytes:
    """Send ``data`` on a connection of its own; read the answer to the end, or leave."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10) if read else b""
    finally:
        writer.close()


def _fault_lines(caplog: pytest.LogCaptureFixture, kind: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if f"client fault ({kind})" in r.getMessage()]


async def test_malformed_requests_are_one_info_line_without_a_traceback_and_counted(
    served: int, caplog: pytest.LogCaptureFixture, clock_of_the_quiet_log: Clock
) -> None:
    caplog.set_level(logging.INFO)
    before = _faults("malformed_request")
    for _ in range(25):
        answer = await _send(served, MALFORMED, read=True)
        assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n", 1)[0]
    assert _faults("malformed_request") == before + 25
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    (line,) = _fault_lines(caplog, "malformed_request")
    assert line.levelno == logging.INFO and line.exc_info is None
    assert "Invalid header token" in line.getMessage()
    # Once the quiet time is over, the next one is logged, saying how many were left out.
    clock_of_the_quiet_log.now += faults.QUIET_EVERY_S
    await _send(served, MALFORMED, read=True)
    _first, second = _fault_lines(caplog, "malformed_request")
    assert "24 more like it" in second.getMessage() and second.exc_info is None


async def test_a_client_leaving_mid_body_is_an_info_line_not_an_error(
    served: int, caplog: pytest.LogCaptureFixture, clock_of_the_quiet_log: Clock
) -> None:
    caplog.set_level(logging.INFO)
    before = _faults("disconnected")
    for _ in range(5):
        await _send(served, CUT_OFF, read=False)
    await eventually(lambda: _faults("disconnected") == before + 5, "five faults counted")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    (line,) = _fault_lines(caplog, "disconnected")
    assert line.levelno == logging.INFO and line.exc_info is None
    assert "POST /api/v1/players" in line.getMessage()


def test_the_quiet_log_keeps_one_line_per_kind_per_period(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    quiet = QuietLog(logging.getLogger("test.quiet"), every_s=10.0, clock=clock)
    caplog.set_level(logging.INFO, logger="test.quiet")
    logged = [quiet.note("a", "one"), quiet.note("a", "two"), quiet.note("b", "other")]
    clock.now += 9.9
    logged.append(quiet.note("a", "three"))
    clock.now += 0.1
    logged.append(quiet.note("a", "four"))
    assert logged == [True, False, True, False, True]
    assert [r.getMessage() for r in caplog.records] == [
        "one",
        "other",
        "four (2 more like it since the last such line, not logged)",
    ]


async def test_connections_the_process_has_no_file_for_are_one_warning_not_errors(
    served: int, caplog: pytest.LogCaptureFixture, clock_of_the_quiet_log: Clock
) -> None:
    # What asyncio reports each time accept() fails for want of a file (EMFILE) while a server
    # runs: the exact report, as the event loop's selector makes it.
    loop = asyncio.get_running_loop()
    before = _faults("out_of_files")
    caplog.set_level(logging.INFO)
    for _ in range(20):
        loop.call_exception_handler(
            {"message": faults.ACCEPT_FAILED, "exception": OSError(24, "Too many open files")}
        )
    assert _faults("out_of_files") == before + 20
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    (line,) = _fault_lines(caplog, "out_of_files")
    assert line.levelno == logging.WARNING and line.exc_info is None
    # Any other report goes where it went: an ERROR.
    loop.call_exception_handler({"message": "something else went wrong"})
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "something else went wrong"
    ]
