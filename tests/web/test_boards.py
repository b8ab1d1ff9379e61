"""The weekly and monthly boards over a real server (docs/protocol.md §12.17): pages by cursor,
"around me", the friends' view, the profile's ranks of the week and the month, and the
refusals (a bad period named, bad limits, cursors and radii, a player not ranked, no token).
Every answer is checked against the OpenAPI document by the test server (tests/contract.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.helpers import register

Client = TestClient[Any, Any]
#: Monday of ISO week 2026-W10, in March 2026.
MONDAY = dt.date(2026, 3, 2)
DONE = dt.datetime(2026, 3, 2, 10, tzinfo=dt.UTC)


def bearer(player: dict[str, Any]) -> dict[str, str]:
    return {"Authorization": f"Bearer {player['token']}"}


async def _json(resp: Any, status: int = 200) -> Any:
    assert resp.status == status, await resp.text()
    return await resp.json()


async def _seed(server: TestServer, client: Client) -> list[dict[str, Any]]:
    """Five players: Ada 1500 over two days of W10; Bob and Cy 1500 over two days in more
    time (tied); Dee 1500 in one day; Eve only in February (W09)."""
    players = [await register(client, n) for n in ("Ada", "Bob", "Cy", "Dee", "Eve")]
    ada, bob, cy, dee, eve = (p["id"] for p in players)
    day2 = MONDAY + dt.timedelta(days=1)
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(ada, 800, 30, 40_000, DONE, daily_date=MONDAY),
            Seed(ada, 700, 30, 40_000, DONE, daily_date=day2),
            Seed(bob, 900, 30, 60_000, DONE, daily_date=MONDAY),
            Seed(bob, 600, 40, 60_000, DONE, status="blocked", daily_date=day2),
            Seed(cy, 750, 30, 60_000, DONE, daily_date=MONDAY),
            Seed(cy, 750, 30, 60_000, DONE, daily_date=day2),
            Seed(dee, 1500, 30, 1_000, DONE, daily_date=MONDAY),
            Seed(eve, 999, 30, 1_000, DONE, daily_date=dt.date(2026, 2, 27)),
        ]
    )
    return players


async def test_a_weeks_board_by_pages_around_a_player_and_among_friends(
    server: TestServer, client: Client
) -> None:
    players = await _seed(server, client)
    ada, bob, cy, dee, eve = (p["id"] for p in players)
    first = await _json(await client.get("/api/v1/boards/week/2026-W10?limit=2"))
    assert (first["kind"], first["period"]) == ("week", "2026-W10")
    assert (first["starts_on"], first["ends_on"]) == ("2026-03-02", "2026-03-08")
    assert [(e["player_id"], e["rank"], e["total"], e["days"]) for e in first["entries"]] == [
        (ada, 1, 1500, 2),
        (bob, 2, 1500, 2),
    ]
    assert first["entries"][0]["elapsed_ms"] == 80_000
    second = await _json(
        await client.get(f"/api/v1/boards/week/2026-W10?limit=2&cursor={first['next_cursor']}")
    )
    assert [(e["player_id"], e["rank"]) for e in second["entries"]] == [(cy, 2), (dee, 4)]
    assert second["next_cursor"] is None

    around = await _json(await client.get(f"/api/v1/boards/week/2026-W10/around/{dee}?radius=1"))
    assert around["player_id"] == dee
    assert [(e["player_id"], e["rank"]) for e in around["entries"]] == [(cy, 2), (dee, 4)]
    missing = await _json(await client.get(f"/api/v1/boards/week/2026-W10/around/{eve}"), 404)
    assert missing["error"]["code"] == "not_ranked"
    assert "2026-W10" in missing["error"]["message"]

    await client.put(f"/api/v1/players/me/following/{dee}", headers=bearer(players[2]))
    friends = await _json(
        await client.get("/api/v1/boards/week/2026-W10/friends", headers=bearer(players[2]))
    )
    assert [(e["player_id"], e["rank"]) for e in friends["entries"]] == [(cy, 2), (dee, 4)]
    refused = await _json(await client.get("/api/v1/boards/week/2026-W10/friends"), 401)
    assert refused["error"]["code"] == "unauthorized"


async def test_a_months_board_holds_the_whole_month_and_no_other(
    server: TestServer, client: Client
) -> None:
    players = await _seed(server, client)
    march = await _json(await client.get("/api/v1/boards/month/2026-03"))
    assert (march["starts_on"], march["ends_on"]) == ("2026-03-01", "2026-03-31")
    assert len(march["entries"]) == 4
    february = await _json(await client.get("/api/v1/boards/month/2026-02"))
    assert [(e["player_id"], e["total"]) for e in february["entries"]] == [(players[4]["id"], 999)]
    week9 = await _json(await client.get("/api/v1/boards/week/2026-W09"))
    assert [e["player_id"] for e in week9["entries"]] == [players[4]["id"]]
    empty = await _json(await client.get("/api/v1/boards/month/2026-04"))
    assert (empty["entries"], empty["next_cursor"]) == ([], None)


async def test_a_profile_shows_the_ranks_of_the_current_week_and_month(
    server: TestServer, client: Client, clock: FakeClock
) -> None:
    players = await _seed(server, client)
    clock.set(dt.datetime(2026, 3, 3, 12, tzinfo=dt.UTC))
    cy = await _json(await client.get(f"/api/v1/players/{players[2]['id']}"))
    assert cy["week"] == {"period": "2026-W10", "rank": 2, "total": 1500, "days": 2}
    assert cy["month"] == {"period": "2026-03", "rank": 2, "total": 1500, "days": 2}
    eve = await _json(await client.get(f"/api/v1/players/{players[4]['id']}"))
    assert eve["week"] == {"period": "2026-W10", "rank": None, "total": None, "days": None}
    assert eve["month"]["rank"] is None


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("/boards/week/2026-10", "bad_period", "'2026-10' is not an ISO week"),
        ("/boards/week/2025-W53", "bad_period", "2025 has ISO weeks W01 to W52"),
        ("/boards/month/2026-00", "bad_period", "the month must be 01 to 12"),
        ("/boards/month/2026-W10", "bad_period", "'2026-W10' is not a month"),
        ("/boards/month/2026-03-01/around/1", "bad_period", "is not a month"),
        ("/boards/week/2026-W10?limit=101", "bad_limit", "limit must be 1..100"),
        ("/boards/week/2026-W10?limit=ten", "bad_limit", "limit must be an integer"),
        ("/boards/month/2026-03?cursor=garbage", "bad_cursor", "the cursor is not valid"),
        ("/boards/week/2026-W10/around/1?radius=51", "bad_radius", "radius must be 0..50"),
        ("/boards/week/2026-W10/around/0", "bad_player_id", "player_id must be a positive"),
    ],
)
async def test_bad_input_is_400_naming_what_was_wrong(
    client: Client, path: str, code: str, message: str
) -> None:
    body = await _json(await client.get(f"/api/v1{path}"), 400)
    assert body["error"]["code"] == code
    assert message in body["error"]["message"]


async def test_the_calendars_last_week_and_month_are_boards_too(client: Client) -> None:
    week = await _json(await client.get("/api/v1/boards/week/9999-W52"))
    assert (week["starts_on"], week["ends_on"], week["entries"]) == ("9999-12-27", "9999-12-31", [])
    month = await _json(await client.get("/api/v1/boards/month/9999-12/around/1"), 404)
    assert month["error"]["code"] == "not_ranked"
