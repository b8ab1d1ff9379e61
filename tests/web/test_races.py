"""Races end to end: real servers, real PostgreSQL (LISTEN/NOTIFY), real websocket clients."""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.engine import GameCode
from server.services.clock import FakeClock
from server.storage.events import RaceStarted, encode_event, room_channel
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, blocking_line, find_winning_line, register

CODE = GameCode.parse("TP1-E-AAAAAAB")


@pytest.fixture
async def race_server(make_server: ServerFactory) -> TestServer:
    return await make_server(race_countdown_s=0.2, race_sweep_s=0.05)


async def _racer(client: TestClient[Any, Any], name: str) -> WsPlayer:
    info = await register(client, name)
    ws, _ = await WsPlayer.connect(client, info["token"])
    return ws


async def test_three_players_race_from_invite_to_results(
    race_server: TestServer, clock: FakeClock
) -> None:
    win = find_winning_line(CODE.deal(), CODE.rules)
    block = blocking_line(CODE.deal(), CODE.rules)
    assert win is not None and block is not None
    async with TestClient(race_server) as client:
        host, ann, bob = [await _racer(client, n) for n in ("Host", "Ann", "Bob")]
        created = await host.request(
            {"type": "race_create", "code": str(CODE), "time_limit_s": 300}
        )
        assert created["type"] == "race" and created["role"] == "racer"
        room = created["race"]
        invite = room["invite"]
        assert len(invite) == 6 and room["status"] == "lobby" and room["code"] is None
        assert room["link"] == f"/race/{invite}"
        for ws in (ann, bob):
            joined = await ws.request({"type": "race_join", "invite": invite.lower()})
            assert joined["role"] == "racer"
        update = await host.until("race_room")
        while len(update["race"]["players"]) < 3:
            update = await host.until("race_room")
        assert [p["name"] for p in update["race"]["players"]] == ["Host", "Ann", "Bob"]

        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running" and started["race"]["starts_at"]
        games = {}
        for ws in (host, ann, bob):
            go = await ws.until("race_go")
            assert go["invite"] == invite
            game = go["game"]
            assert game["mode"] == "race" and game["code"] is None and game["seq"] == 0
            games[ws] = game
        assert len({g["game_id"] for g in games.values()}) == 3
        assert len({tuple(g["tableau"]) for g in games.values()}) == 1  # the same deal
        clock.advance(seconds=1)

        # Host wins, Ann is blocked, Bob resigns; everyone sees each other's progress.
        final_host = await host.play(games[host], win)
        assert final_host["status"] == "won"
        progress = await ann.until("race_progress", player_id=host.player_id, status="won")
        assert progress["cards_left"] == 0 and "tableau" not in progress
        await ann.play(games[ann], block)
        resign = await bob.request({"type": "resign", "game_id": games[bob]["game_id"]})
        assert resign["game"]["status"] == "resigned"

        for ws in (host, ann, bob):
            results = (await ws.until("race_results"))["race"]
            assert results["status"] == "finished"
            assert results["code"] == str(CODE)
            ranked = [(r["rank"], r["name"], r["status"]) for r in results["results"]]
            # Ann removed two cards before she was blocked (475 points); Bob resigned at once
            # (500): the cards removed come before the score.
            assert ranked == [(1, "Host", "won"), (2, "Ann", "blocked"), (3, "Bob", "resigned")]
            assert [r["cards_removed"] for r in results["results"]] == [28, 2, 0]
            # A race on a host's deal is never rated: no rating change in its results.
            assert results["rated"] is False
            assert all("rating" not in r for r in results["results"])

        resp = await client.get(f"/api/v1/races/{invite}")
        assert resp.status == 200
        body = await resp.json()
        assert body["status"] == "finished" and body["results"][0]["name"] == "Host"


async def test_bad_race_requests_get_clear_errors(race_server: TestServer) -> None:
    async with TestClient(race_server) as client:
        host, other = await _racer(client, "Host"), await _racer(client, "Other")
        reply = await other.request({"type": "race_join", "invite": "ZZZZZZ"})
        assert (reply["type"], reply["code"]) == ("error", "bad_invite")
        reply = await other.request({"type": "race_join", "invite": "CCCCCC"})
        assert (reply["type"], reply["code"]) == ("error", "unknown_invite")
        invite = (await host.request({"type": "race_create"}))["race"]["invite"]
        await other.request({"type": "race_join", "invite": invite})
        reply = await other.request({"type": "race_start", "invite": invite})
        assert reply["code"] == "not_host"
        assert (await host.request({"type": "race_start", "invite": invite}))["type"] == "race"
        reply = await host.request({"type": "race_start", "invite": invite})
        assert reply["code"] == "already_started"
        late = await _racer(client, "Late")
        reply = await late.request({"type": "race_join", "invite": invite})
        assert reply["type"] == "race" and reply["role"] == "spectator" and "game" not in reply
        reply = await host.request({"type": "race_create", "time_limit_s": 5})
        assert reply["code"] == "bad_time_limit"
        reply = await host.request({"type": "race_create", "code": "TP1-E-AAA"})
        assert reply["code"] == "bad_code"
        resp = await client.get("/api/v1/races/ZZZZZZ")
        assert resp.status == 400
        resp = await client.get("/api/v1/races/CCCCCC")
        assert resp.status == 404


async def test_someone_elses_race_game_is_refused(
    race_server: TestServer, clock: FakeClock
) -> None:
    async with TestClient(race_server) as client:
        host, ann = await _racer(client, "Host"), await _racer(client, "Ann")
        invite = (await host.request({"type": "race_create"}))["race"]["invite"]
        await ann.request({"type": "race_join", "invite": invite})
        await host.request({"type": "race_start", "invite": invite})
        game = (await host.until("race_go"))["game"]
        clock.advance(seconds=1)
        reply = await ann.act(game, "draw")
        assert (reply["type"], reply["code"]) == ("error", "not_your_game")


async def test_actions_before_the_countdown_ends_are_refused(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(race_countdown_s=0.1)
    async with TestClient(server) as client:
        host = await _racer(client, "Host")
        invite = (await host.request({"type": "race_create"}))["race"]["invite"]
        await host.request({"type": "race_start", "invite": invite})
        game = (await host.until("race_go"))["game"]
        reply = await host.act(game, "draw")  # the fake clock has not reached starts_at
        assert reply["code"] == "race_not_started"
        clock.advance(seconds=1)
        assert (await host.act(game, "draw"))["type"] == "accepted"


async def test_a_forged_start_notification_neither_releases_nor_blocks_the_real_start(
    race_server: TestServer, database_url: str
) -> None:
    """Anyone who may connect to the database may NOTIFY: a ``race_start`` event that the
    stored room does not bear out only makes each process read the room again."""
    async with TestClient(race_server) as client:
        host, ann = await _racer(client, "Host"), await _racer(client, "Ann")
        room = (await host.request({"type": "race_create"}))["race"]
        await ann.request({"type": "race_join", "invite": room["invite"]})
        update = await host.until("race_room")
        while len(update["race"]["players"]) < 2:
            update = await host.until("race_room")
        host.inbox.clear()
        forged = encode_event(
            RaceStarted(
                race_id=room["race_id"],
                invite=room["invite"],
                version=99,
                starts_at=dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
                games={},
            )
        )
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute("SELECT pg_notify($1, $2)", room_channel(room["race_id"]), forged)
        finally:
            await conn.close()
        update = await host.until("race_room")  # read again for the event: still a lobby
        assert update["race"]["status"] == "lobby"
        assert not [m for m in host.inbox if m["type"] == "race_go"]
        await host.request({"type": "race_start", "invite": room["invite"]})
        for ws in (host, ann):
            assert (await ws.until("race_go"))["game"]["seq"] == 0
