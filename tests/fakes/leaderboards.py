"""An in-memory :class:`~server.storage.leaderboards.LeaderboardStore`: the board sorted in
Python and every count counted, with none of the SQL store's shortcuts (keyset ranges, the
``leaderboard_counts`` sums, the "around me" recount), so that the two agree only by both
being right."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from server.storage.leaderboards import BoardPosition, BoardRow, BoardSlice, Placed, order_key
from tests.fakes.database import MemoryDatabase


class MemoryLeaderboardStore:
    """The daily boards of a :class:`MemoryDatabase`'s games.

    Args:
        database: the in-memory tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def page(self, date: dt.date, limit: int, after: BoardPosition | None) -> BoardSlice:
        await self._db.query()
        board = daily_board(self._db, date)
        start = 0 if after is None else sum(order_key(e) <= order_key(after) for e in board)
        return _slice(board, start, start + limit)

    async def window(self, date: dt.date, player_id: int, radius: int) -> BoardSlice | None:
        await self._db.query()
        board = daily_board(self._db, date)
        at = next((i for i, e in enumerate(board) if e.player_id == player_id), None)
        if at is None:
            return None
        return _slice(board, max(0, at - radius), at + radius + 1)

    async def entry(self, date: dt.date, player_id: int) -> BoardSlice | None:
        return await self.window(date, player_id, 0)

    async def entries(
        self, date: dt.date, player_ids: Collection[int], *, own: int | None = None
    ) -> list[BoardSlice]:
        await self._db.query()
        board = daily_board(self._db, date)
        wanted = {*player_ids, *(() if own is None else (own,))}
        return [_slice(board, i, i + 1) for i, e in enumerate(board) if e.player_id in wanted]


def daily_board(database: MemoryDatabase, date: dt.date) -> list[BoardRow]:
    """The date's ranked daily games that are not hidden, in board order (the in-memory
    tables' board: the leaderboard fake's and the profile fake's)."""
    players = database.players
    rows = [
        BoardRow(
            player_id=g.player_id,
            name=players[g.player_id].name,
            score=g.score,
            moves=g.moves,
            undos=g.undos,
            elapsed_ms=g.elapsed_ms,
            status=g.status,
            finished_at=g.finished_at,
            game_id=g.id,
        )
        for g in database.games.values()
        if g.on_board
        and g.daily_date == date
        and g.elapsed_ms is not None
        and g.finished_at is not None
    ]
    return sorted(rows, key=order_key)


def ranked_better(board: list[BoardRow], entry: Placed) -> int:
    """How many entries of ``board`` rank strictly better than ``entry`` (counted: a higher
    score, or the same and fewer moves, or the same score and moves and less time): its rank
    there, minus one."""
    key = (-entry.score, entry.moves, entry.elapsed_ms)
    return sum((-e.score, e.moves, e.elapsed_ms) < key for e in board)


def _slice(board: list[BoardRow], start: int, stop: int) -> BoardSlice:
    """``board[start:stop]`` with the entries before it and those ranked better than its
    first (counted: a higher score, or the same and fewer moves, or the same score and moves
    and less time)."""
    rows = tuple(board[start:stop])
    if not rows:
        return BoardSlice((), 0, 0)
    return BoardSlice(rows, start, ranked_better(board, rows[0]))
