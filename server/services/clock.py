"""Clocks: the services take one, so tests can control time. All times are aware UTC datetimes."""

from __future__ import annotations

import datetime as dt
from typing import Protocol


class Clock(Protocol):
    """A source of the current time."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> dt.datetime:
        """The current time, timezone-aware, in UTC."""
        return dt.datetime.now(dt.UTC)


class FakeClock:
    """A clock that only moves when told to (for tests and simulations).

    Args:
        start: the initial time; must be timezone-aware.

    Raises:
        ValueError: ``start`` is naive.
    """

    def __init__(self, start: dt.datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start time")
        self._now = start.astimezone(dt.UTC)

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


def elapsed_ms(start: dt.datetime, end: dt.datetime) -> int:
    """Whole milliseconds from ``start`` to ``end`` (never negative)."""
    return max(0, (end - start) // dt.timedelta(milliseconds=1))
