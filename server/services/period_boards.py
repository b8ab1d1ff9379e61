"""Weekly and monthly boards (docs/rules.md §4 "Weekly and monthly boards"): per ISO week and
per calendar month of the dailies' UTC dates, players ranked by the sum of their daily scores
in the period.

The results counted are those of the daily boards (ranked daily games, won or blocked, that no
moderator hid: a ban hides them, an unban restores them). Order: total descending, then days
with a result descending, then total elapsed time ascending, then player id; entries equal on
total, days and time share a rank (1, 1, 3). Pages continue from an opaque keyset cursor; the
window "around me", one player's rank and the friends' view are as on the daily board
(:mod:`server.services.leaderboards`), with its limits.
"""

from __future__ import annotations

import asyncio
import calendar
import datetime as dt
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from server.errors import ErrorCode, InvalidInputError
from server.services import cursors, keyset
from server.storage.follows import FollowStore
from server.storage.period_boards import (
    PeriodBoardStore,
    PeriodPosition,
    PeriodRow,
    PeriodSlice,
    period_tied,
)

PeriodKind = Literal["week", "month"]
_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})")
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")


@dataclass(frozen=True, slots=True)
class Period:
    """An ISO week (``kind`` ``"week"``, ``starts_on`` its Monday) or a calendar month
    (``"month"``, ``starts_on`` its first day) of UTC dates.

    >>> Period.parse("week", "2026-W49")
    Period(kind='week', starts_on=datetime.date(2026, 11, 30))
    >>> str(Period.of("month", dt.date(2026, 12, 6)))
    '2026-12'
    """

    kind: PeriodKind
    starts_on: dt.date

    @classmethod
    def of(cls, kind: PeriodKind, date: dt.date) -> Period:
        """The week or month holding ``date``."""
        if kind == "week":
            return cls(kind, date - dt.timedelta(days=date.isoweekday() - 1))
        return cls(kind, date.replace(day=1))

    @classmethod
    def parse(cls, kind: PeriodKind, text: str) -> Period:
        """Parse ``YYYY-Www`` (an ISO week, ``W01`` to ``W52`` or ``W53``) for a week,
        ``YYYY-MM`` for a month.

        Raises:
            InvalidInputError: ``bad_period``, naming the text and what was wrong with it.
        """
        shown = repr(text[:40])
        if kind == "week":
            match = _WEEK.fullmatch(text)
            if match is None:
                raise _bad(f"{shown} is not an ISO week (expected YYYY-Www, e.g. 2026-W49)")
            year, week = int(match[1]), int(match[2])
            if year < 1:
                raise _bad(f"{shown}: the year must be 0001 or later")
            weeks = dt.date(year, 12, 28).isocalendar().week  # 28 December is in the last
            if not 1 <= week <= weeks:
                raise _bad(f"{shown}: {year} has ISO weeks W01 to W{weeks}")
            return cls(kind, dt.date.fromisocalendar(year, week, 1))
        match = _MONTH.fullmatch(text)
        if match is None:
            raise _bad(f"{shown} is not a month (expected YYYY-MM, e.g. 2026-12)")
        year, month = int(match[1]), int(match[2])
        if year < 1:
            raise _bad(f"{shown}: the year must be 0001 or later")
        if not 1 <= month <= 12:
            raise _bad(f"{shown}: the month must be 01 to 12")
        return cls(kind, dt.date(year, month, 1))

    @property
    def ends_on(self) -> dt.date:
        """The period's last date (the last date there is, for the week of 9999-12-31)."""
        if self.kind == "week":
            left = dt.date.max - self.starts_on
            return self.starts_on + min(dt.timedelta(days=6), left)
        last = calendar.monthrange(self.starts_on.year, self.starts_on.month)[1]
        return self.starts_on.replace(day=last)

    def __str__(self) -> str:
        if self.kind == "week":
            year, week, _ = self.starts_on.isocalendar()
            return f"{year:04d}-W{week:02d}"
        return f"{self.starts_on.year:04d}-{self.starts_on.month:02d}"


def _bad(message: str) -> InvalidInputError:
    return InvalidInputError(message, code=ErrorCode.BAD_PERIOD)


@dataclass(frozen=True, slots=True)
class PeriodKey(PeriodPosition):
    """A position in a period board's order, and the cursor that names it."""

    def encode(self) -> str:
        """This key as an opaque URL-safe cursor."""
        return cursors.encode([self.total, self.days, self.elapsed_ms, self.player_id])

    @classmethod
    def decode(cls, cursor: str) -> PeriodKey:
        """Parse a cursor made by :meth:`encode`.

        Raises:
            InvalidInputError: ``bad_cursor``.
        """
        total, days, elapsed, player = cursors.decode_ints(
            cursor, (cursors.NAT64, cursors.NAT32, cursors.NAT64, cursors.NAT64)
        )
        return cls(total, days, elapsed, player)


@dataclass(frozen=True, slots=True)
class PeriodEntry(PeriodRow):
    """One row of a period board with its rank (1 and up; tied rows share the rank of the
    first of them)."""

    rank: int

    @property
    def key(self) -> PeriodKey:
        """This entry's position in the order."""
        return PeriodKey(self.total, self.days, self.elapsed_ms, self.player_id)


PeriodPage = keyset.Page


class PeriodBoardService:
    """Reads weekly and monthly boards.

    Args:
        store: where the boards are read.
        follows: whom each player follows (the friends' view).
    """

    def __init__(self, store: PeriodBoardStore, follows: FollowStore) -> None:
        self._store = store
        self._follows = follows

    async def page(
        self, period: Period, limit: int = 50, cursor: str | None = None
    ) -> keyset.Page[PeriodEntry]:
        """One page of a period's board.

        Args:
            period: the week or month.
            limit: entries per page, 1..100.
            cursor: the previous page's ``next_cursor``, or None for the first page.

        Raises:
            InvalidInputError: ``bad_limit`` or ``bad_cursor``.
            StorageError: the database failed.
        """
        keyset.check_limit(limit)
        key = PeriodKey.decode(cursor) if cursor else None
        board = await self._store.page(period.kind, period.starts_on, limit + 1, key)
        return keyset.page_of(_entries(board), limit)

    async def around(self, period: Period, player_id: int, radius: int = 5) -> list[PeriodEntry]:
        """The entries around one player's: ``radius`` above, theirs, ``radius`` below (fewer
        at the ends).

        Raises:
            InvalidInputError: ``bad_radius`` (not 0..50).
            NotFoundError: ``not_ranked`` when the player has no result in the period.
            StorageError: the database failed.
        """
        keyset.check_radius(radius)
        unranked = f"player {player_id} has no ranked daily result in {period.kind} {period}"
        window = keyset.window_found(
            await self._store.window(period.kind, period.starts_on, player_id, radius), unranked
        )
        return _entries(window)

    async def rank_of(self, period: Period, player_id: int) -> PeriodEntry | None:
        """One player's entry with its rank, or None without a result in the period.

        Raises:
            StorageError: the database failed.
        """
        found = await self.ranks_of(period, [player_id])
        return found[0] if found else None

    async def ranks_of(self, period: Period, player_ids: Collection[int]) -> list[PeriodEntry]:
        """Some players' entries, each with its rank on the whole board, in board order
        (players without a result in the period left out).

        Raises:
            StorageError: the database failed.
        """
        slices = await self._store.entries(period.kind, period.starts_on, player_ids)
        return [_entries(one)[0] for one in slices]

    async def standings(
        self, player_id: int, today: dt.date
    ) -> tuple[tuple[Period, PeriodEntry | None], tuple[Period, PeriodEntry | None]]:
        """The player's entries on the boards of the week and the month holding ``today``
        (each None without a result in it), read at once.

        Raises:
            StorageError: the database failed.
        """
        week, month = Period.of("week", today), Period.of("month", today)
        in_week, in_month = await asyncio.gather(
            self.rank_of(week, player_id), self.rank_of(month, player_id)
        )
        return (week, in_week), (month, in_month)

    async def friends(self, period: Period, me: int) -> list[PeriodEntry]:
        """The friends' view: the entries of ``me`` and of the players they follow, each with
        its rank on the whole board, in board order.

        Raises:
            StorageError: the database failed.
        """
        followed = await self._follows.following(me)
        return await self.ranks_of(period, [me, *(row.id for row in followed)])


def _entries(board: PeriodSlice) -> list[PeriodEntry]:
    """The slice's entries with their ranks: the first's is ``board.better + 1``; a row tied
    with the previous one shares its rank, any other row is ranked by its position."""
    ranks = keyset.ranks(board.rows, board.better, board.before, period_tied)
    return [
        PeriodEntry(row.player_id, row.name, row.total, row.days, row.elapsed_ms, rank)
        for row, rank in zip(board.rows, ranks, strict=True)
    ]


__all__ = [
    "Period",
    "PeriodBoardService",
    "PeriodEntry",
    "PeriodKey",
    "PeriodKind",
    "PeriodPage",
]
