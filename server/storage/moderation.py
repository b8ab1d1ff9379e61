"""Moderation's queries: bans, hidden results and the audit trail (the reads of the review of
a day's results are :mod:`server.storage.review`'s).

:class:`ModerationStore` is the contract :class:`server.services.moderation.ModerationService`
depends on; :class:`PostgresModerationStore` keeps it in PostgreSQL. A moderator's command is
one :class:`ModerationTransaction` (``async with store.transaction() as tx:``), committed by the
service (``await tx.commit()``), so that a command's checks and writes see one state under its
row locks: the player's row first, then the game's, in every command. The rules (what a ban
hides, what an unban restores, what may be restored) are the service's; storage only reads and
writes.

Hiding and restoring are plain updates of ``games.hidden_at`` / ``hidden_by``; the triggers of
migration 0009 move the leaderboard counters and the daily player counts with them. A player's
games are hidden or restored one date after another in date order, so that the counter rows
those triggers update are always locked in one order (the group commit only ever touches
today's). The ban check of ranked play (:func:`ban_of`) reads in another service's transaction
or in a session of its own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from sqlalchemy import ColumnElement, func, insert, null, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.storage.models import Game, ModerationAction, Player
from server.storage.sessions import Sessions

#: Largest id of a player or a game (BIGINT columns); larger ids name nothing.
MAX_ID = 2**63 - 1

#: Where :func:`ban_of` reads: the session factory, or a session already open.
SessionOrFactory: TypeAlias = Sessions | AsyncSession


@dataclass(frozen=True, slots=True)
class PlayerRecord:
    """A player as moderation sees them (``banned_at`` UTC; None when not banned)."""

    id: int
    name: str
    banned_at: dt.datetime | None
    ban_reason: str | None
    ban_action_id: int | None


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A game's row as moderation sees it: its result and whether (and by what) it is hidden."""

    id: int
    player_id: int
    mode: str
    daily_date: dt.date | None
    status: str
    score: int
    moves: int
    elapsed_ms: int | None
    hidden_at: dt.datetime | None
    hidden_by: int | None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One row of the audit trail (``at`` UTC), with the name of the player it names when that
    player is still there."""

    id: int
    at: dt.datetime
    moderator: str
    action: str
    player_id: int | None
    player_name: str | None
    game_id: int | None
    daily_date: dt.date | None
    reason: str | None
    details: Any | None


@dataclass(frozen=True, slots=True)
class ActionStamp:
    """An audit row just written: its id and its time (UTC, the database's clock)."""

    id: int
    at: dt.datetime


class ModerationTransaction(Protocol):
    """One moderator's command or read, in one transaction: nothing it writes is kept unless
    :meth:`commit` is called. Every method may raise :class:`~server.errors.StorageError`."""

    async def player_by_id(self, player_id: int, *, lock: bool = False) -> PlayerRecord | None:
        """The player with this id (its row locked ``FOR UPDATE`` with ``lock``), or None (also
        for ids outside 1..2⁶³−1)."""
        ...

    async def player_by_name_key(self, key: str) -> PlayerRecord | None:
        """The player whose name has this :func:`~server.names.name_key` (unique), or None."""
        ...

    async def game_by_id(self, game_id: int, *, lock: bool = False) -> GameRecord | None:
        """The game with this id (its row locked ``FOR UPDATE`` with ``lock``), or None (also
        for ids outside 1..2⁶³−1)."""
        ...

    async def action_by_id(self, action_id: int) -> ActionRecord | None:
        """One row of the audit trail, or None."""
        ...

    async def actions(self, *, player_id: int | None = None, limit: int = 50) -> list[ActionRecord]:
        """The audit trail, newest first: all of it, or about one player."""
        ...

    async def record_action(
        self,
        *,
        moderator: str,
        action: str,
        player_id: int,
        game_id: int | None = None,
        daily_date: dt.date | None = None,
        reason: str | None = None,
        details: Any | None = None,
    ) -> ActionStamp:
        """Add a row to the audit trail (``details``: JSON), stamped by the database's clock."""
        ...

    async def visible_daily_games(self, player_id: int) -> list[GameRecord]:
        """The player's daily games that are not hidden (any status), in date order."""
        ...

    async def games_hidden_by(self, player_id: int, action_id: int) -> list[GameRecord]:
        """The player's games still hidden by the audit row ``action_id``, in date order."""
        ...

    async def set_hidden(
        self, games: Sequence[GameRecord], action_id: int | None, at: dt.datetime | None
    ) -> None:
        """Hide ``games`` as by the audit row ``action_id`` at ``at``, or restore them (both
        None): one statement per game, in the given order (date order: see the module's notes).
        """
        ...

    async def set_ban(
        self, player_id: int, action_id: int | None, at: dt.datetime | None, reason: str | None
    ) -> None:
        """Record the player's ban (the audit row, since when, why), or lift it (all None)."""
        ...

    async def commit(self) -> None:
        """Keep what this transaction wrote."""
        ...


class ModerationStore(Protocol):
    """Where moderation reads and writes. Every method may raise
    :class:`~server.errors.StorageError` (nothing is changed then)."""

    def transaction(self) -> AbstractAsyncContextManager[ModerationTransaction]:
        """One command's transaction, rolled back unless committed."""
        ...


_PLAYER_COLUMNS = (
    Player.id,
    Player.name,
    Player.banned_at,
    Player.ban_reason,
    Player.ban_action_id,
)
_GAME_COLUMNS = (
    Game.id,
    Game.player_id,
    Game.mode,
    Game.daily_date,
    Game.status,
    Game.score,
    Game.moves,
    Game.elapsed_ms,
    Game.hidden_at,
    Game.hidden_by,
)


def player_record(row: Any) -> PlayerRecord:
    """A :class:`PlayerRecord` from any row with the player's columns by name (a database
    row, or the in-memory tables' for tests)."""
    return PlayerRecord(row.id, row.name, row.banned_at, row.ban_reason, row.ban_action_id)


def game_record(row: Any) -> GameRecord:
    """A :class:`GameRecord` from any row with the game's columns by name."""
    return GameRecord(
        row.id,
        row.player_id,
        row.mode,
        row.daily_date,
        row.status,
        row.score,
        row.moves,
        row.elapsed_ms,
        row.hidden_at,
        row.hidden_by,
    )


_ACTIONS = (
    select(
        ModerationAction.id,
        ModerationAction.at,
        ModerationAction.moderator,
        ModerationAction.action,
        ModerationAction.player_id,
        Player.name,
        ModerationAction.game_id,
        ModerationAction.daily_date,
        ModerationAction.reason,
        ModerationAction.details,
    )
    .outerjoin(Player, Player.id == ModerationAction.player_id)
    .order_by(ModerationAction.id.desc())
)


class PostgresModerationTransaction:
    """:class:`ModerationTransaction` in one PostgreSQL session.

    Args:
        session: the transaction's session (its failures leave as StorageError).
    """

    def __init__(self, session: AsyncSession) -> None:
        self._session = session

    async def player_by_id(self, player_id: int, *, lock: bool = False) -> PlayerRecord | None:
        if not 0 < player_id <= MAX_ID:
            return None
        query = select(*_PLAYER_COLUMNS).where(Player.id == player_id)
        if lock:
            query = query.with_for_update()
        row = (await self._session.execute(query)).first()
        return None if row is None else player_record(row)

    async def player_by_name_key(self, key: str) -> PlayerRecord | None:
        query = select(*_PLAYER_COLUMNS).where(Player.name_key == key)
        row = (await self._session.execute(query)).first()
        return None if row is None else player_record(row)

    async def game_by_id(self, game_id: int, *, lock: bool = False) -> GameRecord | None:
        if not 0 < game_id <= MAX_ID:
            return None
        query = select(*_GAME_COLUMNS).where(Game.id == game_id)
        if lock:
            query = query.with_for_update()
        row = (await self._session.execute(query)).first()
        return None if row is None else game_record(row)

    async def action_by_id(self, action_id: int) -> ActionRecord | None:
        query = _ACTIONS.where(ModerationAction.id == action_id).limit(1)
        row = (await self._session.execute(query)).first()
        return None if row is None else ActionRecord(*row)

    async def actions(self, *, player_id: int | None = None, limit: int = 50) -> list[ActionRecord]:
        query = _ACTIONS.limit(limit)
        if player_id is not None:
            query = query.where(ModerationAction.player_id == player_id)
        return [ActionRecord(*row) for row in await self._session.execute(query)]

    async def record_action(
        self,
        *,
        moderator: str,
        action: str,
        player_id: int,
        game_id: int | None = None,
        daily_date: dt.date | None = None,
        reason: str | None = None,
        details: Any | None = None,
    ) -> ActionStamp:
        statement = (
            insert(ModerationAction)
            .values(
                moderator=moderator,
                action=action,
                player_id=player_id,
                game_id=game_id,
                daily_date=daily_date,
                reason=reason,
                details=null() if details is None else details,
            )
            .returning(ModerationAction.id, ModerationAction.at)
        )
        row = (await self._session.execute(statement)).one()
        return ActionStamp(int(row.id), row.at)

    async def visible_daily_games(self, player_id: int) -> list[GameRecord]:
        return await self._games(
            Game.player_id == player_id, Game.mode == "daily", Game.hidden_at.is_(None)
        )

    async def games_hidden_by(self, player_id: int, action_id: int) -> list[GameRecord]:
        return await self._games(Game.player_id == player_id, Game.hidden_by == action_id)

    async def _games(self, *where: ColumnElement[bool]) -> list[GameRecord]:
        """The games matching ``where``, in date order."""
        query = select(*_GAME_COLUMNS).where(*where).order_by(Game.daily_date, Game.id)
        return [game_record(row) for row in await self._session.execute(query)]

    async def set_hidden(
        self, games: Sequence[GameRecord], action_id: int | None, at: dt.datetime | None
    ) -> None:
        for game in games:
            await self._session.execute(
                update(Game).where(Game.id == game.id).values(hidden_at=at, hidden_by=action_id)
            )

    async def set_ban(
        self, player_id: int, action_id: int | None, at: dt.datetime | None, reason: str | None
    ) -> None:
        await self._session.execute(
            update(Player)
            .where(Player.id == player_id)
            .values(banned_at=at, ban_reason=reason, ban_action_id=action_id)
        )

    async def commit(self) -> None:
        await self._session.commit()


class PostgresModerationStore:
    """:class:`ModerationStore` in PostgreSQL (``players``, ``games``, ``moderation_actions``).

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`, the transaction rolled back).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresModerationTransaction]:
        async with self._sessions() as session:
            yield PostgresModerationTransaction(session)


async def ban_of(db: SessionOrFactory, player_id: int) -> PlayerRecord | None:
    """The player's record when they are banned, else None (also for an unknown player).

    Args:
        db: the session factory, or a session already open (its transaction is used).
        player_id: the player.
    """
    query = select(*_PLAYER_COLUMNS).where(Player.id == player_id, Player.banned_at.is_not(None))
    if isinstance(db, AsyncSession):
        row = (await db.execute(query)).first()
    else:
        async with db() as session:
            row = (await session.execute(query)).first()
    return None if row is None else player_record(row)


async def schema_revision(session: AsyncSession) -> str | None:
    """The database's Alembic revision, or None when it has none."""
    if await session.scalar(select(func.to_regclass("alembic_version"))) is None:
        return None
    revision: str | None = await session.scalar(text("SELECT version_num FROM alembic_version"))
    return revision


__all__ = [
    "MAX_ID",
    "ActionRecord",
    "ActionStamp",
    "GameRecord",
    "ModerationStore",
    "ModerationTransaction",
    "PlayerRecord",
    "PostgresModerationStore",
    "PostgresModerationTransaction",
    "SessionOrFactory",
    "ban_of",
    "game_record",
    "player_record",
    "schema_revision",
]
