"""Log lines as JSON (``TRIPEAKS_LOG_FORMAT=json``), each carrying what it is about."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from pydantic import ValidationError

from server.config import Settings
from server.logs import configure_logging, log_context
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, eventually, register


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The process's log records as JSON lines in a buffer (the logging set-up is restored
    afterwards)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging("INFO", "json", stream=buffer)
    try:
        yield buffer
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


@pytest.fixture
def text_lines() -> Iterator[io.StringIO]:
    """The process's log records as text in a buffer (the set-up restored afterwards)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    buffer = io.StringIO()
    configure_logging("INFO", "text", stream=buffer)
    try:
        yield buffer
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


def test_a_text_traceback_is_plain_whatever_is_installed(text_lines: io.StringIO) -> None:
    """Text logs print a failure as Python does, never with its frames' local variables (with
    rich installed, structlog's default would, at a cost in CPU per failure)."""
    secret_local = "hunter2-not-to-be-printed"
    try:
        raise RuntimeError(f"boom {len(secret_local)}")
    except RuntimeError:
        logging.getLogger("server.example").warning("it failed", exc_info=True)
    text = text_lines.getvalue()
    assert "Traceback (most recent call last):" in text and "RuntimeError: boom 25" in text
    assert secret_local not in text and "│" not in text


def _lines(buffer: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


def test_a_json_line_carries_level_logger_time_and_the_bound_fields(
    json_lines: io.StringIO,
) -> None:
    with log_context(connection_id="ws-7", player_id=3, game_id=None):
        with log_context(request_id="r1"):
            logging.getLogger("server.example").warning("the %s went %s", "thing", "wrong")
        logging.getLogger("server.example").info("outside the request")
    logging.getLogger("server.example").info("outside everything")
    first, second, third = _lines(json_lines)
    assert first["event"] == "the thing went wrong" and first["level"] == "warning"
    assert first["logger"] == "server.example" and first["timestamp"].endswith("Z")
    assert (first["connection_id"], first["player_id"], first["request_id"]) == ("ws-7", 3, "r1")
    assert "game_id" not in first  # None is left out
    assert "request_id" not in second and second["connection_id"] == "ws-7"
    assert not {"connection_id", "player_id", "request_id"} & set(third)


def test_an_exception_is_one_json_line_with_its_traceback(json_lines: io.StringIO) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("server.example").exception("it failed")
    (line,) = _lines(json_lines)
    assert line["event"] == "it failed" and "RuntimeError: boom" in line["exception"]


async def test_a_failure_on_a_websocket_message_is_logged_with_its_connection_player_request_and_game(  # noqa: E501
    make_server: ServerFactory, json_lines: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await make_server()

    async def broken(player_id: int, game_id: int, **_: object) -> object:
        raise RuntimeError("a fault in the service")

    monkeypatch.setattr(server.app[SERVICES].games, "resume", broken)
    async with TestClient(server) as client:
        token = (await register(client, "Logged"))["token"]
        player, _ = await WsPlayer.connect(client, token)
        reply = await player.request({"type": "resume", "game_id": 41})
        assert reply["code"] == "internal_error"

        def logged() -> list[dict[str, Any]]:
            return [line for line in _lines(json_lines) if "a fault in the service" in str(line)]

        await eventually(logged, "the failure logged")
        (line,) = logged()
        assert line["level"] == "error" and line["logger"] == "server.web.handlers"
        assert line["connection_id"].startswith("ws-")
        assert line["player_id"] == player.player_id
        assert line["request_id"] == reply["id"] and line["game_id"] == 41
        await player.close()


async def test_a_rest_answer_echoes_a_plausible_request_id_and_makes_one_otherwise(
    make_server: ServerFactory,
) -> None:
    server = await make_server()
    async with TestClient(server) as client:
        await register(client, "Echoed")
        sent = await client.get("/api/v1/daily", headers={"X-Request-Id": "trace-42.a:b_c"})
        assert sent.headers["X-Request-Id"] == "trace-42.a:b_c"
        junk = await client.get("/api/v1/daily", headers={"X-Request-Id": "no spaces\tor tabs"})
        made = junk.headers["X-Request-Id"]
        assert made != "no spaces\tor tabs" and len(made) == 16 and int(made, 16) >= 0


def test_the_log_format_setting_is_text_or_json() -> None:
    assert Settings(log_format="JSON").log_format == "json"
    with pytest.raises(ValidationError, match="log_format"):
        Settings(log_format="xml")
