"""Migration 0009: hidden results leave the board index, the leaderboard counters and the daily
player counts and come back on restore, whoever writes ``games``; a daily game stored for a
banned player is hidden by the ban from the start, even when the two cross; the schema refuses
half a ban or half a hidden mark; a downgrade restores every hidden result."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.db import alembic_config, direct_dsn, migrate
from server.storage.models import Game, ModerationAction, Player
from tests.helpers import eventually
from tests.storage.test_daily_players import assert_counts_match as assert_players_match
from tests.storage.test_leaderboard_counts import (
    DATE,
    T0,
    add_games,
    add_players,
    assert_counts_match,
    game,
)


async def add_action(engine: AsyncEngine, action: str, player_id: int, **values: Any) -> int:
    async with engine.begin() as conn:
        action_id = await conn.scalar(
            insert(ModerationAction)
            .values(moderator="tester", action=action, player_id=player_id, **values)
            .returning(ModerationAction.id)
        )
    assert isinstance(action_id, int)
    return action_id


async def set_hidden(engine: AsyncEngine, game_id: int, action_id: int | None) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            update(Game)
            .where(Game.id == game_id)
            .values(hidden_at=None if action_id is None else T0, hidden_by=action_id)
        )


async def assert_all_counts_match(engine: AsyncEngine) -> None:
    await assert_counts_match(engine)
    await assert_players_match(engine)


async def test_hiding_and_restoring_move_every_counter(db: AsyncEngine) -> None:
    players = await add_players(db, 4)
    ids = await add_games(
        db,
        [
            game(players[0], status="won", score=772, moves=28, elapsed_ms=40_000),
            game(players[1], status="won", score=772, moves=28, elapsed_ms=41_000),
            game(players[2], status="blocked", score=400, moves=51),
            game(players[3]),  # still playing
        ],
    )
    await assert_all_counts_match(db)
    hide = await add_action(db, "hide", players[0], game_id=ids[0], reason="test")
    await set_hidden(db, ids[0], hide)
    stored = await assert_counts_match(db)
    assert stored[(DATE, 2, 772, 28, 41)] == 1 and (DATE, 2, 772, 28, 40) not in stored
    assert await assert_players_match(db) == {DATE: 3}

    # A game hidden while still being played ends hidden: it never reaches the board.
    hide_playing = await add_action(db, "hide", players[3], game_id=ids[3], reason="test")
    await set_hidden(db, ids[3], hide_playing)
    async with db.begin() as conn:
        await conn.execute(
            update(Game)
            .where(Game.id == ids[3])
            .values(status="won", score=760, moves=40, finished_at=T0, elapsed_ms=90_000)
        )
    stored = await assert_counts_match(db)
    assert (DATE, 0, 760, 0, 0) not in stored
    assert await assert_players_match(db) == {DATE: 2}

    # Restored: both are back, in the board and in the counts.
    await set_hidden(db, ids[0], None)
    await set_hidden(db, ids[3], None)
    stored = await assert_counts_match(db)
    assert stored[(DATE, 0, 772, 0, 0)] == 2 and stored[(DATE, 0, 760, 0, 0)] == 1
    assert await assert_players_match(db) == {DATE: 4}

    # A statement hiding and restoring several rows at once, and deleting a hidden game.
    ban = await add_action(db, "ban", players[1], reason="test")
    async with db.begin() as conn:
        await conn.execute(
            update(Game).where(Game.id.in_(ids[:3])).values(hidden_at=T0, hidden_by=ban)
        )
    await assert_all_counts_match(db)
    async with db.begin() as conn:
        await conn.execute(delete(Game).where(Game.id == ids[1]))
    await assert_all_counts_match(db)
    async with db.begin() as conn:
        await conn.execute(
            update(Game).where(Game.hidden_by == ban).values(hidden_at=None, hidden_by=None)
        )
    assert await assert_players_match(db) == {DATE: 3}
    await assert_counts_match(db)


async def test_the_board_index_leaves_hidden_results_out(db: AsyncEngine) -> None:
    async with db.connect() as conn:
        definition = await conn.scalar(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_games_daily_board'")
        )
        valid = await conn.scalar(
            text("SELECT bool_and(indisvalid) FROM pg_index WHERE indrelid = 'games'::regclass")
        )
    assert definition is not None and "hidden_at IS NULL" in definition
    assert valid


async def test_a_daily_game_stored_for_a_banned_player_is_hidden_by_the_ban(
    db: AsyncEngine,
) -> None:
    banned, other = await add_players(db, 2)
    ban = await add_action(db, "ban", banned, reason="test")
    async with db.begin() as conn:
        await conn.execute(
            update(Player)
            .where(Player.id == banned)
            .values(banned_at=T0, ban_reason="test", ban_action_id=ban)
        )
    daily, free, others = await add_games(
        db,
        [
            game(banned, status="won", score=700, moves=40),
            game(banned, mode="free", daily_date=None),
            game(other, status="won", score=700, moves=40),
        ],
    )
    async with db.connect() as conn:
        query = select(Game.id, Game.hidden_by).where(Game.id.in_([daily, free, others]))
        rows = dict((await conn.execute(query)).all())
    assert rows == {daily: ban, free: None, others: None}
    await assert_all_counts_match(db)


async def test_a_join_crossing_a_ban_waits_for_it_and_is_hidden_by_it(
    db: AsyncEngine, database_url: str
) -> None:
    """The ban's transaction holds the player's row; the insert's trigger reads it FOR SHARE,
    so it waits for the ban to commit and then sees it."""
    player = (await add_players(db, 1))[0]
    ban = await add_action(db, "ban", player, reason="test")
    banning = await asyncpg.connect(direct_dsn(database_url))
    joining = await asyncpg.connect(direct_dsn(database_url))
    try:
        transaction = banning.transaction()
        await transaction.start()
        await banning.execute(
            "UPDATE players SET banned_at = now(), ban_reason = 'test', ban_action_id = $1 "
            "WHERE id = $2",
            ban,
            player,
        )
        values = game(player)
        insert_task = asyncio.create_task(
            joining.fetchval(
                "INSERT INTO games (player_id, code, rules, deal_version, mode, daily_date, "
                "status, score, moves, undos, seq, created_at) VALUES ($1, $2, $3, $4, $5, $6, "
                "$7, $8, $9, $10, $11, $12) RETURNING id",
                *(
                    values[k]
                    for k in (
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
                    )
                ),
            )
        )

        async def insert_waits() -> bool:
            async with db.connect() as conn:
                waiting = await conn.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'INSERT INTO games%' AND datname = current_database()"
                    )
                )
            return bool(waiting)

        await eventually(insert_waits, "the insert to wait for the ban's row lock")
        assert not insert_task.done()
        await transaction.commit()
        game_id = await asyncio.wait_for(insert_task, 30)
    finally:
        await banning.close()
        await joining.close()
    async with db.connect() as conn:
        hidden_by = await conn.scalar(select(Game.hidden_by).where(Game.id == game_id))
    assert hidden_by == ban
    await assert_all_counts_match(db)


@pytest.mark.parametrize(
    ("table", "values"),
    [
        ("games", {"hidden_at": T0}),  # hidden, by no action
        ("players", {"banned_at": T0}),  # banned, with no reason or action
        ("players", {"address_hash": b"short"}),
    ],
)
async def test_the_schema_refuses_half_a_mark(
    db: AsyncEngine, table: str, values: dict[str, Any]
) -> None:
    player = (await add_players(db, 1))[0]
    (game_id,) = await add_games(db, [game(player)])
    model: Any = Game if table == "games" else Player
    target = game_id if table == "games" else player
    with pytest.raises(IntegrityError):
        async with db.begin() as conn:
            await conn.execute(update(model).where(model.id == target).values(**values))


@pytest.mark.parametrize(
    "values",
    [
        {"action": "ban", "reason": None},  # a ban says why
        {"action": "hide", "reason": "x", "game_id": None},  # a hide names its game
        {"action": "delete", "reason": "x"},
        {"action": "unban", "moderator": " "},
    ],
)
async def test_the_audit_trail_refuses_an_incomplete_row(
    db: AsyncEngine, values: dict[str, Any]
) -> None:
    player = (await add_players(db, 1))[0]
    row = {"moderator": "tester", "player_id": player, **values}
    with pytest.raises(IntegrityError):
        async with db.begin() as conn:
            await conn.execute(insert(ModerationAction).values(**row))


async def test_downgrade_puts_every_hidden_result_back_and_upgrade_again(
    db: AsyncEngine,
) -> None:
    players = await add_players(db, 3)
    ids = await add_games(
        db, [game(p, status="won", score=700 + i, moves=40) for i, p in enumerate(players)]
    )
    hide = await add_action(db, "hide", players[0], game_id=ids[0], reason="test")
    await set_hidden(db, ids[0], hide)
    assert await assert_players_match(db) == {DATE: 2}
    async with db.connect() as conn:
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0008"))
        await conn.commit()
        board = await conn.scalar(
            text("SELECT count(*) FROM leaderboard_counts WHERE level = 0 AND entries > 0")
        )
        started = await conn.scalar(text("SELECT players FROM daily_players"))
    assert (board, started) == (3, 3)
    await migrate(db)
    await assert_all_counts_match(db)
    assert await assert_players_match(db) == {DATE: 3}


async def test_an_interrupted_upgrade_finishes_its_index_when_run_again(db: AsyncEngine) -> None:
    """As if the run had stopped within its concurrent part: the schema is there, the version
    not yet stamped, the old board index still in place and a failed build of the new one left
    invalid."""
    players = await add_players(db, 2)
    await add_games(db, [game(p, status="won", score=700, moves=40) for p in players])
    async with db.connect() as conn:  # the schema as 0009 left it (the later ones undone)
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0009"))
        await conn.commit()
    async with db.begin() as conn:
        await conn.execute(text("DROP INDEX ix_games_daily_board"))
        await conn.execute(
            text(
                "CREATE INDEX ix_games_daily_board ON games (daily_date, (-score), moves, "
                "elapsed_ms, finished_at, player_id) "
                "WHERE mode = 'daily' AND status IN ('won', 'blocked')"
            )
        )
        await conn.execute(text("CREATE INDEX ix_games_daily_board_visible ON games (daily_date)"))
        await conn.execute(
            text(
                "UPDATE pg_index SET indisvalid = false "
                "WHERE indexrelid = 'ix_games_daily_board_visible'::regclass"
            )
        )
        await conn.execute(text("UPDATE alembic_version SET version_num = '0008'"))
    await migrate(db)
    async with db.connect() as conn:
        indexes: dict[str, bool] = dict(
            (
                await conn.execute(
                    text(
                        "SELECT c.relname, i.indisvalid FROM pg_index i "
                        "JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE c.relname LIKE 'ix_games_daily_board%'"
                    )
                )
            ).all()
        )
        definition = await conn.scalar(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_games_daily_board'")
        )
        version = await conn.scalar(text("SELECT version_num FROM alembic_version"))
    assert indexes == {"ix_games_daily_board": True}
    assert definition is not None and "hidden_at IS NULL" in definition
    assert version == ScriptDirectory.from_config(alembic_config()).get_current_head()
    await assert_all_counts_match(db)
