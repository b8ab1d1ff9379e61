"""Daily leaderboards: SPEC §4 order, shared ranks, keyset pages and "around me".

Order: score descending, moves ascending, elapsed ms ascending, finish time, player id. Entries
equal on score, moves and elapsed time share a rank (1, 1, 3). Only ended daily games (won or
blocked) rank. Pages continue from an opaque keyset cursor, never an OFFSET.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from server.services.errors import InvalidInputError, NotFoundError
from server.storage.models import Game, Player

MAX_LIMIT = 100
MAX_RADIUS = 50
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

_RANKED = and_(Game.mode == "daily", Game.status.in_(("won", "blocked")))


@dataclass(frozen=True, slots=True)
class BoardKey:
    """A position in the total order: the sort key of one entry (finished_at is UTC)."""

    score: int
    moves: int
    elapsed_ms: int
    finished_at: dt.datetime
    player_id: int

    def encode(self) -> str:
        """This key as an opaque URL-safe cursor."""
        raw = json.dumps(
            [self.score, self.moves, self.elapsed_ms, self.finished_at.isoformat(), self.player_id],
            separators=(",", ":"),
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> BoardKey:
        """Parse a cursor made by :meth:`encode`.

        Raises:
            InvalidInputError: ``bad_cursor``.
        """
        try:
            if len(cursor) > 200:
                raise ValueError("too long")
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            s, m, e, f, p = json.loads(raw)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (s, m, e, p)):
                raise ValueError("not integers")
            # The columns' ranges (INTEGER score/moves, BIGINT elapsed/player id): a value
            # outside them cannot be bound to the query and would fail in the database.
            if not (0 <= s <= _INT32_MAX and 0 <= m <= _INT32_MAX):
                raise ValueError("out of range")
            if not (0 <= e <= _INT64_MAX and 0 <= p <= _INT64_MAX):
                raise ValueError("out of range")
            finished = dt.datetime.fromisoformat(f)
            if finished.tzinfo is None:
                raise ValueError("naive time")
            finished = finished.astimezone(dt.UTC)  # OverflowError near datetime's ends
            return cls(s, m, e, finished, p)
        except (ValueError, TypeError, OverflowError, binascii.Error, UnicodeDecodeError):
            raise InvalidInputError("the cursor is not valid", code="bad_cursor") from None


@dataclass(frozen=True, slots=True)
class Entry:
    """One leaderboard row."""

    rank: int
    player_id: int
    name: str
    score: int
    moves: int
    undos: int
    elapsed_ms: int
    status: str
    finished_at: dt.datetime

    @property
    def key(self) -> BoardKey:
        """This entry's position in the order."""
        return BoardKey(self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id)


@dataclass(frozen=True, slots=True)
class Page:
    """A page of entries and the cursor of the next page (None at the end)."""

    entries: list[Entry]
    next_cursor: str | None


def _after(key: BoardKey) -> ColumnElement[bool]:
    """Rows strictly after ``key`` in the total order."""
    return or_(
        Game.score < key.score,
        and_(
            Game.score == key.score,
            tuple_(Game.moves, Game.elapsed_ms, Game.finished_at, Game.player_id)
            > tuple_(key.moves, key.elapsed_ms, key.finished_at, key.player_id),
        ),
    )


def _before(key: BoardKey) -> ColumnElement[bool]:
    """Rows strictly before ``key`` in the total order."""
    return or_(
        Game.score > key.score,
        and_(
            Game.score == key.score,
            tuple_(Game.moves, Game.elapsed_ms, Game.finished_at, Game.player_id)
            < tuple_(key.moves, key.elapsed_ms, key.finished_at, key.player_id),
        ),
    )


def _better(key: BoardKey) -> ColumnElement[bool]:
    """Rows with a strictly better rank than ``key`` (ties on score, moves, elapsed share)."""
    return or_(
        Game.score > key.score,
        and_(
            Game.score == key.score,
            tuple_(Game.moves, Game.elapsed_ms) < tuple_(key.moves, key.elapsed_ms),
        ),
    )


_COLUMNS = (
    Game.player_id,
    Player.name,
    Game.score,
    Game.moves,
    Game.undos,
    Game.elapsed_ms,
    Game.status,
    Game.finished_at,
)
_ORDER = (Game.score.desc(), Game.moves, Game.elapsed_ms, Game.finished_at, Game.player_id)
_REVERSE = (
    Game.score.asc(),
    Game.moves.desc(),
    Game.elapsed_ms.desc(),
    Game.finished_at.desc(),
    Game.player_id.desc(),
)


class LeaderboardService:
    """Reads daily leaderboards.

    Args:
        sessions: database session factory.
    """

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def page(self, date: dt.date, limit: int = 50, cursor: str | None = None) -> Page:
        """One page of a date's leaderboard.

        Args:
            date: the UTC date.
            limit: entries per page, 1..100.
            cursor: the ``next_cursor`` of the previous page, or None for the first page.

        Raises:
            InvalidInputError: ``bad_limit`` or ``bad_cursor``.
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be 1..{MAX_LIMIT}", code="bad_limit")
        key = BoardKey.decode(cursor) if cursor else None
        query = self._base(date).order_by(*_ORDER).limit(limit + 1)
        if key is not None:
            query = query.where(_after(key))
        async with self._sessions() as session:
            rows = (await session.execute(query)).all()
            more = len(rows) > limit
            rows = rows[:limit]
            entries = await self._ranked(session, date, rows)
        return Page(entries, entries[-1].key.encode() if more and entries else None)

    async def around(self, date: dt.date, player_id: int, radius: int = 5) -> list[Entry]:
        """The window of entries around one player's: ``radius`` above, the player, ``radius``
        below (fewer at the ends).

        Raises:
            InvalidInputError: ``bad_radius``.
            NotFoundError: ``not_ranked`` when the player has no ranked entry on that date.
        """
        if not 0 <= radius <= MAX_RADIUS:
            raise InvalidInputError(f"radius must be 0..{MAX_RADIUS}", code="bad_radius")
        async with self._sessions() as session:
            own = (
                await session.execute(self._base(date).where(Game.player_id == player_id))
            ).first()
            if own is None:
                raise NotFoundError(
                    f"player {player_id} has no ranked game on {date.isoformat()}",
                    code="not_ranked",
                )
            key = _key(own)
            above = (
                await session.execute(
                    self._base(date).where(_before(key)).order_by(*_REVERSE).limit(radius)
                )
            ).all()
            below = (
                await session.execute(
                    self._base(date).where(_after(key)).order_by(*_ORDER).limit(radius)
                )
            ).all()
            rows = [*reversed(above), own, *below]
            return await self._ranked(session, date, rows)

    async def rank_of(self, date: dt.date, player_id: int) -> Entry | None:
        """One player's entry with its rank, or None when they have no ranked game that date."""
        async with self._sessions() as session:
            own = (
                await session.execute(self._base(date).where(Game.player_id == player_id))
            ).first()
            if own is None:
                return None
            return (await self._ranked(session, date, [own]))[0]

    @staticmethod
    def _base(date: dt.date) -> Any:
        return (
            select(*_COLUMNS)
            .join(Player, Player.id == Game.player_id)
            .where(_RANKED, Game.daily_date == date)
        )

    @staticmethod
    async def _ranked(session: AsyncSession, date: dt.date, rows: Sequence[Any]) -> list[Entry]:
        """Give consecutive rows (in board order) their shared ranks."""
        if not rows:
            return []
        first = _key(rows[0])
        scope = and_(_RANKED, Game.daily_date == date)
        better, before = (
            await session.execute(
                select(
                    func.count().filter(_better(first)),
                    func.count().filter(_before(first)),
                ).where(scope)
            )
        ).one()
        entries: list[Entry] = []
        for i, row in enumerate(rows):
            if i == 0:
                rank = int(better) + 1
            elif (row.score, row.moves, row.elapsed_ms) == (
                entries[-1].score,
                entries[-1].moves,
                entries[-1].elapsed_ms,
            ):
                rank = entries[-1].rank
            else:
                rank = int(before) + 1 + i
            entries.append(
                Entry(
                    rank=rank,
                    player_id=row.player_id,
                    name=row.name,
                    score=row.score,
                    moves=row.moves,
                    undos=row.undos,
                    elapsed_ms=row.elapsed_ms,
                    status=row.status,
                    finished_at=row.finished_at,
                )
            )
        return entries


def _key(row: Any) -> BoardKey:
    return BoardKey(row.score, row.moves, row.elapsed_ms, row.finished_at, row.player_id)
