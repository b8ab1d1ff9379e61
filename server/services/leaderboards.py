"""Daily leaderboards: docs/rules.md §4 order, shared ranks, keyset pages and "around me".

Order: score descending, moves ascending, elapsed ms ascending, finish time, player id. Entries
equal on score, moves and elapsed time share a rank (1, 1, 3). Only ended daily games (won or
blocked) rank. Pages continue from an opaque keyset cursor, never an OFFSET.

The store (:class:`~server.storage.leaderboards.LeaderboardStore`) reads slices of a board in
that order, each with how many entries come before it and how many rank better than its first;
this service checks the requests, ranks the slices' entries and makes and reads the cursors.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from server.services import cursors, keyset
from server.storage.leaderboards import (
    BoardPosition,
    BoardRow,
    BoardSlice,
    LeaderboardStore,
    tied,
)

MAX_LIMIT = keyset.MAX_LIMIT
MAX_RADIUS = keyset.MAX_RADIUS


@dataclass(frozen=True, slots=True)
class BoardKey(BoardPosition):
    """A position in the total order: the sort key of one entry (finished_at is UTC), and the
    cursor that names it."""

    def encode(self) -> str:
        """This key as an opaque URL-safe cursor."""
        return cursors.encode(
            [self.score, self.moves, self.elapsed_ms, self.finished_at.isoformat(), self.player_id]
        )

    @classmethod
    def decode(cls, cursor: str) -> BoardKey:
        """Parse a cursor made by :meth:`encode`.

        Raises:
            InvalidInputError: ``bad_cursor``.
        """
        # The columns' ranges: INTEGER score/moves, BIGINT elapsed/player id.
        s, m, e, f, p = cursors.decode(
            cursor,
            (cursors.NAT32, cursors.NAT32, cursors.NAT64, cursors.TEXT, cursors.NAT64),
        )
        try:
            finished = dt.datetime.fromisoformat(str(f))
            if finished.tzinfo is None:
                raise ValueError("naive time")
            finished = finished.astimezone(dt.UTC)  # OverflowError near datetime's ends
        except (ValueError, OverflowError):
            raise cursors.bad_cursor() from None
        return cls(int(s), int(m), int(e), finished, int(p))


@dataclass(frozen=True, slots=True)
class Entry(BoardRow):
    """One leaderboard row: a board's row (:class:`~server.storage.leaderboards.BoardRow`)
    with its rank (1 and up; tied rows share the rank of the first of them)."""

    rank: int

    @property
    def key(self) -> BoardKey:
        """This entry's position in the order."""
        return BoardKey(self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id)


Page = keyset.Page


class LeaderboardService:
    """Reads daily leaderboards.

    Args:
        store: where the boards are read (PostgreSQL, or an in-memory store in tests).
    """

    def __init__(self, store: LeaderboardStore) -> None:
        self._store = store

    async def page(
        self, date: dt.date, limit: int = 50, cursor: str | None = None
    ) -> keyset.Page[Entry]:
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
            StorageError: the database failed.
        """
        keyset.check_limit(limit)
        key = BoardKey.decode(cursor) if cursor else None
        # One entry more than asked for tells whether a next page exists.
        board = await self._store.page(date, limit + 1, key)
        return keyset.page_of(_entries(board), limit)

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
            StorageError: the database failed.
        """
        keyset.check_radius(radius)
        unranked = f"player {player_id} has no ranked game on {date.isoformat()}"
        window = keyset.window_found(await self._store.window(date, player_id, radius), unranked)
        return _entries(window)

    async def rank_of(self, date: dt.date, player_id: int) -> Entry | None:
        """One player's entry with its rank.

        Args:
            date: the UTC date.
            player_id: the player.

        Returns:
            The entry, or None when the player has no ranked game that date.

        Raises:
            StorageError: the database failed.
        """
        own = await self._store.entry(date, player_id)
        return None if own is None else _entries(own)[0]

    async def ranks_of(
        self, date: dt.date, player_ids: Collection[int], *, own: int | None = None
    ) -> list[Entry]:
        """Some players' entries, each with its rank on the whole board (the same as on its
        pages), in board order.

        Args:
            date: the UTC date.
            player_ids: the players; those with no ranked game that date are left out.
            own: the asking player, one more of the players, whose entry is read where their
                own latest write is seen (a replica that lacks it is not believed).

        Raises:
            StorageError: the database failed.
        """
        slices = await self._store.entries(date, player_ids, own=own)
        return [_entries(one)[0] for one in slices]


def _entries(board: BoardSlice) -> list[Entry]:
    """The slice's entries with their ranks: the first's is ``board.better + 1``; a row tied
    with the previous one shares its rank, any other row is ranked by its position
    (docs/rules.md §4: 1, 1, 3)."""
    rows: Sequence[BoardRow] = board.rows
    ranks = keyset.ranks(rows, board.better, board.before, tied)
    return [
        Entry(
            player_id=row.player_id,
            name=row.name,
            score=row.score,
            moves=row.moves,
            undos=row.undos,
            elapsed_ms=row.elapsed_ms,
            status=row.status,
            finished_at=row.finished_at,
            game_id=row.game_id,
            rank=rank,
        )
        for row, rank in zip(rows, ranks, strict=True)
    ]
