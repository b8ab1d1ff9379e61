"""LeaderboardService's rules on either store (in memory and PostgreSQL): docs/rules.md §4
order, shared ranks, pages continued by cursors, "around me", and the checks of limits,
radii and cursors. (Over REST on a real server: ``test_leaderboards.py``; random boards and
the ties of "around me": ``test_leaderboard_ranks.py``.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from server.errors import InvalidInputError, NotFoundError, StorageError
from server.services.leaderboards import BoardKey, Entry, LeaderboardService, Page
from tests.backends import Backend
from tests.boards import DATE, T0, Row, expected, noise, store_rows


def ranks(entries: Sequence[Entry]) -> list[tuple[int, int]]:
    return [(e.rank, e.player_id) for e in entries]


async def walk(boards: LeaderboardService, limit: int) -> list[list[Entry]]:
    """Every page of the board, following next_cursor until it is None."""
    pages: list[list[Entry]] = []
    cursor: str | None = None
    while True:
        page = await boards.page(DATE, limit, cursor)
        assert len(page.entries) <= limit
        pages.append(page.entries)
        if page.next_cursor is None:
            return pages
        assert len(page.entries) == limit  # a short page is always the last
        assert page.next_cursor == page.entries[-1].key.encode()
        cursor = page.next_cursor


@pytest.fixture
def boards(backend: Backend) -> LeaderboardService:
    return LeaderboardService(backend.leaderboards)


async def test_entries_follow_the_order_and_share_ranks(
    backend: Backend, boards: LeaderboardService
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
    await store_rows(backend, rows)
    twin_b = Row("TwinB", 310, 51, 2000, finished_at=t, status="blocked")
    await store_rows(backend, [twin_b])  # stored later: a higher player id breaks the tie
    rows.append(twin_b)

    page = await boards.page(DATE)
    assert [e.name for e in page.entries] == [
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
    assert [e.rank for e in page.entries] == [1, 2, 3, 3, 5, 6, 6, 6, 9]
    assert ranks(page.entries) == expected(rows)
    assert page.next_cursor is None
    blocked = next(r for r in rows if r.name == "Blocked")
    assert page.entries[5] == Entry(
        rank=6,
        player_id=blocked.player_id,
        name="Blocked",
        score=310,
        moves=51,
        undos=4,
        elapsed_ms=2000,
        status="blocked",
        finished_at=T0,
        game_id=page.entries[5].game_id,
    )
    assert len({e.game_id for e in page.entries}) == len(page.entries)
    assert page.entries[3].finished_at == T0 + dt.timedelta(seconds=5)


async def test_only_ended_daily_games_of_the_date_rank(
    backend: Backend, boards: LeaderboardService
) -> None:
    rows = [Row("Real", 500, 20, 100), *noise()]
    by = await store_rows(backend, rows)
    page = await boards.page(DATE)
    assert [(e.name, e.rank) for e in page.entries] == [("Real", 1)]
    other = await boards.page(DATE - dt.timedelta(days=1))
    assert [e.player_id for e in other.entries] == [by["noiseYesterday"]]
    assert await boards.page(dt.date(2026, 1, 1)) == Page([], None)


async def test_an_empty_board_has_no_entries_and_no_cursor(boards: LeaderboardService) -> None:
    assert await boards.page(DATE) == Page([], None)
    assert await boards.page(DATE, 1, BoardKey(1, 1, 1, T0, 1).encode()) == Page([], None)
    assert await boards.rank_of(DATE, 1) is None


async def test_ranks_stay_right_when_a_tie_straddles_a_page(
    backend: Backend, boards: LeaderboardService
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
    await store_rows(backend, rows)
    assert [[(e.name, e.rank) for e in p] for p in await walk(boards, 2)] == [
        [("A1", 1), ("A2", 1)],
        [("A3", 1), ("B1", 4)],
        [("C1", 5), ("C2", 5)],
        [("C3", 5), ("C4", 5)],
    ]
    assert [[e.rank for e in p] for p in await walk(boards, 3)] == [[1, 1, 1], [4, 5, 5], [5, 5]]


async def test_walking_every_page_visits_each_entry_once_in_order(
    backend: Backend, boards: LeaderboardService
) -> None:
    rows = [Row(f"P{i:02}", 500 - (i // 3), 20 + (i % 2), 1000) for i in range(12)]
    await store_rows(backend, [*rows, *noise()])
    want = expected(rows)
    for limit in (1, 3, 5, 12, 13, 100):
        pages = await walk(boards, limit)
        assert ranks([e for p in pages for e in p]) == want, limit
        assert len(pages) == max(1, -(-len(rows) // limit))  # no empty trailing page


async def test_pages_and_windows_work_with_player_ids_beyond_32_bits(
    backend: Backend, boards: LeaderboardService
) -> None:
    await backend.restart_player_ids(3_000_000_000)
    rows = [Row(f"Big{i}", 500 - i // 2, 30, 1000) for i in range(7)]
    await store_rows(backend, rows)
    assert min(r.player_id for r in rows) >= 3_000_000_000
    want = expected(rows)
    for limit in (1, 2, 3):
        assert ranks([e for p in await walk(boards, limit) for e in p]) == want
    assert ranks(await boards.around(DATE, want[3][1], 2)) == want[1:6]


async def test_around_me_gives_radius_entries_either_side_with_ranks(
    backend: Backend, boards: LeaderboardService
) -> None:
    rows = [Row(f"N{i:02}", 700 - 10 * (i // 2), 30, 1000) for i in range(20)]
    await store_rows(backend, [*rows, *noise()])
    want = expected(rows)
    ids = [pid for _, pid in want]

    middle = await boards.around(DATE, ids[10], 3)
    assert ranks(middle) == want[7:14]
    assert [e.rank for e in middle] == [7, 9, 9, 11, 11, 13, 13]
    assert ranks(await boards.around(DATE, ids[1], 3)) == want[0:5]
    assert ranks(await boards.around(DATE, ids[-1], 4)) == want[15:20]
    assert ranks(await boards.around(DATE, ids[5], 0)) == [want[5]]
    assert ranks(await boards.around(DATE, ids[10])) == want[5:16]  # radius 5 by default
    assert ranks(await boards.around(DATE, ids[10], 50)) == want


async def test_around_a_player_without_a_ranked_entry_is_not_ranked(
    backend: Backend, boards: LeaderboardService
) -> None:
    by = await store_rows(backend, [Row("Ranked", 500, 30, 1000), *noise()])
    unranked = [by[n] for n in ("noisePlaying", "noiseResigned", "noiseFree", "noiseRace")]
    for player_id in [*unranked, by["noiseTomorrow"], by["noiseYesterday"], 999_999, 0, 2**63]:
        with pytest.raises(NotFoundError) as caught:
            await boards.around(DATE, player_id)
        assert caught.value.code == "not_ranked"
    yesterday = await boards.around(DATE - dt.timedelta(days=1), by["noiseYesterday"])
    assert ranks(yesterday) == [(1, by["noiseYesterday"])]


async def test_rank_of_gives_one_players_shared_rank(
    backend: Backend, boards: LeaderboardService
) -> None:
    rows = [Row("Ann", 600, 30, 10), Row("Ben", 500, 30, 10), Row("Cid", 500, 30, 10)]
    by = await store_rows(backend, [*rows, *noise()])
    ben, cid = await boards.rank_of(DATE, by["Ben"]), await boards.rank_of(DATE, by["Cid"])
    assert ben is not None and cid is not None
    assert (ben.rank, ben.name, cid.rank) == (2, "Ben", 2)
    for name in ("noisePlaying", "noiseYesterday"):
        assert await boards.rank_of(DATE, by[name]) is None
    assert await boards.rank_of(DATE, 2**63) is None


@pytest.mark.parametrize("limit", [0, 101, -1, 10**20])
async def test_a_limit_outside_1_to_100_is_bad_limit(
    boards: LeaderboardService, limit: int
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await boards.page(DATE, limit)
    assert caught.value.code == "bad_limit"


@pytest.mark.parametrize("radius", [-1, 51, 10**20])
async def test_a_radius_outside_0_to_50_is_bad_radius(
    backend: Backend, boards: LeaderboardService, radius: int
) -> None:
    by = await store_rows(backend, [Row("Ann", 500, 30, 1000)])
    with pytest.raises(InvalidInputError) as caught:
        await boards.around(DATE, by["Ann"], radius)
    assert caught.value.code == "bad_radius"


@pytest.mark.parametrize("cursor", ["garbage!!", "a", "x" * 500])
async def test_a_cursor_that_does_not_parse_is_bad_cursor(
    backend: Backend, boards: LeaderboardService, cursor: str
) -> None:
    await store_rows(backend, [Row("Ann", 500, 30, 1000)])
    with pytest.raises(InvalidInputError) as caught:
        await boards.page(DATE, 10, cursor)
    assert caught.value.code == "bad_cursor"


async def test_the_extreme_cursors_read_the_whole_board_or_nothing(
    backend: Backend, boards: LeaderboardService
) -> None:
    rows = [Row(f"P{i}", 500 - i, 30, 1000) for i in range(3)]
    await store_rows(backend, rows)
    top = BoardKey(2**31 - 1, 0, 0, dt.datetime(1, 1, 2, tzinfo=dt.UTC), 0)
    bottom = BoardKey(0, 2**31 - 1, 2**63 - 1, dt.datetime(9999, 12, 30, tzinfo=dt.UTC), 2**63 - 1)
    assert ranks((await boards.page(DATE, 10, top.encode())).entries) == expected(rows)
    assert await boards.page(DATE, 10, bottom.encode()) == Page([], None)


async def test_a_failing_database_leaves_the_service_as_a_storage_error(
    backend: Backend,
) -> None:
    by = await store_rows(backend, [Row("Ann", 500, 30, 1000)])
    await backend.go_down()
    boards = LeaderboardService(backend.leaderboards)
    with pytest.raises(StorageError):
        await boards.page(DATE)
    with pytest.raises(StorageError):
        await boards.around(DATE, by["Ann"])
    with pytest.raises(StorageError):
        await boards.rank_of(DATE, by["Ann"])
