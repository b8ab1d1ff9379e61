"""Leaderboard ranks from ``leaderboard_counts``: random boards against a naive ranking, the
tie cases of "around me", games finished over websockets, and the shape of the query plans
(one range of the board index, no sort, whatever the size of the board).

The ranking tests run on both stores (the in-memory one counts naively, PostgreSQL's sums
``leaderboard_counts``); the rest are PostgreSQL's only, each saying why."""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient
from hypothesis import Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import delete, event, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import SelectBase

from server.engine import RuleSet
from server.services.clock import FakeClock
from server.services.leaderboards import BoardKey, Entry, LeaderboardService
from server.storage import board_queries
from server.storage.leaderboards import PostgresLeaderboardStore
from server.storage.models import Game, Player
from server.storage.sessions import Sessions
from tests.backends import Backend, PostgresBackend, Seed, open_backend
from tests.helpers import WsPlayer, blocking_line, daily_code, register
from tests.storage.test_leaderboard_counts import stored_and_recounted

DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class Result:
    """One game of a random board."""

    score: int
    moves: int
    elapsed_ms: int
    finished_ms: int
    status: str
    on_date: bool


results = st.builds(
    Result,
    score=st.sampled_from([0, 1, 499, 500, 772]),
    moves=st.integers(28, 30),
    # Around and across whole-second boundaries: the counts group elapsed time by second.
    elapsed_ms=st.sampled_from([0, 999, 1000, 1001, 1999, 2000, 61_000]),
    finished_ms=st.integers(0, 2),
    status=st.sampled_from(["won", "won", "blocked", "blocked", "playing", "resigned"]),
    on_date=st.sampled_from([True, True, True, False]),
)


async def fill(engine: AsyncEngine, board: list[Result]) -> list[tuple[Result, int]]:
    """Replace every game and player by ``board`` (one new player per game)."""
    async with engine.begin() as conn:
        await conn.execute(delete(Game))
        await conn.execute(delete(Player))
        if not board:
            return []
        ids = list(
            (
                await conn.execute(
                    insert(Player).returning(Player.id, sort_by_parameter_order=True),
                    [{"name": f"h{i}{secrets.token_hex(4)}"} for i in range(len(board))],
                )
            ).scalars()
        )
        await conn.execute(
            insert(Game),
            [
                {
                    "player_id": pid,
                    "code": "TP1-E-AAAAAAA",
                    "rules": "E",
                    "deal_version": "TP1",
                    "mode": "daily",
                    "daily_date": DATE if r.on_date else DATE - dt.timedelta(days=1),
                    "status": r.status,
                    "score": r.score,
                    "moves": r.moves,
                    "undos": 0,
                    "seq": r.moves,
                    "elapsed_ms": None if r.status == "playing" else r.elapsed_ms,
                    "created_at": T0,
                    "finished_at": (
                        None
                        if r.status == "playing"
                        else T0 + dt.timedelta(milliseconds=r.finished_ms)
                    ),
                }
                for r, pid in zip(board, ids, strict=True)
            ],
        )
    return list(zip(board, ids, strict=True))


async def fill_backend(backend: Backend, board: list[Result]) -> list[tuple[Result, int]]:
    """Replace every game and player of ``backend`` by ``board`` (one new player per game)."""
    await backend.clear()
    ids = await backend.add_players([f"h{i}{secrets.token_hex(4)}" for i in range(len(board))])
    await backend.add_games(
        [
            Seed(
                pid,
                r.score,
                r.moves,
                None if r.status == "playing" else r.elapsed_ms,
                None if r.status == "playing" else T0 + dt.timedelta(milliseconds=r.finished_ms),
                status=r.status,
                daily_date=DATE if r.on_date else DATE - dt.timedelta(days=1),
            )
            for r, pid in zip(board, ids, strict=True)
        ]
    )
    return list(zip(board, ids, strict=True))


def naive(games: list[tuple[Result, int]]) -> list[tuple[int, int]]:
    """(rank, player id) of the date's ranked games in docs/rules.md §4 order, ranked by
    counting."""
    ranked = [(r, pid) for r, pid in games if r.on_date and r.status in ("won", "blocked")]
    ranked.sort(key=lambda g: (-g[0].score, g[0].moves, g[0].elapsed_ms, g[0].finished_ms, g[1]))
    return [
        (
            1
            + sum(
                (-o.score, o.moves, o.elapsed_ms) < (-r.score, r.moves, r.elapsed_ms)
                for o, _ in ranked
            ),
            pid,
        )
        for r, pid in ranked
    ]


def ranks(entries: list[Entry]) -> list[tuple[int, int]]:
    return [(e.rank, e.player_id) for e in entries]


async def walk(boards: LeaderboardService, limit: int) -> list[Entry]:
    entries: list[Entry] = []
    cursor: str | None = None
    while True:
        page = await boards.page(DATE, limit, cursor)
        entries += page.entries
        if page.next_cursor is None:
            return entries
        cursor = page.next_cursor


async def check_board(
    url: str | None, board: list[Result], limits: list[int], probes: list[tuple[int, int]]
) -> None:
    async with open_backend("memory" if url is None else "postgres", url) as backend:
        games = await fill_backend(backend, board)
        want = naive(games)
        boards = LeaderboardService(backend.leaderboards)
        for limit in limits:
            assert ranks(await walk(boards, limit)) == want, limit
        for at, radius in probes:
            if want:
                i = at % len(want)
                window = await boards.around(DATE, want[i][1], radius)
                assert ranks(window) == want[max(0, i - radius) : i + radius + 1], (i, radius)
        by_player = dict((pid, rank) for rank, pid in want)
        for _, pid in games:
            entry = await boards.rank_of(DATE, pid)
            assert (None if entry is None else entry.rank) == by_player.get(pid)
        if isinstance(backend, PostgresBackend):  # the counters the ranks are summed from
            stored, recounted = await stored_and_recounted(backend.engine)
            assert stored == recounted


async def test_random_boards_rank_like_a_naive_count(backend_url: str | None) -> None:
    # No shrinking phase: each example costs a few database round trips, and shrinking a
    # failure could outlast the test timeout; boards of up to 40 games read well unshrunk.
    @hypothesis_settings(
        max_examples=60,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
    )
    @given(
        board=st.lists(results, max_size=40),
        limits=st.lists(st.integers(1, 12), min_size=1, max_size=3),
        probes=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 6)), max_size=6),
    )
    def check(board: list[Result], limits: list[int], probes: list[tuple[int, int]]) -> None:
        asyncio.run(check_board(backend_url, board, limits, probes))

    # Hypothesis drives a synchronous test: each example runs its own event loop, in a thread.
    await asyncio.to_thread(check)


# --------------------------------------------------------------------------------- around me


async def test_around_ranks_a_window_whose_top_tie_starts_above_it(backend: Backend) -> None:
    tied = [Result(700, 30, 1000, ms, "won", True) for ms in range(4)]
    games = await fill_backend(
        backend,
        [
            Result(772, 28, 5, 0, "won", True),
            *tied,
            Result(600, 30, 1000, 0, "blocked", True),
            Result(600, 30, 1001, 0, "blocked", True),
        ],
    )
    want = naive(games)
    assert [rank for rank, _ in want] == [1, 2, 2, 2, 2, 6, 7]
    boards = LeaderboardService(backend.leaderboards)
    recounts: list[object] = []

    def spy(_conn: Any, statement: object, *_args: Any) -> None:
        if statement is board_queries.COUNTS:
            recounts.append(statement)

    # PostgreSQL's store counts for a window's top only when its ties reach above it; the
    # in-memory store counts every time.
    postgres = backend.engine if isinstance(backend, PostgresBackend) else None
    if postgres is not None:
        event.listen(postgres.sync_engine, "before_execute", spy)
    try:
        for i in range(len(want)):
            for radius in range(5):
                window = await boards.around(DATE, want[i][1], radius)
                assert ranks(window) == want[max(0, i - radius) : i + radius + 1], (i, radius)
    finally:
        if postgres is not None:
            event.remove(postgres.sync_engine, "before_execute", spy)
    assert recounts or postgres is None  # some windows did start inside a run of ties


async def test_a_page_after_a_vanished_cursor_still_ranks_right(backend: Backend) -> None:
    games = await fill_backend(
        backend,
        [Result(500, 30, 1000, ms, "won", True) for ms in range(3)]
        + [Result(400, 30, 1000, 0, "won", True)],
    )
    want = naive(games)
    boards = LeaderboardService(backend.leaderboards)
    # A cursor between the ties, at a position no entry holds any more.
    between = BoardKey(500, 30, 1000, T0 + dt.timedelta(microseconds=500), 0).encode()
    page = await boards.page(DATE, 10, between)
    assert ranks(page.entries) == want[1:]
    # A cursor past a score nobody has: the next entry is ranked by its position.
    gap = BoardKey(450, 1, 1, T0, 0).encode()
    assert ranks((await boards.page(DATE, 10, gap)).entries) == [(4, want[3][1])]


# --------------------------------------------------------------------------------- end to end


async def test_dailies_finished_over_websockets_keep_the_counts(
    client: TestClient[Any, Any], clock: FakeClock, settings: Any, db: AsyncEngine
) -> None:
    # PostgreSQL only: a real server's games, and the counters its triggers keep.
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    players = [await register(client, name) for name in ("Ann", "Ben", "Cid")]
    sockets = [(await WsPlayer.connect(client, p["token"]))[0] for p in players]
    games = [(await ws.request({"type": "join_daily"}))["game"] for ws in sockets]
    clock.advance(ms=30_000)
    await asyncio.gather(sockets[0].play(games[0], line), sockets[1].play(games[1], line))
    clock.advance(ms=1_500)
    await sockets[2].play(games[2], line[:-1])
    await sockets[2].request({"type": "resign", "game_id": games[2]["game_id"]})

    stored, recounted = await stored_and_recounted(db)
    assert stored == recounted
    assert sum(n for key, n in stored.items() if key[1] == 0) == 2
    boards = LeaderboardService(PostgresLeaderboardStore(Sessions(db)))
    ann, ben = [await boards.rank_of(DATE, p["id"]) for p in players[:2]]
    assert ann is not None and ben is not None and (ann.rank, ben.rank) == (1, 1)
    assert await boards.rank_of(DATE, players[2]["id"]) is None
    for ws in sockets:
        await ws.close()


# --------------------------------------------------------------------------------- query plans


async def explain(engine: AsyncEngine, statement: SelectBase, values: dict[str, Any]) -> str:
    compiled = statement.compile(dialect=engine.dialect)  # asyncpg's: positional $n parameters
    assert isinstance(compiled, SQLCompiler) and compiled.positiontup is not None, compiled
    params = tuple(values.get(k, compiled.params[k]) for k in compiled.positiontup)
    async with engine.connect() as conn:
        # On a small test board a sequential scan would win; forbid it (and bitmap scans,
        # which lose the order) to see whether the index can serve the query as one range.
        await conn.exec_driver_sql("SET enable_seqscan = off")
        await conn.exec_driver_sql("SET enable_bitmapscan = off")
        rows = (await conn.exec_driver_sql("EXPLAIN " + str(compiled), params)).all()
    return "\n".join(r[0] for r in rows)


async def test_pages_and_windows_are_one_range_of_the_board_index(db: AsyncEngine) -> None:
    # PostgreSQL only, as every test of query plans.
    await fill(db, [Result(500 - i, 30, 1000, 0, "won", True) for i in range(30)])
    key = board_queries.key_values(BoardKey(490, 30, 1000, T0, 1))
    page = {"date": DATE, "limit": 51}

    first = await explain(db, board_queries.FIRST_PAGE, page)
    assert "Index Scan using ix_games_daily_board on games" in first
    assert "Sort" not in first, first

    deeper = await explain(db, board_queries.NEXT_PAGE, page | key)
    assert "Sort" not in deeper, deeper
    assert "Seq Scan" not in deeper, deeper
    assert "ROW((- score), moves, elapsed_ms, finished_at, player_id) > ROW(" in deeper, deeper

    window = await explain(db, board_queries.AROUND, {"date": DATE, "player_id": 3, "limit": 6})
    assert "Sort" not in window, window
    assert "Seq Scan" not in window, window
    # Both sides start from the player's own position, read from the index as a range.
    assert "Index Scan Backward using ix_games_daily_board" in window, window
    for op in ("<", ">"):
        at_own = f"ROW((- score), moves, elapsed_ms, finished_at, player_id) {op} ROW((- own_"
        assert at_own in window, window
    assert "Join Filter" not in window, window

    own = await explain(db, board_queries.OWN, {"date": DATE, "player_id": 1})
    assert "Seq Scan" not in own, own
    assert own.count("Index Scan using pk_leaderboard_counts") == 3, own


async def test_rank_counts_read_bounded_ranges(db: AsyncEngine) -> None:
    # PostgreSQL only, as every test of query plans.
    await fill(db, [Result(500 - i % 7, 28 + i % 3, 1000 * i, 0, "won", True) for i in range(40)])
    plan = await explain(
        db,
        board_queries.COUNTS,
        {"date": DATE} | board_queries.key_values(BoardKey(497, 29, 12_345, T0, 5)),
    )
    assert "Seq Scan" not in plan and "Sort" not in plan, plan
    assert plan.count("Index Scan using pk_leaderboard_counts") == 3, plan
    assert plan.count("Index Scan using ix_games_daily_board") == 2, plan
    assert "(level = '0'::smallint) AND (score > 497)" in plan, plan
    assert "(level = '1'::smallint) AND (score = 497) AND (moves < 29)" in plan, plan
    assert (
        "(level = '2'::smallint) AND (score = 497) AND (moves = 29) AND (elapsed_s < '12'::bigint)"
        in plan
    ), plan
    # The rest of the elapsed second and the ties come from the board index, by equality on
    # the score and moves and a range of elapsed ms.
    assert "((- score) = '-497'::integer) AND (moves = 29) AND (elapsed_ms >= " in plan, plan
    assert "((- score) = '-497'::integer) AND (moves = 29) AND (elapsed_ms = " in plan, plan


async def test_counts_rows_that_dropped_to_zero_do_not_change_ranks(db: AsyncEngine) -> None:
    # PostgreSQL only: about the rows of leaderboard_counts that its triggers leave at zero.
    games = await fill(
        db, [Result(600, 30, 1000, 0, "won", True), Result(500, 30, 1000, 0, "won", True)]
    )
    async with db.begin() as conn:
        await conn.execute(
            text("UPDATE games SET status = 'resigned' WHERE player_id = :p"), {"p": games[0][1]}
        )
        zero = await conn.scalar(text("SELECT count(*) FROM leaderboard_counts WHERE entries = 0"))
    assert zero == 3
    boards = LeaderboardService(PostgresLeaderboardStore(Sessions(db)))
    entry = await boards.rank_of(DATE, games[1][1])
    assert entry is not None and entry.rank == 1
