"""Admission: how many players may be getting in at once (registering, saying hello).

A crowd arriving together — the daily's first minute — would otherwise take every database
connection at once: players already playing would wait behind it for their actions, and past the
pool's time-out newcomers would get a failure that says nothing useful. Newcomers wait their turn
here instead, in arrival order, using at most part of the pool; one who would wait too long is
answered at once and clearly (``server_busy``, with a time to come back), and nothing is changed.

A crowd can cost more than the database, too: a storm of reconnecting pages (every socket of a
process cut at once) costs its event loop the websocket upgrades and hellos, and every reply to
the players in play waits behind them. While the loop runs late by ``shed_lag_s`` or more at
each of its last :data:`SHED_AFTER_MEASURES` measures (:meth:`Admission.watch_loop`; one late
measure alone is as often the machine scheduling the process late as the process being
overloaded), newcomers are answered ``server_busy`` at once
instead of queueing: the storm is spread over the retry times rather than landing on the
players in play.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from server.errors import ServerBusyError
from server.web import metrics

#: Consecutive late measures of the event loop before newcomers are turned away for it.
SHED_AFTER_MEASURES = 3


class Admission:
    """At most ``limit`` admissions at once; the others wait, first come first served, for at
    most ``wait_s`` seconds, and at most ``queue`` of them.

    Args:
        limit: admissions in progress at once (each uses one database connection at a time).
        wait_s: the longest a newcomer waits for their turn.
        queue: newcomers waiting at most; one more is turned away at once.
        retry_after_s: what a newcomer turned away is told to wait before trying again.
        shed_lag_s: while the event loop runs this late (s) or more at each of its last
            :data:`SHED_AFTER_MEASURES` measures, newcomers are turned away at once; None:
            never for that.
    """

    def __init__(
        self,
        limit: int,
        wait_s: float = 10.0,
        queue: int = 2000,
        retry_after_s: float = 2.0,
        shed_lag_s: float | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"admission limit must be at least 1, not {limit}")
        if shed_lag_s is not None and shed_lag_s <= 0:
            raise ValueError(f"shed_lag_s must be positive or None, not {shed_lag_s}")
        self._shed_lag_s = shed_lag_s
        #: How late the event loop ran at its last measure (s).
        self.lag_s = 0.0
        #: How late it ran at each of its last measures (s), newest last.
        self._lags: deque[float] = deque(maxlen=SHED_AFTER_MEASURES)
        #: Measures taken so far.
        self.measures = 0
        self._slots = asyncio.Semaphore(limit)
        self._wait_s = wait_s
        self._queue = queue
        self._waiting = 0
        self.retry_after_s = retry_after_s
        #: Newcomers turned away so far (for the operator).
        self.turned_away = 0

    @property
    def waiting(self) -> int:
        """Newcomers waiting for their turn now."""
        return self._waiting

    @property
    def shedding(self) -> bool:
        """Whether newcomers are turned away at once: the event loop ran late by
        ``shed_lag_s`` or more at each of its last :data:`SHED_AFTER_MEASURES` measures."""
        return (
            self._shed_lag_s is not None
            and len(self._lags) == SHED_AFTER_MEASURES
            and min(self._lags) >= self._shed_lag_s
        )

    async def watch_loop(self, every_s: float) -> None:
        """Measure how late the event loop runs, every ``every_s`` seconds, until cancelled:
        a sleep that ends later than asked ended that late (:attr:`lag_s`)."""
        while True:
            asked = time.monotonic() + every_s
            await asyncio.sleep(every_s)
            self.lag_s = max(0.0, time.monotonic() - asked)
            self._lags.append(self.lag_s)
            self.measures += 1

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one admission slot for the block.

        Raises:
            ServerBusyError: the event loop runs too late (see :attr:`shedding`), the queue
                is full, or the turn did not come within ``wait_s``.
        """
        if self.shedding:
            self.turned_away += 1
            metrics.ADMISSION_LOOP_LAG.inc()
            raise ServerBusyError(self.retry_after_s)
        if self._waiting >= self._queue:
            self.turned_away += 1
            metrics.ADMISSION_QUEUE_FULL.inc()
            raise ServerBusyError(self.retry_after_s)
        self._waiting += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await self._slots.acquire()
        except TimeoutError:
            self.turned_away += 1
            metrics.ADMISSION_WAIT_TIMEOUT.inc()
            raise ServerBusyError(self.retry_after_s) from None
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._slots.release()


__all__ = ["Admission", "ServerBusyError"]
