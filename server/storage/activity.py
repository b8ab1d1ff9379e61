"""What the database shows of the whole service, for the metrics scrapes (``GET /metrics``,
:mod:`server.web.scrape`): race rooms by state, and today's daily (the database's UTC date,
:mod:`server.storage.today`) players and ranked entries. One short query over the counters the
database keeps and the races of two partial indexes, bounded in the database itself
(``statement_timeout``); the scrape bounds its wait too.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.models import DailyPlayers, LeaderboardCount, Race
from server.storage.today import today_sql


@dataclass(frozen=True, slots=True)
class Activity:
    """What the database shows at one moment: race rooms by state, and today's daily (the
    database's UTC date) players and ranked entries."""

    rooms_lobby: int
    rooms_running: int
    daily_players: int
    daily_ranked: int


async def read_activity(
    engine: AsyncEngine, pinned_today: dt.date | None, *, statement_timeout_ms: int
) -> Activity:
    """The figures now, in one statement on a connection of its own.

    Args:
        engine: the application's engine.
        pinned_today: the date a simulated clock says it is (None: the database's clock).
        statement_timeout_ms: the statement's limit in the database.

    Raises:
        Exception: what the engine raises when the database fails or the statement times out;
            cancelled mid-statement, the connection is discarded (its state is unknown).
    """
    today = today_sql(pinned_today)
    query = select(
        select(func.count()).select_from(Race).where(Race.status == "lobby").scalar_subquery(),
        select(func.count()).select_from(Race).where(Race.status == "running").scalar_subquery(),
        select(DailyPlayers.players).where(DailyPlayers.daily_date == today).scalar_subquery(),
        select(func.sum(LeaderboardCount.entries))
        .where(LeaderboardCount.daily_date == today, LeaderboardCount.level == 0)
        .scalar_subquery(),
    )
    async with engine.connect() as conn:
        try:
            await conn.execute(text(f"SET LOCAL statement_timeout = {statement_timeout_ms}"))
            row = (await conn.execute(query)).one()
        except asyncio.CancelledError:
            await conn.invalidate()  # cut off mid-statement: its state is unknown
            raise
    lobby, running, players, ranked = row
    return Activity(int(lobby), int(running), int(players or 0), int(ranked or 0))


__all__ = ["Activity", "read_activity"]
