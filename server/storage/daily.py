"""The daily challenge's rows (table ``daily_challenges``: a date's deal, and the level it was
chosen for with its baselines), its counters (``daily_players``, ``leaderboard_counts``) and the
database's clock, which alone says which date it is.

:class:`DailyStore` is the contract :class:`server.services.daily.DailyService` depends on;
:class:`PostgresDailyStore` keeps it in PostgreSQL (an in-memory one for tests keeps it in
``tests/fakes/daily.py``, over a clock of its own standing in for the database's). Choosing a
date's deal, and what may be shown of it, are the service's rules.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert

from server.engine.actions import Status
from server.engine.codes import GameCode
from server.engine.difficulty import Level
from server.errors import StorageOutcomeUnknown, StorageUnavailable
from server.storage.models import DailyChallenge, DailyPlayers, LeaderboardCount
from server.storage.replicas import ReadRouter, RoutedStore
from server.storage.sessions import Sessions
from server.storage.today import today_sql


@dataclass(frozen=True, slots=True)
class DailyCounts:
    """What the database counts of one date's daily.

    Attributes:
        players: daily games started on the date, whatever became of them.
        ranked: the date's ranked entries (daily games won or blocked).
    """

    players: int
    ranked: int


@dataclass(frozen=True, slots=True)
class DailyDifficulty:
    """The level a date's deal was chosen for, and the baselines of the two players of the
    difficulty measure who see no face-down card (docs/rules.md §4 "Difficulty").

    Attributes:
        level: the deal's level.
        greedy_status: how the greedy game ended: won or blocked.
        greedy_score: its final score.
        random_playouts: the random playouts played (at least 1).
        random_wins: how many of them were won.
        random_median_score: their median final score (the lower median).
    """

    level: Level
    greedy_status: Status
    greedy_score: int
    random_playouts: int
    random_wins: int
    random_median_score: int


@dataclass(frozen=True, slots=True)
class DailyDeal:
    """A date's stored deal, with its difficulty: None for a date chosen without the solver,
    or before dates were chosen by level."""

    code: GameCode
    difficulty: DailyDifficulty | None = None


class DailyStore(Protocol):
    """Where daily deals are kept, and the clock that decides the date. Every method may raise
    :class:`~server.errors.StorageError` when the database fails (nothing is changed then)."""

    async def today(self) -> dt.date:
        """The current UTC date by the database's clock (the one authority on the daily
        boundary for every process)."""
        ...

    async def deal(self, date: dt.date) -> DailyDeal | None:
        """The deal stored for a UTC date with its difficulty, or None when it has none."""
        ...

    async def keep_deal(
        self,
        date: dt.date,
        code: GameCode,
        created_at: dt.datetime,
        difficulty: DailyDifficulty | None = None,
    ) -> DailyDeal:
        """Store ``code`` (with its difficulty) as the deal of ``date`` unless the date has one
        already (stored earlier, or by another process meanwhile): a date's deal never changes.

        Args:
            date: the UTC date.
            code: the deal chosen for it (its rule set is the day's).
            created_at: when it was chosen (aware, UTC).
            difficulty: its level and baselines, or None (chosen without the solver).

        Returns:
            The date's stored deal: ``code``, or the one stored first, each with its own
            difficulty.

        Raises:
            StorageError: the database failed — never ``StorageOutcomeUnknown``: whether a
                deal whose commit was not confirmed was stored changes nothing anyone asked
                for (the deal is read back, or chosen and kept again, on the next request).
        """
        ...

    async def counts(self, date: dt.date) -> DailyCounts:
        """The date's players and ranked entries (zero for a date nobody played)."""
        ...


_TODAY = select(today_sql(None).label("today"))
_DEAL_COLUMNS = (
    DailyChallenge.code,
    DailyChallenge.level,
    DailyChallenge.greedy_status,
    DailyChallenge.greedy_score,
    DailyChallenge.random_playouts,
    DailyChallenge.random_wins,
    DailyChallenge.random_median_score,
)


class PostgresDailyStore:
    """:class:`DailyStore` in PostgreSQL: deals in ``daily_challenges`` (the date is the
    primary key: the first deal stored for a date stays), counts from the counters that
    triggers on ``games`` keep (never a count of the date's games).

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def today(self) -> dt.date:
        """The database's current UTC date, ``(statement_timestamp() AT TIME ZONE 'UTC')::date``
        (one short query).

        Raises:
            StorageError: the database did not answer.
        """
        async with self._sessions() as session:
            today: dt.date = (await session.execute(_TODAY)).scalar_one()
        return today

    async def deal(self, date: dt.date) -> DailyDeal | None:
        """The deal stored for ``date`` (UTC) with its difficulty, or None.

        Raises:
            StorageError: the database failed.
        """
        statement = select(*_DEAL_COLUMNS).where(DailyChallenge.date == date)
        async with self._sessions() as session:
            row = (await session.execute(statement)).one_or_none()
        if row is None:
            return None
        difficulty = None
        if row.level is not None:
            difficulty = DailyDifficulty(
                level=Level(row.level),
                greedy_status=Status(row.greedy_status),
                greedy_score=row.greedy_score,
                random_playouts=row.random_playouts,
                random_wins=row.random_wins,
                random_median_score=row.random_median_score,
            )
        return DailyDeal(GameCode.parse(row.code), difficulty)

    async def keep_deal(
        self,
        date: dt.date,
        code: GameCode,
        created_at: dt.datetime,
        difficulty: DailyDifficulty | None = None,
    ) -> DailyDeal:
        """Insert the deal unless the date has one (``ON CONFLICT (date) DO NOTHING``, which
        waits for a concurrent insert of the date and yields to it), then read the date's deal.

        Args:
            date: the UTC date.
            code: the deal chosen for it.
            created_at: when it was chosen (aware, UTC).
            difficulty: its level and baselines, or None.

        Returns:
            The date's stored deal (``code`` or the one stored first) with its difficulty.

        Raises:
            StorageUnavailable: the deal's commit was not confirmed: it may have been stored,
                which changes nothing a caller asked for (the next request reads it back, or
                keeps a deal again); never ``StorageOutcomeUnknown``, which would tell a reader
                of the daily challenge that their request may have changed something.
            StorageError: the database failed.
        """
        figures: dict[str, object] = {}
        if difficulty is not None:
            figures = {
                "level": difficulty.level.value,
                "greedy_status": difficulty.greedy_status.value,
                "greedy_score": difficulty.greedy_score,
                "random_playouts": difficulty.random_playouts,
                "random_wins": difficulty.random_wins,
                "random_median_score": difficulty.random_median_score,
            }
        statement = (
            insert(DailyChallenge)
            .values(
                date=date,
                code=str(code),
                rules=code.rules.value,
                created_at=created_at,
                **figures,
            )
            .on_conflict_do_nothing(index_elements=[DailyChallenge.date])
        )
        async with self._sessions() as session:
            await session.execute(statement)
            try:
                await session.commit()
            except StorageOutcomeUnknown as exc:
                raise StorageUnavailable(f"a daily deal's commit is unconfirmed: {exc}") from exc
        stored = await self.deal(date)
        assert stored is not None  # a date's deal is never deleted
        return stored

    async def counts(self, date: dt.date) -> DailyCounts:
        """The date's players (``daily_players``) and ranked entries (level 0 of
        ``leaderboard_counts`` summed over the scores), read in one statement.

        Raises:
            StorageError: the database failed.
        """
        statement = select(
            select(DailyPlayers.players).where(DailyPlayers.daily_date == date).scalar_subquery(),
            select(func.sum(LeaderboardCount.entries))
            .where(LeaderboardCount.daily_date == date, LeaderboardCount.level == 0)
            .scalar_subquery(),
        )
        async with self._sessions() as session:
            players, ranked = (await session.execute(statement)).one()
        return DailyCounts(players=int(players or 0), ranked=int(ranked or 0))


class ReplicaDailyStore(PostgresDailyStore):
    """:class:`PostgresDailyStore` whose counts (a date's players and ranked entries: the
    daily's facts, today's and the archive's) are read on the database's replicas while they
    keep up (see :class:`~server.storage.replicas.ReadRouter`); the date and the deals stay
    on the primary (its clock decides the date; a deal is stored by its first reader).

    Args:
        router: the router between the primary and the replicas.
    """

    def __init__(self, router: ReadRouter) -> None:
        super().__init__(router.primary)
        self._stores = RoutedStore(router, PostgresDailyStore)

    async def counts(self, date: dt.date) -> DailyCounts:
        """See :meth:`PostgresDailyStore.counts`."""
        return await self._stores.read(lambda store: store.counts(date))


__all__ = [
    "DailyCounts",
    "DailyDeal",
    "DailyDifficulty",
    "DailyStore",
    "PostgresDailyStore",
    "ReplicaDailyStore",
]
