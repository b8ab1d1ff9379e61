"""What a ``hello`` needs, read in one statement: the token's player, the player's games that can
still be played, and whether they sit in an open race room.

A crowd saying hello at once (the daily's release, every page reconnecting after a restart)
would otherwise cost each hello a handful of queries, each with its pool check-out and its own
transaction. Here the hellos waiting at one moment are read together, in one statement sent
through the driver under the engine's pool (as the group commit's batch,
:mod:`server.storage.commits`): a lone hello is read at once, a thousand at once in a handful
of statements. The statement refreshes each token's ``last_used_at`` as
:meth:`~server.storage.players.PlayerStore.by_token_hash` does.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine.actions import Status
from server.storage.driver_errors import database_error
from server.storage.enums import RaceStatus
from server.storage.games import GameHead, GameMode
from server.storage.players import TOKENS_TOUCHED_SQL, PlayerRow
from server.storage.sessions import DATABASE_FAILURES, as_storage_error
from server.storage.today import DATABASE_TODAY_SQL

log = logging.getLogger(__name__)

#: Hellos read in one statement at most.
MAX_BATCH = 256
#: Seconds a statement may take before its hellos fail (``StorageUnavailable``).
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class WelcomeRead:
    """What one token's hello needs.

    Attributes:
        token_id: the token's id (``player_tokens.id``).
        player: the token's player.
        today: the daily boundary's UTC date the games were chosen by (the pinned one, else the
            database's).
        games: the player's games that can still be played, newest first (see
            :meth:`~server.storage.games.GameStore.unfinished`).
        seated: whether the player sits in a room whose status is lobby or running.
    """

    token_id: int
    player: PlayerRow
    today: dt.date
    games: tuple[GameHead, ...]
    seated: bool


class WelcomeStore(Protocol):
    """Reads what a hello needs (:class:`~server.errors.StorageError` when the database
    fails)."""

    async def read(
        self, token_hash: bytes, pinned_today: dt.date | None, now: dt.datetime, limit: int
    ) -> WelcomeRead | None:
        """What the hello of the token whose SHA-256 is ``token_hash`` needs, or None when
        there is no such token.

        Args:
            pinned_today: the UTC date a simulated clock says it is, else None (the
                database's clock decides which dailies are still open).
            now: the server's time (UTC): a race game is listed once its race has started.
            limit: games listed at most.
        """
        ...


_PLAYABLE = (
    f"(g.status = '{Status.PLAYING}' "
    f"OR (g.status = '{Status.BLOCKED}' AND g.mode = '{GameMode.FREE}'))"
)
_OPEN_ROOM = f"r.status IN ('{RaceStatus.LOBBY}', '{RaceStatus.RUNNING}')"

#: $1 token hashes, $2 each hello's time, $3 each hello's pinned date (or NULL), $4 each
#: hello's game limit; one row per token found, ``n`` its place (1-based) in $1.
READ_SQL = f"""
WITH asked AS (
    SELECT a.n, a.token_hash, a.at, a.pinned, a.lim
    FROM unnest($1::bytea[], $2::timestamptz[], $3::date[], $4::int[])
        WITH ORDINALITY AS a(token_hash, at, pinned, lim, n)
), found AS (
    SELECT a.n, a.at, a.lim, COALESCE(a.pinned, {DATABASE_TODAY_SQL}) AS today,
           t.id AS token_id, t.last_used_at, p.id AS player_id, p.name
    FROM asked AS a
    JOIN player_tokens AS t ON t.token_hash = a.token_hash
    JOIN players AS p ON p.id = t.player_id
), {TOKENS_TOUCHED_SQL}
SELECT f.n, f.token_id, f.player_id, f.name, f.today,
    (SELECT COALESCE(json_agg(json_build_array(g.id, g.seq, g.status)
                              ORDER BY g.created_at DESC, g.id DESC), '[]')
     FROM (SELECT g.id, g.seq, g.status, g.created_at
           FROM games AS g
           WHERE g.player_id = f.player_id AND {_PLAYABLE}
             AND (g.daily_date IS NULL OR g.daily_date >= f.today)
             AND (g.race_id IS NULL OR g.race_id IN (
                 SELECT r.id FROM races AS r
                 WHERE r.status = '{RaceStatus.RUNNING}' AND r.starts_at <= f.at))
           ORDER BY g.created_at DESC, g.id DESC
           LIMIT f.lim) AS g) AS games,
    EXISTS (SELECT 1 FROM race_players AS s JOIN races AS r ON r.id = s.race_id
            WHERE s.player_id = f.player_id AND {_OPEN_ROOM}) AS seated
FROM found AS f
"""


@dataclass(slots=True)
class _Asked:
    token_hash: bytes
    pinned_today: dt.date | None
    now: dt.datetime
    limit: int
    answer: asyncio.Future[WelcomeRead | None]


class PostgresWelcomeStore:
    """:class:`WelcomeStore` in PostgreSQL: the hellos waiting when a statement starts are read
    in it, up to :data:`MAX_BATCH` (one statement in flight at a time).

    Args:
        engine: the engine whose pool lends the connection of each statement.
        max_batch: hellos read in one statement at most.
        timeout_s: how long a statement may take before its hellos fail.
    """

    def __init__(
        self, engine: AsyncEngine, max_batch: int = MAX_BATCH, timeout_s: float = READ_TIMEOUT_S
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
        self._engine = engine
        self._max_batch = max_batch
        self._timeout_s = timeout_s
        self._waiting: list[_Asked] = []
        self._reader: asyncio.Task[None] | None = None
        #: Statements sent so far (for tests and the operator).
        self.statements = 0

    async def read(
        self, token_hash: bytes, pinned_today: dt.date | None, now: dt.datetime, limit: int
    ) -> WelcomeRead | None:
        """See :meth:`WelcomeStore.read`.

        Raises:
            StorageError: the database failed, or did not answer within the time-out.
        """
        answer: asyncio.Future[WelcomeRead | None] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Asked(token_hash, pinned_today, now, limit, answer))
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_waiting())
        return await answer

    async def _read_waiting(self) -> None:
        """Read the waiting hellos, a batch per statement, until none waits."""
        while self._waiting:
            batch = [a for a in self._waiting[: self._max_batch] if not a.answer.done()]
            del self._waiting[: self._max_batch]
            if not batch:
                continue
            try:
                found = await self._read(batch)
            except Exception as exc:  # every hello of the batch fails with it
                error = as_storage_error(exc)
                for asked in batch:
                    if not asked.answer.done():
                        asked.answer.set_exception(error)
                continue
            for place, asked in enumerate(batch, start=1):
                if not asked.answer.done():
                    asked.answer.set_result(found.get(place))

    async def _read(self, batch: Sequence[_Asked]) -> dict[int, WelcomeRead]:
        """One statement for ``batch``; each token found by its place (1-based)."""
        arguments = (
            [a.token_hash for a in batch],
            [a.now for a in batch],
            [a.pinned_today for a in batch],
            [a.limit for a in batch],
        )
        async with self._engine.connect() as conn:
            # Its own implicit transaction: nothing of SQLAlchemy's opens one around it.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            assert driver is not None  # a connection just checked out is attached
            try:
                rows = await driver.fetch(READ_SQL, *arguments, timeout=self._timeout_s)
            except TimeoutError:
                await conn.invalidate()
                raise
            except DATABASE_FAILURES as exc:
                if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
                    raise database_error(
                        exc, READ_SQL, connection_invalidated=driver.is_closed()
                    ) from exc
                raise
        self.statements += 1
        return {row["n"]: _welcome_read(row) for row in rows}


def _welcome_read(row: asyncpg.Record) -> WelcomeRead:
    listed = row["games"]
    if isinstance(listed, str):  # the engine's connections decode json; a bare driver does not
        listed = json.loads(listed)
    games = tuple(GameHead(game_id, seq, Status(status)) for game_id, seq, status in listed)
    return WelcomeRead(
        token_id=row["token_id"],
        player=PlayerRow(row["player_id"], row["name"]),
        today=row["today"],
        games=games,
        seated=row["seated"],
    )


__all__ = ["MAX_BATCH", "READ_SQL", "PostgresWelcomeStore", "WelcomeRead", "WelcomeStore"]
