"""The migrated schema enforces the invariants the services rely on (docs/rules.md §4, §5)."""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.db import DatabaseConfigError, async_url
from server.storage.models import DailyChallenge, Game, GameAction, Player, PlayerToken

T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


async def add_player(engine: AsyncEngine, name: str) -> int:
    async with engine.begin() as conn:
        player_id = await conn.scalar(
            insert(Player).values(name=name, created_at=T0).returning(Player.id)
        )
    assert isinstance(player_id, int)
    return player_id


def game_values(player_id: int, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "player_id": player_id,
        "code": "TP1-E-AAAAAAA",
        "rules": "E",
        "deal_version": "TP1",
        "mode": "daily",
        "daily_date": dt.date(2026, 3, 14),
        "status": "playing",
        "score": 500,
        "moves": 0,
        "undos": 0,
        "seq": 0,
        "created_at": T0,
    }
    values.update(overrides)
    return values


async def add_game(engine: AsyncEngine, player_id: int, **overrides: Any) -> int:
    async with engine.begin() as conn:
        game_id = await conn.scalar(
            insert(Game).values(**game_values(player_id, **overrides)).returning(Game.id)
        )
    assert isinstance(game_id, int)
    return game_id


async def test_every_timestamp_column_is_timestamptz(db: AsyncEngine) -> None:
    async with db.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT table_name, column_name, data_type FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND data_type LIKE 'timestamp%'"
                )
            )
        ).all()
    assert {(r.table_name, r.column_name) for r in rows} == {
        ("players", "created_at"),
        ("player_tokens", "created_at"),
        ("player_tokens", "last_used_at"),
        ("games", "created_at"),
        ("games", "finished_at"),
        ("game_actions", "created_at"),
        ("daily_challenges", "created_at"),
        ("races", "created_at"),
        ("races", "starts_at"),
        ("races", "ends_at"),
        ("races", "finished_at"),
        ("race_players", "joined_at"),
        ("race_presence", "since"),
        ("server_instances", "started_at"),
        ("server_instances", "seen_at"),
        ("race_connections", "connected_at"),
        ("players", "banned_at"),
        ("games", "hidden_at"),
        ("moderation_actions", "at"),
        ("follows", "created_at"),
        ("player_connections", "connected_at"),
        ("player_ratings", "rated_at"),
        ("rating_changes", "rated_at"),
        ("race_queue", "joined_at"),
    }
    assert {r.data_type for r in rows} == {"timestamp with time zone"}


async def test_one_daily_attempt_per_player_per_date(db: AsyncEngine) -> None:
    alice = await add_player(db, "Alice")
    await add_game(db, alice)
    with pytest.raises(IntegrityError, match="uq_games_daily_player"):
        await add_game(db, alice, status="won", finished_at=T0, elapsed_ms=1000)
    # another date, and free games, are not limited
    await add_game(db, alice, daily_date=dt.date(2026, 3, 13))
    await add_game(db, alice, mode="free", daily_date=None)
    await add_game(db, alice, mode="free", daily_date=None)


async def test_action_sequence_numbers_are_unique_per_game(db: AsyncEngine) -> None:
    alice = await add_player(db, "Alice")
    first = await add_game(db, alice, mode="free", daily_date=None)
    second = await add_game(db, alice, mode="free", daily_date=None)
    row = {"seq": 1, "kind": "draw", "pos": None, "card": "KH", "score_after": 499}
    async with db.begin() as conn:
        await conn.execute(insert(GameAction).values(game_id=first, created_at=T0, **row))
        await conn.execute(insert(GameAction).values(game_id=second, created_at=T0, **row))
    with pytest.raises(IntegrityError, match="pk_game_actions"):
        async with db.begin() as conn:
            await conn.execute(insert(GameAction).values(game_id=first, created_at=T0, **row))


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"rules": "N"}, "ck_games_rules"),
        ({"mode": "ranked", "daily_date": None}, "ck_games_mode"),
        ({"status": "lost"}, "ck_games_status"),
        ({"mode": "free"}, "ck_games_daily_date"),
        ({"daily_date": None}, "ck_games_daily_date"),
        ({"score": -1}, "ck_games_counters"),
        ({"moves": -1}, "ck_games_counters"),
        ({"undos": -1}, "ck_games_counters"),
        ({"seq": -1}, "ck_games_counters"),
        # A ranked result needs its place in the board order.
        ({"status": "won", "elapsed_ms": 1000}, "ck_games_result"),
        ({"status": "blocked", "finished_at": T0}, "ck_games_result"),
        ({"status": "won", "finished_at": T0, "elapsed_ms": -1}, "ck_games_result"),
    ],
)
async def test_game_check_constraints(
    db: AsyncEngine, overrides: dict[str, Any], constraint: str
) -> None:
    alice = await add_player(db, "Alice")
    with pytest.raises(IntegrityError, match=constraint):
        await add_game(db, alice, **overrides)


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"kind": "resign"}, "ck_game_actions_kind"),
        ({"seq": 0}, "ck_game_actions_seq"),
        ({"pos": 28}, "ck_game_actions_pos"),
        ({"pos": -1}, "ck_game_actions_pos"),
    ],
)
async def test_action_check_constraints(
    db: AsyncEngine, overrides: dict[str, Any], constraint: str
) -> None:
    alice = await add_player(db, "Alice")
    game = await add_game(db, alice)
    row = {"seq": 1, "kind": "remove", "pos": 3, "card": "KH", "score_after": 499, **overrides}
    with pytest.raises(IntegrityError, match=constraint):
        async with db.begin() as conn:
            await conn.execute(insert(GameAction).values(game_id=game, created_at=T0, **row))


async def test_player_names_are_unique_case_insensitively_and_tokens_unique(
    db: AsyncEngine,
) -> None:
    await add_player(db, "Alice")
    with pytest.raises(IntegrityError, match="uq_players_name_key"):
        await add_player(db, "ALICE")
    with pytest.raises(IntegrityError, match="uq_players_name_key"):
        await add_player(db, "\u0410lice")  # Cyrillic А: the key of the name is the default
    bob, cid = await add_player(db, "Bob"), await add_player(db, "Cid")
    token_hash = secrets.token_bytes(32)
    async with db.begin() as conn:
        await conn.execute(insert(PlayerToken).values(player_id=bob, token_hash=token_hash))
    with pytest.raises(IntegrityError, match="uq_player_tokens_token_hash"):
        async with db.begin() as conn:
            await conn.execute(insert(PlayerToken).values(player_id=cid, token_hash=token_hash))
    with pytest.raises(IntegrityError, match="ck_player_tokens_token_hash"):
        async with db.begin() as conn:
            await conn.execute(insert(PlayerToken).values(player_id=cid, token_hash=b"short"))


async def test_one_daily_challenge_per_date(db: AsyncEngine) -> None:
    values = {"date": dt.date(2026, 3, 14), "code": "TP1-E-AAAAAAA", "rules": "E"}
    async with db.begin() as conn:
        await conn.execute(insert(DailyChallenge).values(**values))
        stored = await conn.scalar(select(DailyChallenge.created_at))
    assert stored is not None and stored.tzinfo is not None
    with pytest.raises(IntegrityError, match="pk_daily_challenges"):
        async with db.begin() as conn:
            await conn.execute(insert(DailyChallenge).values(**{**values, "code": "TP1-E-B"}))
    with pytest.raises(IntegrityError, match="ck_daily_challenges_rules"):
        async with db.begin() as conn:
            await conn.execute(
                insert(DailyChallenge).values(
                    **{**values, "date": dt.date(2026, 3, 15), "rules": "X"}
                )
            )


async def test_deleting_a_player_cascades_to_games_and_actions(db: AsyncEngine) -> None:
    alice = await add_player(db, "Alice")
    game = await add_game(db, alice)
    async with db.begin() as conn:
        await conn.execute(
            insert(GameAction).values(
                game_id=game, seq=1, kind="draw", card="KH", score_after=499, created_at=T0
            )
        )
        await conn.execute(delete(Player).where(Player.id == alice))
        assert await conn.scalar(select(func.count()).select_from(Game)) == 0
        assert await conn.scalar(select(func.count()).select_from(GameAction)) == 0


async def test_timestamps_come_back_as_aware_utc(db: AsyncEngine) -> None:
    alice = await add_player(db, "Alice")
    local = dt.datetime(2026, 3, 14, 21, 30, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    game = await add_game(db, alice, created_at=local)
    async with db.connect() as conn:
        created = await conn.scalar(select(Game.created_at).where(Game.id == game))
    assert created == local
    assert created.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
        ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg"),
        ("postgresql+psycopg://u@h/db", "postgresql+asyncpg"),
    ],
)
def test_async_url_normalises_to_asyncpg(url: str, driver: str) -> None:
    assert async_url(url).drivername == driver


@pytest.mark.parametrize("url", ["sqlite:///x.db", "mysql://u@h/db", "not a url", ""])
def test_async_url_rejects_other_databases(url: str) -> None:
    with pytest.raises(DatabaseConfigError):
        async_url(url)


async def test_a_follow_is_one_per_pair_never_of_oneself_and_goes_with_either_player(
    db: AsyncEngine,
) -> None:
    alice, bob = await add_player(db, "Alice"), await add_player(db, "Bob")
    follow = "INSERT INTO follows (follower_id, followed_id, created_at) VALUES (:a, :b, now())"
    async with db.begin() as conn:
        await conn.execute(text(follow), {"a": alice, "b": bob})
        await conn.execute(text(follow), {"a": bob, "b": alice})
    with pytest.raises(IntegrityError, match="pk_follows"):
        async with db.begin() as conn:
            await conn.execute(text(follow), {"a": alice, "b": bob})
    with pytest.raises(IntegrityError, match="ck_follows_not_self"):
        async with db.begin() as conn:
            await conn.execute(text(follow), {"a": alice, "b": alice})
    async with db.begin() as conn:
        await conn.execute(text("DELETE FROM players WHERE id = :b"), {"b": bob})
        assert await conn.scalar(text("SELECT count(*) FROM follows")) == 0
