"""Ratings of rated races (tables ``player_ratings`` and ``rating_changes``, docs/rules.md §4
"Ratings"): a player's rating per rule set, and one change row per racer of each rated race.

:class:`RatingStore` is the contract :class:`server.services.ratings.RatingService` depends
on; :class:`PostgresRatingStore` keeps it in PostgreSQL. The maths is the service's (the
OpenSkill library's); storage only reads and writes. A race's ratings are written in the
transaction that finishes it (:meth:`RatingStore.lock` and :meth:`RatingStore.save` take the
race service's :class:`~server.storage.transactions.Transaction`), so a race is rated exactly
once, and never without its results.

Times are aware UTC datetimes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert

from server.engine.codes import RuleSet
from server.storage.models import PlayerRating, Race, RatingChange
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of

#: Key (with the rule set's letter) of the transaction-level advisory lock a writer of a rule
#: set's ratings holds: the ladder's counts are then written by one transaction at a time.
LADDER_LOCK = 0x4C_41_44  # "LAD"


@dataclass(frozen=True, slots=True)
class RatingRow:
    """A ``player_ratings`` row: ``mu`` and ``sigma`` (OpenSkill's), rated ``races`` played
    and ``wins`` (first places, shared ones included), ``rated_at`` (UTC: when the last rated
    race ended, or when the row was made for a player's first one)."""

    player_id: int
    rules: RuleSet
    mu: float
    sigma: float
    races: int
    wins: int
    rated_at: dt.datetime


@dataclass(frozen=True, slots=True)
class RatingChangeRow:
    """A ``rating_changes`` row: a racer's ``rank`` (1 is first; equal results share one)
    among ``racers`` in rated race ``race_id``, their rating as the library took it
    (``mu_before``, ``sigma_before``) and as it gave it back (``mu_after``, ``sigma_after``),
    at ``rated_at`` (UTC); ``invite`` is the race's invite code where it was read with the
    race (a player's history), else None."""

    race_id: int
    player_id: int
    rules: RuleSet
    rank: int
    racers: int
    mu_before: float
    sigma_before: float
    mu_after: float
    sigma_after: float
    rated_at: dt.datetime
    invite: str | None = None


class RatingStore(Protocol):
    """Where ratings are kept. Every method may raise :class:`~server.errors.StorageError`
    when the database fails (nothing is changed then)."""

    async def lock(
        self,
        tx: Transaction,
        rules: RuleSet,
        player_ids: Sequence[int],
        start: tuple[float, float],
        at: dt.datetime,
    ) -> dict[int, RatingRow]:
        """The players' ratings under ``rules``, their rows locked until ``tx`` ends (in
        player id order, so two races' transactions never wait on each other in a cycle); a
        player without one gets a row with ``start`` (mu, sigma), no races, ``rated_at`` =
        ``at``."""
        ...

    async def save(
        self, tx: Transaction, ratings: Sequence[RatingRow], changes: Sequence[RatingChangeRow]
    ) -> None:
        """Write the new ratings (rows :meth:`lock` returned, changed) and the race's change
        rows in ``tx``.

        Raises (from the transaction's block):
            StorageConflict: ``pk_rating_changes``: the race was rated already.
        """
        ...

    async def ratings_of(self, player_id: int) -> list[RatingRow]:
        """The player's ratings, by rule set (``C`` before ``E``)."""
        ...

    async def history(self, player_id: int, rules: RuleSet, limit: int) -> list[RatingChangeRow]:
        """The player's last ``limit`` rating changes under ``rules``, the latest first."""
        ...

    async def race_changes(self, race_id: int) -> list[RatingChangeRow]:
        """A race's rating changes, by rank (then player id); empty for a race not rated."""
        ...


def _rating(row: PlayerRating) -> RatingRow:
    return RatingRow(
        row.player_id,
        RuleSet(row.rules),
        row.mu,
        row.sigma,
        row.races,
        row.wins,
        row.rated_at,
    )


def _change(row: RatingChange, invite: str | None = None) -> RatingChangeRow:
    return RatingChangeRow(
        row.race_id,
        row.player_id,
        RuleSet(row.rules),
        row.rank,
        row.racers,
        row.mu_before,
        row.sigma_before,
        row.mu_after,
        row.sigma_after,
        row.rated_at,
        invite,
    )


class PostgresRatingStore:
    """:class:`RatingStore` in PostgreSQL.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def lock(
        self,
        tx: Transaction,
        rules: RuleSet,
        player_ids: Sequence[int],
        start: tuple[float, float],
        at: dt.datetime,
    ) -> dict[int, RatingRow]:
        """See :meth:`RatingStore.lock` (the rule set's :data:`LADDER_LOCK`, then ``INSERT … ON
        CONFLICT DO NOTHING`` in id order, then ``SELECT … FOR UPDATE`` in id order)."""
        session = session_of(tx)
        ids = sorted(set(player_ids))
        if not ids:
            return {}
        # One writer of a rule set's ratings at a time: the ladder's count rows (migration
        # 0016) are then never locked in opposite orders by two transactions.
        await session.execute(select(func.pg_advisory_xact_lock(LADDER_LOCK, ord(rules.value))))
        mu, sigma = start
        await session.execute(
            insert(PlayerRating)
            .values(
                [
                    {
                        "player_id": player_id,
                        "rules": rules.value,
                        "mu": mu,
                        "sigma": sigma,
                        "races": 0,
                        "wins": 0,
                        "rated_at": at,
                    }
                    for player_id in ids
                ]
            )
            .on_conflict_do_nothing()
        )
        rows = await session.scalars(
            select(PlayerRating)
            .where(PlayerRating.rules == rules.value, PlayerRating.player_id.in_(ids))
            .order_by(PlayerRating.player_id)
            .with_for_update()
        )
        return {row.player_id: _rating(row) for row in rows}

    async def save(
        self, tx: Transaction, ratings: Sequence[RatingRow], changes: Sequence[RatingChangeRow]
    ) -> None:
        """See :meth:`RatingStore.save`."""
        session = session_of(tx)
        for rating in sorted(ratings, key=lambda r: r.player_id):
            row = await session.get(PlayerRating, (rating.player_id, rating.rules.value))
            assert row is not None, "save() takes rows lock() returned"
            row.mu, row.sigma = rating.mu, rating.sigma
            row.races, row.wins, row.rated_at = rating.races, rating.wins, rating.rated_at
        if changes:
            await session.execute(
                insert(RatingChange).values(
                    [
                        {
                            "race_id": c.race_id,
                            "player_id": c.player_id,
                            "rules": c.rules.value,
                            "rank": c.rank,
                            "racers": c.racers,
                            "mu_before": c.mu_before,
                            "sigma_before": c.sigma_before,
                            "mu_after": c.mu_after,
                            "sigma_after": c.sigma_after,
                            "rated_at": c.rated_at,
                        }
                        for c in changes
                    ]
                )
            )
        await session.flush()

    async def ratings_of(self, player_id: int) -> list[RatingRow]:
        """See :meth:`RatingStore.ratings_of`."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(PlayerRating)
                .where(PlayerRating.player_id == player_id)
                .order_by(PlayerRating.rules)
            )
            return [_rating(row) for row in rows]

    async def history(self, player_id: int, rules: RuleSet, limit: int) -> list[RatingChangeRow]:
        """See :meth:`RatingStore.history` (index ``ix_rating_changes_player_rules_rated_at``)."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(RatingChange, Race.invite)
                .join(Race, Race.id == RatingChange.race_id)
                .where(RatingChange.player_id == player_id, RatingChange.rules == rules.value)
                .order_by(RatingChange.rated_at.desc(), RatingChange.race_id.desc())
                .limit(limit)
            )
            return [_change(row, invite) for row, invite in rows]

    async def race_changes(self, race_id: int) -> list[RatingChangeRow]:
        """See :meth:`RatingStore.race_changes`."""
        async with self._sessions() as session:
            rows = await session.scalars(
                select(RatingChange)
                .where(RatingChange.race_id == race_id)
                .order_by(RatingChange.rank, RatingChange.player_id)
            )
            return [_change(row) for row in rows]


__all__ = ["LADDER_LOCK", "PostgresRatingStore", "RatingChangeRow", "RatingRow", "RatingStore"]
