"""Player profiles: a player's daily history, streaks and figures, and their races
(docs/rules.md §4 "Profiles", streaks in §4 "Daily challenge").

Every figure is worked out at read time from the stored games that one read of the store
returns (:class:`~server.storage.profiles.ProfileStore`): no counter is kept that could drift
from the games. :func:`streaks` holds the streak rule, with no I/O.

What a profile shows is public: results, scores, ranks and shares of par, never a deal's code
nor a card (the daily's par is public while its date is open; a race still running shows in no
figure).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from server.engine.actions import Status
from server.engine.codes import GameCode
from server.errors import ErrorCode, NotFoundError
from server.services.analysis import Analyzer
from server.services.daily import DailyService
from server.storage.profiles import DailyResult, ProfileStore

#: The statuses of a daily game that rank on its date's board (docs/rules.md §4 "Leaderboard").
RANKED = frozenset({Status.WON, Status.BLOCKED})
#: The statuses of a daily game that is over.
ENDED = frozenset({Status.WON, Status.BLOCKED, Status.RESIGNED})
_DAY = dt.timedelta(days=1)
#: Seconds a profile read waits for the solver's pars of dates not yet solved.
PAR_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Streaks:
    """A player's daily streaks, in UTC dates (docs/rules.md §4 "Daily challenge").

    Attributes:
        current: the run of consecutive ranked dates ending today, or yesterday while today
            has no ranked result yet; 0 when neither date has one.
        best: the longest run ever (at least ``current``).
    """

    current: int
    best: int


def streaks(ranked_dates: Iterable[dt.date], today: dt.date) -> Streaks:
    """The current and best daily streak (docs/rules.md §4 "Daily challenge", "Streaks").

    A streak is a run of consecutive UTC dates on each of which the player has a ranked result
    (a daily game that ended won or blocked and that no moderator hid). The current streak is
    the run ending ``today``, or ending yesterday when ``today`` has no ranked result yet (it
    is alive until today ends); the best streak is the longest run.

    Args:
        ranked_dates: the dates with a ranked result, in any order, repeats allowed. Dates
            after ``today`` cannot have one and are ignored.
        today: the current UTC date of the daily boundary.

    Returns:
        The current and best streak, each 0 and up.

    >>> d = dt.date(2026, 3, 14)
    >>> streaks([d - dt.timedelta(days=1), d - dt.timedelta(days=2)], d)
    Streaks(current=2, best=2)
    >>> streaks([d - dt.timedelta(days=2)], d)
    Streaks(current=0, best=1)
    """
    dates = sorted({date for date in ranked_dates if date <= today})
    best, run, previous = 0, 0, None
    for date in dates:
        run = run + 1 if previous is not None and date - previous == _DAY else 1
        best = max(best, run)
        previous = date
    alive = previous is not None and today - previous <= _DAY
    return Streaks(current=run if alive else 0, best=best)


def par_share(score: int, par: int | None) -> float | None:
    """``score / par`` rounded to 4 decimals, as a game record shows it (None without a par,
    or a par of 0)."""
    return None if not par else round(score / par, 4)


@dataclass(frozen=True, slots=True)
class ProfileDay:
    """One UTC date on which the player played the daily.

    Attributes:
        date: the date.
        status: playing (not ended: still open, or left unfinished when the date closed),
            won, blocked or resigned.
        score: the game's score (so far, while playing).
        rank: its rank on the date's leaderboard (won or blocked only), else None.
        par: the date's par (the best score perfect play reaches; public while the date is
            open), None without the solver.
        par_share: ``score / par`` (4 decimals) once the game has ended, else None.
    """

    date: dt.date
    status: Status
    score: int
    rank: int | None
    par: int | None
    par_share: float | None


@dataclass(frozen=True, slots=True)
class Profile:
    """What anyone may see of a player (docs/rules.md §4 "Profiles").

    Attributes:
        player_id, name: the player.
        member_since: the UTC date they registered.
        today: the daily boundary's UTC date the profile was read at.
        days: the dates they played the daily (results a moderator hid left out), oldest
            first.
        streaks: their current and best daily streak.
        best_score: their best score among ranked results, None without one.
        average_par_share: the mean of ``score / par`` over their ranked results with a par
            (4 decimals), None without one.
        ranked_days: how many dates they have a ranked result on.
        races_played: finished races they raced in.
        races_won: finished races whose results rank them first.
    """

    player_id: int
    name: str
    member_since: dt.date
    today: dt.date
    days: tuple[ProfileDay, ...]
    streaks: Streaks
    best_score: int | None
    average_par_share: float | None
    ranked_days: int
    races_played: int
    races_won: int


class ProfileService:
    """Reads player profiles.

    Args:
        store: where profiles are read (one snapshot per profile).
        daily: the daily service (whether a simulated clock decides today's date).
        analyzer: the solver, for each date's par (cached per deal), or None.
    """

    def __init__(
        self, store: ProfileStore, daily: DailyService, analyzer: Analyzer | None = None
    ) -> None:
        self._store = store
        self._daily = daily
        self._analyzer = analyzer

    async def profile(self, player_id: int) -> Profile:
        """A player's profile, every figure from one read of the stored games.

        Args:
            player_id: the player.

        Returns:
            The profile.

        Raises:
            NotFoundError: ``unknown_player`` when there is no such player.
            StorageError: the database failed.
        """
        stored = await self._store.read(player_id, self._daily.pinned_today())
        if stored is None:
            raise NotFoundError(f"there is no player {player_id}", code=ErrorCode.UNKNOWN_PLAYER)
        pars = await self._pars(stored.days)
        days = tuple(_day(result, pars.get(result.code)) for result in stored.days)
        ranked = [day for day in days if day.status in RANKED]
        shares = [day.par_share for day in ranked if day.par_share is not None]
        return Profile(
            player_id=stored.player_id,
            name=stored.name,
            member_since=stored.created_at.astimezone(dt.UTC).date(),
            today=stored.today,
            days=days,
            streaks=streaks((day.date for day in ranked), stored.today),
            best_score=max((day.score for day in ranked), default=None),
            average_par_share=round(sum(shares) / len(shares), 4) if shares else None,
            ranked_days=len(ranked),
            races_played=stored.races_played,
            races_won=stored.races_won,
        )

    async def _pars(self, days: Iterable[DailyResult]) -> dict[str, int]:
        """The par of each date's deal (by its code) that the solver has: from its cache, or
        solved now on its spare capacity (one deal after the other, waited for up to
        :data:`PAR_WAIT_S`; a solve not done by then goes on and is cached for the next
        read); empty without the solver."""
        analyzer = self._analyzer
        if analyzer is None:
            return {}
        codes = {code: GameCode.parse(code) for code in sorted({day.code for day in days})}

        def known() -> dict[str, int]:
            found = {code: analyzer.cached(parsed) for code, parsed in codes.items()}
            return {code: a.par for code, a in found.items() if a is not None}

        pars = known()
        missing = [parsed for code, parsed in codes.items() if code not in pars]
        if not missing:
            return pars

        async def solve() -> None:
            for code in missing:
                await analyzer.analyse(code)

        task = analyzer.spare(solve)
        if task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), PAR_WAIT_S)
        return known()


def _day(result: DailyResult, par: int | None) -> ProfileDay:
    """A stored daily game as the profile shows it: its code left behind."""
    return ProfileDay(
        date=result.date,
        status=result.status,
        score=result.score,
        rank=result.rank,
        par=par,
        par_share=par_share(result.score, par) if result.status in ENDED else None,
    )


__all__ = [
    "ENDED",
    "RANKED",
    "Profile",
    "ProfileDay",
    "ProfileService",
    "Streaks",
    "par_share",
    "streaks",
]
