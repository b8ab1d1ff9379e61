"""``period_totals`` and ``period_counts`` stay equal to a recount of the ranked daily games,
whoever writes ``games``.

The triggers of migration 0013 are checked against a recount done in Python from the games
themselves after every kind of write: inserts, results, hiding and restoring, deletes (a
player's cascade included), COPY, TRUNCATE, many transactions finishing games at once (one
player's several dates among them), and the upgrade over games already stored.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections import Counter
from typing import Any

import asyncpg
from alembic import command
from sqlalchemy import delete, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.db import alembic_config, migrate
from server.storage.models import Game, PeriodCount, PeriodTotal
from tests.storage.test_leaderboard_counts import T0, add_games, add_players, game
from tests.storage.test_moderation_schema import add_action, set_hidden

#: Sunday 2026-03-01 (ISO week 2026-W09, month 2026-03) to Monday 2026-03-09 (2026-W11).
MAR_1 = dt.date(2026, 3, 1)
FEB_28 = dt.date(2026, 2, 28)

Totals = dict[tuple[str, dt.date, int], tuple[int, int, int]]
Counts = Counter[tuple[str, dt.date, int, int, int, int]]


def periods(date: dt.date) -> list[tuple[str, dt.date]]:
    """The week (its Monday) and the month (its first day) holding ``date``."""
    return [
        ("week", date - dt.timedelta(days=date.isoweekday() - 1)),
        ("month", date.replace(day=1)),
    ]


def recount(games: list[Any]) -> tuple[Totals, Counts]:
    """The entries of every period and the three levels of their counts, from the games."""
    totals: dict[tuple[str, dt.date, int], list[int]] = {}
    for g in games:
        if g.mode != "daily" or g.status not in ("won", "blocked") or g.hidden_at is not None:
            continue
        for kind, start in periods(g.daily_date):
            entry = totals.setdefault((kind, start, g.player_id), [0, 0, 0])
            entry[0] += g.score
            entry[1] += 1
            entry[2] += g.elapsed_ms
    counts: Counts = Counter()
    for (kind, start, _), (total, days, elapsed) in totals.items():
        counts[(kind, start, 0, total, 0, 0)] += 1
        counts[(kind, start, 1, total, days, 0)] += 1
        counts[(kind, start, 2, total, days, elapsed // 1000)] += 1
    return {k: (v[0], v[1], v[2]) for k, v in totals.items()}, counts


async def assert_totals_match(engine: AsyncEngine) -> Totals:
    """The stored entries (rows with days > 0) and counts (rows above 0) equal the recount."""
    async with engine.connect() as conn:
        games = (await conn.execute(select(Game))).all()
        stored_totals = {
            (r.kind, r.starts_on, r.player_id): (r.total, r.days, r.elapsed_ms)
            for r in (await conn.execute(select(PeriodTotal).where(PeriodTotal.days > 0))).all()
        }
        zero = (await conn.execute(select(PeriodTotal).where(PeriodTotal.days <= 0))).all()
        stored_counts: Counts = Counter(
            {
                (r.kind, r.starts_on, r.level, r.total, r.days, r.elapsed_s): r.entries
                for r in (await conn.execute(select(PeriodCount))).all()
                if r.entries != 0
            }
        )
    totals, counts = recount(list(games))
    assert stored_totals == totals
    assert stored_counts == counts
    assert all((r.total, r.days, r.elapsed_ms) == (0, 0, 0) for r in zero)
    return totals


async def test_results_are_summed_per_iso_week_and_per_month(db: AsyncEngine) -> None:
    """Sunday 1 March is in February's last ISO week (W09) but in March; Saturday 28 February
    in the same week but in February."""
    a, b = await add_players(db, 2)
    await add_games(
        db,
        [
            game(a, daily_date=FEB_28, status="won", score=700, elapsed_ms=60_000),
            game(a, daily_date=MAR_1, status="blocked", score=400, elapsed_ms=90_500),
            game(a, daily_date=MAR_1 + dt.timedelta(days=1), status="resigned", score=900),
            game(b, daily_date=MAR_1 + dt.timedelta(days=1), status="playing", score=900),
            game(b, daily_date=MAR_1 + dt.timedelta(days=2), status="won", score=650),
            game(b, mode="free", daily_date=None, status="won", score=999),
        ],
    )
    totals = await assert_totals_match(db)
    week9 = dt.date(2026, 2, 23)
    assert totals[("week", week9, a)] == (1100, 2, 150_500)
    assert totals[("month", dt.date(2026, 2, 1), a)] == (700, 1, 60_000)
    assert totals[("month", MAR_1, a)] == (400, 1, 90_500)
    assert totals[("week", dt.date(2026, 3, 2), b)] == (650, 1, 300_000)
    assert ("week", dt.date(2026, 3, 2), a) not in totals  # resigned: not ranked


async def test_finishing_hiding_restoring_and_deleting_move_the_totals(db: AsyncEngine) -> None:
    a, b = await add_players(db, 2)
    first, second, other = await add_games(
        db,
        [game(a, daily_date=MAR_1), game(a, daily_date=FEB_28), game(b, daily_date=MAR_1)],
    )

    async def change(game_id: int, **values: Any) -> None:
        async with db.begin() as conn:
            await conn.execute(update(Game).where(Game.id == game_id).values(**values))
        await assert_totals_match(db)

    ended = {"finished_at": T0, "elapsed_ms": 61_000}
    await change(first, status="won", score=720, **ended)
    await change(second, status="blocked", score=300, **ended)
    await change(other, status="won", score=720, **ended)
    hide = await add_action(db, "hide", a, game_id=first, reason="test")
    await change(first, hidden_at=T0, hidden_by=hide)  # a hidden result leaves every board
    totals = await assert_totals_match(db)
    assert ("month", MAR_1, a) not in totals
    assert totals[("week", dt.date(2026, 2, 23), a)] == (300, 1, 61_000)
    await change(first, hidden_at=None, hidden_by=None)
    await change(first, score=700)  # a changed result moves its entry
    async with db.begin() as conn:
        await conn.execute(delete(Game).where(Game.id == second))
    await assert_totals_match(db)
    async with db.begin() as conn:  # the player's cascade
        await conn.execute(text("DELETE FROM players WHERE id = :id"), {"id": a})
    totals = await assert_totals_match(db)
    assert {key[2] for key in totals} == {b}


async def test_copy_and_truncate_keep_the_totals(db: AsyncEngine, database_url: str) -> None:
    players = await add_players(db, 3)
    rows = [
        game(p, daily_date=MAR_1 + dt.timedelta(days=d), status="won", score=500 + d)
        for p in players
        for d in range(3)
    ]
    columns = list(rows[0])
    conn = await asyncpg.connect(database_url)
    try:
        await conn.copy_records_to_table(
            "games", columns=columns, records=[tuple(r[c] for c in columns) for r in rows]
        )
    finally:
        await conn.close()
    assert len(await assert_totals_match(db)) == 3 * 3  # W09, W10 and March, per player
    async with db.begin() as conn:
        await conn.execute(text("TRUNCATE games CASCADE"))
    assert await assert_totals_match(db) == {}


async def test_concurrent_finishes_are_counted_exactly(db: AsyncEngine) -> None:
    """Many transactions at once, each finishing games of several players in one statement (as
    the group committer does), in opposite orders, one player's games of different dates of
    one week finished by different transactions at once: every entry and every count is
    exact, and none waits in a cycle."""
    rng = random.Random(26)
    writers, players_per_writer, days = 8, 5, 4
    players = await add_players(db, writers * players_per_writer)
    dates = [dt.date(2026, 3, 2) + dt.timedelta(days=d) for d in range(days)]  # one week
    ids = await add_games(db, [game(p, daily_date=d) for p in players for d in dates])
    by_date = {d: ids[i::days] for i, d in enumerate(dates)}

    async def finish(batch: list[int], reverse: bool) -> None:
        order = sorted(batch, reverse=reverse)
        async with db.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE games AS g SET status = 'won', score = v.score, moves = 30, "
                    "finished_at = :t, elapsed_ms = v.elapsed "
                    "FROM unnest(CAST(:ids AS bigint[]), CAST(:scores AS integer[]), "
                    "CAST(:elapsed AS bigint[])) AS v(id, score, elapsed) WHERE g.id = v.id"
                ),
                {
                    "t": T0,
                    "ids": order,
                    "scores": [rng.choice((500, 600, 700)) for _ in order],
                    "elapsed": [rng.randint(30_000, 90_000) for _ in order],
                },
            )
            await asyncio.sleep(rng.random() / 100)  # hold the rows a little

    # Each date's games in batches; all dates' batches at once, so that one player's games
    # of several dates are finished by concurrent transactions.
    batches = [
        (ids_of_date[i : i + players_per_writer], n % 2 == 1)
        for n, ids_of_date in enumerate(by_date.values())
        for i in range(0, len(ids_of_date), players_per_writer)
    ]
    await asyncio.wait_for(asyncio.gather(*(finish(b, r) for b, r in batches)), 60)
    totals = await assert_totals_match(db)
    week = [v for k, v in totals.items() if k[0] == "week"]
    assert len(week) == len(players) and all(days_ == days for _, days_, _ in week)


async def test_upgrade_sums_the_games_already_stored(db: AsyncEngine) -> None:
    async with db.connect() as conn:
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0012"))
        await conn.commit()
    a, b = await add_players(db, 2)
    hidden, _, _, _ = await add_games(
        db,
        [
            game(b, daily_date=MAR_1, status="won", score=650),
            game(a, daily_date=FEB_28, status="won", score=700),
            game(a, daily_date=MAR_1, status="won", score=600),
            game(b, daily_date=FEB_28, status="resigned"),
        ],
    )
    await set_hidden(db, hidden, await add_action(db, "hide", b, game_id=hidden, reason="x"))
    await migrate(db)
    totals = await assert_totals_match(db)
    assert totals[("week", dt.date(2026, 2, 23), a)] == (1300, 2, 600_000)
    assert not [k for k in totals if k[2] == b]
    async with db.begin() as conn:  # the triggers are in place after the upgrade
        await conn.execute(delete(Game).where(Game.player_id == a))
    assert await assert_totals_match(db) == {}
