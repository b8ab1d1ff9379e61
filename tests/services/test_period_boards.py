"""Weekly and monthly boards on PostgreSQL (the counters of migration 0013 summed by
:mod:`server.storage.period_boards`) against a board ranked naively in Python: pages walked by
cursor at every size, "around me" for every player at several radii, ranks of some players,
the friends' view, ties, days not played, bans and unbans; and the period names' parsing.

PostgreSQL's only: the weekly and monthly boards have no in-memory store (what they rank is
kept by the database's triggers)."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine import RuleSet
from server.errors import ErrorCode, InvalidInputError, NotFoundError
from server.services.clock import FakeClock
from server.services.moderation import ModerationService
from server.services.period_boards import Period, PeriodBoardService, PeriodEntry, PeriodKey
from server.storage import period_boards
from server.storage.follows import PostgresFollowStore
from server.storage.period_boards import PostgresPeriodBoardStore, position_values
from server.storage.sessions import Sessions
from tests.backends import PostgresBackend, Seed, open_backend
from tests.helpers import WsPlayer, blocking_line, daily_code, register
from tests.services.test_leaderboard_ranks import explain
from tests.storage.test_period_totals import assert_totals_match

#: ISO week 2026-W10 (Monday 2 March to Sunday 8 March), inside March 2026.
WEEK = Period("week", dt.date(2026, 3, 2))
MONTH = Period("month", dt.date(2026, 3, 1))
T0 = dt.datetime(2026, 3, 2, 12, tzinfo=dt.UTC)


@pytest.fixture
async def backend(database_url: str) -> AsyncIterator[PostgresBackend]:
    async with open_backend("postgres", database_url) as opened:
        assert isinstance(opened, PostgresBackend)
        yield opened


def boards(backend: PostgresBackend) -> PeriodBoardService:
    store = PostgresPeriodBoardStore(Sessions(backend.engine))
    return PeriodBoardService(store, backend.follows)


def seed(player_id: int, date: dt.date, score: int, elapsed_ms: int, status: str = "won") -> Seed:
    ended = status in ("won", "blocked", "resigned")
    return Seed(
        player_id,
        score,
        30,
        elapsed_ms if ended else None,
        T0 if ended else None,
        status=status,
        daily_date=date,
    )


def naive(seeds: list[Seed], period: Period, names: dict[int, str]) -> list[PeriodEntry]:
    """The period's board ranked by counting, from the seeds."""
    sums: dict[int, list[int]] = {}
    for s in seeds:
        assert s.daily_date is not None
        if s.status not in ("won", "blocked") or not period.starts_on <= s.daily_date:
            continue
        if s.daily_date > period.ends_on or s.elapsed_ms is None:
            continue
        entry = sums.setdefault(s.player_id, [0, 0, 0])
        entry[0] += s.score
        entry[1] += 1
        entry[2] += s.elapsed_ms
    keys = {pid: (-v[0], -v[1], v[2]) for pid, v in sums.items()}
    order = sorted(sums, key=lambda pid: (*keys[pid], pid))
    return [
        PeriodEntry(
            pid,
            names[pid],
            sums[pid][0],
            sums[pid][1],
            sums[pid][2],
            1 + sum(other < keys[pid] for other in keys.values()),
        )
        for pid in order
    ]


async def random_board(
    backend: PostgresBackend, players: int, seed_: int
) -> tuple[list[Seed], dict[int, str]]:
    """Players with results on random days of March 2026 (and a few around it): few distinct
    scores and times, so that totals, days and times tie often."""
    rng = random.Random(seed_)
    names = [f"p{i}" for i in range(players)]
    ids = await backend.add_players(names)
    seeds: list[Seed] = []
    for pid in ids:
        for day in rng.sample(range(-3, 35), rng.randint(0, 6)):
            date = dt.date(2026, 3, 1) + dt.timedelta(days=day)
            status = rng.choice(["won", "won", "blocked", "resigned", "playing"])
            score, elapsed = rng.choice([0, 300, 600]), rng.choice([999, 1000, 1500])
            seeds.append(seed(pid, date, score, elapsed, status))
    await backend.add_games(seeds)
    return seeds, dict(zip(ids, names, strict=True))


@pytest.mark.parametrize("period", [WEEK, MONTH], ids=str)
async def test_pages_windows_and_ranks_match_a_naive_ranking(
    backend: PostgresBackend, period: Period
) -> None:
    seeds, names = await random_board(backend, 40, 26)
    service = boards(backend)
    expected = naive(seeds, period, names)
    assert len(expected) > 10
    assert len({e.rank for e in expected}) < len(expected)  # some ties
    for limit in (1, 2, 3, 7, 100):
        walked: list[PeriodEntry] = []
        cursor = None
        while True:
            page = await service.page(period, limit, cursor)
            walked += page.entries
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert walked == expected, limit
    for i, entry in enumerate(expected):
        for radius in (0, 1, 3):
            window = await service.around(period, entry.player_id, radius)
            assert window == expected[max(0, i - radius) : i + radius + 1]
    some = [e.player_id for e in expected[::3]]
    assert await service.ranks_of(period, [*some, 10**12]) == expected[::3]


async def test_totals_then_days_then_time_and_days_not_played_count_zero(
    backend: PostgresBackend,
) -> None:
    a, b, c, d, e, f = await backend.add_players(["a", "b", "c", "d", "e", "f"])
    day = WEEK.starts_on
    await backend.add_games(
        [
            # a: 1200 over two days; b: 1200 in one day (fewer days ranks lower).
            seed(a, day, 600, 60_000),
            seed(a, day + dt.timedelta(days=1), 600, 60_000),
            seed(b, day, 1200, 10_000),
            # c and d: 1200 over two days in more time than a, tied with each other.
            seed(c, day, 1000, 100_000),
            seed(c, day + dt.timedelta(days=2), 200, 100_000, status="blocked"),
            seed(d, day + dt.timedelta(days=3), 700, 150_000),
            seed(d, day + dt.timedelta(days=4), 500, 50_000),
            # e: one day played of seven, nothing more: 900 beats 0s, under the 1200s.
            seed(e, day + dt.timedelta(days=6), 900, 5_000),
            # f: resigned and unfinished only: on no board.
            seed(f, day, 999, 1_000, status="resigned"),
            seed(f, day + dt.timedelta(days=1), 999, 1_000, status="playing"),
        ]
    )
    page = await boards(backend).page(WEEK)
    assert [(x.player_id, x.rank, x.total, x.days) for x in page.entries] == [
        (a, 1, 1200, 2),
        (c, 2, 1200, 2),
        (d, 2, 1200, 2),
        (b, 4, 1200, 1),
        (e, 5, 900, 1),
    ]
    assert page.next_cursor is None
    with pytest.raises(NotFoundError) as refused:
        await boards(backend).around(WEEK, f, 2)
    assert refused.value.code is ErrorCode.NOT_RANKED
    assert await boards(backend).rank_of(WEEK, f) is None


async def test_a_ban_takes_every_result_off_and_an_unban_puts_them_back(
    backend: PostgresBackend,
) -> None:
    a, b, c = await backend.add_players(["a", "b", "c"])
    day = MONTH.starts_on
    await backend.add_games(
        [
            seed(a, day, 900, 1_000),
            seed(a, day + dt.timedelta(days=10), 900, 1_000),
            seed(b, day, 800, 1_000),
            seed(c, day, 700, 1_000),
        ]
    )
    service = boards(backend)
    assert [x.player_id for x in (await service.page(MONTH)).entries] == [a, b, c]
    await backend.ban(a, "cheating")
    assert [(x.player_id, x.rank) for x in (await service.page(MONTH)).entries] == [
        (b, 1),
        (c, 2),
    ]
    assert await service.rank_of(MONTH, a) is None
    await ModerationService(backend.moderation).unban(f"id:{a}", "tests")
    entry = await service.rank_of(MONTH, a)
    assert entry is not None and (entry.rank, entry.total, entry.days) == (1, 1800, 2)


async def test_the_friends_view_is_me_and_whom_i_follow_at_their_ranks(
    backend: PostgresBackend,
) -> None:
    me, x, y, z = await backend.add_players(["me", "x", "y", "z"])
    day = WEEK.starts_on
    await backend.add_games(
        [seed(x, day, 900, 1_000), seed(z, day, 800, 1_000), seed(me, day, 100, 1_000)]
    )
    for followed in (x, y):
        await backend.follows.follow(me, followed, T0, limit=500)
    friends = await boards(backend).friends(WEEK, me)
    assert [(e.player_id, e.rank) for e in friends] == [(x, 1), (me, 3)]


def test_period_names_parse_and_print() -> None:
    assert Period.parse("week", "2026-W49") == Period("week", dt.date(2026, 11, 30))
    assert Period.parse("week", "2026-W53").starts_on == dt.date(2026, 12, 28)  # 53 weeks
    assert Period.parse("week", "2027-W01").starts_on == dt.date(2027, 1, 4)
    assert str(Period.of("week", dt.date(2027, 1, 3))) == "2026-W53"
    assert str(Period.of("month", dt.date(2026, 2, 28))) == "2026-02"
    assert Period.parse("month", "2026-02").ends_on == dt.date(2026, 2, 28)
    assert Period.parse("month", "2026-12").ends_on == dt.date(2026, 12, 31)
    assert Period.parse("week", "2026-W49").ends_on == dt.date(2026, 12, 6)
    # The calendar's ends.
    assert Period.parse("month", "9999-12").ends_on == dt.date(9999, 12, 31)
    assert Period.parse("week", "9999-W52").ends_on == dt.date(9999, 12, 31)
    assert Period.parse("week", "0001-W01").starts_on == dt.date(1, 1, 1)


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("week", "2026-49", "'2026-49' is not an ISO week (expected YYYY-Www, e.g. 2026-W49)"),
        ("week", "2025-W53", "'2025-W53': 2025 has ISO weeks W01 to W52"),
        ("week", "2026-W00", "'2026-W00': 2026 has ISO weeks W01 to W53"),
        ("week", "0000-W01", "'0000-W01': the year must be 0001 or later"),
        ("month", "2026-13", "'2026-13': the month must be 01 to 12"),
        ("month", "2026-W49", "'2026-W49' is not a month (expected YYYY-MM, e.g. 2026-12)"),
        ("month", "2026-1", "'2026-1' is not a month (expected YYYY-MM, e.g. 2026-12)"),
        ("month", "２０２６-12", "'２０２６-12' is not a month (expected YYYY-MM, e.g. 2026-12)"),
    ],
)
def test_a_bad_period_is_refused_naming_what_was_wrong(kind: str, text: str, message: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        Period.parse(kind, text)  # type: ignore[arg-type]
    assert refused.value.code is ErrorCode.BAD_PERIOD
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "cursor", ["x", "WzEsMiwzXQ", "WzEsMiwzLC0xXQ", "WzEsMiwzLHRydWVd", "W10" * 100]
)
async def test_a_bad_cursor_is_refused(backend: PostgresBackend, cursor: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await boards(backend).page(WEEK, 10, cursor)
    assert refused.value.code is ErrorCode.BAD_CURSOR


def test_a_cursor_names_its_position() -> None:
    key = PeriodKey(1800, 2, 61_000, 42)
    assert PeriodKey.decode(key.encode()) == key


# --------------------------------------------------------------------------------- end to end


async def test_dailies_finished_over_websockets_on_two_dates_are_summed(
    client: TestClient[Any, Any], clock: FakeClock, settings: Any, db: AsyncEngine
) -> None:
    """Three players finish (or resign) the dailies of two dates of one week over real
    websockets, two of them at once each date: the totals the triggers keep equal a recount of
    the games, and the board ranks them by their sums."""
    players = [await register(client, name) for name in ("Ann", "Ben", "Cid")]
    sockets = [(await WsPlayer.connect(client, p["token"]))[0] for p in players]
    for day in range(2):
        if day:
            clock.advance(days=1)
        date = clock.now().date()
        code = daily_code((settings.daily_secret or "").encode(), date, RuleSet.EASY)
        line = blocking_line(code.deal(), code.rules)
        assert line is not None
        games = [(await ws.request({"type": "join_daily"}))["game"] for ws in sockets]
        clock.advance(ms=30_000)
        await asyncio.gather(sockets[0].play(games[0], line), sockets[1].play(games[1], line))
        await sockets[2].request({"type": "resign", "game_id": games[2]["game_id"]})
    await assert_totals_match(db)
    week = Period.of("week", clock.now().date())
    assert week == Period.of("week", clock.now().date() - dt.timedelta(days=1))
    sessions = Sessions(db)
    service = PeriodBoardService(PostgresPeriodBoardStore(sessions), PostgresFollowStore(sessions))
    entries = (await service.page(week)).entries
    assert [(e.rank, e.days) for e in entries] == [(1, 2), (1, 2)]
    assert {e.player_id for e in entries} == {players[0]["id"], players[1]["id"]}
    for ws in sockets:
        await ws.close()


# --------------------------------------------------------------------------------- query plans


async def test_pages_windows_and_ranks_are_ranges_of_the_board_index(
    backend: PostgresBackend,
) -> None:
    seeds, _ = await random_board(backend, 30, 7)
    db = backend.engine
    where = {"kind": "week", "starts_on": WEEK.starts_on, "limit": 51}
    key = position_values(PeriodKey(600, 1, 1000, 3))

    first = await explain(db, period_boards.FIRST_PAGE, where)
    assert "Index Scan using ix_period_totals_board on period_totals" in first, first
    assert "Sort" not in first, first
    deeper = await explain(db, period_boards.NEXT_PAGE, where | key)
    assert "Sort" not in deeper and "Seq Scan" not in deeper, deeper
    assert "ROW((- total), (- days), elapsed_ms, player_id) > ROW(" in deeper, deeper
    assert deeper.count("Index Scan using pk_period_counts") == 3, deeper
    assert "(level = '0'::smallint) AND (total > " in deeper, deeper
    window = await explain(db, period_boards.AROUND, where | {"player_id": seeds[0].player_id})
    assert "Seq Scan" not in window, window
    # The only sort is of the entries above the player (at most ``limit``), for the first.
    sorts = [line for line in window.splitlines() if "Sort Key:" in line]
    assert sorts and all("above" in line for line in sorts), window
    assert "Index Scan Backward using ix_period_totals_board" in window, window
    assert "Join Filter" not in window, window
