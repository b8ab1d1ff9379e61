"""Daily leaderboards: docs/rules.md §4 order, shared ranks, keyset pages and "around me".

Order: score descending, moves ascending, elapsed ms ascending, finish time, player id. Entries
equal on score, moves and elapsed time share a rank (1, 1, 3). Only ended daily games (won or
blocked) rank. Pages continue from an opaque keyset cursor, never an OFFSET.

Every read is a bounded index range, whatever the size of the board: a page or a window is one
row comparison on the board index ``ix_games_daily_board`` (ascending on ``-score``), and a rank
sums a few ranges of ``leaderboard_counts``, which triggers on ``games`` keep up to date (see
:func:`_rank_counts`). Each answer is one statement, hence one snapshot: rows and ranks always
agree. (Only when the ties at the top of an "around me" window reach above it is the window read
again with the top's counts, in one REPEATABLE READ transaction.) The statements are built once
and bound to each request's values.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Date,
    DateTime,
    Integer,
    ScalarSelect,
    and_,
    bindparam,
    func,
    literal_column,
    null,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import aliased

from server.errors import ErrorCode, InvalidInputError, NotFoundError
from server.storage.models import Game, LeaderboardCount, Player
from server.storage.sessions import Sessions

MAX_LIMIT = 100
MAX_RADIUS = 50
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


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
            raise InvalidInputError("the cursor is not valid", code=ErrorCode.BAD_CURSOR) from None


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


@dataclass(frozen=True, slots=True)
class _Key:
    """The parts of a position in the order as SQL expressions: statement parameters (a
    cursor) or the columns of the row being selected (its own rank)."""

    score: ColumnElement[Any]
    moves: ColumnElement[Any]
    elapsed_ms: ColumnElement[Any]
    second: ColumnElement[Any]
    finished_at: ColumnElement[Any]
    player_id: ColumnElement[Any]

    def position(self) -> ColumnElement[Any]:
        """This key as a row value in the order of the board index's columns, comparable with
        another key's (a cursor's with a row's own, :data:`_SELF`)."""
        return tuple_(-self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id)


_DATE = bindparam("date", type_=Date())
_LIMIT = bindparam("limit", type_=Integer())
_PLAYER = bindparam("player_id", type_=BigInteger())
_CURSOR = _Key(
    score=bindparam("k_score", type_=Integer()),
    moves=bindparam("k_moves", type_=Integer()),
    elapsed_ms=bindparam("k_elapsed_ms", type_=BigInteger()),
    second=bindparam("k_second", type_=BigInteger()),
    finished_at=bindparam("k_finished_at", type_=DateTime(timezone=True)),
    player_id=bindparam("k_player_id", type_=BigInteger()),
)
_SELF = _Key(
    score=Game.score.expression,
    moves=Game.moves.expression,
    elapsed_ms=Game.elapsed_ms.expression,
    second=(Game.elapsed_ms // 1000).expression,
    finished_at=Game.finished_at.expression,
    player_id=Game.player_id.expression,
)


def _key_values(key: BoardKey) -> dict[str, Any]:
    """The values of the :data:`_CURSOR` parameters for ``key``."""
    return {
        "k_score": key.score,
        "k_moves": key.moves,
        "k_elapsed_ms": key.elapsed_ms,
        "k_second": key.elapsed_ms // 1000,
        "k_finished_at": key.finished_at,
        "k_player_id": key.player_id,
    }


def _on_board(game: Any) -> ColumnElement[bool]:
    """``game``'s row is a ranked entry of the date being read.

    The mode and statuses are literals, not parameters: a plan made for any parameter values
    could not use the partial board index, whose WHERE is this very condition.
    """
    return and_(
        game.mode == literal_column("'daily'"),
        game.status.in_([literal_column("'won'"), literal_column("'blocked'")]),
        game.hidden_at.is_(None),  # a hidden result is on no board (docs/rules.md §4)
        game.daily_date == _DATE,
    )


def _counted(level: int, *where: ColumnElement[bool]) -> ScalarSelect[Any]:
    """The sum of the ``leaderboard_counts`` entries of the date at ``level`` matching
    ``where``."""
    return (
        select(func.coalesce(func.sum(LeaderboardCount.entries), 0))
        .where(LeaderboardCount.daily_date == _DATE, LeaderboardCount.level == level, *where)
        .scalar_subquery()
    )


def _rank_counts(key: _Key, *, up_to: bool) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """Two counts for the position ``key``: the entries ranked strictly better (the rank of an
    entry there, minus one), and its ties (same score, moves and elapsed ms) placed before it
    in the order — or, when ``up_to``, not after it.

    Better entries have a higher score, or the same score and fewer moves, or the same score
    and moves and a shorter elapsed time. Each is summed from a bounded range: level 0 of
    ``leaderboard_counts`` for higher scores, level 1 for the same score and fewer moves, level
    2 for the same score and moves and an earlier elapsed second, and the board index for the
    same score, moves and elapsed second but fewer ms. The ties come from the board index too.
    """
    counts = LeaderboardCount
    other = aliased(Game)
    same_moves = and_(_on_board(other), -other.score == -key.score, other.moves == key.moves)
    same_second_faster = (
        select(func.count())
        .where(
            same_moves,
            other.elapsed_ms >= key.second * 1000,
            other.elapsed_ms < key.elapsed_ms,
        )
        .scalar_subquery()
    )
    better = (
        _counted(0, counts.score > key.score)
        + _counted(1, counts.score == key.score, counts.moves < key.moves)
        + _counted(
            2, counts.score == key.score, counts.moves == key.moves, counts.elapsed_s < key.second
        )
        + same_second_faster
    )
    placed = tuple_(other.finished_at, other.player_id)
    earlier = tuple_(key.finished_at, key.player_id)
    ties = (
        select(func.count())
        .where(
            same_moves,
            other.elapsed_ms == key.elapsed_ms,
            placed <= earlier if up_to else placed < earlier,
        )
        .scalar_subquery()
    )
    return better.label("better"), ties.label("ties")


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
_ORDER = (
    (-Game.score).asc(),
    Game.moves.asc(),
    Game.elapsed_ms.asc(),
    Game.finished_at.asc(),
    Game.player_id.asc(),
)
_REVERSE = (
    (-Game.score).desc(),
    Game.moves.desc(),
    Game.elapsed_ms.desc(),
    Game.finished_at.desc(),
    Game.player_id.desc(),
)
_ENTRIES = select(*_COLUMNS).join(Player, Player.id == Game.player_id).where(_on_board(Game))

#: The first ``limit`` entries (the first ranks 1: no counts needed).
_FIRST_PAGE = _ENTRIES.order_by(*_ORDER).limit(_LIMIT)
#: The ``limit`` entries after the cursor, each with the cursor's counts (the entries ranked
#: better than it, and its ties up to it).
_NEXT_PAGE = (
    _ENTRIES.add_columns(*_rank_counts(_CURSOR, up_to=True))
    .where(_SELF.position() > _CURSOR.position())
    .order_by(*_ORDER)
    .limit(_LIMIT)
)
#: One player's entry with its counts (the entries ranked better, its ties before it).
_OWN = _ENTRIES.add_columns(*_rank_counts(_SELF, up_to=False)).where(Game.player_id == _PLAYER)


def _around() -> CompoundSelect[Any]:
    """One statement for a window around a player: the player's entry with its counts
    (``part`` 0), and up to ``limit`` entries above it (1) and below it (2)."""
    own = _OWN.cte("own")
    at_own = tuple_(-own.c.score, own.c.moves, own.c.elapsed_ms, own.c.finished_at, own.c.player_id)
    # LATERAL, so that the player's row drives the index scans (a plan scanning the board
    # from one end and filtering on the player's position would read half of it).
    nearer = _ENTRIES.where(_SELF.position() < at_own).order_by(*_REVERSE).limit(_LIMIT)
    farther = _ENTRIES.where(_SELF.position() > at_own).order_by(*_ORDER).limit(_LIMIT)
    above, below = nearer.lateral("above"), farther.lateral("below")

    def columns(source: Any) -> list[Any]:
        return [source.c[column.key] for column in _COLUMNS]

    return union_all(
        select(literal_column("0").label("part"), *columns(own), own.c.better, own.c.ties),
        select(literal_column("1"), *columns(above), null(), null()).select_from(
            own.join(above, true())
        ),
        select(literal_column("2"), *columns(below), null(), null()).select_from(
            own.join(below, true())
        ),
    )


_AROUND = _around()
#: The counts of the cursor (the entries ranked better, its ties before it).
_COUNTS = select(*_rank_counts(_CURSOR, up_to=False))


@dataclass(frozen=True, slots=True)
class _Window:
    """The rows of an "around me" window in board order, the number of entries before the
    first, and the first one's rank (None when its ties reach above the window)."""

    rows: list[Any]
    position: int
    rank: int | None

    @classmethod
    def read(cls, parts: Sequence[Any], radius: int) -> _Window | None:
        """Put together the rows of :data:`_AROUND` (read with ``limit = radius + 1``).

        Returns:
            The window, or None when the player has no entry.
        """
        own = next((row for row in parts if row.part == 0), None)
        if own is None:
            return None
        above = sorted((row for row in parts if row.part == 1), key=_order_key)
        below = sorted((row for row in parts if row.part == 2), key=_order_key)[:radius]
        # One entry more above than shown: when it does not tie with the top of the window,
        # the top is the first of its ties and its rank follows from its position.
        beyond = above.pop(0) if len(above) > radius else None
        rows = [*above, own, *below]
        position = int(own.better) + int(own.ties) - len(above)
        if _tie(rows[0], own):
            rank: int | None = int(own.better) + 1
        elif beyond is None or not _tie(beyond, rows[0]):
            rank = position + 1
        else:
            rank = None
        return cls(rows, position, rank)


class LeaderboardService:
    """Reads daily leaderboards.

    Args:
        sessions: database session factory.
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def page(self, date: dt.date, limit: int = 50, cursor: str | None = None) -> Page:
        """One page of a date's leaderboard.

        Args:
            date: the UTC date.
            limit: entries per page, 1..100.
            cursor: the ``next_cursor`` of the previous page, or None for the first page.

        Returns:
            Up to ``limit`` entries with their ranks, and the cursor of the next page (None
            when these are the last entries).

        Raises:
            InvalidInputError: ``bad_limit`` or ``bad_cursor``.
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInputError(f"limit must be 1..{MAX_LIMIT}", code=ErrorCode.BAD_LIMIT)
        key = BoardKey.decode(cursor) if cursor else None
        values = {"date": date, "limit": limit + 1}
        async with self._connection() as conn:
            if key is None:
                rows = (await conn.execute(_FIRST_PAGE, values)).all()
            else:
                rows = (await conn.execute(_NEXT_PAGE, values | _key_values(key))).all()
        more = len(rows) > limit
        rows = rows[:limit]
        if not rows:
            return Page([], None)
        if key is None:
            entries = _entries(rows, position=0, rank=1)
        else:
            # The first row follows every entry up to the cursor; it shares the cursor's rank
            # when it ties with the cursor's score, moves and elapsed time.
            first = rows[0]
            position = int(first.better) + int(first.ties)
            rank = int(first.better) + 1 if _tie(first, key) else position + 1
            entries = _entries(rows, position=position, rank=rank)
        return Page(entries, entries[-1].key.encode() if more else None)

    async def around(self, date: dt.date, player_id: int, radius: int = 5) -> list[Entry]:
        """The window of entries around one player's: ``radius`` above, the player, ``radius``
        below (fewer at the ends).

        Args:
            date: the UTC date.
            player_id: the player in the middle of the window.
            radius: entries on either side, 0..50.

        Returns:
            The entries of the window in board order, with their ranks.

        Raises:
            InvalidInputError: ``bad_radius``.
            NotFoundError: ``not_ranked`` when the player has no ranked entry on that date.
        """
        if not 0 <= radius <= MAX_RADIUS:
            raise InvalidInputError(f"radius must be 0..{MAX_RADIUS}", code=ErrorCode.BAD_RADIUS)
        values = {"date": date, "player_id": player_id, "limit": radius + 1}
        async with self._connection() as conn:
            window = _Window.read((await conn.execute(_AROUND, values)).all(), radius)
        if window is not None and window.rank is None:
            # Rare: the top's ties reach above the window. Read the window again and count
            # for its top, both from one snapshot.
            async with self._connection(snapshot=True) as conn:
                window = _Window.read((await conn.execute(_AROUND, values)).all(), radius)
                if window is not None and window.rank is None:
                    top = window.rows[0]
                    counts = await conn.execute(_COUNTS, {"date": date} | _key_values(_key(top)))
                    window = replace(window, rank=int(counts.one().better) + 1)
        if window is None:
            raise NotFoundError(
                f"player {player_id} has no ranked game on {date.isoformat()}",
                code=ErrorCode.NOT_RANKED,
            )
        assert window.rank is not None
        return _entries(window.rows, position=window.position, rank=window.rank)

    async def rank_of(self, date: dt.date, player_id: int) -> Entry | None:
        """One player's entry with its rank.

        Args:
            date: the UTC date.
            player_id: the player.

        Returns:
            The entry, or None when the player has no ranked game that date.
        """
        async with self._connection() as conn:
            own = (await conn.execute(_OWN, {"date": date, "player_id": player_id})).first()
        if own is None:
            return None
        position = int(own.better) + int(own.ties)
        return _entries([own], position=position, rank=int(own.better) + 1)[0]

    @asynccontextmanager
    async def _connection(self, *, snapshot: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection for one answer. An answer read by one statement reads one snapshot
        and needs no transaction (sparing its two round trips); with ``snapshot``, the
        statements run in one transaction reading one snapshot, so that they agree."""
        level = "REPEATABLE READ" if snapshot else "AUTOCOMMIT"
        async with self._sessions() as session:
            yield await session.connection(execution_options={"isolation_level": level})


def _key(row: Any) -> BoardKey:
    """The position of a selected row."""
    return BoardKey(row.score, row.moves, row.elapsed_ms, row.finished_at, row.player_id)


def _order_key(row: Any) -> tuple[int, int, int, dt.datetime, int]:
    """A selected row's place in the order, for sorting in Python."""
    return (-row.score, row.moves, row.elapsed_ms, row.finished_at, row.player_id)


def _tie(a: Any, b: Any) -> bool:
    """Whether two rows share a rank (equal score, moves and elapsed time)."""
    return bool((a.score, a.moves, a.elapsed_ms) == (b.score, b.moves, b.elapsed_ms))


def _entries(rows: Sequence[Any], *, position: int, rank: int) -> list[Entry]:
    """Entries for consecutive rows in board order.

    Args:
        rows: the rows, the first being preceded by ``position`` entries in the order.
        position: entries before the first row.
        rank: the first row's rank.

    Returns:
        The entries; a row tied with the previous one shares its rank, any other row is ranked
        by its position (docs/rules.md §4: 1, 1, 3).
    """
    entries: list[Entry] = []
    for i, row in enumerate(rows):
        if i == 0:
            row_rank = rank
        elif _tie(row, rows[i - 1]):
            row_rank = entries[-1].rank
        else:
            row_rank = position + i + 1
        entries.append(
            Entry(
                rank=row_rank,
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
