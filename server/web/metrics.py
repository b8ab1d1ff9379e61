"""Operational metrics, served as ``GET /metrics`` in the Prometheus text format.

Most metrics live in the process (``prometheus_client``'s default registry) and are updated
where things happen: each update on the action path is one call on a label child bound once
here, never a label lookup per action, and no label ever names a player, a game or a
connection. A few are read when scraped: the database pool of the application scraped, and
what the database knows of races and today's daily (one short query, bounded in time; a
scrape never waits on the database for longer than :data:`ACTIVITY_TIMEOUT_S`).

With ``tripeaks serve --workers N`` a scrape reaches one worker at random, so the workers run
``prometheus_client``'s multiprocess mode: the supervisor gives them a private directory in
``PROMETHEUS_MULTIPROC_DIR`` (see :mod:`server.workers`) before they start, each worker writes
its values to files there, and whichever worker is scraped sums every worker's files (a dead
worker's counts stay in the sums; its gauges leave them). That mode is chosen when this module
is first imported, from the environment, exactly as ``prometheus_client`` chooses it.

The README's "Operating it" section lists every metric.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from server.engine.errors import Rejection
from server.errors import ErrorCode
from server.services import Services
from server.services.analysis import Lookup as SolverLookup
from server.services.analysis import Task as SolverTask
from server.services.daily import today_sql
from server.storage.models import DailyPlayers, LeaderboardCount, Race

log = logging.getLogger(__name__)

#: The environment variable naming the directory of ``prometheus_client``'s multiprocess mode.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: Whether this process keeps its metrics in the files of a multiprocess directory (a worker
#: of ``serve --workers``), decided as ``prometheus_client`` decides it: at import.
MULTIPROCESS = MULTIPROCESS_ENV in os.environ

#: The classic text format (0.0.4), which every Prometheus reads, as generate_latest writes it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# No ``*_created`` series beside each counter and histogram (a start time per series, which
# would double what every scrape carries): the process start time is in ``process_*``.
disable_created_metrics()  # type: ignore[no-untyped-call]

#: Label value for codes outside the fixed sets below (the label set stays bounded).
OTHER = "other"

# ----------------------------------------------------------------------------------- actions

ACTIONS = Counter(
    "tripeaks_actions",
    "Action requests served over the websocket, by outcome (accepted, rejected, error) and "
    "code (the rejection or error code; empty when accepted).",
    ["outcome", "code"],
)
#: Rejection codes: the engine's rules and the service's own.
REJECTION_CODES = (
    *(r.value for r in Rejection),
    ErrorCode.STALE_SEQ.value,
    ErrorCode.DAILY_CLOSED.value,
    ErrorCode.RACE_OVER.value,
    OTHER,
)
#: Error codes an action can be answered with.
ACTION_ERROR_CODES = (
    "hello_required",
    "unknown_game",
    "not_your_game",
    "race_not_started",
    "unavailable",
    "server_busy",
    "internal_error",
    OTHER,
)
ACCEPTED = ACTIONS.labels("accepted", "")
_REJECTED = {code: ACTIONS.labels("rejected", code) for code in REJECTION_CODES}
_FAILED = {code: ACTIONS.labels("error", code) for code in ACTION_ERROR_CODES}


def action_rejected(code: str) -> None:
    """Count an action answered ``rejected`` with ``code``."""
    _REJECTED.get(code, _REJECTED[OTHER]).inc()


def action_failed(code: str) -> None:
    """Count an action answered with an error (``unavailable``, ``server_busy``, …)."""
    _FAILED.get(code, _FAILED[OTHER]).inc()


#: Upper bounds of the acknowledgement-time buckets, in seconds: 1 ms to 2 s.
ACK_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
ACK_SECONDS = Histogram(
    "tripeaks_action_ack_seconds",
    "Server time of an action request, in seconds: from the start of parsing its frame to its "
    "reply being queued for the socket (waiting behind the connection's earlier requests and "
    "the group commit included).",
    buckets=ACK_BUCKETS_S,
)

# ------------------------------------------------------------------------------ group commit

#: Upper bounds of the batch-size buckets, in writes (at most 512 per batch).
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
COMMIT_BATCH_WRITES = Histogram(
    "tripeaks_group_commit_batch_writes",
    "Actions stored per group-commit batch (one statement, one transaction), committed "
    "batches only.",
    buckets=BATCH_BUCKETS,
)
#: Upper bounds of the commit-time buckets, in seconds: 0.5 ms to 5 s.
COMMIT_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
COMMIT_SECONDS = Histogram(
    "tripeaks_group_commit_seconds",
    "Time of a committed group-commit batch's statement (one round trip and its commit), in "
    "seconds.",
    buckets=COMMIT_BUCKETS_S,
)


def observe_batch(writes: int, seconds: float) -> None:
    """Record one committed batch: its number of writes and its statement's time in seconds."""
    COMMIT_BATCH_WRITES.observe(writes)
    COMMIT_SECONDS.observe(seconds)


# -------------------------------------------------------------------------------- websockets

WEBSOCKETS_OPEN = Gauge(
    "tripeaks_websockets_open",
    "Websocket connections open now.",
    multiprocess_mode="livesum",
)


class CloseReason(StrEnum):
    """Why a websocket connection closed (the ``reason`` label of
    ``tripeaks_websocket_closes_total``)."""

    #: The client sent a close frame.
    CLIENT = "client"
    #: The connection broke or vanished without a close frame.
    CONNECTION_LOST = "connection_lost"
    #: The client did not answer the server's ping in time.
    HEARTBEAT = "heartbeat"
    #: No ``hello`` within the time allowed (1008).
    HELLO_TIMEOUT = "hello_timeout"
    #: Messages far past the rate limit (1008).
    FLOOD = "flood"
    #: The client read its messages too slowly (1008).
    SLOW_READER = "slow_reader"
    #: A frame over the size limit (1009).
    MESSAGE_TOO_BIG = "message_too_big"
    #: A binary frame (1003).
    BINARY_FRAME = "binary_frame"
    #: A frame breaking the websocket protocol.
    PROTOCOL_ERROR = "protocol_error"
    #: The server shutting down (1001).
    SERVER_SHUTDOWN = "server_shutdown"
    #: The connection's token was revoked: rotated, or its device signed out (4001).
    SIGNED_OUT = "signed_out"


WEBSOCKET_CLOSES = Counter(
    "tripeaks_websocket_closes",
    "Websocket connections closed, by reason: " + ", ".join(r.value for r in CloseReason) + ".",
    ["reason"],
)
_CLOSES = {reason: WEBSOCKET_CLOSES.labels(reason.value) for reason in CloseReason}


def websocket_closed(reason: CloseReason) -> None:
    """Count a closed websocket (and take it off the open ones)."""
    _CLOSES[reason].inc()
    WEBSOCKETS_OPEN.dec()


# ------------------------------------------------------------------- limits and admission

RATE_LIMITED = Counter(
    "tripeaks_rate_limited",
    "Requests refused for going over a rate limit, by kind: websocket_message (answered "
    "rate_limited; a flood closes the connection instead), registration and sign_in (HTTP "
    "429).",
    ["kind"],
)
RATE_LIMITED_MESSAGES = RATE_LIMITED.labels("websocket_message")
RATE_LIMITED_REGISTRATIONS = RATE_LIMITED.labels("registration")
RATE_LIMITED_SIGN_INS = RATE_LIMITED.labels("sign_in")

ADMISSION_BUSY = Counter(
    "tripeaks_admission_server_busy",
    "Players arriving (registering, saying hello, asking for a new table) answered "
    "server_busy, by reason: queue_full (too many waiting already) or wait_timeout (their "
    "turn did not come in time).",
    ["reason"],
)
ADMISSION_QUEUE_FULL = ADMISSION_BUSY.labels("queue_full")
ADMISSION_WAIT_TIMEOUT = ADMISSION_BUSY.labels("wait_timeout")

# ------------------------------------------------------------------------------------ solver

SOLVER_CACHE = Counter(
    "tripeaks_solver_cache",
    "Deal analyses asked of the solver, by result: hit (answered from its cache), shared "
    "(waited for the same deal's solve already running), miss (solved).",
    ["result"],
)
_SOLVER_CACHE = {result: SOLVER_CACHE.labels(result) for result in ("hit", "shared", "miss")}
#: Upper bounds of the solve-time buckets, in seconds: 10 ms to 60 s.
SOLVER_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SOLVER_SECONDS = Histogram(
    "tripeaks_solver_seconds",
    "Time of a solver task, in seconds, from its submission to the solver processes (waiting "
    "for a free one included) to its answer, by task: analyse (a whole deal: winnable, par, "
    "line) or hint (the best action of a position).",
    ["task"],
    buckets=SOLVER_BUCKETS_S,
)
_SOLVER_SECONDS = {task: SOLVER_SECONDS.labels(task) for task in ("analyse", "hint")}


def solver_lookup(result: SolverLookup) -> None:
    """Count a deal analysis asked of the solver: ``hit``, ``shared`` or ``miss``."""
    _SOLVER_CACHE[result].inc()


def solver_solved(task: SolverTask, seconds: float) -> None:
    """Record the time of one solver task, in seconds."""
    _SOLVER_SECONDS[task].observe(seconds)


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


@dataclass(frozen=True, slots=True)
class Activity:
    """What the database shows at one moment: race rooms by state, and today's daily (the
    database's UTC date) players and ranked entries."""

    rooms_lobby: int
    rooms_running: int
    daily_players: int
    daily_ranked: int


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
        today = today_sql(services.daily.pinned_today())
        query = select(
            select(func.count()).select_from(Race).where(Race.status == "lobby").scalar_subquery(),
            select(func.count())
            .select_from(Race)
            .where(Race.status == "running")
            .scalar_subquery(),
            select(DailyPlayers.players).where(DailyPlayers.daily_date == today).scalar_subquery(),
            select(func.sum(LeaderboardCount.entries))
            .where(LeaderboardCount.daily_date == today, LeaderboardCount.level == 0)
            .scalar_subquery(),
        )
        try:
            async with asyncio.timeout(self._timeout_s), services.db.connect() as conn:
                try:
                    await conn.execute(
                        text(f"SET LOCAL statement_timeout = {ACTIVITY_STATEMENT_TIMEOUT_MS}")
                    )
                    row = (await conn.execute(query)).one()
                except asyncio.CancelledError:
                    await conn.invalidate()  # cut off mid-statement: its state is unknown
                    raise
        except Exception as exc:
            ACTIVITY_FAILURES.inc()
            log.warning("metrics: the database's figures were not read: %s", type(exc).__name__)
            return None
        lobby, running, players, ranked = row
        return Activity(int(lobby), int(running), int(players or 0), int(ranked or 0))


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
    "ACCEPTED",
    "ACK_SECONDS",
    "ADMISSION_QUEUE_FULL",
    "ADMISSION_WAIT_TIMEOUT",
    "CONTENT_TYPE",
    "MULTIPROCESS",
    "MULTIPROCESS_ENV",
    "RATE_LIMITED_MESSAGES",
    "RATE_LIMITED_REGISTRATIONS",
    "RATE_LIMITED_SIGN_INS",
    "WEBSOCKETS_OPEN",
    "Activity",
    "ActivityReader",
    "CloseReason",
    "action_failed",
    "action_rejected",
    "observe_batch",
    "render",
    "solver_lookup",
    "solver_solved",
    "watch_pool",
    "websocket_closed",
]
