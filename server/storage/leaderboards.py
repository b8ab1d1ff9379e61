"""Daily leaderboards' reads: the board of a date in docs/rules.md §4 order, as pages, windows
and single entries, each with what ranks them.

Order: score descending, moves ascending, elapsed ms ascending, finish time, player id (see
:func:`order_key`); entries equal on score, moves and elapsed time tie (:func:`tied`). Only
ended daily games (won or blocked) are on a date's board. :class:`LeaderboardStore` is the
contract :class:`server.services.leaderboards.LeaderboardService` depends on (which turns
slices into ranks, cursors and pages); :class:`PostgresLeaderboardStore` keeps it in
PostgreSQL (an in-memory one for tests keeps it in ``tests/fakes/leaderboards.py``).

In PostgreSQL each answer is one statement of :mod:`server.storage.board_queries` (bounded
index ranges, whatever the size of the board), hence one snapshot: rows and ranks always
agree. (Only when the ties at the top of an "around me" window reach above it is the window
read again with the top's counts, in one REPEATABLE READ transaction.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from server.storage.board_queries import (
    AROUND,
    COUNTS,
    FIRST_PAGE,
    NEXT_PAGE,
    OWN,
    OWN_MANY,
    Placed,
    key_values,
)
from server.storage.replicas import ReadRouter, RoutedStore
from server.storage.sessions import Sessions

#: Largest player id (``players.id`` is a BIGINT); larger ids are on no board.
MAX_PLAYER_ID = 2**63 - 1


def order_key(entry: Placed) -> tuple[int, int, int, dt.datetime, int]:
    """An entry's place in the board order (smaller first): higher score, then fewer moves,
    less elapsed time, earlier finish, smaller player id."""
    return (-entry.score, entry.moves, entry.elapsed_ms, entry.finished_at, entry.player_id)


def tied(a: Placed, b: Placed) -> bool:
    """Whether two entries tie (equal score, moves and elapsed time): neither ranks better."""
    return (a.score, a.moves, a.elapsed_ms) == (b.score, b.moves, b.elapsed_ms)


@dataclass(frozen=True, slots=True)
class BoardPosition:
    """A place in the board order (which no entry need hold: a cursor's). ``elapsed_ms`` in
    milliseconds, ``finished_at`` aware UTC; score and moves within 0..2³¹−1, elapsed time and
    player id within 0..2⁶³−1 (the columns' ranges)."""

    score: int
    moves: int
    elapsed_ms: int
    finished_at: dt.datetime
    player_id: int


@dataclass(frozen=True, slots=True)
class BoardRow:
    """One entry of a board: a player's ended daily game of the date.

    Attributes:
        player_id: the player.
        name: the player's display name.
        score: the game's score.
        moves: its moves.
        undos: its undos (not part of the order).
        elapsed_ms: its playing time, milliseconds.
        status: ``"won"`` or ``"blocked"``.
        finished_at: when it ended (aware, UTC).
        game_id: the game's id.
    """

    player_id: int
    name: str
    score: int
    moves: int
    undos: int
    elapsed_ms: int
    status: str
    finished_at: dt.datetime
    game_id: int

    @property
    def position(self) -> BoardPosition:
        """This entry's place in the order."""
        return BoardPosition(
            self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id
        )


@dataclass(frozen=True, slots=True)
class BoardSlice:
    """Consecutive entries of a board, and where they stand in it.

    Attributes:
        rows: the entries, in board order.
        before: how many entries of the board come before ``rows[0]`` (0 when ``rows`` is
            empty).
        better: how many entries rank strictly better than ``rows[0]``: all of them come
            before it, and the other entries before it tie with it; its rank is
            ``better + 1`` (0 when ``rows`` is empty).
    """

    rows: tuple[BoardRow, ...]
    before: int
    better: int


class LeaderboardStore(Protocol):
    """Where the daily boards are read. Every method may raise
    :class:`~server.errors.StorageError` when the database fails."""

    async def page(self, date: dt.date, limit: int, after: BoardPosition | None) -> BoardSlice:
        """Up to ``limit`` (1 and up) entries of the date's board: the first ones, or the
        ones after the position ``after`` (which no entry need hold any more)."""
        ...

    async def window(self, date: dt.date, player_id: int, radius: int) -> BoardSlice | None:
        """The player's entry on the date's board with up to ``radius`` (0 and up) entries
        either side (fewer at the ends), or None when the player has no entry on it."""
        ...

    async def entry(self, date: dt.date, player_id: int) -> BoardSlice | None:
        """The player's entry on the date's board alone (``rows`` of one), or None when the
        player has none."""
        ...

    async def entries(
        self, date: dt.date, player_ids: Collection[int], *, own: int | None = None
    ) -> list[BoardSlice]:
        """The entries of these players (and of ``own``, the asking player, if given) on the
        date's board, each alone (``rows`` of one, with its counts on the whole board), in
        board order; players with none are left out."""
        ...


@dataclass(frozen=True, slots=True)
class _Window:
    """The rows of an "around me" window in board order, the number of entries before the
    first, and the first one's rank (None when its ties reach above the window)."""

    rows: list[Any]
    position: int
    rank: int | None

    @classmethod
    def read(cls, parts: Sequence[Any], radius: int) -> _Window | None:
        """Put together the rows of :data:`~server.storage.board_queries.AROUND` (read with
        ``limit = radius + 1``).

        Returns:
            The window, or None when the player has no entry.
        """
        own = next((row for row in parts if row.part == 0), None)
        if own is None:
            return None
        above = sorted((row for row in parts if row.part == 1), key=order_key)
        below = sorted((row for row in parts if row.part == 2), key=order_key)[:radius]
        # One entry more above than shown: when it does not tie with the top of the window,
        # the top is the first of its ties and its rank follows from its position.
        beyond = above.pop(0) if len(above) > radius else None
        rows = [*above, own, *below]
        position = int(own.better) + int(own.ties) - len(above)
        if tied(rows[0], own):
            rank: int | None = int(own.better) + 1
        elif beyond is None or not tied(beyond, rows[0]):
            rank = position + 1
        else:
            rank = None
        return cls(rows, position, rank)


class PostgresLeaderboardStore:
    """:class:`LeaderboardStore` over PostgreSQL's ``games`` (the board index) and
    ``leaderboard_counts`` (the ranks).

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def page(self, date: dt.date, limit: int, after: BoardPosition | None) -> BoardSlice:
        """Up to ``limit`` entries of the date's board in order: the first ones, or those
        after ``after``, with the counts of ``after`` (one statement, one snapshot).

        Args:
            date: the UTC date.
            limit: most entries returned, 1 and up.
            after: the position to continue from (a cursor; no entry need hold it any more),
                or None for the top of the board.

        Returns:
            The entries, how many come before the first, and how many of those rank better
            than it (both 0 when there is no entry).

        Raises:
            StorageError: the database failed.
        """
        values = {"date": date, "limit": limit}
        async with self._connection() as conn:
            if after is None:
                rows = (await conn.execute(FIRST_PAGE, values)).all()
            else:
                rows = (await conn.execute(NEXT_PAGE, values | key_values(after))).all()
        if not rows:
            return BoardSlice((), 0, 0)
        if after is None:
            return BoardSlice(_board_rows(rows), 0, 0)
        # The first row follows every entry up to ``after``; it ties with those tying with
        # ``after`` only if it ties with ``after`` itself.
        first = rows[0]
        before = int(first.better) + int(first.ties)
        better = int(first.better) if tied(first, after) else before
        return BoardSlice(_board_rows(rows), before, better)

    async def window(self, date: dt.date, player_id: int, radius: int) -> BoardSlice | None:
        """The player's entry with up to ``radius`` entries above and below it: one
        statement, or (when the ties at the window's top reach above it) the window and the
        top's counts read again in one REPEATABLE READ transaction.

        Args:
            date: the UTC date.
            player_id: the player in the middle.
            radius: entries on either side, 0 and up.

        Returns:
            The window, or None when the player has no entry on the board (also for ids
            outside 1..2⁶³−1).

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        values = {"date": date, "player_id": player_id, "limit": radius + 1}
        async with self._connection() as conn:
            window = _Window.read((await conn.execute(AROUND, values)).all(), radius)
        if window is not None and window.rank is None:
            # Rare: the top's ties reach above the window. Read the window again and count
            # for its top, both from one snapshot.
            async with self._connection(snapshot=True) as conn:
                window = _Window.read((await conn.execute(AROUND, values)).all(), radius)
                if window is not None and window.rank is None:
                    top = _board_row(window.rows[0]).position
                    counts = await conn.execute(COUNTS, {"date": date} | key_values(top))
                    window = _Window(window.rows, window.position, int(counts.one().better) + 1)
        if window is None:
            return None
        assert window.rank is not None
        return BoardSlice(_board_rows(window.rows), window.position, window.rank - 1)

    async def entry(self, date: dt.date, player_id: int) -> BoardSlice | None:
        """The player's entry with its counts (one statement).

        Args:
            date: the UTC date.
            player_id: the player.

        Returns:
            A slice of that one entry, or None when the player has none on the board (also
            for ids outside 1..2⁶³−1).

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        async with self._connection() as conn:
            own = (await conn.execute(OWN, {"date": date, "player_id": player_id})).first()
        if own is None:
            return None
        return BoardSlice(_board_rows([own]), int(own.better) + int(own.ties), int(own.better))

    async def entries(
        self, date: dt.date, player_ids: Collection[int], *, own: int | None = None
    ) -> list[BoardSlice]:
        """Some players' entries with their counts (one statement, one snapshot).

        Args:
            date: the UTC date.
            player_ids: the players (ids outside 1..2⁶³−1 name nobody).
            own: the asking player, one more of the players.

        Returns:
            A slice of one entry per player with one, in board order.

        Raises:
            StorageError: the database failed.
        """
        wanted = {*player_ids, *(() if own is None else (own,))}
        ids = sorted(i for i in wanted if 0 < i <= MAX_PLAYER_ID)
        if not ids:
            return []
        async with self._connection() as conn:
            rows = (await conn.execute(OWN_MANY, {"date": date, "player_ids": ids})).all()
        return [
            BoardSlice(_board_rows([row]), int(row.better) + int(row.ties), int(row.better))
            for row in rows
        ]

    @asynccontextmanager
    async def _connection(self, *, snapshot: bool = False) -> AsyncIterator[AsyncConnection]:
        """A connection for one answer. An answer read by one statement reads one snapshot
        and needs no transaction (sparing its two round trips); with ``snapshot``, the
        statements run in one transaction reading one snapshot, so that they agree."""
        level = "REPEATABLE READ" if snapshot else "AUTOCOMMIT"
        async with self._sessions() as session:
            yield await session.connection(execution_options={"isolation_level": level})


class ReplicaLeaderboardStore:
    """:class:`LeaderboardStore` read on the database's replicas while they keep up (see
    :class:`~server.storage.replicas.ReadRouter`), each answer from one database.

    Pages are as the replica has them. A player's window or entry, and the asking player's
    entry among others (``own``), are read on the primary when the replica has none: a player
    who has just finished sees their rank at once, whichever process stored the game. (An entry,
    once on a board, never changes: a daily game ranks once, when it ends.)

    Args:
        router: the router between the primary and the replicas.
    """

    def __init__(self, router: ReadRouter) -> None:
        self._stores = RoutedStore(router, PostgresLeaderboardStore)

    async def page(self, date: dt.date, limit: int, after: BoardPosition | None) -> BoardSlice:
        """See :meth:`PostgresLeaderboardStore.page`."""
        return await self._stores.read(lambda store: store.page(date, limit, after))

    async def window(self, date: dt.date, player_id: int, radius: int) -> BoardSlice | None:
        """See :meth:`PostgresLeaderboardStore.window`; read on the primary when a replica
        has no entry of the player."""
        return await self._stores.read(
            lambda store: store.window(date, player_id, radius), complete=_found
        )

    async def entry(self, date: dt.date, player_id: int) -> BoardSlice | None:
        """See :meth:`PostgresLeaderboardStore.entry`; read on the primary when a replica has
        no entry of the player."""
        return await self._stores.read(lambda store: store.entry(date, player_id), complete=_found)

    async def entries(
        self, date: dt.date, player_ids: Collection[int], *, own: int | None = None
    ) -> list[BoardSlice]:
        """See :meth:`PostgresLeaderboardStore.entries`; read on the primary when a replica
        has no entry of ``own``."""

        def complete(slices: list[BoardSlice]) -> bool:
            return own is None or any(one.rows[0].player_id == own for one in slices)

        return await self._stores.read(
            lambda store: store.entries(date, player_ids, own=own), complete=complete
        )


def _found(board: BoardSlice | None) -> bool:
    return board is not None


def _board_row(row: Any) -> BoardRow:
    """A selected row (of :data:`~server.storage.board_queries.COLUMNS`) as a :class:`BoardRow`."""
    return BoardRow(
        player_id=row.player_id,
        name=row.name,
        score=row.score,
        moves=row.moves,
        undos=row.undos,
        elapsed_ms=row.elapsed_ms,
        status=row.status,
        finished_at=row.finished_at,
        game_id=row.id,
    )


def _board_rows(rows: Sequence[Any]) -> tuple[BoardRow, ...]:
    return tuple(_board_row(row) for row in rows)


__all__ = [
    "MAX_PLAYER_ID",
    "BoardPosition",
    "BoardRow",
    "BoardSlice",
    "LeaderboardStore",
    "Placed",
    "PostgresLeaderboardStore",
    "ReplicaLeaderboardStore",
    "order_key",
    "tied",
]
