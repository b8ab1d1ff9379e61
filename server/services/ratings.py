"""The multiplayer rating of rated races (docs/rules.md §4 "Ratings").

A rating is OpenSkill's Weng–Lin Plackett–Luce model (the ``openskill`` library; the README
says why it rather than TrueSkill): ``mu`` (the skill's estimate) and ``sigma`` (its
uncertainty), per player and rule set, starting at the library's 25 and 25/3. A rated race
updates every racer at once from its results order (:func:`server.services.rooms.rank_results`;
equal results share a rank and are a tie for the library), exactly as the library's ``rate``
computes it. The rating shown is the library's ``ordinal`` (``mu - 3 sigma``) scaled to
:attr:`RatingRules.scale`; a player is provisional until :attr:`RatingRules.provisional_races`
rated races under the rule set.

Absence: the library adds its dynamics factor ``tau`` to each racer's sigma in quadrature at
every rated race (``sigma² + tau²``) so that a rating keeps moving; for time away we apply the
same factor once per whole day since the player's last rated race, before the race is rated
(``sigma² + days · tau²``, never above the starting sigma): the Glicko-style rating period the
library's documentation describes for ``tau``, with a day as the period.

Races on a host's deal are never rated (the database refuses such a race:
``ck_races_rated_random_deal``).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openskill.models import PlackettLuce

from server.engine.codes import RuleSet
from server.storage.ratings import RatingChangeRow, RatingRow, RatingStore
from server.storage.transactions import Transaction


@dataclass(frozen=True, slots=True)
class RatingRules:
    """How ratings are kept and shown.

    Attributes:
        provisional_races: rated races under a rule set before a rating is no longer
            provisional (shown with a "?").
        scale: the shown rating is ``ordinal × scale`` rounded (ordinal = mu − 3 sigma).
        history: rating changes a player's history shows.
    """

    provisional_races: int = 10
    scale: float = 40.0
    history: int = 100


@dataclass(frozen=True, slots=True)
class Rating:
    """A player's rating under a rule set, as shown.

    Attributes:
        rules: the rule set.
        mu / sigma: the library's estimate and its uncertainty.
        shown: the rating shown (:attr:`RatingRules.scale` × the ordinal, rounded).
        provisional: fewer rated races than :attr:`RatingRules.provisional_races`.
        races / wins: rated races played, and won (first places, shared ones included).
        rated_at: when the last rated race ended (UTC).
    """

    rules: RuleSet
    mu: float
    sigma: float
    shown: int
    provisional: bool
    races: int
    wins: int
    rated_at: dt.datetime


@dataclass(frozen=True, slots=True)
class RatingPoint:
    """One rated race in a player's history: the race, when it ended (UTC), the player's
    rank among ``racers``, and their shown rating before and after it (``change`` = after −
    before), and the race's invite code (its room and results)."""

    race_id: int
    rated_at: dt.datetime
    rank: int
    racers: int
    before: int
    after: int
    invite: str

    @property
    def change(self) -> int:
        """The shown rating's change in this race."""
        return self.after - self.before


class RatingModel:
    """The rating's maths (the library's model) and how a rating is shown: no storage.

    Args:
        rules: how ratings are kept and shown.
    """

    def __init__(self, rules: RatingRules | None = None) -> None:
        self.rules = rules or RatingRules()
        self.model = PlackettLuce()

    @property
    def start(self) -> tuple[float, float]:
        """A new player's (mu, sigma): the library's defaults."""
        return (self.model.mu, self.model.sigma)

    def returning_sigma(self, sigma: float, since: dt.datetime, now: dt.datetime) -> float:
        """``sigma`` after the absence from ``since`` to ``now`` (UTC): the library's ``tau``
        added in quadrature once per whole day, never above the starting sigma."""
        days = max(0, (now - since) // dt.timedelta(days=1))
        return min(self.model.sigma, math.sqrt(sigma**2 + days * self.model.tau**2))

    def shown(self, mu: float, sigma: float) -> int:
        """The rating shown for (mu, sigma): the library's ordinal, scaled and rounded."""
        return round(self.model.rating(mu=mu, sigma=sigma).ordinal() * self.rules.scale)

    def view(self, row: RatingRow) -> Rating:
        """A stored rating as shown."""
        return Rating(
            row.rules,
            row.mu,
            row.sigma,
            self.shown(row.mu, row.sigma),
            row.races < self.rules.provisional_races,
            row.races,
            row.wins,
            row.rated_at,
        )

    def rate(
        self,
        race_id: int,
        rules: RuleSet,
        ranks: Mapping[int, int],
        before: Mapping[int, RatingRow],
        at: dt.datetime,
    ) -> tuple[list[RatingRow], list[RatingChangeRow]]:
        """The racers' new ratings and the race's change rows.

        Args:
            race_id: the race.
            rules: its rule set.
            ranks: each racer's rank in the results (1 is first; equal ranks are ties).
            before: each racer's rating as stored (one per racer of ``ranks``).
            at: when the race ended (UTC).

        Returns:
            The new ratings and the change rows, in the order of ``ranks``.

        Raises:
            ValueError: a racer of ``ranks`` has no rating in ``before``, or fewer than two
                racers (a race of one rates nobody).
        """
        if len(ranks) < 2:
            raise ValueError(f"a rated race needs two racers or more, not {len(ranks)}")
        ids = list(ranks)
        missing = [i for i in ids if i not in before]
        if missing:
            raise ValueError(f"no stored rating for racers {missing}")
        taken = {
            i: (before[i].mu, self.returning_sigma(before[i].sigma, before[i].rated_at, at))
            for i in ids
        }
        teams = [[self.model.rating(mu=taken[i][0], sigma=taken[i][1])] for i in ids]
        rated = self.model.rate(teams, ranks=[float(ranks[i]) for i in ids])
        ratings: list[RatingRow] = []
        changes: list[RatingChangeRow] = []
        for i, (new,) in zip(ids, rated, strict=True):
            old = before[i]
            won = ranks[i] == 1
            ratings.append(
                RatingRow(i, rules, new.mu, new.sigma, old.races + 1, old.wins + won, at)
            )
            changes.append(
                RatingChangeRow(
                    race_id, i, rules, ranks[i], len(ids), *taken[i], new.mu, new.sigma, at
                )
            )
        return ratings, changes


class RatingService(RatingModel):
    """Rates finished races and reads ratings.

    Args:
        store: the ratings' queries.
        rules: how ratings are kept and shown.
    """

    def __init__(self, store: RatingStore, rules: RatingRules | None = None) -> None:
        super().__init__(rules)
        self._store = store

    async def rate_race(
        self,
        tx: Transaction,
        race_id: int,
        rules: RuleSet,
        results: Sequence[Mapping[str, Any]],
        at: dt.datetime,
    ) -> list[dict[str, Any]]:
        """Rate a finished race in ``tx`` (the transaction that stores its results) from its
        ranked results (``player_id``, ``rank`` and ``moves`` of each racer); a race of fewer
        than two racers, or one in which no racer made a move (nobody played: matched players
        who never took their seats), rates nobody.

        Returns:
            The results, each a new dict, with a ``rating`` member for every racer rated:
            ``{"before", "after", "change", "provisional"}``, their shown rating before the
            race (as the library took it, after the absence) and after it, ``change`` = after −
            before, and whether it is provisional after the race. Nobody rated: the results
            unchanged.

        Raises:
            StorageConflict: ``pk_rating_changes``: the race was rated already.
        """
        ranks = {int(r["player_id"]): int(r["rank"]) for r in results}
        if len(ranks) < 2 or not any(int(r["moves"]) for r in results):
            return [dict(r) for r in results]
        before = await self._store.lock(tx, rules, list(ranks), self.start, at)
        ratings, changes = self.rate(race_id, rules, ranks, before, at)
        await self._store.save(tx, ratings, changes)
        races = {rating.player_id: rating.races for rating in ratings}
        shown = {c.player_id: self.shown_change(c, races[c.player_id]) for c in changes}
        return [{**r, "rating": shown[int(r["player_id"])]} for r in results]

    def shown_change(self, change: RatingChangeRow, races: int) -> dict[str, Any]:
        """A racer's change in a rated race as a race's results show it: ``before`` and
        ``after`` (shown ratings), ``change`` (after − before) and ``provisional`` (after the
        race, having played ``races`` rated races)."""
        before = self.shown(change.mu_before, change.sigma_before)
        after = self.shown(change.mu_after, change.sigma_after)
        return {
            "before": before,
            "after": after,
            "change": after - before,
            "provisional": races < self.rules.provisional_races,
        }

    async def ratings_of(self, player_id: int) -> list[Rating]:
        """The player's ratings as shown, by rule set."""
        return [self.view(row) for row in await self._store.ratings_of(player_id)]

    async def history(self, player_id: int, rules: RuleSet) -> list[RatingChangeRow]:
        """The player's last :attr:`RatingRules.history` rating changes under ``rules``, the
        latest first."""
        return await self._store.history(player_id, rules, self.rules.history)

    async def with_history(self, player_id: int) -> list[tuple[Rating, list[RatingPoint]]]:
        """The player's ratings by rule set, each with its last :attr:`RatingRules.history`
        rated races, the latest first, as shown."""
        shown: list[tuple[Rating, list[RatingPoint]]] = []
        for rating in await self.ratings_of(player_id):
            points = [
                RatingPoint(
                    c.race_id,
                    c.rated_at,
                    c.rank,
                    c.racers,
                    self.shown(c.mu_before, c.sigma_before),
                    self.shown(c.mu_after, c.sigma_after),
                    c.invite or "",
                )
                for c in await self.history(player_id, rating.rules)
            ]
            shown.append((rating, points))
        return shown

    async def race_changes(self, race_id: int) -> list[RatingChangeRow]:
        """A race's rating changes by rank (empty for a race not rated)."""
        return await self._store.race_changes(race_id)


__all__ = ["Rating", "RatingModel", "RatingPoint", "RatingRules", "RatingService"]
