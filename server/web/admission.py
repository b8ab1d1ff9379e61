"""Admission: how many players may be getting in at once (registering, saying hello).

A crowd arriving together — the daily's first minute — would otherwise take every database
connection at once: players already playing would wait behind it for their actions, and past the
pool's time-out newcomers would get a failure that says nothing useful. Newcomers wait their turn
here instead, in arrival order, using at most part of the pool; one who would wait too long is
answered at once and clearly (``server_busy``, with a time to come back), and nothing is changed.

Hellos wait their turn without a bound on how many may wait, only on how long (``wait_s``): a
connection's requests are served one after the other, so each has at most one hello waiting,
and the connections the process holds bound them. Counted against the queue, they turned a
storm away when its hellos came in together: with 10,000 pages cut at once on two workers,
4,500 hellos reached each worker within a second, 2,000 could wait, and the others were given
appointments 200 a second apart, the last some 25 s after the cut; read 256 a statement, those
4,500 are answered within 2 s (``benchmarks/action_path.py --storm 10000 --storm-clients 2
--workers 2``, side by side in two rounds: every page back within 8.1 and 8.8 s with none turned
away, against 29.9 and 19.4 s with 4,328 and 1,971 turned away).

A crowd can cost more than the database, too: a storm of reconnecting pages (every socket of a
process cut at once) costs its event loop the websocket upgrades and hellos, and every reply to
the players in play waits behind them. While the loop runs late by ``shed_lag_s`` or more at
each of its last :data:`SHED_AFTER_MEASURES` measures (:meth:`Admission.watch_loop`; one late
measure alone is as often the machine scheduling the process late as the process being
overloaded) and the process itself used at least :data:`SHED_CPU_SHARE` of a core over them,
newcomers are answered ``server_busy`` at once instead of queueing: the storm is spread over
the retry times rather than landing on the players in play. A loop that is late while its
process has little CPU is late because the machine runs other work first; turning newcomers
away would not make it any sooner, and is not done.

The retry time grows with how much the server is turning away: newcomers turned away are given
their times to come back as appointments, ``retry_spread_per_s`` a second from
``retry_after_s`` on (the first after ``retry_after_s``, the next ``1 / retry_spread_per_s``
later, and so on), never later than ``retry_max_s``. A lone newcomer turned away comes back
after ``retry_after_s``; ten thousand pages cut off at once come back spread over the
following seconds rather than together at every retry.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from server.errors import ServerBusyError
from server.web import metrics

#: Consecutive late measures of the event loop before newcomers are turned away for it.
SHED_AFTER_MEASURES = 3
#: The share of one core the process must have used over those measures for its lateness to
#: be its own work (a storm) rather than the machine's other work.
SHED_CPU_SHARE = 0.7
#: Newcomers turned away a second who are given distinct times to come back (the default).
RETRY_SPREAD_PER_S = 200.0
#: The longest a newcomer turned away is told to wait (s; the default).
RETRY_MAX_S = 30.0
#: Hellos in progress at once (the default): as many as one read of the waiting hellos takes
#: (:data:`server.storage.welcome.MAX_BATCH`), since they are read together.
GREETING_LIMIT = 256


class Admission:
    """At most ``limit`` admissions at once; the others wait, first come first served, for at
    most ``wait_s`` seconds, and at most ``queue`` of them.

    Args:
        limit: admissions in progress at once (each uses one database connection at a time).
        wait_s: the longest a newcomer waits for their turn.
        queue: newcomers waiting for an admission slot at most; one more is turned away at
            once (hellos are not counted: see ``greeting_queue``).
        retry_after_s: what a newcomer turned away is told to wait before trying again
            when nobody else was turned away lately (s).
        shed_lag_s: while the event loop runs this late (s) or more at each of its last
            :data:`SHED_AFTER_MEASURES` measures and the process used :data:`SHED_CPU_SHARE`
            of a core or more over them, newcomers are turned away at once; None: never for
            that.
        retry_spread_per_s: newcomers turned away who are told to come back within the same
            second at most (their retry times are spread by ``1 / retry_spread_per_s`` s).
        retry_max_s: the longest retry time (s), at least ``retry_after_s``.
        clock: the monotonic clock the retry times are counted on (s).
        cpu_clock: the process's CPU time (s; :func:`time.process_time`).
        greeting_limit: hellos in progress at once (:meth:`turn` with ``greeting``).
        greeting_queue: hellos waiting at most; None: no bound but the connections' (each has
            at most one hello waiting, see the module's docstring).

    Raises:
        ValueError: a limit under 1, a lag, spread or retry time that is not positive, a
            longest retry time under ``retry_after_s``, a negative queue.
    """

    def __init__(
        self,
        limit: int,
        wait_s: float = 10.0,
        queue: int = 2000,
        retry_after_s: float = 2.0,
        shed_lag_s: float | None = None,
        retry_spread_per_s: float = RETRY_SPREAD_PER_S,
        retry_max_s: float = RETRY_MAX_S,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.process_time,
        greeting_limit: int = GREETING_LIMIT,
        greeting_queue: int | None = None,
    ) -> None:
        if retry_after_s <= 0 or retry_spread_per_s <= 0:
            raise ValueError(
                "retry_after_s and retry_spread_per_s must be positive, not "
                f"{retry_after_s} and {retry_spread_per_s}"
            )
        if retry_max_s < retry_after_s:
            raise ValueError(
                f"retry_max_s ({retry_max_s}) must be at least retry_after_s ({retry_after_s})"
            )
        if limit < 1 or greeting_limit < 1:
            raise ValueError(
                f"the limits must be at least 1, not {limit} and {greeting_limit} (greetings)"
            )
        if queue < 0 or (greeting_queue is not None and greeting_queue < 0):
            raise ValueError(f"the queues cannot be negative: {queue} and {greeting_queue}")
        if shed_lag_s is not None and shed_lag_s <= 0:
            raise ValueError(f"shed_lag_s must be positive or None, not {shed_lag_s}")
        self._shed_lag_s = shed_lag_s
        #: How late the event loop ran at its last measure (s).
        self.lag_s = 0.0
        #: How late it ran at each of its last measures (s), newest last.
        self._lags: deque[float] = deque(maxlen=SHED_AFTER_MEASURES)
        #: The share of one core the process used over its last measure.
        self.last_cpu_share = 0.0
        #: The share of one core the process used over each of its last measures.
        self._cpu_shares: deque[float] = deque(maxlen=SHED_AFTER_MEASURES)
        #: Measures taken so far.
        self.measures = 0
        self._cpu_clock = cpu_clock
        self._slots = asyncio.Semaphore(limit)
        self._greeting_slots = asyncio.Semaphore(greeting_limit)
        self._wait_s = wait_s
        self._queues = {False: queue, True: greeting_queue}
        #: Newcomers waiting now: for an admission slot (False), to be greeted (True).
        self._waiting_for = {False: 0, True: 0}
        self.retry_after_s = retry_after_s
        self._retry_gap_s = 1 / retry_spread_per_s
        self._retry_max_s = retry_max_s
        self._clock = clock
        #: The last appointment given to a newcomer turned away (on ``clock``, s).
        self._last_appointment = -math.inf
        #: Newcomers turned away so far (for the operator).
        self.turned_away = 0

    def _turn_away(self) -> ServerBusyError:
        """The refusal of one more newcomer, with their time to come back: the next free
        appointment (``retry_after_s`` from now at the earliest, ``1 / retry_spread_per_s``
        after the last one given), at most ``retry_max_s`` from now."""
        self.turned_away += 1
        now = self._clock()
        wait_s = min(
            max(self.retry_after_s, self._last_appointment + self._retry_gap_s - now),
            self._retry_max_s,
        )
        self._last_appointment = now + wait_s
        return ServerBusyError(wait_s)

    @property
    def waiting(self) -> int:
        """Newcomers waiting for their turn now (hellos included)."""
        return self._waiting_for[False] + self._waiting_for[True]

    @property
    def cpu_share(self) -> float:
        """The share of one core the process used over its last measures (0 before any)."""
        return sum(self._cpu_shares) / len(self._cpu_shares) if self._cpu_shares else 0.0

    def late_for_own_work(self, lag_s: float) -> bool:
        """Whether the event loop ran ``lag_s`` late or more at its last measure while the
        process used :data:`SHED_CPU_SHARE` of a core or more: late for its own work, not for
        the machine's other work."""
        return self.lag_s >= lag_s and self.last_cpu_share >= SHED_CPU_SHARE

    @property
    def shedding(self) -> bool:
        """Whether newcomers are turned away at once: the event loop ran late by
        ``shed_lag_s`` or more at each of its last :data:`SHED_AFTER_MEASURES` measures, and
        the process used :data:`SHED_CPU_SHARE` of a core or more over them."""
        return (
            self._shed_lag_s is not None
            and len(self._lags) == SHED_AFTER_MEASURES
            and min(self._lags) >= self._shed_lag_s
            and self.cpu_share >= SHED_CPU_SHARE
        )

    async def watch_loop(self, every_s: float, then: Callable[[], None] | None = None) -> None:
        """Measure how late the event loop runs, every ``every_s`` seconds, until cancelled:
        a sleep that ends later than asked ended that late (:attr:`lag_s`); and the share of
        a core the process used meanwhile (:attr:`last_cpu_share`); ``then`` is called after
        each measure."""
        while True:
            began = time.monotonic()
            cpu_began = self._cpu_clock()
            await asyncio.sleep(every_s)
            ended = time.monotonic()
            self.lag_s = max(0.0, ended - began - every_s)
            metrics.LOOP_LAG_SECONDS.observe(self.lag_s)
            self._lags.append(self.lag_s)
            self.last_cpu_share = (self._cpu_clock() - cpu_began) / max(ended - began, 1e-9)
            self._cpu_shares.append(self.last_cpu_share)
            self.measures += 1
            if then is not None:
                then()

    @asynccontextmanager
    async def turn(self, greeting: bool = False) -> AsyncIterator[None]:
        """Hold one admission slot for the block: one of ``limit``, or for a ``greeting`` (a
        hello, whose read and online record go with the others' in one statement each, so
        that many at once take no more of the pool) one of ``greeting_limit``.

        Raises:
            ServerBusyError: the event loop runs too late (see :attr:`shedding`), its queue
                is full, or the turn did not come within ``wait_s``; its retry time is the
                newcomer's appointment (see the module's docstring).
        """
        if self.shedding:
            metrics.ADMISSION_LOOP_LAG.inc()
            raise self._turn_away()
        bound = self._queues[greeting]
        if bound is not None and self._waiting_for[greeting] >= bound:
            metrics.ADMISSION_QUEUE_FULL.inc()
            raise self._turn_away()
        slots = self._greeting_slots if greeting else self._slots
        self._waiting_for[greeting] += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await slots.acquire()
        except TimeoutError:
            metrics.ADMISSION_WAIT_TIMEOUT.inc()
            raise self._turn_away() from None
        finally:
            self._waiting_for[greeting] -= 1
        try:
            yield
        finally:
            slots.release()


__all__ = ["Admission", "ServerBusyError"]
