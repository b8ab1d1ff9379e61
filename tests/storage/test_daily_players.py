"""``daily_players`` stays equal to a count of each date's daily games, whoever writes
``games``: inserts (one or many rows), deletes (a player's cascade), COPY, TRUNCATE, and the
migration's backfill of games stored before it."""

from __future__ import annotations

import datetime as dt

import asyncpg
from alembic import command
from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.db import alembic_config, migrate
from server.storage.models import DailyPlayers, Game, Player
from tests.storage.test_leaderboard_counts import (
    DATE,
    T0,
    add_games,
    add_players,
    add_players_before_name_keys,
    game,
)

COPY_COLUMNS = [
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
    "created_at",
]


async def stored_and_recounted(
    engine: AsyncEngine,
) -> tuple[dict[dt.date, int], dict[dt.date, int]]:
    async with engine.connect() as conn:
        stored = {
            r.daily_date: r.players
            for r in await conn.execute(select(DailyPlayers))
            if r.players != 0
        }
        recount = {
            r.daily_date: r.n
            for r in await conn.execute(
                select(Game.daily_date, func.count().label("n"))
                .where(Game.mode == "daily", Game.hidden_at.is_(None))  # hidden: uncounted
                .group_by(Game.daily_date)
            )
        }
    return stored, recount


async def assert_counts_match(engine: AsyncEngine) -> dict[dt.date, int]:
    stored, recount = await stored_and_recounted(engine)
    assert stored == recount
    return stored


async def test_daily_games_are_counted_per_date_whatever_their_status(db: AsyncEngine) -> None:
    players = await add_players(db, 5)
    await add_games(
        db,
        [
            game(players[0]),
            game(players[1], status="won", score=700, moves=30),
            game(players[2], status="resigned"),
            game(players[3], daily_date=DATE + dt.timedelta(days=1)),
            game(players[4], mode="free", daily_date=None),
        ],
    )
    assert await assert_counts_match(db) == {DATE: 3, DATE + dt.timedelta(days=1): 1}
    async with db.begin() as conn:  # several rows in one statement
        more = await add_players(db, 3)
        await conn.execute(insert(Game), [game(p) for p in more])
    assert (await assert_counts_match(db))[DATE] == 6


async def test_deletes_copy_and_truncate_keep_the_count(db: AsyncEngine, database_url: str) -> None:
    players = await add_players(db, 4)
    await add_games(db, [game(p) for p in players])
    async with db.begin() as conn:
        await conn.execute(delete(Player).where(Player.id == players[0]))  # cascades
    assert await assert_counts_match(db) == {DATE: 3}
    extra = await add_players(db, 2)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.copy_records_to_table(
            "games",
            columns=COPY_COLUMNS,
            records=[
                (p, "TP1-E-AAAAAAA", "E", "TP1", "daily", DATE, "playing", 500, 0, 0, 0, T0)
                for p in extra
            ],
        )
    finally:
        await conn.close()
    assert await assert_counts_match(db) == {DATE: 5}
    async with db.begin() as conn2:
        await conn2.execute(text("TRUNCATE games CASCADE"))
    assert await assert_counts_match(db) == {}


async def test_upgrade_counts_the_daily_games_already_stored(db: AsyncEngine) -> None:
    async with db.connect() as conn:
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0004"))
        await conn.commit()
    players = await add_players_before_name_keys(db, 3)
    await add_games(db, [game(players[0]), game(players[1], status="won", score=600, moves=40)])
    await migrate(db)
    assert await assert_counts_match(db) == {DATE: 2}
    await add_games(db, [game(players[2])])  # the triggers are in place after the upgrade
    assert await assert_counts_match(db) == {DATE: 3}
