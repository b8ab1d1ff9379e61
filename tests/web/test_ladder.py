"""The ladder over a real server (docs/protocol.md §12.19): a rule set's rated players by shown
rating, by pages and cursors, around a player, among friends; ratings of the other rule set and
banned players left off; the refusals (a bad rule set named, bad limits, cursors and radii, a
player not on the ladder, no token). Every answer is checked against the OpenAPI document by
the test server (tests/contract.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import insert

from server.storage.models import PlayerRating
from server.web.keys import SERVICES
from tests.helpers import register

Client = TestClient[Any, Any]
AT = dt.datetime(2026, 3, 2, 10, tzinfo=dt.UTC)


def bearer(player: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {player['token']}"}


async def _json(resp: Any, status: int = 200) -> Any:
    assert resp.status == status, await resp.text()
    return await resp.json()


async def _rate(server: TestServer, rows: list[tuple[int, str, int, int, int]]) -> None:
    """Store ratings ``(player_id, rules, shown rating, races, wins)``: sigma 1, and mu such
    that the ordinal times 40 is the rating."""
    async with server.app[SERVICES].db.begin() as conn:
        await conn.execute(
            insert(PlayerRating),
            [
                {
                    "player_id": player_id,
                    "rules": rules,
                    "mu": 3 + rating / 40,
                    "sigma": 1.0,
                    "races": races,
                    "wins": wins,
                    "rated_at": AT,
                }
                for player_id, rules, rating, races, wins in rows
            ],
        )


async def _seed(server: TestServer, client: Client) -> list[dict[str, Any]]:
    """Six players under Classic: Ada 200 (12 races), Bob and Cy 150 (Bob in more races, Cy
    in as many as Dee), Dee 150, Eve 100 (3 races: provisional), Fay 900 under Easy only."""
    players = [await register(client, n) for n in ("Ada", "Bob", "Cy", "Dee", "Eve", "Fay")]
    ada, bob, cy, dee, eve, fay = (p["id"] for p in players)
    await _rate(
        server,
        [
            (ada, "C", 200, 12, 7),
            (bob, "C", 150, 20, 2),
            (cy, "C", 150, 11, 1),
            (dee, "C", 150, 11, 5),
            (eve, "C", 100, 3, 0),
            (fay, "E", 900, 30, 30),
        ],
    )
    return players


async def test_a_ladder_by_pages_around_a_player_and_among_friends(
    server: TestServer, client: Client
) -> None:
    players = await _seed(server, client)
    ada, bob, cy, dee, eve, fay = (p["id"] for p in players)
    first = await _json(await client.get("/api/v1/ladder/C?limit=2"))
    assert first["rules"] == "C"
    assert first["entries"][0] == {
        "rank": 1,
        "player_id": ada,
        "name": "Ada",
        "rating": 200,
        "provisional": False,
        "races": 12,
        "wins": 7,
    }
    assert [(e["player_id"], e["rank"]) for e in first["entries"]] == [(ada, 1), (bob, 2)]
    second = await _json(
        await client.get(f"/api/v1/ladder/C?limit=2&cursor={first['next_cursor']}")
    )
    # Cy and Dee: the same rating and races, by player id; all three of 150 share rank 2.
    assert [(e["player_id"], e["rank"]) for e in second["entries"]] == [(cy, 2), (dee, 2)]
    third = await _json(
        await client.get(f"/api/v1/ladder/C?limit=2&cursor={second['next_cursor']}")
    )
    assert [(e["player_id"], e["rank"], e["provisional"]) for e in third["entries"]] == [
        (eve, 5, True)
    ]
    assert third["next_cursor"] is None
    whole = await _json(await client.get("/api/v1/ladder/C"))
    assert [e["player_id"] for e in whole["entries"]] == [ada, bob, cy, dee, eve]
    easy = await _json(await client.get("/api/v1/ladder/E"))
    assert [(e["player_id"], e["rank"], e["rating"]) for e in easy["entries"]] == [(fay, 1, 900)]

    around = await _json(await client.get(f"/api/v1/ladder/C/around/{dee}?radius=2"))
    assert around["player_id"] == dee and around["rules"] == "C"
    assert [(e["player_id"], e["rank"]) for e in around["entries"]] == [
        (bob, 2),
        (cy, 2),
        (dee, 2),
        (eve, 5),
    ]
    alone = await _json(await client.get(f"/api/v1/ladder/C/around/{cy}?radius=0"))
    assert [(e["player_id"], e["rank"]) for e in alone["entries"]] == [(cy, 2)]
    missing = await _json(await client.get(f"/api/v1/ladder/C/around/{fay}"), 404)
    assert missing["error"]["code"] == "not_ranked"
    assert "C ladder" in missing["error"]["message"]

    for followed in (eve, ada, fay):
        resp = await client.put(
            f"/api/v1/players/me/following/{followed}", headers=bearer(players[3])
        )
        assert resp.status in (200, 201), await resp.text()
    friends = await _json(await client.get("/api/v1/ladder/C/friends", headers=bearer(players[3])))
    assert friends["rules"] == "C"
    assert [(e["player_id"], e["rank"]) for e in friends["entries"]] == [
        (ada, 1),
        (dee, 2),
        (eve, 5),
    ]
    refused = await _json(await client.get("/api/v1/ladder/C/friends"), 401)
    assert refused["error"]["code"] == "unauthorized"


async def test_a_banned_player_is_off_the_ladder_until_unbanned(
    server: TestServer, client: Client
) -> None:
    players = await _seed(server, client)
    ada, bob, cy, dee, eve, _ = (p["id"] for p in players)
    moderation = server.app[SERVICES].moderation
    await moderation.ban(str(bob), "match fixing", "mod")
    whole = await _json(await client.get("/api/v1/ladder/C"))
    assert [(e["player_id"], e["rank"]) for e in whole["entries"]] == [
        (ada, 1),
        (cy, 2),
        (dee, 2),
        (eve, 4),
    ]
    page = await _json(await client.get("/api/v1/ladder/C?limit=1"))
    after = await _json(await client.get(f"/api/v1/ladder/C?limit=2&cursor={page['next_cursor']}"))
    assert [(e["player_id"], e["rank"]) for e in after["entries"]] == [(cy, 2), (dee, 2)]
    around = await _json(await client.get(f"/api/v1/ladder/C/around/{eve}?radius=1"))
    assert [(e["player_id"], e["rank"]) for e in around["entries"]] == [(dee, 2), (eve, 4)]
    gone = await _json(await client.get(f"/api/v1/ladder/C/around/{bob}"), 404)
    assert gone["error"]["code"] == "not_ranked"

    await moderation.unban(str(bob), "mod")
    back = await _json(await client.get(f"/api/v1/ladder/C/around/{eve}?radius=1"))
    assert [(e["player_id"], e["rank"]) for e in back["entries"]] == [(dee, 2), (eve, 5)]


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("/ladder/X", "bad_rules", "'X' is not a rule set (expected E or C)"),
        ("/ladder/c", "bad_rules", "'c' is not a rule set"),
        ("/ladder/N/around/1", "bad_rules", "'N' is not a rule set"),
        ("/ladder/EC/around/1", "bad_rules", "'EC' is not a rule set"),
        ("/ladder/C?limit=101", "bad_limit", "limit must be 1..100"),
        ("/ladder/C?limit=ten", "bad_limit", "limit must be an integer"),
        ("/ladder/E?cursor=garbage", "bad_cursor", "the cursor is not valid"),
        ("/ladder/C/around/1?radius=51", "bad_radius", "radius must be 0..50"),
        ("/ladder/C/around/0", "bad_player_id", "player_id must be a positive"),
    ],
)
async def test_bad_input_is_400_naming_what_was_wrong(
    client: Client, path: str, code: str, message: str
) -> None:
    body = await _json(await client.get(f"/api/v1{path}"), 400)
    assert body["error"]["code"] == code
    assert message in body["error"]["message"]
