"""A token bucket: the request rate of one websocket connection, owned by that connection.

A connection's limits live and die with it: no shared store, no key per connection, no thread,
nothing that grows with the number of connections a process has had, and a check costs a few
arithmetic operations.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class TokenBucket:
    """``rate`` tokens per second, holding at most ``burst`` (full at the start).

    Args:
        rate: tokens added per second (> 0).
        burst: the most tokens held (>= 1): how many requests may come at once after a pause.
        clock: monotonic seconds (``time.monotonic``; tests pass their own).
    """

    __slots__ = ("_clock", "_stamp", "_tokens", "burst", "rate")

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, not {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._stamp = clock()

    def take(self) -> bool:
        """Take one token: True if there was one (the request may go on), False if the bucket
        is empty (the request is over the rate; nothing is taken)."""
        now = self._clock()
        tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        if tokens < 1:
            self._tokens = tokens
            return False
        self._tokens = tokens - 1
        return True


__all__ = ["TokenBucket"]
