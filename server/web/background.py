"""The process's background tasks kept running: one that fails is logged, counted
(``tripeaks_background_restarts_total{task}``, :mod:`server.web.metrics`) and started again
after a back-off that doubles while it keeps failing.

A task ends for good only when it returns or is cancelled (the shutdown): no failure — a
database error, a bug — stops a revoked-token sweep or a race sweep for the rest of the
process's life.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from server.web import metrics
from server.web.metrics import BackgroundTask

log = logging.getLogger(__name__)

#: First and longest wait before a failed task is started again: doubling from the first while
#: it keeps failing, back to the first once a run lasted longer than the longest.
RESTART_BACKOFF_S = (0.5, 10.0)


async def supervised(
    task: BackgroundTask,
    run: Callable[[], Awaitable[object]],
    *,
    backoff_s: tuple[float, float] | None = None,
) -> None:
    """Run ``run()`` until it returns; each time it fails (any ``Exception``), log it, count it
    and run it again after the back-off (:data:`RESTART_BACKOFF_S` unless given). Cancelling
    this cancels the run and ends it."""
    first, longest = backoff_s or RESTART_BACKOFF_S
    delay = first
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        try:
            await run()
            return
        except Exception:
            if loop.time() - started > longest:
                delay = first  # it ran well for a while: a new failure starts over
            metrics.background_restarted(task)
            log.error(
                "background task %s failed; starting it again in %.1f s",
                task.value,
                delay,
                exc_info=True,
            )
        await asyncio.sleep(delay)
        delay = min(longest, delay * 2)


async def periodically(
    task: BackgroundTask,
    every_s: float,
    step: Callable[[], Awaitable[object]],
    *,
    at_once: bool = False,
    longest_s: float | None = None,
) -> None:
    """Run ``step`` every ``every_s`` seconds (first at once when ``at_once``, else after one
    wait). A failed step is logged, counted as a restart of ``task`` and run again after a
    back-off: ``every_s`` doubled per failure in a row, at most ``longest_s`` (the longest of
    :data:`RESTART_BACKOFF_S` unless given; or ``every_s``, if longer); a step that succeeds
    brings back the usual pace."""
    longest = RESTART_BACKOFF_S[1] if longest_s is None else longest_s
    if not at_once:
        await asyncio.sleep(every_s)
    failures = 0
    while True:
        try:
            await step()
        except Exception:
            failures += 1
            pause = min(max(every_s, longest), every_s * 2 ** min(failures, 16))
            metrics.background_restarted(task)
            log.warning(
                "%s failed (%d in a row); trying again in %.1f s",
                task.value,
                failures,
                pause,
                exc_info=True,
            )
            await asyncio.sleep(pause)
            continue
        failures = 0
        await asyncio.sleep(every_s)
