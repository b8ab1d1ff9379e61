"""The review of a day's suspicious results (docs/rules.md §4 "Moderation"; ``tripeaks admin
suspicious``): which signals fire for each ranked result, and what each saw, in words.
:class:`ReviewService` reads the day from its :class:`~server.storage.review.ReviewStore` and
works out the solver's line; :func:`review`, pure, judges them.

It reads only what the server already has: elapsed times, action logs against the solver's
optimal line, and the keyed hash of the address each account registered from
(:func:`server.services.addresses.hash_address`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from server.engine.codes import GameCode
from server.errors import ErrorCode, NotFoundError
from server.storage.review import DayResult, ReviewStore, Step


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When the signals fire.

    Attributes:
        fast_fraction: a won result is fast under this fraction of the median elapsed time of
            the date's won results that are not hidden …
        min_sample: … when there are at least this many of them;
        floor_ms_per_move: and, whatever the others did, under this many milliseconds a move.
        shared_accounts: accounts ranked on the date that registered from one address for the
            shared-address signal.
    """

    fast_fraction: float = 0.25
    min_sample: int = 5
    floor_ms_per_move: int = 250
    shared_accounts: int = 3


@dataclass(frozen=True, slots=True)
class Line:
    """The day's optimal line by the solver: its par and its actions as ``(kind, pos)``."""

    par: int
    steps: tuple[Step, ...]


def solve_line(code: GameCode) -> Line:
    """The solver's optimal line of a deal, in this process (the one the server publishes once
    the date is over: the solver is deterministic)."""
    from server.engine.solver import solve

    solution = solve(code.deal(), code.rules)
    return Line(solution.par, tuple((a.kind.value, a.pos) for a in solution.line))


@dataclass(frozen=True, slots=True)
class Signal:
    """A signal that fired for a result: ``fast``, ``optimal_line`` or ``shared_address``,
    and what it saw, in words."""

    name: str
    explanation: str


@dataclass(frozen=True, slots=True)
class Flagged:
    """A result and the signals that fired for it."""

    result: DayResult
    signals: list[Signal]


@dataclass(frozen=True, slots=True)
class DayReview:
    """A date's ranked results reviewed: the figures the signals compared against, and the
    results for which any fired (most signals first, then in board order)."""

    date: dt.date
    ranked: int
    hidden: int
    won_on_board: int
    median_won_ms: float | None
    fast_under_ms: float | None
    par: int | None
    line_length: int | None
    thresholds: Thresholds
    flagged: list[Flagged] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Day:
    """What each of a date's results is compared against.

    Attributes:
        date: the date.
        limits: the thresholds.
        won: how many won results are on the board.
        median: their median elapsed ms (None without any).
        fast_under: the elapsed ms a won result is fast under (None with too few of them).
        line: the solver's optimal line (None when there is no result).
        logs: the action logs of the results that could follow the line.
        accounts: the results by the address their account registered from.
    """

    date: dt.date
    limits: Thresholds
    won: int
    median: float | None
    fast_under: float | None
    line: Line | None
    logs: dict[int, list[Step]]
    accounts: dict[bytes, list[DayResult]]


def review(
    date: dt.date,
    results: Sequence[DayResult],
    line: Line | None,
    logs: dict[int, list[Step]],
    limits: Thresholds,
) -> DayReview:
    """The signals of each of a date's ranked results (hidden ones included, so that a
    moderator sees what was already dealt with).

    - ``fast``: a won result whose elapsed time is under ``fast_fraction`` of the median of the
      date's won results on the board (when there are at least ``min_sample``), or under
      ``floor_ms_per_move`` milliseconds a move.
    - ``optimal_line``: its action log is the solver's optimal line, action for action, from
      the deal to the end (``logs`` holds the logs of the results that could be: as many
      actions as the line, no undo).
    - ``shared_address``: ``shared_accounts`` or more accounts ranked on the date registered
      from one address (the same keyed hash).
    """
    won = sorted(r.elapsed_ms for r in results if r.status == "won" and not r.hidden)
    median = float(statistics.median(won)) if won else None
    fast_under = None
    if median is not None and len(won) >= limits.min_sample:
        fast_under = limits.fast_fraction * median
    accounts: dict[bytes, list[DayResult]] = defaultdict(list)
    for r in results:
        if r.address_hash is not None:
            accounts[r.address_hash].append(r)
    day = _Day(date, limits, len(won), median, fast_under, line, logs, accounts)
    flagged: list[tuple[int, int, Flagged]] = []
    for order, r in enumerate(results):
        found = (_fast(day, r), _optimal_line(day, r), _shared_address(day, r))
        signals = [signal for signal in found if signal is not None]
        if signals:
            flagged.append((-len(signals), order, Flagged(r, signals)))
    flagged.sort(key=lambda item: (item[0], item[1]))
    return DayReview(
        date=date,
        ranked=len(results),
        hidden=sum(r.hidden for r in results),
        won_on_board=len(won),
        median_won_ms=median,
        fast_under_ms=fast_under,
        par=None if line is None else line.par,
        line_length=None if line is None else len(line.steps),
        thresholds=limits,
        flagged=[item[2] for item in flagged],
    )


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s"


def _fast(day: _Day, r: DayResult) -> Signal | None:
    """``fast``: won under a fraction of the day's median, or else quicker than the floor a
    move."""
    if r.status != "won":
        return None
    limits = day.limits
    if day.fast_under is not None and r.elapsed_ms < day.fast_under:
        assert day.median is not None
        return Signal(
            "fast",
            f"won in {_seconds(r.elapsed_ms)}, under "
            f"{limits.fast_fraction:.0%} of the median of the day's "
            f"{day.won} won results on the board ({_seconds(day.median)}): "
            f"the threshold is {_seconds(day.fast_under)}",
        )
    per_move = r.elapsed_ms / max(r.moves, 1)
    if per_move < limits.floor_ms_per_move:
        return Signal(
            "fast",
            f"won in {_seconds(r.elapsed_ms)} over {r.moves} moves, "
            f"{per_move:.0f} ms a move: quicker than "
            f"{limits.floor_ms_per_move} ms a move",
        )
    return None


def _optimal_line(day: _Day, r: DayResult) -> Signal | None:
    """``optimal_line``: the result's log is the solver's line, action for action."""
    line = day.line
    if line is None or day.logs.get(r.game_id) != list(line.steps):
        return None
    return Signal(
        "optimal_line",
        f"its {len(line.steps)} actions are the solver's optimal line, action for "
        f"action, from the deal to the end (score {r.score}; par {line.par})",
    )


def _shared_address(day: _Day, r: DayResult) -> Signal | None:
    """``shared_address``: enough of the day's accounts registered from the result's
    account's address."""
    if r.address_hash is None:
        return None
    group = day.accounts.get(r.address_hash)
    if group is None or len(group) < day.limits.shared_accounts:
        return None
    others = ", ".join(f"{g.player_id} {g.player_name}" for g in group[:10])
    more = f" and {len(group) - 10} more" if len(group) > 10 else ""
    return Signal(
        "shared_address",
        f"one of {len(group)} accounts ranked on {day.date.isoformat()} that registered "
        f"from one address (group {r.address_hash.hex()[:8]}: players "
        f"{others}{more})",
    )


class ReviewService:
    """The review of a day's suspicious results over the database.

    Args:
        store: where the day's results and action logs are read.
    """

    def __init__(self, store: ReviewStore) -> None:
        self._store = store

    async def suspicious(
        self,
        date: dt.date,
        thresholds: Thresholds | None = None,
        solve: Callable[[GameCode], Line] | None = None,
    ) -> DayReview:
        """Review a date's ranked results against the signals of :func:`review`: the day is
        read, its optimal line solved (in a thread, no connection held), the logs that could
        follow it read, and the signals judged.

        Args:
            date: the UTC date.
            thresholds: when each signal fires (defaults: :class:`Thresholds`).
            solve: the day's optimal line for its code (default: the solver, in this process).

        Raises:
            NotFoundError: ``no_daily``: the date has no daily.
            StorageError: the database failed.
        """
        limits = thresholds or Thresholds()
        day = await self._store.day(date)
        if day is None:
            raise NotFoundError(
                f"there was no daily challenge on {date.isoformat()}", code=ErrorCode.NO_DAILY
            )
        results = day.results
        code = GameCode.parse(day.code)
        line = await asyncio.to_thread(solve or solve_line, code) if results else None
        logs: dict[int, list[Step]] = {}
        if line is not None:
            followed = [r.game_id for r in results if r.undos == 0 and r.seq == len(line.steps)]
            logs = await self._store.action_logs(followed)
        return review(date, results, line, logs, limits)


__all__ = [
    "DayReview",
    "Flagged",
    "Line",
    "ReviewService",
    "Signal",
    "Thresholds",
    "review",
    "solve_line",
]
