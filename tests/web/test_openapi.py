"""The OpenAPI document: generated from the route table that registers the routes, valid
OpenAPI 3.1, served once and cacheable, and agreeing with docs/protocol.md §12; and the
contract checker every test server runs (tests/contract.py) catches what breaks it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from openapi_spec_validator import validate

from server.config import Settings
from server.errors import ErrorCode
from server.protocol.client import client_message_schema
from server.protocol.server import server_message_schema
from server.storage.games import GameMode
from server.web.app import create_app
from server.web.http import PREFIX
from server.web.routes import ROUTES, openapi_document
from tests.contract import CONTRACT, Contract

Client = TestClient[Any, Any]
PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
#: The routes the document describes: the API and the health checks.
DESCRIBED = re.compile(rf"^({re.escape(PREFIX)}(/|$)|/healthz$|/readyz$)")


def test_every_registered_route_is_in_the_document_and_every_operation_is_registered(
    settings: Settings,
) -> None:
    app = create_app(settings)
    registered = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and DESCRIBED.match(route.resource.canonical)
    }
    # aiohttp answers HEAD for every GET; the document says so once, in its description.
    registered -= {("HEAD", path) for method, path in registered if method == "GET"}
    paths = openapi_document()["paths"]
    described = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert registered == described
    assert len(described) == len(ROUTES) >= 11


def test_the_document_is_valid_openapi_3_1() -> None:
    document = openapi_document()
    assert document["openapi"] == "3.1.0"
    validate(document)  # the OpenAPI 3.1 meta-schema, and every $ref resolves
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))


def test_the_document_is_made_once() -> None:
    assert openapi_document() is openapi_document()


def test_every_operation_answers_its_failures_and_says_its_codes() -> None:
    for path, item in openapi_document()["paths"].items():
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            assert op["summary"] and op["description"], where
            for status, response in op["responses"].items():
                assert {"X-Request-Id", "Server-Timing"} <= set(response["headers"]), where
                if path.startswith(PREFIX) and status != "304":
                    assert "Cache-Control" in response["headers"], (where, status)
                if int(status) >= 400 and path.startswith(PREFIX):
                    schema = response["content"]["application/json"]["schema"]
                    codes = schema["properties"]["error"]["properties"]["code"]["enum"]
                    assert codes and all(ErrorCode(c) for c in codes), (where, status)
            if path.startswith(PREFIX) and not path.endswith("openapi.json"):
                assert {"500", "503"} <= set(op["responses"]), where


def test_the_error_codes_of_each_status_are_those_of_the_protocols_table() -> None:
    """docs/protocol.md §12.1 lists, for each status, the codes an error answer carries."""
    text = PROTOCOL.read_text(encoding="utf-8")
    section = text[text.index("### 12.1 Conventions") : text.index("### 12.2")]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        if match := re.match(r"^\| (\d{3}) \| (.*) \|$", line):
            table[match[1]] = set(re.findall(r"`([a-z_]+)`", match[2]))
    documented: dict[str, set[str]] = {}
    for path, item in openapi_document()["paths"].items():
        for op in item.values():
            for status, response in op["responses"].items():
                if int(status) >= 400 and path.startswith(PREFIX):
                    schema = response["content"]["application/json"]["schema"]
                    codes = schema["properties"]["error"]["properties"]["code"]["enum"]
                    documented.setdefault(status, set()).update(codes)
    # Outside any operation: an unknown path, a method a path does not take.
    documented.setdefault("404", set()).add("not_found")
    documented["405"] = {"method_not_allowed"}
    assert documented == table


def test_the_game_modes_the_document_names_are_the_servers() -> None:
    record = openapi_document()["components"]["schemas"]["GameRecord"]
    assert set(record["properties"]["mode"]["enum"]) == {mode.value for mode in GameMode}


def test_the_document_holds_the_websocket_message_schemas() -> None:
    websocket = openapi_document()["x-websocket"]
    assert websocket["path"] == "/ws"
    client = dict(websocket["client_messages"])
    server = dict(websocket["server_messages"])
    assert client.pop("$id") != server.pop("$id")
    assert client == client_message_schema()
    assert server == server_message_schema()


async def test_the_document_is_served_and_revalidated_with_its_etag(client: Client) -> None:
    resp = await client.get("/api/v1/openapi.json")
    assert resp.status == 200
    assert resp.content_type == "application/json"
    assert resp.headers["Cache-Control"] == "no-cache"
    etag = resp.headers["ETag"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', etag)
    assert await resp.json() == json.loads(json.dumps(openapi_document()))

    again = await client.get("/api/v1/openapi.json", headers={"If-None-Match": etag})
    assert again.status == 304
    assert again.headers["ETag"] == etag
    assert await again.read() == b""

    other = await client.get("/api/v1/openapi.json", headers={"If-None-Match": '"stale"'})
    assert other.status == 200
    assert (await client.get("/api/v1/openapi.json", headers={"If-None-Match": "*"})).status == 304


# ------------------------------------------------------------------------------ the checker

GAME = {
    "id": 1,
    "player": {"id": 1, "name": "Alice"},
    "mode": "free",
    "rules": "E",
    "code": None,
    "deal_version": "TP1",
    "daily_date": None,
    "status": "playing",
    "score": 500,
    "moves": 0,
    "undos": 0,
    "seq": 0,
    "elapsed_ms": None,
    "created_at": "2026-12-01T15:20:10.625511Z",
    "finished_at": None,
    "hinted": False,
    "par": None,
    "par_share": None,
}


def _problems(contract: Contract, status: int, body: object, path: str = "/api/v1/games/1") -> Any:
    return contract.problems("GET", path, status, "application/json", json.dumps(body).encode())


def test_the_checker_passes_a_conforming_answer() -> None:
    assert _problems(CONTRACT, 200, GAME) == []
    revealed = {**GAME, "code": "TP1-E-AAAAAAA", "actions": []}
    assert _problems(CONTRACT, 200, revealed) == []
    assert _problems(CONTRACT, 404, {"error": {"code": "unknown_game", "message": "no"}}) == []


@pytest.mark.parametrize(
    ("status", "body", "complaint"),
    [
        (200, {k: v for k, v in GAME.items() if k != "hinted"}, "'hinted' is a required"),
        (200, {**GAME, "mode": "solo"}, "'solo' is not one of"),
        (200, {**GAME, "created_at": "2026-12-01T15:20:10+01:00"}, "does not match 'Z$'"),
        (200, {**GAME, "actions": [{"seq": 1}]}, "is a required property"),
        (404, {"error": {"code": "no_daily", "message": "x"}}, "'no_daily' is not one of"),
        (404, {"error": {"code": "unknown_game"}}, "'message' is a required"),
        (418, {"error": {"code": "unknown_game", "message": "x"}}, "418 is not a documented"),
    ],
)
def test_the_checker_names_what_breaks_the_document(
    status: int, body: dict[str, Any], complaint: str
) -> None:
    problems = _problems(CONTRACT, status, body)
    assert problems and any(complaint in p for p in problems), problems


def test_the_checker_holds_answers_outside_the_operations_to_the_error_body() -> None:
    ok = {"error": {"code": "not_found", "message": "Not Found"}}
    assert _problems(CONTRACT, 404, ok, "/api/v1/nothing") == []
    assert _problems(CONTRACT, 404, {"detail": "nope"}, "/api/v1/nothing")
    assert _problems(CONTRACT, 200, {}, "/api/v1/nothing")
