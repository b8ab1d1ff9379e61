"""Weekly and monthly boards' reads (docs/rules.md §4 "Weekly and monthly boards"): a period's
board in its order, as pages, windows and single entries, each with what ranks them.

A period is a ``kind`` (``"week"``: an ISO week, ``starts_on`` its Monday; ``"month"``:
``starts_on`` its first day). Its entries are the rows of ``period_totals`` with ``days > 0``,
which triggers on ``games`` keep (migration 0013). Order: total descending, days descending,
elapsed ms ascending, player id (:func:`period_order_key`); entries equal on total, days and
elapsed ms tie (:func:`period_tied`). A rank sums bounded ranges of ``period_counts`` and counts
within one elapsed second on the board index, as the daily board does
(:mod:`server.storage.board_queries`); a page is one range of ``ix_period_totals_board``, never
an OFFSET. Every answer is one statement, hence one snapshot: rows and ranks always agree.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Date,
    Integer,
    ScalarSelect,
    Text,
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

from server.storage.leaderboards import MAX_PLAYER_ID
from server.storage.models import PeriodCount, PeriodTotal, Player
from server.storage.rows import typed_rows
from server.storage.sessions import Sessions


class PeriodPlaced(Protocol):
    """Anything with a place in a period board's order: a position, a row."""

    @property
    def total(self) -> int: ...
    @property
    def days(self) -> int: ...
    @property
    def elapsed_ms(self) -> int: ...
    @property
    def player_id(self) -> int: ...


def period_order_key(entry: PeriodPlaced) -> tuple[int, int, int, int]:
    """An entry's place in the order (smaller first): higher total, then more days, less
    elapsed time, smaller player id."""
    return (-entry.total, -entry.days, entry.elapsed_ms, entry.player_id)


def period_tied(a: PeriodPlaced, b: PeriodPlaced) -> bool:
    """Whether two entries tie (equal total, days and elapsed ms): neither ranks better."""
    return (a.total, a.days, a.elapsed_ms) == (b.total, b.days, b.elapsed_ms)


@dataclass(frozen=True, slots=True)
class PeriodPosition:
    """A place in a period board's order (which no entry need hold: a cursor's). ``total``,
    ``elapsed_ms`` and ``player_id`` within 0..2⁶³−1, ``days`` within 0..2³¹−1 (the columns'
    ranges); ``elapsed_ms`` in milliseconds."""

    total: int
    days: int
    elapsed_ms: int
    player_id: int


@dataclass(frozen=True, slots=True)
class PeriodRow:
    """One entry of a period board.

    Attributes:
        player_id: the player.
        name: the player's display name.
        total: the sum of the scores of their ranked daily results in the period.
        days: how many of the period's dates they have a ranked result on (1 and up).
        elapsed_ms: the sum of those results' playing times, milliseconds.
    """

    player_id: int
    name: str
    total: int
    days: int
    elapsed_ms: int

    @property
    def position(self) -> PeriodPosition:
        """This entry's place in the order."""
        return PeriodPosition(self.total, self.days, self.elapsed_ms, self.player_id)


@dataclass(frozen=True, slots=True)
class PeriodSlice:
    """Consecutive entries of a period board and where they stand in it.

    Attributes:
        rows: the entries, in board order.
        before: how many entries come before ``rows[0]`` (0 when ``rows`` is empty).
        better: how many entries rank strictly better than ``rows[0]`` (its rank is
            ``better + 1``; 0 when ``rows`` is empty).
    """

    rows: tuple[PeriodRow, ...]
    before: int
    better: int


class PeriodBoardStore(Protocol):
    """Where the weekly and monthly boards are read. ``kind`` is ``"week"`` or ``"month"``,
    ``starts_on`` the period's first date (a Monday for a week). Every method may raise
    :class:`~server.errors.StorageError` when the database fails."""

    async def page(
        self, kind: str, starts_on: dt.date, limit: int, after: PeriodPosition | None
    ) -> PeriodSlice:
        """Up to ``limit`` (1 and up) entries: the first ones, or those after ``after``."""
        ...

    async def window(
        self, kind: str, starts_on: dt.date, player_id: int, radius: int
    ) -> PeriodSlice | None:
        """The player's entry with up to ``radius`` (0 and up) entries either side, or None
        when the player has no entry."""
        ...

    async def entries(
        self, kind: str, starts_on: dt.date, player_ids: Collection[int]
    ) -> list[PeriodSlice]:
        """These players' entries, each alone with its counts on the whole board, in board
        order; players with none are left out."""
        ...


# ----------------------------------------------------------------------------- statements

_KIND = bindparam("kind", type_=Text())
_STARTS = bindparam("starts_on", type_=Date())
_LIMIT = bindparam("limit", type_=Integer())
_PLAYER = bindparam("player_id", type_=BigInteger())


@dataclass(frozen=True, slots=True)
class _Key:
    """A position as SQL expressions: a cursor's parameters, or a selected row's columns."""

    total: ColumnElement[Any]
    days: ColumnElement[Any]
    elapsed_ms: ColumnElement[Any]
    second: ColumnElement[Any]
    player_id: ColumnElement[Any]

    def position(self) -> ColumnElement[Any]:
        """The key as a row value in the board index's column order."""
        return tuple_(-self.total, -self.days, self.elapsed_ms, self.player_id)


_CURSOR = _Key(
    total=bindparam("k_total", type_=BigInteger()),
    days=bindparam("k_days", type_=Integer()),
    elapsed_ms=bindparam("k_elapsed_ms", type_=BigInteger()),
    second=bindparam("k_second", type_=BigInteger()),
    player_id=bindparam("k_player_id", type_=BigInteger()),
)
_SELF = _Key(
    total=PeriodTotal.total.expression,
    days=PeriodTotal.days.expression,
    elapsed_ms=PeriodTotal.elapsed_ms.expression,
    second=(PeriodTotal.elapsed_ms // 1000).expression,
    player_id=PeriodTotal.player_id.expression,
)


def position_values(key: PeriodPlaced) -> dict[str, Any]:
    """The values of the cursor parameters for ``key``."""
    return {
        "k_total": key.total,
        "k_days": key.days,
        "k_elapsed_ms": key.elapsed_ms,
        "k_second": key.elapsed_ms // 1000,
        "k_player_id": key.player_id,
    }


def _on_board(row: Any) -> ColumnElement[bool]:
    """``row`` is an entry of the period being read. ``days > 0`` is a literal: a plan made
    for any parameter could not use the partial board index, whose WHERE it is."""
    return and_(row.kind == _KIND, row.starts_on == _STARTS, row.days > literal_column("0"))


def _counted(level: int, *where: ColumnElement[bool]) -> ScalarSelect[Any]:
    """The sum of the period's ``period_counts`` entries at ``level`` matching ``where``."""
    counts = PeriodCount
    return (
        select(func.coalesce(func.sum(counts.entries), 0))
        .where(counts.kind == _KIND, counts.starts_on == _STARTS, counts.level == level, *where)
        .scalar_subquery()
    )


def _rank_counts(key: _Key, *, up_to: bool) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """The entries ranked strictly better than the position ``key`` (a higher total, or the
    same and more days, or the same total and days and less time: three ``period_counts``
    ranges and one count within the elapsed second on the board index), and its ties before
    it (or, when ``up_to``, not after it)."""
    counts = PeriodCount
    other = aliased(PeriodTotal)
    same_days = and_(_on_board(other), -other.total == -key.total, -other.days == -key.days)
    same_second_faster = (
        select(func.count())
        .where(same_days, other.elapsed_ms >= key.second * 1000, other.elapsed_ms < key.elapsed_ms)
        .scalar_subquery()
    )
    better = (
        _counted(0, counts.total > key.total)
        + _counted(1, counts.total == key.total, counts.days > key.days)
        + _counted(
            2, counts.total == key.total, counts.days == key.days, counts.elapsed_s < key.second
        )
        + same_second_faster
    )
    ties = (
        select(func.count())
        .where(
            same_days,
            other.elapsed_ms == key.elapsed_ms,
            other.player_id <= key.player_id if up_to else other.player_id < key.player_id,
        )
        .scalar_subquery()
    )
    return better.label("better"), ties.label("ties")


_COLUMNS = (
    PeriodTotal.player_id,
    Player.name,
    PeriodTotal.total,
    PeriodTotal.days,
    PeriodTotal.elapsed_ms,
)
_ORDER = (
    (-PeriodTotal.total).asc(),
    (-PeriodTotal.days).asc(),
    PeriodTotal.elapsed_ms.asc(),
    PeriodTotal.player_id.asc(),
)
_REVERSE = tuple(column.element.desc() for column in _ORDER)
_ENTRIES = (
    select(*_COLUMNS).join(Player, Player.id == PeriodTotal.player_id).where(_on_board(PeriodTotal))
)

#: The first ``limit`` entries.
FIRST_PAGE = _ENTRIES.order_by(*_ORDER).limit(_LIMIT)
#: The ``limit`` entries after the cursor, each with the cursor's counts.
NEXT_PAGE = (
    _ENTRIES.add_columns(*_rank_counts(_CURSOR, up_to=True))
    .where(_SELF.position() > _CURSOR.position())
    .order_by(*_ORDER)
    .limit(_LIMIT)
)
#: Some players' entries (``player_ids``), each with its counts, in board order.
OWN_MANY = (
    _ENTRIES.add_columns(*_rank_counts(_SELF, up_to=False))
    .where(PeriodTotal.player_id.in_(bindparam("player_ids", expanding=True)))
    .order_by(*_ORDER)
)
#: One player's entry with its counts.
OWN = _ENTRIES.add_columns(*_rank_counts(_SELF, up_to=False)).where(
    PeriodTotal.player_id == _PLAYER
)


def _around() -> CompoundSelect[Any]:
    """One statement for a window around a player: their entry with its counts (``part``
    0), up to ``limit`` entries above it (1) and below it (2), and the counts of the farthest
    entry above it, the window's first (3: the columns null but ``better``)."""
    own = OWN.cte("own")
    at_own = tuple_(-own.c.total, -own.c.days, own.c.elapsed_ms, own.c.player_id)
    # LATERAL, so that the player's row drives the index scans.
    nearer = _ENTRIES.where(_SELF.position() < at_own).order_by(*_REVERSE).limit(_LIMIT)
    farther = _ENTRIES.where(_SELF.position() > at_own).order_by(*_ORDER).limit(_LIMIT)
    nearest = nearer.lateral("nearer")
    above = select(*nearest.c).select_from(own.join(nearest, true())).cte("above")
    below = farther.lateral("below")
    first = (
        select(above)
        .order_by(-above.c.total, -above.c.days, above.c.elapsed_ms, above.c.player_id)
        .limit(1)
        .subquery("first")
    )
    top = _Key(
        total=first.c.total,
        days=first.c.days,
        elapsed_ms=first.c.elapsed_ms,
        second=first.c.elapsed_ms // 1000,
        player_id=first.c.player_id,
    )
    better, _ = _rank_counts(top, up_to=False)

    def columns(source: Any) -> list[Any]:
        return [source.c[column.key] for column in _COLUMNS]

    blank = [null()] * len(_COLUMNS)
    return union_all(
        select(literal_column("0").label("part"), *columns(own), own.c.better, own.c.ties),
        select(literal_column("1"), *columns(above), null(), null()),
        select(literal_column("2"), *columns(below), null(), null()).select_from(
            own.join(below, true())
        ),
        select(literal_column("3"), *blank, better, null()).select_from(first),
    )


#: The entries around a player (``player_id``, ``limit`` either side) and the counts of the
#: player's entry and of the window's first (see :func:`_around`).
AROUND = _around()


# ---------------------------------------------------------------------------------- store


class PostgresPeriodBoardStore:
    """:class:`PeriodBoardStore` over ``period_totals`` and ``period_counts``.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def page(
        self, kind: str, starts_on: dt.date, limit: int, after: PeriodPosition | None
    ) -> PeriodSlice:
        """Up to ``limit`` entries in order, the first ones or those after ``after`` with the
        counts of ``after`` (one statement).

        Raises:
            StorageError: the database failed.
        """
        values = {"kind": kind, "starts_on": starts_on, "limit": limit}
        async with self._connection() as conn:
            if after is None:
                rows = (await conn.execute(FIRST_PAGE, values)).all()
            else:
                rows = (await conn.execute(NEXT_PAGE, values | position_values(after))).all()
        if not rows:
            return PeriodSlice((), 0, 0)
        if after is None:
            return PeriodSlice(typed_rows(PeriodRow, rows), 0, 0)
        first = rows[0]
        before = int(first.better) + int(first.ties)
        better = int(first.better) if period_tied(first, after) else before
        return PeriodSlice(typed_rows(PeriodRow, rows), before, better)

    async def window(
        self, kind: str, starts_on: dt.date, player_id: int, radius: int
    ) -> PeriodSlice | None:
        """The player's entry with up to ``radius`` entries either side, with the counts of
        theirs and of the window's first (one statement, one snapshot).

        Returns:
            The window, or None when the player has no entry (also for ids outside
            1..2⁶³−1).

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        values = {"kind": kind, "starts_on": starts_on, "limit": radius, "player_id": player_id}
        async with self._connection() as conn:
            parts = (await conn.execute(AROUND, values)).all()
        own = next((row for row in parts if row.part == 0), None)
        if own is None:
            return None
        above = sorted((row for row in parts if row.part == 1), key=period_order_key)
        below = sorted((row for row in parts if row.part == 2), key=period_order_key)
        first = next((row for row in parts if row.part == 3), None)
        before = int(own.better) + int(own.ties) - len(above)
        better = int(own.better) if first is None or period_tied(above[0], own) else first.better
        return PeriodSlice(typed_rows(PeriodRow, [*above, own, *below]), before, int(better))

    async def entries(
        self, kind: str, starts_on: dt.date, player_ids: Collection[int]
    ) -> list[PeriodSlice]:
        """Some players' entries with their counts (one statement).

        Raises:
            StorageError: the database failed.
        """
        ids = sorted({i for i in player_ids if 0 < i <= MAX_PLAYER_ID})
        if not ids:
            return []
        values = {"kind": kind, "starts_on": starts_on, "player_ids": ids}
        async with self._connection() as conn:
            rows = (await conn.execute(OWN_MANY, values)).all()
        return [
            PeriodSlice(
                typed_rows(PeriodRow, [row]), int(row.better) + int(row.ties), int(row.better)
            )
            for row in rows
        ]

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one answer, read by one statement (one snapshot) outside any
        transaction (sparing its two round trips)."""
        async with self._sessions() as session:
            yield await session.connection(execution_options={"isolation_level": "AUTOCOMMIT"})


__all__ = [
    "PeriodBoardStore",
    "PeriodPlaced",
    "PeriodPosition",
    "PeriodRow",
    "PeriodSlice",
    "PostgresPeriodBoardStore",
    "period_order_key",
    "period_tied",
    "position_values",
]
