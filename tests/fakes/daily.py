"""An in-memory :class:`~server.storage.daily.DailyStore`."""

from __future__ import annotations

import datetime as dt

from server.engine.codes import GameCode
from server.storage.daily import DailyCounts, DailyDeal, DailyDifficulty
from tests.fakes.database import DealRecord, MemoryDatabase


class MemoryDailyStore:
    """Daily deals kept in a :class:`MemoryDatabase`, whose clock is the database's: it alone
    says which UTC date it is. The first deal kept for a date stays; the counts are counted
    from the database's games that are not hidden (the counters PostgreSQL's triggers keep
    equal to them).

    Args:
        database: the in-memory tables and the database's clock.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def today(self) -> dt.date:
        await self._db.query()
        return self._db.now().date()

    async def deal(self, date: dt.date) -> DailyDeal | None:
        await self._db.query()
        stored = self._db.deals.get(date)
        return None if stored is None else DailyDeal(stored.code, stored.difficulty)

    async def keep_deal(
        self,
        date: dt.date,
        code: GameCode,
        created_at: dt.datetime,
        difficulty: DailyDifficulty | None = None,
    ) -> DailyDeal:
        await self._db.query()
        stored = self._db.deals.setdefault(date, DealRecord(code, created_at, difficulty))
        return DailyDeal(stored.code, stored.difficulty)

    async def counts(self, date: dt.date) -> DailyCounts:
        await self._db.query()
        games = [
            g
            for g in self._db.games.values()
            if g.mode == "daily" and g.daily_date == date and g.hidden_at is None
        ]
        ranked = [g for g in games if g.on_board]
        return DailyCounts(players=len(games), ranked=len(ranked))
