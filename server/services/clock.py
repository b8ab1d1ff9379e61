"""Clocks: the services take one, so tests can control time. All times are aware UTC datetimes.

A process's clock times games (elapsed ms, race windows). The daily boundary has one authority
for every process instead: the database's clock, read in the statement that commits an action
(see :mod:`server.services.daily`). A *simulated* clock (tests, simulations) stands in for the
database's clock there too, so that a test can move the date.
"""

from __future__ import annotations

import datetime as dt
from typing import ClassVar, Protocol


class Clock(Protocol):
    """A source of the current time.

    Attributes:
        simulated: True for a clock that is not the real time (then it also decides the daily
            boundary in place of the database's clock).
    """

    simulated: ClassVar[bool]

    def now(self) -> dt.datetime:
        """The current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The real clock, optionally off by a fixed amount (a process whose clock is wrong).

    Args:
        offset: added to the system time; zero for a correct clock.
    """

    simulated: ClassVar[bool] = False

    def __init__(self, offset: dt.timedelta = dt.timedelta(0)) -> None:
        self._offset = offset

    def now(self) -> dt.datetime:
        """The current time, timezone-aware, in UTC."""
        now = dt.datetime.now(dt.UTC)
        return now + self._offset if self._offset else now


class FakeClock:
    """A clock that only moves when told to (for tests and simulations); it decides the daily
    boundary too (``simulated``).

    Args:
        start: the initial time; must be timezone-aware.

    Raises:
        ValueError: ``start`` is naive.
    """

    def __init__(self, start: dt.datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._now = start.astimezone(dt.UTC)

    simulated: ClassVar[bool] = True

    def now(self) -> dt.datetime:
        """The current fake time (UTC)."""
        return self._now

    def advance(self, *, ms: int = 0, seconds: float = 0, days: int = 0) -> None:
        """Move the clock forward by the given amounts."""
        self._now += dt.timedelta(milliseconds=ms, seconds=seconds, days=days)

    def set(self, when: dt.datetime) -> None:
        """Jump to ``when`` (timezone-aware)."""
        if when.tzinfo is None:
            raise ValueError("FakeClock.set needs a timezone-aware time")
        self._now = when.astimezone(dt.UTC)


_MS = dt.timedelta(milliseconds=1)


def elapsed_ms(start: dt.datetime, end: dt.datetime) -> int:
    """Whole milliseconds from ``start`` to ``end`` (never negative)."""
    return max(0, (end - start) // _MS)
