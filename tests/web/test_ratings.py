"""Quick races and ratings on a real server: four players waiting under Classic are matched by
the server's own matcher loop into one rated race on a sealed deal; once it is raced out over
websockets, ``GET /api/v1/players/{player_id}/ratings`` shows each racer's rating, provisional,
with the race in its history exactly as the library moved it; bad and unknown ids are refused."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from openskill.models import PlackettLuce

from server.engine import RuleSet
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, race_code, register

Client = TestClient[Any, Any]


async def _ratings(client: Client, player_id: int) -> dict[str, Any]:
    resp = await client.get(f"/api/v1/players/{player_id}/ratings")
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def test_a_quick_race_is_matched_raced_and_rated_and_its_ratings_are_served(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.2, race_sweep_s=0.05)
    services = server.app[SERVICES]
    async with TestClient(server) as client:
        infos = [await register(client, name) for name in ("ada", "bob", "cy", "di")]
        assert (await _ratings(client, infos[0]["id"])) == {
            "player_id": infos[0]["id"],
            "ratings": [],
        }
        sockets = [(await WsPlayer.connect(client, info["token"]))[0] for info in infos]
        for ws in sockets:
            await ws.request({"type": "queue_join", "rules": "C"})
        rooms: list[Any] = []
        while not rooms:  # the matcher loop runs every 0.5 s
            rooms = await services.races.active_for(infos[0]["id"])
            await asyncio.sleep(0.05)
        invite = rooms[0].invite
        code = await race_code(server, invite)
        assert code.rules is RuleSet.CLASSIC and code.sealed

        clock.advance(seconds=1)  # the countdown is over: a racer joining gets their game
        games = []
        for ws in sockets:
            joined = await ws.request({"type": "race_join", "invite": invite})
            assert joined["role"] == "racer" and joined["game"] is not None, joined
            games.append(joined["game"])
        # Ada removes one card (drawing until she can); the others resign at once.
        state = await sockets[0].remove_a_card(code, games[0])
        for ws, g in zip(sockets, [state, *games[1:]], strict=True):
            await ws.request({"type": "resign", "game_id": g["game_id"]})
        finished = (await sockets[0].until("race_results"))["race"]
        results = finished["results"]
        assert [(r["name"], r["rank"]) for r in results] == [
            ("ada", 1),
            ("bob", 2),
            ("cy", 2),
            ("di", 2),
        ]

        assert finished["rated"] is True

        model = PlackettLuce()
        expected = model.rate([[model.rating()] for _ in infos], ranks=[1.0, 2.0, 2.0, 2.0])
        # Each racer's result carries their change, in the push and in the room read later.
        shown = [round(new.ordinal() * 40) for (new,) in expected]
        changes = [
            {"before": 0, "after": after, "change": after, "provisional": True} for after in shown
        ]
        assert [r["rating"] for r in finished["results"]] == changes
        room = await client.get(f"/api/v1/races/{invite}")
        assert room.status == 200
        stored = await room.json()
        assert stored["rated"] is True
        assert [r["rating"] for r in stored["results"]] == changes
        for info, (new,), won in zip(infos, expected, [1, 0, 0, 0], strict=True):
            body = await _ratings(client, info["id"])
            (rating,) = body["ratings"]
            assert (rating["rules"], rating["races"], rating["wins"]) == ("C", 1, won)
            assert (rating["mu"], rating["sigma"]) == (new.mu, new.sigma)
            assert rating["provisional"] is True
            assert rating["rating"] == round(new.ordinal() * 40)
            (point,) = rating["history"]
            assert point["before"] == 0 and point["after"] == rating["rating"]
            assert point["change"] == point["after"] - point["before"]
            assert point["racers"] == 4 and point["rank"] == (1 if won else 2)
            assert point["invite"] == invite  # the finished room and its results
        for ws in sockets:
            await ws.close()


async def test_the_ratings_of_a_bad_or_unknown_player_id_are_refused(client: Client) -> None:
    for raw in ("abc", "0", "99999999999999999999"):
        resp = await client.get(f"/api/v1/players/{raw}/ratings")
        assert resp.status == 400, raw
        assert (await resp.json())["error"]["code"] == "bad_player_id"
    resp = await client.get("/api/v1/players/4242/ratings")
    assert resp.status == 404
    assert (await resp.json())["error"]["code"] == "unknown_player"


async def test_a_friends_race_every_racer_opted_into_is_rated(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.2, race_sweep_s=0.05)
    async with TestClient(server) as client:
        infos = [await register(client, name) for name in ("eve", "fay", "gus")]
        eve, fay, gus = [(await WsPlayer.connect(client, i["token"]))[0] for i in infos]
        # A host's deal is never rated: the option is refused and no room is opened.
        refused = await eve.request({"type": "race_create", "code": "TP1-C-AAAAAAB", "rated": True})
        assert (refused["type"], refused["code"]) == ("error", "rated_host_deal")
        assert "never rated" in refused["message"]
        assert await server.app[SERVICES].races.active_for(infos[0]["id"]) == []

        created = await eve.request({"type": "race_create", "rules": "C", "rated": True})
        room = created["race"]
        assert (room["rated"], room["host_deal"]) == (True, False)
        invite = room["invite"]
        # Taking a seat needs the opt-in; watching does not.
        no = await fay.request({"type": "race_join", "invite": invite})
        assert (no["type"], no["code"]) == ("error", "rated_mismatch")
        assert f"race {invite} is rated" in no["message"]
        watching = await gus.request({"type": "race_join", "invite": invite, "watch": True})
        assert watching["role"] == "spectator"
        joined = await fay.request({"type": "race_join", "invite": invite, "rated": True})
        assert joined["role"] == "racer" and joined["race"]["rated"] is True

        # The opt-in is refused in a room that is not rated.
        other = (await gus.request({"type": "race_create", "rules": "E"}))["race"]
        assert other["rated"] is False
        wrong = await fay.request({"type": "race_join", "invite": other["invite"], "rated": True})
        assert (wrong["type"], wrong["code"]) == ("error", "rated_mismatch")
        assert "is not rated" in wrong["message"]

        started = await eve.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running"
        clock.advance(seconds=1)
        games = [(await ws.until("race_go"))["game"] for ws in (eve, fay)]
        # Eve removes a card (drawing until she can); Fay resigns at once.
        state = await eve.remove_a_card(await race_code(server, invite), games[0])
        await eve.request({"type": "resign", "game_id": state["game_id"]})
        await fay.request({"type": "resign", "game_id": games[1]["game_id"]})
        finished = (await fay.until("race_results"))["race"]
        assert finished["rated"] is True
        model = PlackettLuce()
        (first,), (second,) = model.rate([[model.rating()], [model.rating()]], ranks=[1.0, 2.0])
        assert [(r["name"], r["rating"]) for r in finished["results"]] == [
            (
                "eve",
                {
                    "before": 0,
                    "after": round(first.ordinal() * 40),
                    "change": round(first.ordinal() * 40),
                    "provisional": True,
                },
            ),
            (
                "fay",
                {
                    "before": 0,
                    "after": round(second.ordinal() * 40),
                    "change": round(second.ordinal() * 40),
                    "provisional": True,
                },
            ),
        ]
        ladder = await client.get("/api/v1/ladder/C")
        assert [e["name"] for e in (await ladder.json())["entries"]] == ["eve", "fay"]
        for ws in (eve, fay, gus):
            await ws.close()
