"""REST on a real server: ``GET /api/v1/games/{id}`` (what is revealed to whom, and when),
``/healthz`` and the JSON error bodies of unknown paths and wrong methods."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from aiohttp.web import Application, Request
from sqlalchemy import text
from sqlalchemy.engine import make_url

from server.config import Settings
from server.engine import GameCode, RuleSet
from server.services.clock import FakeClock
from server.storage.db import create_engine
from server.web.keys import SERVICES
from tests.conftest import ADMIN_URL
from tests.helpers import WsPlayer, blocking_line, daily_code, register

Client = TestClient[Any, Any]
CODE = "TP1-E-AAAAAAA"
SUMMARY_FIELDS = {
    "id",
    "player",
    "mode",
    "rules",
    "code",
    "deal_version",
    "daily_date",
    "status",
    "score",
    "moves",
    "undos",
    "seq",
    "elapsed_ms",
    "created_at",
    "finished_at",
    "hinted",
    "par",
    "par_share",
}
ACTION_FIELDS = {"seq", "action", "pos", "card", "score_after", "at"}


def bearer(player: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {player['token']}"}


async def summary(
    client: Client, game_id: int, viewer: dict[str, Any] | None = None
) -> dict[str, Any]:
    resp = await client.get(f"/api/v1/games/{game_id}", headers=bearer(viewer) if viewer else {})
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body: dict[str, Any] = await resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return body


async def play_free(
    client: Client, clock: FakeClock, name: str
) -> tuple[dict[str, Any], WsPlayer, dict[str, Any]]:
    """A player with a free game of CODE after draw (KH), remove 27 (QS), undo, draw (7C)."""
    player = await register(client, name)
    ws, _ = await WsPlayer.connect(client, player["token"])
    game = (await ws.request({"type": "new_game", "code": CODE.lower()}))["game"]
    assert game["code"] == CODE
    clock.advance(ms=1500)
    game = (await ws.act(game, "draw"))["game"]  # waste KH
    clock.advance(ms=500)
    reply = await ws.act(game, "remove", 27)  # QS on KH
    assert reply["type"] == "accepted", reply
    game = reply["game"]
    clock.advance(ms=250)
    reply = await ws.act(game, "undo")
    assert reply["type"] == "accepted", reply
    game = reply["game"]
    clock.advance(ms=250)
    game = (await ws.act(game, "draw"))["game"]  # QS went back; 7C is drawn
    return player, ws, game


async def test_unknown_game_is_404(client: Client) -> None:
    await error(await client.get("/api/v1/games/999999"), 404, "unknown_game")
    await error(await client.get("/api/v1/games/0"), 400, "bad_game_id")


@pytest.mark.parametrize("game_id", ["abc", "-1", "1.0", "1e3", "0x1f", "9" * 40, "１"])
async def test_non_numeric_game_id_is_400(client: Client, game_id: str) -> None:
    await error(await client.get(f"/api/v1/games/{game_id}"), 400, "bad_game_id")


async def test_in_progress_free_game_hides_code_and_actions_from_others(
    client: Client, clock: FakeClock
) -> None:
    alice, ws, game = await play_free(client, clock, "Alice")
    bob = await register(client, "Bob")
    for viewer in (None, bob):
        body = await summary(client, game["game_id"], viewer)
        assert set(body) == SUMMARY_FIELDS  # no "actions"
        assert body["code"] is None
        assert body["id"] == game["game_id"]
        assert body["player"] == {"id": alice["id"], "name": "Alice"}
        assert body["mode"] == "free" and body["rules"] == "E"
        assert body["deal_version"] == "TP1"
        assert body["daily_date"] is None
        assert body["status"] == "playing"
        assert (body["score"], body["moves"], body["undos"], body["seq"]) == (
            game["score"],
            game["moves"],
            game["undos"],
            game["seq"],
        )
        assert body["finished_at"] is None
        assert body["created_at"] == "2026-03-14T12:00:00Z"
    await ws.close()


async def test_owner_sees_code_and_full_action_list_of_an_in_progress_game(
    client: Client, clock: FakeClock
) -> None:
    alice, ws, game = await play_free(client, clock, "Alice")
    body = await summary(client, game["game_id"], alice)
    assert set(body) == SUMMARY_FIELDS | {"actions"}
    assert body["code"] == CODE
    assert (body["moves"], body["undos"], body["seq"]) == (3, 1, 4)
    actions = body["actions"]
    for action in actions:
        assert set(action) == ACTION_FIELDS
    assert actions == [
        {
            "seq": 1,
            "action": "draw",
            "pos": None,
            "card": "KH",
            "score_after": 499,
            "at": "2026-03-14T12:00:01.500000Z",
        },
        {
            "seq": 2,
            "action": "remove",
            "pos": 27,
            "card": "QS",
            "score_after": 498,
            "at": "2026-03-14T12:00:02Z",
        },
        {
            "seq": 3,
            "action": "undo",
            "pos": 27,
            "card": "QS",
            "score_after": 499,
            "at": "2026-03-14T12:00:02.250000Z",
        },
        {
            "seq": 4,
            "action": "draw",
            "pos": None,
            "card": "7C",
            "score_after": 498,
            "at": "2026-03-14T12:00:02.500000Z",
        },
    ]
    assert body["score"] == game["score"] == 498
    await ws.close()


async def test_ended_free_game_shows_actions_to_anyone(client: Client, clock: FakeClock) -> None:
    alice, ws, game = await play_free(client, clock, "Alice")
    clock.advance(ms=1000)
    resigned = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert resigned["game"]["status"] == "resigned", resigned
    bob = await register(client, "Bob")
    owner_view = await summary(client, game["game_id"], alice)
    for viewer in (None, bob):
        body = await summary(client, game["game_id"], viewer)
        assert body["status"] == "resigned"
        assert body["code"] == CODE
        assert body["finished_at"] == "2026-03-14T12:00:03.500000Z"
        assert body["elapsed_ms"] == 3500
        assert [a["seq"] for a in body["actions"]] == [1, 2, 3, 4]
        assert body == owner_view
    await ws.close()


async def test_another_players_bearer_does_not_reveal_an_open_game(
    client: Client, clock: FakeClock
) -> None:
    _alice, ws, game = await play_free(client, clock, "Alice")
    bob = await register(client, "Bob")
    body = await summary(client, game["game_id"], bob)
    assert body["code"] is None and "actions" not in body
    resp = await client.get(
        f"/api/v1/games/{game['game_id']}", headers={"Authorization": "Bearer not-a-token"}
    )
    await error(resp, 401, "unauthorized")
    await ws.close()


async def test_finished_daily_stays_hidden_while_its_date_is_open(
    client: Client, clock: FakeClock, settings: Settings
) -> None:
    code = daily_code((settings.daily_secret or "").encode(), dt.date(2026, 3, 14), RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    alice = await register(client, "Alice")
    bob = await register(client, "Bob")
    ws, _ = await WsPlayer.connect(client, alice["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    clock.advance(ms=42_000)
    final = await ws.play(game, line)
    assert final["status"] == "blocked"

    for viewer in (None, bob):
        body = await summary(client, game["game_id"], viewer)
        assert body["mode"] == "daily" and body["daily_date"] == "2026-03-14"
        assert body["status"] == "blocked"
        assert body["elapsed_ms"] == 42_000
        assert body["code"] is None
        assert "actions" not in body

    clock.set(dt.datetime(2026, 3, 15, 0, 0, tzinfo=dt.UTC))
    for viewer in (None, bob, alice):
        body = await summary(client, game["game_id"], viewer)
        assert body["code"] == str(code)
        assert len(body["actions"]) == len(line)
        assert [a["action"] for a in body["actions"]] == [a.kind.value for a in line]
        assert [a["pos"] for a in body["actions"]] == [a.pos for a in line]
        deal = code.deal()
        drawn = [a["card"] for a in body["actions"] if a["action"] == "draw"]
        assert drawn == [str(c) for c in deal.stock]
    await ws.close()


async def test_owner_of_an_open_daily_does_not_get_its_code_over_rest(
    client: Client, clock: FakeClock
) -> None:
    # docs/rules.md §4: the daily's code stays hidden until its date is over. The code names every
    # face-down card and the stock order, so even the player of the game may not see it (the
    # websocket state also sends code null). The cards they have seen (actions) are fine.
    alice = await register(client, "Alice")
    ws, _ = await WsPlayer.connect(client, alice["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    assert game["code"] is None
    game = (await ws.act(game, "draw"))["game"]
    body = await summary(client, game["game_id"], alice)
    assert body["code"] is None
    assert [(a["action"], a["card"]) for a in body["actions"]] == [("draw", game["waste"])]

    resigned = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert resigned["game"]["status"] == "resigned"
    assert (await summary(client, game["game_id"], alice))["code"] is None

    clock.advance(days=1)
    published = (await (await client.get("/api/v1/daily/2026-03-14")).json())["code"]
    assert published is not None
    assert (await summary(client, game["game_id"], alice))["code"] == published
    assert (await summary(client, game["game_id"]))["code"] == published
    assert GameCode.parse(published).rules is RuleSet.EASY
    await ws.close()


async def test_registering_a_look_alike_of_a_taken_name_is_409_name_taken(client: Client) -> None:
    await register(client, "Ada")
    resp = await client.post("/api/v1/players", json={"name": "\u0410da"})  # Cyrillic А
    body = await error(resp, 409, "name_taken")
    assert body["error"]["message"] == "the name 'Аda' looks like 'Ada', which is already taken"
    assert (await client.post("/api/v1/players", json={"name": "Adam"})).status == 201


async def test_healthz_and_readyz_are_ok(client: Client) -> None:
    for path in ("/healthz", "/readyz"):
        resp = await client.get(path)
        assert resp.status == 200
        assert await resp.json() == {"status": "ok", "database": "ok"}


@pytest.mark.parametrize(
    "path", ["/api/v1/nothing", "/api/v1/", "/api/v1/players/me/extra", "/api/v1/daily/x/y/z"]
)
async def test_unknown_api_path_is_404_json(client: Client, path: str) -> None:
    await error(await client.get(path), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/api/v1/players"),
        ("GET", "/api/v1/players"),
        ("POST", "/api/v1/daily"),
        ("PUT", "/api/v1/games/1"),
        ("POST", "/api/v1/daily/2026-03-14/leaderboard"),
    ],
)
async def test_wrong_method_is_405_json_with_allow(client: Client, method: str, path: str) -> None:
    resp = await client.request(method, path)
    await error(resp, 405, "method_not_allowed")
    assert resp.headers.get("Allow"), "a 405 must say which methods are allowed"


async def test_api_errors_do_not_leak_to_other_routes(client: Client) -> None:
    resp = await client.get("/definitely-not-here")
    assert resp.status == 404


async def test_database_outage_gives_503_json_and_the_api_recovers(
    client: Client, database_url: str
) -> None:
    alice = await register(client, "Alice")
    name = make_url(database_url).database
    admin = create_engine(ADMIN_URL, pool_size=1)

    async def run(sql: str) -> None:
        async with admin.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(sql))

    try:
        await run(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        )
        await run(f'ALTER DATABASE "{name}" RENAME TO "{name}_away"')
        try:
            for method, path in [
                ("GET", "/api/v1/daily"),
                ("GET", "/api/v1/daily/2026-03-13"),
                ("POST", "/api/v1/players"),
                ("GET", "/api/v1/players/me"),
                ("GET", "/api/v1/daily/2026-03-14/leaderboard"),
                ("GET", "/api/v1/daily/2026-03-14/leaderboard/around/1"),
                ("GET", "/api/v1/games/1"),
            ]:
                resp = await client.request(
                    method, path, json={"name": "Bob"}, headers=bearer(alice)
                )
                await error(resp, 503, "unavailable")
            ready = await client.get("/readyz")
            assert ready.status == 503
            assert await ready.json() == {"status": "unavailable", "database": "unreachable"}
            # Alive all the same: a database outage is no reason to restart the server.
            health = await client.get("/healthz")
            assert health.status == 200
            assert await health.json() == {"status": "ok", "database": "unreachable"}
        finally:
            await run(f'ALTER DATABASE "{name}_away" RENAME TO "{name}"')
    finally:
        await admin.dispose()
    assert (await client.get("/readyz")).status == 200
    me = await client.get("/api/v1/players/me", headers=bearer(alice))
    assert me.status == 200
    assert (await me.json())["id"] == alice["id"]
    assert (await client.post("/api/v1/players", json={"name": "Bob"})).status == 201


async def test_every_rest_answer_says_how_long_the_server_spent_on_it(
    client: TestClient[Request, Application],
) -> None:
    for path, status in (
        ("/api/v1/daily", 200),
        ("/api/v1/games/999999", 404),
        ("/healthz", 200),
        ("/api/v1/nowhere", 404),
    ):
        resp = await client.get(path)
        assert resp.status == status, path
        timing = resp.headers["Server-Timing"]
        assert re.fullmatch(r'app;dur=\d+\.\d;desc="server"', timing), (path, timing)


async def test_a_body_in_an_unknown_charset_is_bad_json_naming_it(client: Client) -> None:
    resp = await client.post(
        "/api/v1/players",
        data=b'{"name": "Bob"}',
        headers={"Content-Type": "application/json; charset=no-such-charset"},
    )
    body = await error(resp, 400, "bad_json")
    assert body["error"]["message"] == "the body's charset 'no-such-charset' is not known"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_its_content_encoding_does_not_decode_is_bad_json(
    client: Client, encoding: str
) -> None:
    resp = await client.post(
        "/api/v1/players",
        data=b'{"name": "Bob"}',
        headers={
            "Content-Type": "application/json",
            "Content-Encoding": encoding,
            # aiohttp gives up the connection of a body it could not decode once answered:
            # ask for the close, so the client reads the answer rather than a lost connection.
            "Connection": "close",
        },
    )
    body = await error(resp, 400, "bad_json")
    assert encoding in body["error"]["message"]
    assert (await client.post("/api/v1/players", json={"name": "Bob"})).status == 201


async def test_an_oversized_body_is_413_request_entity_too_large(client: Client) -> None:
    resp = await client.post(
        "/api/v1/players",
        data=b'{"name": "' + b"x" * 70_000 + b'"}',
        headers={"Content-Type": "application/json"},
    )
    await error(resp, 413, "request_entity_too_large")


async def test_an_unexpected_failure_is_500_internal_error_in_the_error_body(
    client: Client, server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(date: dt.date | None = None) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(server.app[SERVICES].daily, "info", broken)
    body = await error(await client.get("/api/v1/daily"), 500, "internal_error")
    assert body["error"]["message"] == "the server failed; try again"
    assert (await client.get("/healthz")).status == 200


async def test_ids_are_read_up_to_the_largest_the_database_holds(client: Client) -> None:
    await error(await client.get(f"/api/v1/games/{2**63 - 1}"), 404, "unknown_game")
    await error(await client.get(f"/api/v1/games/{2**63}"), 400, "bad_game_id")
    path = f"/api/v1/daily/2026-03-14/leaderboard/around/{2**63 - 1}"
    await error(await client.get(path), 404, "not_ranked")
