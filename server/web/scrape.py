"""Serving ``GET /metrics`` in the Prometheus text format: what one scrape reads and renders.

A scrape renders the process-wide metrics (:mod:`server.web.metrics`, updated where things
happen), and reads a few figures when it happens: the database pool of the application scraped,
and what the database knows of races and today's daily (:mod:`server.storage.activity`: one
short query, bounded in time; a scrape never waits on the database for longer than
:data:`ACTIVITY_TIMEOUT_S`).

With ``tripeaks serve --workers N`` a scrape reaches one worker at random, so the workers run
``prometheus_client``'s multiprocess mode: the supervisor gives them a private directory in
``PROMETHEUS_MULTIPROC_DIR`` (see :mod:`server.workers`) before they start, each worker writes
its values to files there, and whichever worker is scraped sums every worker's files (a dead
worker's counts stay in the sums; its gauges leave them). That mode is chosen when this module
is first imported, from the environment, exactly as ``prometheus_client`` chooses it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from server.services import Services
from server.storage.activity import Activity, read_activity

log = logging.getLogger(__name__)

#: The environment variable naming the directory of ``prometheus_client``'s multiprocess mode.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Whether this process keeps its metrics in the files of a multiprocess directory (a worker
#: of ``serve --workers``), decided as ``prometheus_client`` decides it: at import.
MULTIPROCESS = MULTIPROCESS_ENV in os.environ

#: The classic text format (0.0.4), which every Prometheus reads, as generate_latest writes it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# No ``*_created`` series beside each counter (a start time per series, which would double what
# every scrape carries): the process start time is in ``process_*``. (server.web.metrics says
# so too, for its own; whichever is imported first turns them off before any is made.)
disable_created_metrics()  # type: ignore[no-untyped-call]


# ------------------------------------------------------------------------- database pool

POOL_CHECKED_OUT = "tripeaks_db_pool_checked_out"
POOL_CHECKED_OUT_HELP = "Database connections checked out of the pool now (in use)."
POOL_SIZE = "tripeaks_db_pool_size"
POOL_SIZE_HELP = (
    "Database connections the pool keeps open (TRIPEAKS_DB_POOL_SIZE); as many again may "
    "open beyond it under load."
)

if MULTIPROCESS:
    # Each worker's share, kept up to date by the pool's events (see watch_pool): a scrape
    # reads one worker, and must see them all.
    _POOL_CHECKED_OUT: Gauge | None = Gauge(
        POOL_CHECKED_OUT, POOL_CHECKED_OUT_HELP, multiprocess_mode="livesum"
    )
    _POOL_SIZE: Gauge | None = Gauge(POOL_SIZE, POOL_SIZE_HELP, multiprocess_mode="livesum")
else:
    _POOL_CHECKED_OUT = _POOL_SIZE = None


def watch_pool(engine: AsyncEngine) -> Callable[[], None]:
    """In multiprocess mode, keep this process's share of the pool gauges up to date with the
    pool's check-out and check-in events (a scrape reads the pool of the worker it reaches
    only); otherwise nothing: the scrape reads the application's pool itself.

    Returns:
        A function that stops watching and takes this pool's share off the gauges.
    """
    if _POOL_CHECKED_OUT is None or _POOL_SIZE is None:
        return lambda: None
    checked_out, size_gauge = _POOL_CHECKED_OUT, _POOL_SIZE
    pool = engine.sync_engine.pool
    size = pool.size() if isinstance(pool, QueuePool) else 0
    held = [0]

    def checkout(*_args: object) -> None:
        held[0] += 1
        checked_out.inc()

    def checkin(*_args: object) -> None:
        held[0] -= 1
        checked_out.dec()

    event.listen(engine.sync_engine, "checkout", checkout)
    event.listen(engine.sync_engine, "checkin", checkin)
    size_gauge.inc(size)

    def stop() -> None:
        event.remove(engine.sync_engine, "checkout", checkout)
        event.remove(engine.sync_engine, "checkin", checkin)
        checked_out.dec(held[0])
        size_gauge.dec(size)

    return stop


def _pool_families(engine: AsyncEngine) -> list[Metric]:
    """The pool gauges read from the application's own engine (single-process mode)."""
    pool = engine.pool
    if MULTIPROCESS or not isinstance(pool, QueuePool):
        return []
    return [
        GaugeMetricFamily(POOL_CHECKED_OUT, POOL_CHECKED_OUT_HELP, value=pool.checkedout()),
        GaugeMetricFamily(POOL_SIZE, POOL_SIZE_HELP, value=pool.size()),
    ]


# --------------------------------------------------------------- read from the database

#: Longest a scrape waits for the database's figures (a connection, the query), in seconds;
#: past it they are left out of that scrape.
ACTIVITY_TIMEOUT_S = 1.0
#: The query's own limit in the database (``statement_timeout``), in milliseconds.
ACTIVITY_STATEMENT_TIMEOUT_MS = 500

ACTIVITY_FAILURES = Counter(
    "tripeaks_metrics_query_failures",
    "Reads of the database figures for scrapes (race rooms, today's daily) that failed or "
    "took over a second; those series are left out of the scrapes that waited for them.",
)


class ActivityReader:
    """Reads :class:`Activity` for the scrapes of one application: one short query (the
    counters the database keeps, and the races of two partial indexes), at most one at a time
    (scrapes arriving meanwhile share it), each bounded by :data:`ACTIVITY_TIMEOUT_S`."""

    def __init__(self, timeout_s: float = ACTIVITY_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._reading: asyncio.Task[Activity | None] | None = None

    async def read(self, services: Services) -> Activity | None:
        """The current figures, or None when they could not be read in time (counted in
        ``tripeaks_metrics_query_failures_total``)."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.create_task(self._read(services), name="metrics-activity")
        return await asyncio.shield(self._reading)

    async def _read(self, services: Services) -> Activity | None:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await read_activity(
                    services.db,
                    services.daily.pinned_today(),
                    statement_timeout_ms=ACTIVITY_STATEMENT_TIMEOUT_MS,
                )
        except Exception as exc:
            ACTIVITY_FAILURES.inc()
            log.warning("metrics: the database's figures were not read: %s", type(exc).__name__)
            return None


def _activity_families(activity: Activity) -> list[Metric]:
    rooms = GaugeMetricFamily(
        "tripeaks_race_rooms",
        "Race rooms now, by state: lobby (joining) or running (started: counting down or "
        "racing); read from the database, every process's rooms.",
        labels=["state"],
    )
    rooms.add_metric(["lobby"], activity.rooms_lobby)
    rooms.add_metric(["running"], activity.rooms_running)
    return [
        rooms,
        GaugeMetricFamily(
            "tripeaks_daily_players",
            "Players who started today's daily (the database's UTC date); read from the database.",
            value=activity.daily_players,
        ),
        GaugeMetricFamily(
            "tripeaks_daily_ranked",
            "Today's daily games ranked on its leaderboard (won or blocked); read from the "
            "database.",
            value=activity.daily_ranked,
        ),
    ]


# ----------------------------------------------------------------------------------- scrape


class _Families:
    """A collector of metric families read for one scrape."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


_process_registry: Collector | None = None


def _process_metrics() -> Collector:
    """What the process-wide metrics are read from: the default registry, or in multiprocess
    mode every worker's files."""
    global _process_registry
    if _process_registry is None:
        if MULTIPROCESS:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            _process_registry = registry
        else:
            _process_registry = REGISTRY
    return _process_registry


def render(services: Services, activity: Activity | None) -> bytes:
    """The text of one scrape: the process-wide metrics (every worker's, in multiprocess
    mode), the application's pool, and ``activity`` when it was read."""
    families = _pool_families(services.db)
    if activity is not None:
        families += _activity_families(activity)
    return generate_latest(_process_metrics()) + generate_latest(_Families(families))


__all__ = [
    "ACTIVITY_STATEMENT_TIMEOUT_MS",
    "ACTIVITY_TIMEOUT_S",
    "CONTENT_TYPE",
    "MULTIPROCESS",
    "MULTIPROCESS_ENV",
    "Activity",
    "ActivityReader",
    "render",
    "watch_pool",
]
