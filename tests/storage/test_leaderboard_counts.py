"""``leaderboard_counts`` stays equal to a recount of the ranked games, whoever writes ``games``.

The triggers of migration 0004 are checked against a recount done in Python from the games
themselves, after every kind of write: inserts, status and result changes, deletes (a player's
cascade included), COPY, TRUNCATE, and concurrent transactions finishing games at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import secrets
from collections import Counter
from collections.abc import Sequence
from typing import Any

import asyncpg
from alembic import command
from sqlalchemy import Row, column, delete, insert, table, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.db import alembic_config, migrate
from server.storage.models import Game, Player
from tests.storage.test_models import game_values

DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)

Counts = Counter[tuple[dt.date, int, int, int, int]]


async def add_players(engine: AsyncEngine, count: int) -> list[int]:
    async with engine.begin() as conn:
        rows = await conn.execute(
            insert(Player).returning(Player.id),
            [{"name": f"p{secrets.token_hex(6)}"} for _ in range(count)],
        )
        return sorted(rows.scalars())


async def add_players_before_name_keys(engine: AsyncEngine, count: int) -> list[int]:
    """Like :func:`add_players`, on a schema older than revision 0007 (no ``name_key``)."""
    players = table("players", column("id"), column("name"), column("token_hash"))
    async with engine.begin() as conn:
        rows = await conn.execute(
            insert(players).returning(players.c.id),
            [
                {"name": f"p{secrets.token_hex(6)}", "token_hash": secrets.token_bytes(32)}
                for _ in range(count)
            ],
        )
        return sorted(rows.scalars())


def game(player_id: int, **overrides: Any) -> dict[str, Any]:
    """A daily game of ``DATE``; an ended status gets a finish time and an elapsed time."""
    ended = overrides.get("status", "playing") != "playing"
    finish = {
        "race_id": None,
        "finished_at": T0 + dt.timedelta(minutes=5) if ended else None,
        "elapsed_ms": 300_000 if ended else None,
    }
    return game_values(player_id, **(finish | overrides))


async def add_games(engine: AsyncEngine, games: list[dict[str, Any]]) -> list[int]:
    async with engine.begin() as conn:
        rows = await conn.execute(
            insert(Game).returning(Game.id, sort_by_parameter_order=True), games
        )
        return list(rows.scalars())


def recount(games: Sequence[Row[*tuple[Any, ...]]]) -> Counts:
    """The three levels of counts, computed from the ranked games in Python (a hidden game is
    on no board: migration 0009)."""
    counts: Counts = Counter()
    for g in games:
        if g.mode != "daily" or g.status not in ("won", "blocked") or g.hidden_at is not None:
            continue
        second = g.elapsed_ms // 1000
        counts[(g.daily_date, 0, g.score, 0, 0)] += 1
        counts[(g.daily_date, 1, g.score, g.moves, 0)] += 1
        counts[(g.daily_date, 2, g.score, g.moves, second)] += 1
    return counts


async def stored_and_recounted(engine: AsyncEngine) -> tuple[Counts, Counts]:
    async with engine.connect() as conn:
        stored = (
            await conn.execute(
                text(
                    "SELECT daily_date, level, score, moves, elapsed_s, entries "
                    "FROM leaderboard_counts WHERE entries <> 0"
                )
            )
        ).all()
        games = (
            await conn.execute(
                text(
                    "SELECT mode, status, daily_date, score, moves, elapsed_ms, hidden_at "
                    "FROM games"
                )
            )
        ).all()
    return Counter({tuple(r[:5]): r[5] for r in stored}), recount(games)


async def assert_counts_match(engine: AsyncEngine) -> Counts:
    stored, expected = await stored_and_recounted(engine)
    assert stored == expected
    assert all(n > 0 for n in stored.values())
    return stored


async def test_inserted_ranked_games_are_counted_at_every_level(db: AsyncEngine) -> None:
    players = await add_players(db, 8)
    other_day = DATE - dt.timedelta(days=1)
    await add_games(
        db,
        [
            game(players[0], status="won", score=772, moves=28, elapsed_ms=61_999),
            game(players[1], status="won", score=772, moves=28, elapsed_ms=61_000),
            game(players[2], status="blocked", score=772, moves=29, elapsed_ms=62_000),
            game(players[3], status="blocked", score=300, moves=51, elapsed_ms=0),
            game(players[4]),  # playing: not ranked
            game(players[5], status="resigned", score=800),  # resigned: not ranked
            game(players[6], status="won", daily_date=other_day, score=772, moves=28),
            game(players[7], status="won", mode="free", daily_date=None),
        ],
    )
    stored = await assert_counts_match(db)
    assert stored[(DATE, 0, 772, 0, 0)] == 3
    assert stored[(DATE, 1, 772, 28, 0)] == 2
    assert stored[(DATE, 2, 772, 28, 61)] == 2
    assert stored[(DATE, 2, 772, 29, 62)] == 1
    assert stored[(DATE, 2, 300, 51, 0)] == 1
    assert stored[(other_day, 0, 772, 0, 0)] == 1
    assert sum(n for key, n in stored.items() if key[1] == 0) == 5


async def test_status_and_result_changes_move_the_counts(db: AsyncEngine) -> None:
    players = await add_players(db, 4)
    ids = await add_games(db, [game(p) for p in players])
    await assert_counts_match(db)  # nothing ranked yet

    async def change(game_id: int, **values: Any) -> None:
        async with db.begin() as conn:
            await conn.execute(update(Game).where(Game.id == game_id).values(**values))
        await assert_counts_match(db)

    end = {"finished_at": T0 + dt.timedelta(minutes=3), "elapsed_ms": 180_500}
    await change(ids[0], status="won", score=760, moves=40, **end)  # playing -> won
    await change(ids[1], status="blocked", score=420, moves=45, **end)  # playing -> blocked
    await change(ids[2], status="resigned", **end)  # playing -> resigned: not ranked
    await change(ids[0], score=700, moves=41, elapsed_ms=999)  # a ranked result corrected
    await change(ids[0], status="resigned")  # won -> resigned: leaves the board
    await change(ids[1], daily_date=DATE + dt.timedelta(days=1))  # moved to another date
    # A blocked daily game taken back to playing (only free play allows an undo out of a
    # blocked game, but whichever writer does it, the board must follow).
    await change(ids[1], status="playing", finished_at=None, elapsed_ms=None)
    await change(ids[3], status="blocked", score=0, moves=80, **end)
    async with db.begin() as conn:  # a statement changing no ranking column
        await conn.execute(update(Game).values(undos=Game.undos + 1))
    stored = await assert_counts_match(db)
    assert stored == Counter(
        {(DATE, 0, 0, 0, 0): 1, (DATE, 1, 0, 80, 0): 1, (DATE, 2, 0, 80, 180): 1}
    )


async def test_many_rows_in_one_statement(db: AsyncEngine) -> None:
    rng = random.Random(7)
    players = await add_players(db, 300)
    ids = await add_games(
        db,
        [
            game(
                p,
                status=rng.choice(["playing", "won", "blocked", "resigned"]),
                score=rng.choice([0, 500, 772]),
                moves=rng.randint(28, 30),
                elapsed_ms=rng.choice([999, 1000, 1001, 59_999]),
            )
            for p in players
        ],
    )
    await assert_counts_match(db)
    async with db.begin() as conn:
        # Every game of the board ends (or is reopened) in one statement.
        await conn.execute(
            text(
                "UPDATE games SET status = CASE WHEN id % 3 = 0 THEN 'playing' ELSE 'won' END, "
                "score = (id * 7) % 5, moves = 28 + id % 2, "
                "finished_at = CASE WHEN id % 3 = 0 THEN NULL ELSE CAST(:t AS timestamptz) END, "
                "elapsed_ms = CASE WHEN id % 3 = 0 THEN NULL ELSE (id * 997) % 4000 END"
            ),
            {"t": T0},
        )
    await assert_counts_match(db)
    async with db.begin() as conn:
        await conn.execute(delete(Game).where(Game.id.in_(ids[::2])))
    await assert_counts_match(db)


async def test_deleting_a_player_cascades_out_of_the_counts(db: AsyncEngine) -> None:
    players = await add_players(db, 3)
    await add_games(
        db,
        [
            game(players[0], status="won", score=700, moves=30),
            game(players[0], status="won", score=650, moves=31, daily_date=DATE - dt.timedelta(1)),
            game(players[1], status="won", score=700, moves=30),
            game(players[2], status="blocked", score=100, moves=60),
        ],
    )
    await assert_counts_match(db)
    async with db.begin() as conn:
        await conn.execute(delete(Player).where(Player.id.in_(players[:2])))
    stored = await assert_counts_match(db)
    assert sum(n for key, n in stored.items() if key[1] == 0) == 1


async def test_copy_and_truncate_keep_the_counts(db: AsyncEngine, database_url: str) -> None:
    players = await add_players(db, 50)
    rng = random.Random(3)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.copy_records_to_table(
            "games",
            columns=[
                "player_id",
                "code",
                "rules",
                "deal_version",
                "mode",
                "daily_date",
                "status",
                "score",
                "moves",
                "undos",
                "seq",
                "elapsed_ms",
                "created_at",
                "finished_at",
            ],
            records=[
                (
                    p,
                    "TP1-E-AAAAAAA",
                    "E",
                    "TP1",
                    "daily",
                    DATE,
                    status,
                    rng.randint(0, 3),
                    rng.randint(28, 29),
                    0,
                    0,
                    None if status == "playing" else rng.randint(0, 3000),
                    T0,
                    None if status == "playing" else T0,
                )
                for p in players
                for status in [rng.choice(["won", "blocked", "playing"])]
            ],
        )
    finally:
        await conn.close()
    stored = await assert_counts_match(db)
    assert stored
    async with db.begin() as conn:
        await conn.execute(text("TRUNCATE games CASCADE"))
    assert await assert_counts_match(db) == Counter()


async def test_concurrent_transactions_finishing_games_do_not_deadlock(db: AsyncEngine) -> None:
    """Many transactions at once, each finishing several games in one statement (as the group
    committer does) with crossing scores, in opposite row orders: the shared count rows are
    always taken in key order, so none waits in a cycle."""
    rng = random.Random(11)
    writers, per_writer, rounds = 8, 6, 5
    players = await add_players(db, writers * per_writer * rounds)
    ids = await add_games(db, [game(p) for p in players])
    scores = [700, 600, 500]

    async def finish(batch: list[int], reverse: bool) -> None:
        order = sorted(batch, reverse=reverse)
        values = [
            (gid, scores[(i + int(reverse)) % len(scores)], 28 + i % 2)
            for i, gid in enumerate(order)
        ]
        async with db.begin() as conn:
            await conn.execute(
                text(
                    "UPDATE games AS g SET status = 'won', score = v.score, moves = v.moves, "
                    "finished_at = :t, elapsed_ms = 1000 * v.moves "
                    "FROM unnest(CAST(:ids AS bigint[]), CAST(:scores AS integer[]), "
                    "CAST(:moves AS integer[])) WITH ORDINALITY AS v(id, score, moves, n) "
                    "WHERE g.id = v.id"
                ),
                {
                    "t": T0,
                    "ids": [v[0] for v in values],
                    "scores": [v[1] for v in values],
                    "moves": [v[2] for v in values],
                },
            )
            await asyncio.sleep(rng.random() / 100)  # hold the count rows a little

    batches = [ids[i : i + per_writer] for i in range(0, len(ids), per_writer)]
    for r in range(rounds):
        chunk = batches[r * writers : (r + 1) * writers]
        await asyncio.wait_for(
            asyncio.gather(*(finish(b, reverse=i % 2 == 1) for i, b in enumerate(chunk))), 30
        )
    stored = await assert_counts_match(db)
    assert sum(n for key, n in stored.items() if key[1] == 0) == len(ids)


async def test_upgrade_counts_the_games_already_stored(db: AsyncEngine) -> None:
    async with db.connect() as conn:
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0003"))
        await conn.commit()
    players = await add_players_before_name_keys(db, 6)
    await add_games(
        db,
        [
            game(players[0], status="won", score=772, moves=28, elapsed_ms=1),
            game(players[1], status="won", score=772, moves=28, elapsed_ms=999),
            game(players[2], status="blocked", score=400, moves=50),
            game(players[3], status="resigned"),
            game(players[4]),
            game(players[5], status="won", daily_date=DATE + dt.timedelta(days=1)),
        ],
    )
    await migrate(db)
    stored = await assert_counts_match(db)
    assert stored[(DATE, 2, 772, 28, 0)] == 2
    # The triggers are in place after the upgrade.
    async with db.begin() as conn:
        await conn.execute(delete(Game).where(Game.player_id == players[0]))
    await assert_counts_match(db)
