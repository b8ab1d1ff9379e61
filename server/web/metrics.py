"""Operational metrics of the process, served as ``GET /metrics`` in the Prometheus text format
(:mod:`server.web.scrape` renders them, with what a scrape reads of the pool and the database).

The metrics live in the process (``prometheus_client``'s default registry, or in multiprocess
mode its files) and are updated where things happen: each update on the action path is one call
on a label child bound once here, never a label lookup per action, and no label ever names a
player, a game or a connection. What a scrape serves (``render``, ``CONTENT_TYPE``), reads
(``ActivityReader``) and watches (``watch_pool``) stays importable from here.

The README's "Operating it" section lists every metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from server.engine.codes import RuleSet
from server.engine.errors import Rejection
from server.errors import ErrorCode
from server.services.analysis import Lookup as SolverLookup
from server.services.analysis import Task as SolverTask
from server.services.matchmaking import Matched
from server.storage.replicas import Fallback, ReadTarget

# No ``*_created`` series beside each counter and histogram (a start time per series, which
# would double what every scrape carries): the process start time is in ``process_*``.
# (server.web.scrape says so too, for its own.)
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
    "outcome_unknown",
    "server_busy",
    "internal_error",
    "unauthorized",
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


#: Upper bounds of the acknowledgement-time buckets, in seconds: 1 ms to 10 s.
ACK_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
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


# ------------------------------------------------------------------------------------ events

EVENTS_PUBLISHED = Counter(
    "tripeaks_events_published_total",
    "Events between processes sent by this process's publisher (after their commits).",
)
EVENTS_DROPPED = Counter(
    "tripeaks_events_dropped_total",
    "Events this process could not publish (their writes are stored all the same): full (too "
    "many waiting), failed (the publish statement failed).",
    ["reason"],
)
_EVENTS_DROPPED = {reason: EVENTS_DROPPED.labels(reason) for reason in ("full", "failed")}
EVENT_QUEUE_USAGE = Gauge(
    "tripeaks_event_queue_usage",
    "The database's NOTIFY queue usage, 0..1, as the event listener last read it (once a second).",
    multiprocess_mode="max",
)


EVENT_ROOM_CHANNELS = Gauge(
    "tripeaks_event_room_channels",
    "Race rooms whose event channel this process LISTENs to now (those it serves).",
    multiprocess_mode="livesum",
)


def event_room_channels(count: int) -> None:
    """Record how many room channels the event listener LISTENs to now."""
    EVENT_ROOM_CHANNELS.set(count)


def events_published(count: int) -> None:
    """Record ``count`` events sent."""
    EVENTS_PUBLISHED.inc(count)


def events_dropped(reason: str, count: int) -> None:
    """Record ``count`` events dropped for ``reason`` (``full``, ``failed``)."""
    _EVENTS_DROPPED[reason].inc(count)


def event_queue_usage(usage: float) -> None:
    """Record a reading of the NOTIFY queue's usage (0..1)."""
    EVENT_QUEUE_USAGE.set(usage)


# ------------------------------------------------------------------------------ quick races

QUEUE_WAITING = Gauge(
    "tripeaks_queue_waiting",
    "Players waiting for a quick race under each rule set, as this process's last matcher pass "
    "left them (rows another process's pass held then are not counted).",
    ["rules"],
)
#: Upper bounds of the quick-race wait buckets, in seconds.
QUEUE_WAIT_BUCKETS_S = (0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0)
QUEUE_WAIT_SECONDS = Histogram(
    "tripeaks_queue_wait_seconds",
    "Seconds a matched player waited for their quick race, by rule set.",
    ["rules"],
    buckets=QUEUE_WAIT_BUCKETS_S,
)
QUEUE_MATCH_SIZE = Histogram(
    "tripeaks_queue_match_players",
    "Players per quick race matched, by rule set.",
    ["rules"],
    buckets=(2, 3, 4, 5, 6),
)


def observe_match(rules: RuleSet, waiting: int, made: Sequence[Matched]) -> None:
    """Record one matcher pass: the players it left waiting under ``rules`` and each
    match's size and waits (seconds)."""
    QUEUE_WAITING.labels(rules.value).set(waiting)
    for matched in made:
        QUEUE_MATCH_SIZE.labels(rules.value).observe(len(matched.player_ids))
        for wait_s in matched.waits_s:
            QUEUE_WAIT_SECONDS.labels(rules.value).observe(wait_s)


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

CLIENT_FAULTS = Counter(
    "tripeaks_client_faults",
    "Requests that failed by their client's doing, by kind: malformed_request (HTTP could not "
    "read it; answered 400), disconnected (the client left mid-request, its body cut short), "
    "body_timeout (its body did not arrive in time; answered 408), connection_limit (over its "
    "address's connection limit; answered 429), out_of_files (a connection not accepted: the "
    "process had no file left). Logged at INFO (out_of_files at WARNING), at most one line "
    "per kind every 10 s.",
    ["kind"],
)
_CLIENT_FAULTS = {
    kind: CLIENT_FAULTS.labels(kind)
    for kind in (
        "malformed_request",
        "disconnected",
        "body_timeout",
        "connection_limit",
        "out_of_files",
    )
}


def client_fault(kind: str) -> None:
    """Count a request that failed by its client's doing (see ``server.web.faults``)."""
    _CLIENT_FAULTS[kind].inc()


#: Upper bounds of the event loop's lateness buckets, in seconds: 5 ms to 10 s.
LOOP_LAG_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
LOOP_LAG_SECONDS = Histogram(
    "tripeaks_event_loop_lag_seconds",
    "How late the process's event loop ran, in seconds: measured every 50 ms, a short sleep "
    "that ended that much later than asked (every player's reads, writes and acks wait as "
    "long).",
    buckets=LOOP_LAG_BUCKETS_S,
)

ADMISSION_BUSY = Counter(
    "tripeaks_admission_server_busy",
    "Players arriving (registering, saying hello, asking for a new table) answered "
    "server_busy, by reason: queue_full (too many waiting already) or wait_timeout (their "
    "turn did not come in time).",
    ["reason"],
)
ADMISSION_QUEUE_FULL = ADMISSION_BUSY.labels("queue_full")
ADMISSION_WAIT_TIMEOUT = ADMISSION_BUSY.labels("wait_timeout")
ADMISSION_LOOP_LAG = ADMISSION_BUSY.labels("loop_lag")
ARRIVALS_HELD = Counter(
    "tripeaks_arrivals_held",
    "New connections that waited at the door, unread, while the process was busy with the "
    "players in play (a storm of reconnecting pages let in at the pace it is greeted)",
)
ARRIVALS_TURNED_AWAY = Counter(
    "tripeaks_arrivals_turned_away",
    "New connections closed as they arrived because the door already held as many as it may",
)
ARRIVALS_LEFT = Counter(
    "tripeaks_arrivals_left",
    "Connections held at the door whose peer had closed or reset them, unread, when their turn "
    "came: dropped without taking a place",
)
DEPARTURES_WAITED = Counter(
    "tripeaks_departures_waited",
    "Closed connections that waited for a later turn of the event loop to be let go (a cut "
    "that ended many at once, let go a few at a time)",
)

# ------------------------------------------------------------------------- background tasks


class BackgroundTask(StrEnum):
    """A long-running task of the process (the ``task`` label of
    ``tripeaks_background_restarts_total``)."""

    #: This process's presence record, refreshed.
    PRESENCE_HEARTBEAT = "presence_heartbeat"
    #: Races whose time is up, finished.
    RACE_SWEEP = "race_sweep"
    #: Players waiting for a quick race, matched.
    QUEUE_MATCH = "queue_match"
    #: Race presence moved along (reconnecting, gone).
    PRESENCE_SWEEP = "presence_sweep"
    #: The records of who is online, kept in line with this process's sockets.
    ONLINE_SWEEP = "online_sweep"
    #: Today's and tomorrow's daily deals, prepared ahead.
    DAILY_PREPARE = "daily_prepare"
    #: The event listener (LISTEN), reconnecting when its connection is lost.
    EVENT_LISTENER = "event_listener"
    #: Open websockets whose token was revoked, looked up and closed.
    TOKEN_CHECK = "token_check"
    #: A followed race room, read again and sent to its followers.
    ROOM_REFRESH = "room_refresh"
    #: Every followed race room read again, those an event missed left behind sent.
    ROOM_SWEEP = "room_sweep"
    #: A race's deal, released to this process's racers at its start.
    RACE_RELEASE = "race_release"
    #: A race invitation, checked and shown to the invited player.
    RACE_INVITATION = "race_invitation"
    #: The read replicas' lag, measured.
    REPLICA_LAG = "replica_lag"
    #: A quick-race match, checked and shown to its players.
    QUEUE_MATCHED = "queue_matched"


BACKGROUND_RESTARTS = Counter(
    "tripeaks_background_restarts",
    "Background tasks that failed and were started again after a back-off, by task: "
    + ", ".join(t.value for t in BackgroundTask)
    + ".",
    ["task"],
)
_RESTARTS = {task: BACKGROUND_RESTARTS.labels(task.value) for task in BackgroundTask}


def background_restarted(task: BackgroundTask) -> None:
    """Count a background task that failed and is started again."""
    _RESTARTS[task].inc()


# ----------------------------------------------------------------------------- read replicas

REPLICA_LAG = Gauge(
    "tripeaks_db_replica_lag_seconds",
    "How far each read replica (TRIPEAKS_DATABASE_READ_URLS; host:port) was behind the primary "
    "at its last lag probe, in seconds (+Inf: it has replayed nothing; the last value stays "
    "while it does not answer); the largest any process measured.",
    ["replica"],
    multiprocess_mode="livemax",
)
REPLICA_USABLE = Gauge(
    "tripeaks_db_replica_usable",
    "1 while reads go to the replica (it answered its last probe in time and lags at most "
    "TRIPEAKS_DATABASE_READ_MAX_LAG_S), else 0; the smallest of the processes'.",
    ["replica"],
    multiprocess_mode="livemin",
)
DB_READS = Counter(
    "tripeaks_db_reads",
    "Reads that tolerate lag (leaderboards, profiles, replays, the daily's counts), by where "
    "they were answered: primary or replica.",
    ["target"],
)
_DB_READS = {target: DB_READS.labels(target.value) for target in ReadTarget}
DB_READ_FALLBACKS = Counter(
    "tripeaks_db_read_fallbacks",
    "Reads that could have gone to a replica answered by the primary, by reason: no_replica "
    "(none usable), failed (the replica's read failed or missed its deadline), missing (the "
    "replica lacked the player's own write, or a game over for good).",
    ["reason"],
)
_DB_READ_FALLBACKS = {reason: DB_READ_FALLBACKS.labels(reason.value) for reason in Fallback}


class ReplicaMetrics:
    """The read router's observer (:class:`~server.storage.replicas.ReadObserver`): counts
    reads and fallbacks, and sets the replicas' lag and use."""

    def read(self, target: ReadTarget) -> None:
        """Count a read answered by ``target``."""
        _DB_READS[target].inc()

    def fallback(self, reason: Fallback) -> None:
        """Count a read sent to the primary for ``reason``."""
        _DB_READ_FALLBACKS[reason].inc()

    def lag(self, replica: str, seconds: float | None, usable: bool) -> None:
        """Set a replica's lag (kept as it was when None) and whether it is used."""
        if seconds is not None:
            REPLICA_LAG.labels(replica).set(seconds)
        REPLICA_USABLE.labels(replica).set(1 if usable else 0)


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
    "line), hint (the best action of a position), divergence (where a replayed game first "
    "left every optimal path) or grade (a daily candidate: its solve and difficulty measure).",
    ["task"],
    buckets=SOLVER_BUCKETS_S,
)
_SOLVER_SECONDS = {
    task: SOLVER_SECONDS.labels(task) for task in ("analyse", "hint", "divergence", "grade")
}


def solver_lookup(result: SolverLookup) -> None:
    """Count a deal analysis asked of the solver: ``hit``, ``shared`` or ``miss``."""
    _SOLVER_CACHE[result].inc()


def solver_solved(task: SolverTask, seconds: float) -> None:
    """Record the time of one solver task, in seconds."""
    _SOLVER_SECONDS[task].observe(seconds)


# What a scrape serves, reads and watches, importable from here as before. Imported last, so that
# the scrape's own metrics are registered after the process's (the order of a scrape's text).
from server.web.scrape import (  # noqa: E402
    ACTIVITY_TIMEOUT_S,
    CONTENT_TYPE,
    MULTIPROCESS,
    MULTIPROCESS_ENV,
    Activity,
    ActivityReader,
    render,
    watch_pool,
)

__all__ = [
    "ACCEPTED",
    "ACK_SECONDS",
    "ACTIVITY_TIMEOUT_S",
    "ADMISSION_LOOP_LAG",
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
    "BackgroundTask",
    "CloseReason",
    "ReplicaMetrics",
    "action_failed",
    "action_rejected",
    "background_restarted",
    "client_fault",
    "event_queue_usage",
    "event_room_channels",
    "events_dropped",
    "events_published",
    "observe_batch",
    "observe_match",
    "render",
    "solver_lookup",
    "solver_solved",
    "watch_pool",
    "websocket_closed",
]
