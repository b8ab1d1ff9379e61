"""The hello's read (:mod:`server.storage.welcome`): hellos arriving together are read in a few
statements, each answered with its own token's player, games and seat; an unknown token is
None; a database that fails fails every hello of its statement as a StorageError. Real
PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from server.bench.process import free_port
from server.engine.actions import Status
from server.errors import StorageUnavailable
from server.storage.db import create_engine
from server.storage.games import GameHead
from server.storage.welcome import PostgresWelcomeStore

NOW = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
TODAY = NOW.date()


def _hash(i: int) -> bytes:
    return hashlib.sha256(f"token-{i}".encode()).digest()


async def _players(database_url: str, count: int) -> list[int]:
    """``count`` players with one token each (``_hash(i)``) and one game each: player ``i``
    has ``i % 3`` free games playing, and every third one a won game."""
    conn = await asyncpg.connect(database_url)
    try:
        ids = []
        for i in range(count):
            player_id = await conn.fetchval(
                "INSERT INTO players (name, name_key, created_at, recovery_hash) "
                "VALUES ($1, $2, $3, $4) RETURNING id",
                f"p{i}",
                f"p{i}",
                NOW,
                b"x" * 32,
            )
            await conn.execute(
                "INSERT INTO player_tokens (player_id, token_hash, created_at) VALUES ($1, $2, $3)",
                player_id,
                _hash(i),
                NOW,
            )
            for n in range(i % 3):
                await conn.execute(
                    "INSERT INTO games (player_id, mode, code, rules, deal_version, status, "
                    "score, moves, undos, seq, created_at) "
                    "VALUES ($1, 'free', 'TP1-E-AAAAAAB', 'E', 'TP1', 'playing', 0, 0, 0, $2, $3)",
                    player_id,
                    n,
                    NOW + dt.timedelta(seconds=n),
                )
            if i % 3 == 0:
                await conn.execute(
                    "INSERT INTO games (player_id, mode, code, rules, deal_version, status, "
                    "score, moves, undos, seq, created_at, finished_at, elapsed_ms) "
                    "VALUES ($1, 'free', 'TP1-E-AAAAAAB', 'E', 'TP1', 'won', 0, 0, 0, 0, $2, $2, "
                    "0)",
                    player_id,
                    NOW,
                )
            ids.append(player_id)
        return ids
    finally:
        await conn.close()


async def test_hellos_arriving_together_are_read_in_few_statements_each_with_its_own_answer(
    db: AsyncEngine, database_url: str
) -> None:
    ids = await _players(database_url, 60)
    store = PostgresWelcomeStore(db, max_batch=16)
    asked = [_hash(i) for i in range(60)] + [b"\0" * 32]
    answers = await asyncio.gather(*(store.read(h, TODAY, NOW, 20) for h in asked))
    assert answers[-1] is None  # no such token
    for i, found in enumerate(answers[:-1]):
        assert found is not None
        assert (found.player.id, found.player.name, found.today) == (ids[i], f"p{i}", TODAY)
        assert [(g.seq, g.status) for g in found.games] == [
            (n, Status.PLAYING) for n in reversed(range(i % 3))
        ]
        assert all(isinstance(g, GameHead) for g in found.games)
        assert found.seated is False
    # Read together: at most one statement per 16 hellos (the first alone, then the rest).
    assert store.statements <= 1 + -(-60 // 16)
    conn = await asyncpg.connect(database_url)
    try:
        unused = await conn.fetchval(
            "SELECT count(*) FROM player_tokens WHERE last_used_at IS NULL"
        )
    finally:
        await conn.close()
    assert unused == 0  # every token read is marked used


async def test_the_games_listed_are_at_most_the_limit_newest_first(
    db: AsyncEngine, database_url: str
) -> None:
    await _players(database_url, 3)
    found = await PostgresWelcomeStore(db).read(_hash(2), None, NOW, 1)
    assert found is not None and [g.seq for g in found.games] == [1]


async def test_a_database_that_cannot_be_reached_fails_every_hello_as_storage_unavailable() -> None:
    engine = create_engine(f"postgresql://postgres@127.0.0.1:{free_port()}/none")
    try:
        store = PostgresWelcomeStore(engine)
        results = await asyncio.gather(
            *(store.read(_hash(i), None, NOW, 20) for i in range(5)), return_exceptions=True
        )
        assert all(isinstance(r, StorageUnavailable) for r in results), results
    finally:
        await engine.dispose()


def test_a_batch_of_no_hellos_is_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        PostgresWelcomeStore(create_engine("postgresql://x@127.0.0.1/none"), max_batch=0)
