"""Daily leaderboards over REST on a real server: docs/rules.md §4 order, shared ranks, keyset
pages, "around me" and input validation. Boards are built by inserting rows straight into the
tables.

PostgreSQL only: a real server's services are built over it (and a test here reads its SQL).
The service's rules run on both stores in ``test_leaderboard_service.py``."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine import RuleSet
from server.errors import InvalidInputError
from server.services.clock import FakeClock
from server.services.leaderboards import BoardKey
from server.web.keys import SERVICES
from tests.boards import (
    BOARD,
    DATE,
    DAY,
    T0,
    Client,
    Row,
    error,
    expected,
    get_json,
    insert_rows,
    noise,
    ranks,
    walk,
)
from tests.helpers import WsPlayer, blocking_line, daily_code, register

ENTRY_FIELDS = {
    "rank",
    "player_id",
    "name",
    "score",
    "moves",
    "undos",
    "elapsed_ms",
    "status",
    "finished_at",
    "game_id",
    "replayable",
}


async def test_entries_follow_spec_order_score_moves_elapsed_finish_player(
    client: Client, db: AsyncEngine
) -> None:
    t = T0
    rows = [
        Row("Late", 800, 30, 1000, finished_at=t + dt.timedelta(seconds=5)),
        Row("Early", 800, 30, 1000, finished_at=t),
        Row("FewerMoves", 800, 29, 9000),
        Row("Faster", 800, 30, 900),
        Row("LowerScore", 790, 10, 10),
        Row("Blocked", 310, 51, 2000, status="blocked", undos=4),
        Row("TwinA", 310, 51, 2000, finished_at=t, status="blocked"),
        Row("ZeroScore", 0, 60, 100, status="blocked"),
        *noise(),
    ]
    await insert_rows(db, rows)
    twin_b = Row("TwinB", 310, 51, 2000, finished_at=t, status="blocked")
    await insert_rows(db, [twin_b])  # inserted later: a higher player id breaks the tie
    rows.append(twin_b)
    by = {r.name: r.player_id for r in rows}

    body = await get_json(client, BOARD)
    names = [e["name"] for e in body["entries"]]
    assert names == [
        "FewerMoves",
        "Faster",
        "Early",
        "Late",
        "LowerScore",
        "Blocked",
        "TwinA",
        "TwinB",
        "ZeroScore",
    ]
    assert [e["rank"] for e in body["entries"]] == [1, 2, 3, 3, 5, 6, 6, 6, 9]
    assert ranks(body["entries"]) == expected(rows)
    assert body["next_cursor"] is None
    assert by["TwinA"] < by["TwinB"]

    blocked = body["entries"][5]
    assert blocked == {
        "rank": 6,
        "player_id": by["Blocked"],
        "name": "Blocked",
        "score": 310,
        "moves": 51,
        "undos": 4,
        "elapsed_ms": 2000,
        "status": "blocked",
        "finished_at": "2026-03-14T01:00:00Z",
        "game_id": blocked["game_id"],
        "replayable": False,
    }
    assert len({e["game_id"] for e in body["entries"]}) == len(body["entries"])
    for entry in body["entries"]:
        assert set(entry) == ENTRY_FIELDS
    assert body["entries"][3]["finished_at"] == "2026-03-14T01:00:05Z"


async def test_shared_ranks_are_1_1_3(client: Client, db: AsyncEngine) -> None:
    rows = [
        Row("Ann", 700, 40, 5000, finished_at=T0),
        Row("Ben", 700, 40, 5000, finished_at=T0 + dt.timedelta(minutes=3)),
        Row("Cid", 700, 40, 5001),
    ]
    await insert_rows(db, rows)
    body = await get_json(client, BOARD)
    assert [(e["name"], e["rank"]) for e in body["entries"]] == [
        ("Ann", 1),
        ("Ben", 1),
        ("Cid", 3),
    ]


async def test_only_ended_daily_games_of_the_date_rank(client: Client, db: AsyncEngine) -> None:
    rows = [Row("Real", 500, 20, 100), *noise()]
    await insert_rows(db, rows)
    body = await get_json(client, BOARD)
    assert [e["name"] for e in body["entries"]] == ["Real"]
    assert body["entries"][0]["rank"] == 1

    other = await get_json(client, "/api/v1/daily/2026-03-13/leaderboard")
    assert [e["name"] for e in other["entries"]] == ["noiseYesterday"]
    assert (await get_json(client, "/api/v1/daily/2026-01-01/leaderboard"))["entries"] == []


async def test_ranks_stay_right_when_a_tie_straddles_a_page(
    client: Client, db: AsyncEngine
) -> None:
    rows = [
        Row("A1", 772, 28, 50_000, finished_at=T0),
        Row("A2", 772, 28, 50_000, finished_at=T0 + dt.timedelta(seconds=1)),
        Row("A3", 772, 28, 50_000, finished_at=T0 + dt.timedelta(seconds=2)),
        Row("B1", 700, 35, 10),
        Row("C1", 650, 35, 10, finished_at=T0),
        Row("C2", 650, 35, 10, finished_at=T0 + dt.timedelta(seconds=1)),
        Row("C3", 650, 35, 10, finished_at=T0 + dt.timedelta(seconds=2)),
        Row("C4", 650, 35, 10, finished_at=T0 + dt.timedelta(seconds=3)),
    ]
    await insert_rows(db, rows)
    pages = await walk(client, 2)
    assert [[(e["name"], e["rank"]) for e in p] for p in pages] == [
        [("A1", 1), ("A2", 1)],
        [("A3", 1), ("B1", 4)],
        [("C1", 5), ("C2", 5)],
        [("C3", 5), ("C4", 5)],
    ]
    pages = await walk(client, 3)
    assert [[e["rank"] for e in p] for p in pages] == [[1, 1, 1], [4, 5, 5], [5, 5]]


async def test_walking_every_page_visits_each_entry_once_in_order(
    client: Client, db: AsyncEngine
) -> None:
    rows = [Row(f"P{i:02}", 500 - (i // 3), 20 + (i % 2), 1000, finished_at=T0) for i in range(12)]
    await insert_rows(db, [*rows, *noise()])
    want = expected(rows)
    for limit in (1, 3, 5, 12, 13, 100):
        pages = await walk(client, limit)
        flat = [e for p in pages for e in p]
        assert ranks(flat) == want, limit
        assert len({e["player_id"] for e in flat}) == len(rows)
        assert len(pages) == max(1, -(-len(rows) // limit))  # no empty trailing page


async def test_empty_board_has_no_entries_and_no_cursor(client: Client) -> None:
    assert await get_json(client, BOARD) == {"date": DAY, "entries": [], "next_cursor": None}


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_boards_walk_matches_naive_ranking(
    client: Client, db: AsyncEngine, seed: int
) -> None:
    rng = random.Random(seed)
    n = rng.randint(180, 220)
    finishes = [T0 + dt.timedelta(milliseconds=rng.randint(0, 3)) for _ in range(3)]
    rows = [
        Row(
            f"R{i:03}",
            score=rng.choice([0, 1, 300, 301, 772]),
            moves=rng.randint(28, 31),
            elapsed_ms=rng.choice([1000, 1001, 2000]),
            finished_at=rng.choice(finishes),
            status=rng.choice(["won", "blocked"]),
            undos=rng.randint(0, 3),
        )
        for i in range(n)
    ]
    # Unfinished and resigned games of the same date, some outscoring every ranked one.
    extra = [
        Row(f"X{i:03}", rng.choice([0, 772]), 28, 1000, status=rng.choice(["playing", "resigned"]))
        for i in range(20)
    ]
    await insert_rows(db, [*rows, *extra, *noise()])
    want = expected(rows)
    assert len({r for r, _ in want}) < len(want) / 3  # there really are many ties

    by_id = {r.player_id: r for r in rows}
    for limit in (1, 7, 50, 100):
        flat = [e for p in await walk(client, limit) for e in p]
        assert ranks(flat) == want, (seed, limit)
        for e in flat:
            r = by_id[e["player_id"]]
            assert (e["name"], e["score"], e["moves"], e["elapsed_ms"], e["undos"]) == (
                r.name,
                r.score,
                r.moves,
                r.elapsed_ms,
                r.undos,
            )
            assert e["status"] == r.status

    # Around-me windows agree with the same naive ranking.
    for _ in range(15):
        radius = rng.randint(0, 8)
        i = rng.randrange(len(want))
        pid = want[i][1]
        body = await get_json(client, f"{BOARD}/around/{pid}", radius=radius)
        assert ranks(body["entries"]) == want[max(0, i - radius) : i + radius + 1], (i, radius)


async def test_pages_and_ranks_work_with_player_ids_beyond_32_bits(
    client: Client, db: AsyncEngine
) -> None:
    # players.id is a BIGINT identity: ids past 2**31 are valid and must survive the cursor.
    async with db.begin() as conn:
        await conn.execute(text("ALTER TABLE players ALTER COLUMN id RESTART WITH 3000000000"))
    rows = [Row(f"Big{i}", 500 - i // 2, 30, 1000) for i in range(7)]
    await insert_rows(db, rows)
    assert min(r.player_id for r in rows) >= 3_000_000_000
    want = expected(rows)
    for limit in (1, 2, 3):
        flat = [e for p in await walk(client, limit) for e in p]
        assert ranks(flat) == want
    body = await get_json(client, f"{BOARD}/around/{want[3][1]}", radius=2)
    assert ranks(body["entries"]) == want[1:6]


# --------------------------------------------------------------------------------- around me


async def test_around_me_returns_radius_either_side_with_ranks(
    client: Client, db: AsyncEngine
) -> None:
    rows = [Row(f"N{i:02}", 700 - 10 * (i // 2), 30, 1000) for i in range(20)]
    await insert_rows(db, [*rows, *noise()])
    want = expected(rows)
    ids = [pid for _, pid in want]

    middle = await get_json(client, f"{BOARD}/around/{ids[10]}", radius=3)
    assert set(middle) == {"date", "player_id", "entries"}
    assert middle["date"] == DAY and middle["player_id"] == ids[10]
    assert ranks(middle["entries"]) == want[7:14]
    assert middle["entries"][3]["player_id"] == ids[10]
    assert [e["rank"] for e in middle["entries"]] == [7, 9, 9, 11, 11, 13, 13]
    for entry in middle["entries"]:
        assert set(entry) == ENTRY_FIELDS

    top = await get_json(client, f"{BOARD}/around/{ids[1]}", radius=3)
    assert ranks(top["entries"]) == want[0:5]
    bottom = await get_json(client, f"{BOARD}/around/{ids[-1]}", radius=4)
    assert ranks(bottom["entries"]) == want[15:20]
    alone = await get_json(client, f"{BOARD}/around/{ids[5]}", radius=0)
    assert ranks(alone["entries"]) == [want[5]]
    default = await get_json(client, f"{BOARD}/around/{ids[10]}")
    assert ranks(default["entries"]) == want[5:16]  # radius 5 by default
    wide = await get_json(client, f"{BOARD}/around/{ids[10]}", radius=50)
    assert ranks(wide["entries"]) == want


async def test_around_me_of_a_single_entry_board(client: Client, db: AsyncEngine) -> None:
    rows = [Row("Solo", 123, 45, 6789, status="blocked")]
    await insert_rows(db, rows)
    body = await get_json(client, f"{BOARD}/around/{rows[0].player_id}", radius=10)
    assert ranks(body["entries"]) == [(1, rows[0].player_id)]


async def test_around_an_unranked_player_is_404_not_ranked(client: Client, db: AsyncEngine) -> None:
    rows = [Row("Ranked", 500, 30, 1000), *noise()]
    await insert_rows(db, rows)
    by = {r.name: r.player_id for r in rows}
    for name in ("noisePlaying", "noiseResigned", "noiseFree", "noiseRace", "noiseTomorrow"):
        await error(await client.get(f"{BOARD}/around/{by[name]}"), 404, "not_ranked")
    await error(await client.get(f"{BOARD}/around/999999"), 404, "not_ranked")
    await error(await client.get(f"{BOARD}/around/0"), 400, "bad_player_id")
    # ranked on another date only
    await error(await client.get(f"{BOARD}/around/{by['noiseYesterday']}"), 404, "not_ranked")
    ok = await get_json(
        client, f"/api/v1/daily/2026-03-13/leaderboard/around/{by['noiseYesterday']}"
    )
    assert ranks(ok["entries"]) == [(1, by["noiseYesterday"])]


async def test_rank_of_gives_one_players_shared_rank(server: TestServer, db: AsyncEngine) -> None:
    rows = [Row("Ann", 600, 30, 10), Row("Ben", 500, 30, 10), Row("Cid", 500, 30, 10), *noise()]
    await insert_rows(db, rows)
    boards = server.app[SERVICES].leaderboards
    by = {r.name: r.player_id for r in rows}
    ben = await boards.rank_of(DATE, by["Ben"])
    cid = await boards.rank_of(DATE, by["Cid"])
    assert ben is not None and cid is not None
    assert (ben.rank, cid.rank) == (2, 2)
    assert await boards.rank_of(DATE, by["noisePlaying"]) is None
    assert await boards.rank_of(DATE, by["noiseYesterday"]) is None


# --------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "limit", ["0", "101", "x", "-1", "1.5", "1e2", "9" * 20, " ", "1_0", "+5", " 5", "\u0665"]
)
async def test_bad_limit_is_400(client: Client, limit: str) -> None:
    await error(await client.get(BOARD, params={"limit": limit}), 400, "bad_limit")


@pytest.mark.parametrize("limit", ["1", "100"])
async def test_limit_bounds_are_accepted(client: Client, limit: str) -> None:
    assert (await client.get(BOARD, params={"limit": limit})).status == 200


def _b64(value: object) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "garbage!!",
        "%%%",
        "a",
        "x" * 500,
        _b64(b"not json"),
        _b64(b"\xff\xfe\xfd"),
        _b64({"score": 1}),
        _b64([1, 2, 3]),
        _b64([1, 2, 3, "2026-03-14T01:00:00+00:00", 4, 5]),
        _b64(["1", 2, 3, "2026-03-14T01:00:00+00:00", 4]),
        _b64([1.5, 2, 3, "2026-03-14T01:00:00+00:00", 4]),
        _b64([True, 2, 3, "2026-03-14T01:00:00+00:00", 4]),
        _b64([1, 2, 3, "yesterday", 4]),
        _b64([1, 2, 3, 20260314, 4]),
        _b64([1, 2, 3, "2026-03-14T01:00:00", 4]),  # naive time
        _b64([2**70, 2, 3, "2026-03-14T01:00:00+00:00", 4]),
        _b64([1, 2, 3, "2026-03-14T01:00:00+00:00", -(2**63) - 1]),
        _b64([1, 2**40, 3, "2026-03-14T01:00:00+00:00", 4]),
        _b64([1, 2, 3, "0001-01-01T00:00:00+14:00", 4]),
        _b64([1, 2, 3, "9999-12-31T23:59:59-14:00", 4]),
    ],
)
async def test_bad_cursor_is_400(client: Client, db: AsyncEngine, cursor: str) -> None:
    await insert_rows(db, [Row("Ann", 500, 30, 1000)])
    await error(await client.get(BOARD, params={"cursor": cursor}), 400, "bad_cursor")


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    score=st.integers(0, 2**31 - 1),
    moves=st.integers(0, 2**31 - 1),
    elapsed=st.integers(0, 2**63 - 1),
    finished=st.datetimes(
        min_value=dt.datetime(1970, 1, 1),
        max_value=dt.datetime(9000, 1, 1),
        timezones=st.just(dt.UTC),
    ),
    player_id=st.integers(1, 2**63 - 1),
)
def test_cursor_round_trips_every_key(
    score: int, moves: int, elapsed: int, finished: dt.datetime, player_id: int
) -> None:
    key = BoardKey(score, moves, elapsed, finished, player_id)
    assert BoardKey.decode(key.encode()) == key


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=250), st.binary(max_size=150).map(_b64)))
def test_any_cursor_text_decodes_or_is_bad_cursor(cursor: str) -> None:
    try:
        key = BoardKey.decode(cursor)
    except InvalidInputError as exc:
        assert exc.code == "bad_cursor"
    else:
        assert key.finished_at.utcoffset() == dt.timedelta(0)


async def test_tampered_cursor_is_400_or_a_valid_page(client: Client, db: AsyncEngine) -> None:
    await insert_rows(db, [Row(f"P{i}", 500 - i, 30, 1000) for i in range(5)])
    cursor = (await get_json(client, BOARD, limit=2))["next_cursor"]
    assert cursor
    for i in range(len(cursor)):
        for replacement in ("A", "_", "!"):
            if cursor[i] == replacement:
                continue
            tampered = cursor[:i] + replacement + cursor[i + 1 :]
            resp = await client.get(BOARD, params={"cursor": tampered, "limit": "2"})
            # A cursor is an opaque position, not a secret: a flipped byte either fails to
            # parse (400 bad_cursor) or still names a position (200); never a server error.
            assert resp.status in (200, 400), (tampered, await resp.text())
            if resp.status == 400:
                assert (await resp.json())["error"]["code"] == "bad_cursor"
    await error(await client.get(BOARD, params={"cursor": cursor + "AAAA"}), 400, "bad_cursor")
    await error(await client.get(BOARD, params={"cursor": cursor[:-4]}), 400, "bad_cursor")


@pytest.mark.parametrize("radius", ["-1", "51", "x", "2.5", "9" * 20, "1_0", "\u0665"])
async def test_bad_radius_is_400(client: Client, db: AsyncEngine, radius: str) -> None:
    rows = [Row("Ann", 500, 30, 1000)]
    await insert_rows(db, rows)
    resp = await client.get(f"{BOARD}/around/{rows[0].player_id}", params={"radius": radius})
    await error(resp, 400, "bad_radius")


@pytest.mark.parametrize("player_id", ["abc", "-1", "1.5", "0x10", "9" * 30, "%201", "１"])
async def test_bad_player_id_in_path_is_400(client: Client, player_id: str) -> None:
    await error(await client.get(f"{BOARD}/around/{player_id}"), 400, "bad_player_id")


@pytest.mark.parametrize("date", ["2026-3-14", "today", "2026-02-30"])
async def test_bad_date_in_leaderboard_path_is_400(client: Client, date: str) -> None:
    await error(await client.get(f"/api/v1/daily/{date}/leaderboard"), 400, "bad_date")
    await error(await client.get(f"/api/v1/daily/{date}/leaderboard/around/1"), 400, "bad_date")


# --------------------------------------------------------------------------------- SQL shape


async def test_pages_use_keyset_conditions_never_offset(
    server: TestServer, client: Client, db: AsyncEngine
) -> None:
    rows = [Row(f"P{i:02}", 500 - i // 2, 30, 1000) for i in range(30)]
    await insert_rows(db, rows)
    statements: list[str] = []

    def log(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sync_engine = server.app[SERVICES].db.sync_engine
    event.listen(sync_engine, "before_cursor_execute", log)
    try:
        first = await get_json(client, BOARD, limit=10)
        second = await get_json(client, BOARD, limit=10, cursor=first["next_cursor"])
        await get_json(client, f"{BOARD}/around/{rows[15].player_id}", radius=4)
    finally:
        event.remove(sync_engine, "before_cursor_execute", log)
    assert ranks(first["entries"] + second["entries"]) == expected(rows)[:20]
    selects = [s for s in statements if "FROM games" in s]
    assert len(selects) >= 4
    assert not [s for s in statements if "OFFSET" in s.upper()]
    assert any("LIMIT" in s.upper() for s in selects)


# --------------------------------------------------------------------------------- end to end


async def test_a_blocked_daily_played_over_websocket_ranks(
    client: Client, clock: FakeClock, settings: Any
) -> None:
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    alice = await register(client, "Alice")
    bob = await register(client, "Bob")
    ws_a, _ = await WsPlayer.connect(client, alice["token"])
    ws_b, _ = await WsPlayer.connect(client, bob["token"])
    game_a = (await ws_a.request({"type": "join_daily"}))["game"]
    game_b = (await ws_b.request({"type": "join_daily"}))["game"]
    clock.advance(ms=61_234)
    final = await ws_a.play(game_a, line)
    assert final["status"] == "blocked"
    await ws_b.act(game_b, "draw")
    await ws_b.request({"type": "resign", "game_id": game_b["game_id"]})

    body = await get_json(client, BOARD)
    assert body["entries"] == [
        {
            "rank": 1,
            "player_id": alice["id"],
            "name": "Alice",
            "score": final["score"],
            "moves": final["moves"],
            "undos": 0,
            "elapsed_ms": 61_234,
            "status": "blocked",
            "finished_at": "2026-03-14T12:01:01.234000Z",
            "game_id": game_a["game_id"],
            "replayable": False,
        }
    ]
    daily = await get_json(client, "/api/v1/daily")
    assert (daily["players"], daily["ranked"]) == (2, 1)
    await error(await client.get(f"{BOARD}/around/{bob['id']}"), 404, "not_ranked")
    # Once the date is over its games' replays are served, and the board says so.
    clock.set(dt.datetime(2026, 3, 15, 0, 0, tzinfo=dt.UTC))
    for board in (BOARD, f"{BOARD}/around/{alice['id']}"):
        entries = (await get_json(client, board))["entries"]
        assert [(e["game_id"], e["replayable"]) for e in entries] == [(game_a["game_id"], True)]
    await ws_a.close()
    await ws_b.close()
