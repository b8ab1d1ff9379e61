"""Following over a real server (docs/protocol.md §12.14): follow by id and by name, unfollow,
repeats, refusals, who is online, the friends' view of a board with the global ranks; and race
invitations over real websockets, crossing from one server process to another (two servers
on one database, the invitation's event over LISTEN/NOTIFY)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, eventually, register

Client = TestClient[Any, Any]
DATE = dt.date(2026, 3, 14)


def bearer(player: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {player['token']}"}


async def _json(resp: Any, status: int = 200) -> Any:
    assert resp.status == status, await resp.text()
    return await resp.json()


async def _error(resp: Any, status: int, code: str) -> None:
    body = await _json(resp, status)
    assert body["error"]["code"] == code, body


async def _following(client: Client, player: dict[str, Any]) -> list[dict[str, Any]]:
    body = await _json(await client.get("/api/v1/players/me/following", headers=bearer(player)))
    assert body["limit"] == 500
    players: list[dict[str, Any]] = body["players"]
    return players


async def test_follow_by_id_and_by_name_then_unfollow(client: Client) -> None:
    me, ada, bob = [await register(client, n) for n in ("Me", "Ada", "Bob")]
    followed = await _json(
        await client.put(f"/api/v1/players/me/following/{ada['id']}", headers=bearer(me))
    )
    assert (followed["id"], followed["name"], followed["online"]) == (ada["id"], "Ada", False)
    by_name = await _json(
        await client.post(
            "/api/v1/players/me/following", json={"name": "  BOB "}, headers=bearer(me)
        )
    )
    assert (by_name["id"], by_name["name"]) == (bob["id"], "Bob")
    assert [p["id"] for p in await _following(client, me)] == [ada["id"], bob["id"]]
    assert await _following(client, ada) == []  # one-way

    gone = await _json(
        await client.delete(f"/api/v1/players/me/following/{ada['id']}", headers=bearer(me))
    )
    assert gone == {"player_id": ada["id"], "was_following": True}
    again = await _json(
        await client.delete(f"/api/v1/players/me/following/{ada['id']}", headers=bearer(me))
    )
    assert again == {"player_id": ada["id"], "was_following": False}
    assert [p["id"] for p in await _following(client, me)] == [bob["id"]]


async def test_following_twice_changes_nothing(client: Client) -> None:
    me, ada = [await register(client, n) for n in ("Me", "Ada")]
    path = f"/api/v1/players/me/following/{ada['id']}"
    first = await _json(await client.put(path, headers=bearer(me)))
    second = await _json(await client.put(path, headers=bearer(me)))
    third = await _json(
        await client.post("/api/v1/players/me/following", json={"name": "ada"}, headers=bearer(me))
    )
    assert first == second == third
    assert await _following(client, me) == [first]


async def test_following_oneself_or_nobody_is_refused(client: Client) -> None:
    me = await register(client, "Me")
    await _error(
        await client.put(f"/api/v1/players/me/following/{me['id']}", headers=bearer(me)),
        400,
        "cannot_follow_self",
    )
    await _error(
        await client.post("/api/v1/players/me/following", json={"name": "ME"}, headers=bearer(me)),
        400,
        "cannot_follow_self",
    )
    await _error(
        await client.put(f"/api/v1/players/me/following/{me['id'] + 100}", headers=bearer(me)),
        404,
        "unknown_player",
    )
    await _error(
        await client.post(
            "/api/v1/players/me/following", json={"name": "Nobody"}, headers=bearer(me)
        ),
        404,
        "unknown_player",
    )
    await _error(
        await client.post("/api/v1/players/me/following", json={"nom": "x"}, headers=bearer(me)),
        400,
        "invalid_input",
    )
    await _error(
        await client.put("/api/v1/players/me/following/abc", headers=bearer(me)),
        400,
        "bad_player_id",
    )
    await _error(await client.get("/api/v1/players/me/following"), 401, "unauthorized")
    assert await _following(client, me) == []


async def test_the_list_says_who_is_online(client: Client) -> None:
    me, ada = [await register(client, n) for n in ("Me", "Ada")]
    await client.put(f"/api/v1/players/me/following/{ada['id']}", headers=bearer(me))
    ws, _ = await WsPlayer.connect(client, ada["token"])
    assert [p["online"] for p in await _following(client, me)] == [True]
    await ws.close()

    async def offline() -> bool:
        return [p["online"] for p in await _following(client, me)] == [False]

    await eventually(offline, "Ada offline once her socket closed")


async def test_the_friends_view_shows_the_global_ranks_in_board_order(
    server: TestServer, client: Client
) -> None:
    players = [await register(client, n) for n in ("Me", "Ada", "Bob", "Cy", "Dee")]
    me, ada, bob, cy, dee = (p["id"] for p in players)
    done = dt.datetime(2026, 3, 14, 10, tzinfo=dt.UTC)
    seeds = PostgresBackend(server.app[SERVICES].db)
    await seeds.add_games(
        [
            Seed(cy, 900, 30, 50_000, done, daily_date=DATE),
            Seed(dee, 700, 30, 60_000, done, daily_date=DATE),
            Seed(ada, 700, 30, 60_000, done, daily_date=DATE),
            Seed(me, 500, 31, 70_000, done, daily_date=DATE),
            Seed(bob, 800, 30, 10_000, done, daily_date=DATE - dt.timedelta(days=1)),
        ]
    )
    for followed in (ada, bob, dee):
        await client.put(f"/api/v1/players/me/following/{followed}", headers=bearer(players[0]))
    board = await _json(
        await client.get(
            f"/api/v1/daily/{DATE.isoformat()}/leaderboard/friends", headers=bearer(players[0])
        )
    )
    everyone = await _json(await client.get(f"/api/v1/daily/{DATE.isoformat()}/leaderboard"))
    ranks = {e["player_id"]: e["rank"] for e in everyone["entries"]}
    assert board["date"] == DATE.isoformat()
    assert [e["player_id"] for e in board["entries"]] == [
        e["player_id"] for e in everyone["entries"] if e["player_id"] in (me, ada, dee)
    ]
    assert [e["rank"] for e in board["entries"]] == [
        ranks[e["player_id"]] for e in board["entries"]
    ]
    assert [e["rank"] for e in board["entries"]] == [2, 2, 4]
    full = {e["player_id"]: e for e in everyone["entries"]}
    assert all(e == full[e["player_id"]] for e in board["entries"])
    await _error(
        await client.get(f"/api/v1/daily/{DATE.isoformat()}/leaderboard/friends"),
        401,
        "unauthorized",
    )


async def test_an_invitation_reaches_the_invited_players_socket_on_another_process(
    make_server: ServerFactory,
) -> None:
    first, second = await make_server(), await make_server()
    async with TestClient(first) as here, TestClient(second) as there:
        host, ada, bob = [await register(here, n) for n in ("Host", "Ada", "Bob")]
        await here.put(f"/api/v1/players/me/following/{ada['id']}", headers=bearer(host))
        await here.put(f"/api/v1/players/me/following/{bob['id']}", headers=bearer(host))
        hosting, _ = await WsPlayer.connect(here, host["token"])
        invited, _ = await WsPlayer.connect(there, ada["token"])  # on the other process
        room = (await hosting.request({"type": "race_create"}))["race"]
        invite = room["invite"]

        reply = await hosting.request(
            {"type": "invite_to_race", "invite": invite, "player_id": ada["id"]}
        )
        assert reply["type"] == "invited" and reply["player_id"] == ada["id"], reply
        told = await invited.until("race_invite")
        assert told == {
            "type": "race_invite",
            "invite": invite,
            "from": {"id": host["id"], "name": "Host"},
        }
        again = await hosting.request(
            {"type": "invite_to_race", "invite": invite, "player_id": ada["id"]}
        )
        assert again["type"] == "error" and again["code"] == "too_many_invites", again

        offline = await hosting.request(
            {"type": "invite_to_race", "invite": invite, "player_id": bob["id"]}
        )
        assert offline["type"] == "error" and offline["code"] == "player_offline", offline
        stranger, _ = await WsPlayer.connect(there, bob["token"])
        outsider = await stranger.request(
            {"type": "invite_to_race", "invite": invite, "player_id": ada["id"]}
        )
        assert outsider["code"] == "not_in_race", outsider
        await here.delete(f"/api/v1/players/me/following/{bob['id']}", headers=bearer(host))
        unfollowed = await hosting.request(
            {"type": "invite_to_race", "invite": invite, "player_id": bob["id"]}
        )
        assert unfollowed["code"] == "not_following", unfollowed
        for ws in (hosting, invited, stranger):
            await ws.close()
