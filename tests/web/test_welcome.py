"""What a ``hello`` is answered, for every kind of player state: the player, exactly the games
that can still be played (free, blocked free, today's daily, a started race's; newest first),
each as ``resume`` shows it, and the open rooms the player sits in; the same for a banned
player; ``unauthorized`` for a token signed out, rotated or never made. Real server, real
PostgreSQL, real websocket clients."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.engine import GameCode
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, blocking_line, find_winning_line, register

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")


@pytest.fixture
async def race_server(make_server: ServerFactory) -> TestServer:
    return await make_server(race_countdown_s=0.2, race_sweep_s=0.05)


async def _player(client: Client, name: str) -> tuple[WsPlayer, dict[str, Any]]:
    info = await register(client, name)
    ws, _ = await WsPlayer.connect(client, info["token"])
    return ws, info


async def _hello(client: Client, token: str, **hello: Any) -> dict[str, Any]:
    """A new connection's answer to ``hello`` (its request id left out)."""
    ws = await client.ws_connect("/ws")
    try:
        await ws.send_json({"type": "hello", "token": token, "id": 1, **hello})
        reply: dict[str, Any] = await ws.receive_json()
    finally:
        await ws.close()
    reply.pop("id", None)
    return reply


async def _resumed(ws: WsPlayer, game_ids: list[int]) -> list[dict[str, Any]]:
    """Each game's STATE as ``resume`` answers it on ``ws``."""
    states = []
    for game_id in game_ids:
        reply = await ws.request({"type": "resume", "game_id": game_id})
        assert reply["type"] == "game", reply
        states.append(reply["game"])
    return states


async def test_a_welcome_holds_the_games_that_can_still_be_played_and_the_open_rooms(
    race_server: TestServer, clock: FakeClock
) -> None:
    """Free (playing and blocked), today's daily and a started race's game are in it, newest
    first, each as ``resume`` shows it; won and resigned games are not; a running race and a
    lobby the player sits in are its rooms. The same again for a banned player, and in
    another language."""
    win = find_winning_line(CODE.deal(), CODE.rules)
    block = blocking_line(CODE.deal(), CODE.rules)
    assert win is not None and block is not None
    async with TestClient(race_server) as client:
        ws, me = await _player(client, "Erin")
        other, _ = await _player(client, "Olaf")
        wanted: list[int] = []

        playing = (await ws.request({"type": "new_game"}))["game"]
        assert (await ws.act(playing, "draw"))["type"] == "accepted"
        wanted.append(playing["game_id"])
        clock.advance(seconds=1)
        blocked = (await ws.request({"type": "new_game", "code": str(CODE)}))["game"]
        assert (await ws.play(blocked, block))["status"] == "blocked"
        wanted.append(blocked["game_id"])
        clock.advance(seconds=1)
        won = (await ws.request({"type": "new_game", "code": str(CODE)}))["game"]
        assert (await ws.play(won, win))["status"] == "won"
        clock.advance(seconds=1)
        resigned = (await ws.request({"type": "new_game"}))["game"]
        gave_up = await ws.request({"type": "resign", "game_id": resigned["game_id"]})
        assert gave_up["game"]["status"] == "resigned"
        clock.advance(seconds=1)
        daily = (await ws.request({"type": "join_daily"}))["game"]
        assert (await ws.act(daily, "draw"))["type"] == "accepted"
        wanted.append(daily["game_id"])
        clock.advance(seconds=1)

        # A race of two, started (its game is in the welcome once its countdown is over)...
        room = (await ws.request({"type": "race_create", "code": str(CODE)}))["race"]
        joined = await other.request({"type": "race_join", "invite": room["invite"]})
        assert joined["role"] == "racer"
        await ws.request({"type": "race_start", "invite": room["invite"]})
        race_game = (await ws.until("race_go"))["game"]
        clock.advance(seconds=1)
        wanted.append(race_game["game_id"])
        # ... and a lobby opened by the other player, in which this one sits.
        lobby = (await other.request({"type": "race_create", "code": str(CODE)}))["race"]
        joined = await ws.request({"type": "race_join", "invite": lobby["invite"]})
        assert joined["role"] == "racer"
        clock.advance(seconds=1)

        welcome = await _hello(client, me["token"])
        assert welcome["type"] == "welcome"
        assert welcome["player"] == {"id": me["id"], "name": "Erin"}
        assert welcome["locale"] == "en"
        assert [g["game_id"] for g in welcome["games"]] == wanted[::-1]
        assert welcome["games"] == await _resumed(ws, wanted[::-1])
        assert [(r["invite"], r["status"]) for r in welcome["races"]] == [
            (lobby["invite"], "lobby"),
            (room["invite"], "running"),
        ]
        for shown in welcome["races"]:
            assert {p["name"] for p in shown["players"]} == {"Erin", "Olaf"}
            assert all(p["presence"]["state"] == "connected" for p in shown["players"])

        # Another language: the same games, as resume shows them in it.
        chinese, _ = await WsPlayer.connect(client, me["token"], locale="zh-Hant")
        welcome_zh = await _hello(client, me["token"], locale="zh-Hant")
        assert welcome_zh["locale"] == "zh-Hant"
        assert welcome_zh["games"] == await _resumed(chinese, wanted[::-1])
        await chinese.close()

        # Banned from ranked play: the same welcome.
        await race_server.app[SERVICES].moderation.ban("Erin", "used a solver", "mod")
        assert await _hello(client, me["token"]) == welcome


async def test_a_new_player_is_welcomed_with_no_games_and_no_rooms(client: Client) -> None:
    info = await register(client, "Nell")
    assert await _hello(client, info["token"]) == {
        "type": "welcome",
        "player": {"id": info["id"], "name": "Nell"},
        "locale": "en",
        "games": [],
        "races": [],
    }


async def test_a_finished_race_and_yesterdays_daily_are_not_in_a_welcome(
    race_server: TestServer, clock: FakeClock
) -> None:
    async with TestClient(race_server) as client:
        ws, me = await _player(client, "Dana")
        daily = (await ws.request({"type": "join_daily"}))["game"]
        assert (await ws.act(daily, "draw"))["type"] == "accepted"
        room = (await ws.request({"type": "race_create", "code": str(CODE)}))["race"]
        await ws.request({"type": "race_start", "invite": room["invite"]})
        race_game = (await ws.until("race_go"))["game"]
        clock.advance(seconds=1)
        welcome = await _hello(client, me["token"])
        assert [g["game_id"] for g in welcome["games"]] == [race_game["game_id"], daily["game_id"]]
        resigned = await ws.request({"type": "resign", "game_id": race_game["game_id"]})
        assert resigned["type"] == "game", resigned
        await ws.until("race_results")
        clock.advance(days=1)
        welcome = await _hello(client, me["token"])
        assert (welcome["games"], welcome["races"]) == ([], [])


async def test_a_token_signed_out_rotated_or_never_made_is_answered_unauthorized(
    client: Client,
) -> None:
    info = await register(client, "Sid")
    headers = {"Authorization": f"Bearer {info['token']}"}
    resp = await client.post("/api/v1/players/me/token", headers=headers)
    assert resp.status == 200
    rotated = (await resp.json())["token"]
    signed_in = await client.post(
        "/api/v1/sessions", json={"name": "Sid", "recovery_code": info["recovery_code"]}
    )
    phone = (await signed_in.json())["token"]
    resp = await client.delete(
        "/api/v1/players/me/sessions", headers={"Authorization": f"Bearer {rotated}"}
    )
    assert resp.status == 200
    for token in (info["token"], phone, "x" * 40, "y" * 150):
        reply = await _hello(client, token)
        assert (reply["type"], reply["code"]) == ("error", "unauthorized"), token
    assert (await _hello(client, rotated))["type"] == "welcome"


async def test_a_page_that_says_which_games_it_holds_is_sent_only_those_that_changed(
    client: Client,
) -> None:
    ws, me = await _player(client, "Hana")
    other, _ = await _player(client, "Ivo")
    held = (await ws.request({"type": "new_game"}))["game"]  # the page's STATE, seq 0
    moved = (await ws.request({"type": "new_game"}))["game"]
    assert (await ws.act(moved, "draw"))["type"] == "accepted"  # seq 1 since the page's
    ended = (await ws.request({"type": "new_game"}))["game"]
    await ws.request({"type": "resign", "game_id": ended["game_id"]})
    new = (await ws.request({"type": "new_game"}))["game"]  # not held by the page
    theirs = (await other.request({"type": "new_game"}))["game"]
    everything = await _hello(client, me["token"])
    assert "unchanged" not in everything  # a hello that names no game: all of them

    holding = [
        {"game_id": held["game_id"], "seq": 0},
        {"game_id": moved["game_id"], "seq": 0},
        {"game_id": ended["game_id"], "seq": 0},
        {"game_id": theirs["game_id"], "seq": 0},
    ]
    welcome = await _hello(client, me["token"], games=holding)
    assert welcome["unchanged"] == [held["game_id"]]
    assert welcome["games"] == [g for g in everything["games"] if g["game_id"] != held["game_id"]]
    assert {g["game_id"] for g in welcome["games"]} == {new["game_id"], moved["game_id"]}
    nothing_held = await _hello(client, me["token"], games=[])
    assert nothing_held == {**everything, "unchanged": []}


@pytest.mark.parametrize(
    "games",
    [
        [{"game_id": n, "seq": 0} for n in range(1, 22)],  # more than a welcome lists
        [{"game_id": 1, "seq": -1}],
        [{"game_id": 0, "seq": 0}],
        [{"game_id": 1}],
        [{"game_id": 1, "seq": 0, "status": "playing"}],
        {"1": 0},
    ],
)
async def test_a_hello_holding_games_badly_is_refused_naming_the_field(
    client: Client, games: Any
) -> None:
    info = await register(client, "Jo")
    reply = await _hello(client, info["token"], games=games)
    assert (reply["type"], reply["code"]) == ("error", "invalid_message")
    assert reply["message"].startswith("hello: ") and "games" in reply["message"], reply
    assert (await _hello(client, info["token"]))["type"] == "welcome"  # nothing was changed
