"""Every error the server raises on purpose, in one tree, and the stable codes clients see.

::

    TriPeaksError
    ├── ProtocolError            a client message that cannot be read (server.protocol.client)
    ├── ServiceError             a request refused by a service; nothing was changed
    │   ├── InvalidInputError    HTTP 400: the request's content is unacceptable
    │   ├── UnauthorizedError    HTTP 401: no valid player token
    │   ├── ForbiddenError       HTTP 403: someone else's resource
    │   │   └── BannedError      banned from ranked play: since when and why
    │   ├── NotFoundError        HTTP 404: no such game, player, date or race
    │   ├── ConflictError        HTTP 409: the request conflicts with the current state
    │   ├── UnavailableError     HTTP 503: the database failed
    │   └── ServerBusyError      HTTP 503 + Retry-After: too many requests at this moment
    └── StorageError             the database failed under a query (server.storage only)
        ├── StorageBusy          no pooled connection came free in time
        ├── StorageConflict      a constraint refused a write (a unique key taken meanwhile)
        ├── StorageUnavailable   the database refused, dropped or timed out the query
        └── StorageOutcomeUnknown a write's commit may or may not have happened

The engine's own errors (:class:`server.engine.errors.EngineError`, a ``ValueError``) stay with
the pure engine; the parse point and the services turn them into a :class:`ProtocolError` or an
:class:`InvalidInputError`. Storage raises only :class:`StorageError` (never a driver's or
SQLAlchemy's exception); :func:`refusal` is the one translation of it into what a player is told,
used by the websocket and REST layers, each in one place.

Every code a client can receive is an :class:`ErrorCode`; the websocket ``error`` message, the REST
error body and docs/protocol.md §7 and §12 share them.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from enum import StrEnum
from typing import ClassVar

log = logging.getLogger(__name__)

#: Seconds a client is told to wait when the server is too busy to take its request.
BUSY_RETRY_S = 2.0


class ErrorCode(StrEnum):
    """The stable, machine-readable error codes (docs/protocol.md §7, §11.9, §12). The value is
    the wire code; a code never changes meaning once published."""

    # reading a client message (websocket)
    BAD_JSON = "bad_json"
    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_MESSAGE = "invalid_message"
    BAD_CODE = "bad_code"
    # the connection (websocket)
    HELLO_REQUIRED = "hello_required"
    HELLO_TIMEOUT = "hello_timeout"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    RATE_LIMITED = "rate_limited"
    FLOOD = "flood"
    BUSY = "busy"
    # players
    UNAUTHORIZED = "unauthorized"
    BAD_NAME = "bad_name"
    NAME_TAKEN = "name_taken"
    BANNED = "banned"
    SIGN_IN_FAILED = "sign_in_failed"
    BAD_KEEP = "bad_keep"
    UNKNOWN_PLAYER = "unknown_player"
    # games
    UNKNOWN_GAME = "unknown_game"
    NOT_YOUR_GAME = "not_your_game"
    GAME_OVER = "game_over"
    DAILY_CLOSED = "daily_closed"
    STALE_SEQ = "stale_seq"
    BEHIND_ACKNOWLEDGED = "behind_acknowledged"
    HINTS_NOT_ALLOWED = "hints_not_allowed"
    RACE_NOT_STARTED = "race_not_started"
    RACE_OVER = "race_over"
    REPLAY_NOT_PUBLIC = "replay_not_public"
    # races
    BAD_INVITE = "bad_invite"
    UNKNOWN_INVITE = "unknown_invite"
    ROOM_FULL = "room_full"
    TOO_MANY_ROOMS = "too_many_rooms"
    RACE_CLOSED = "race_closed"
    NOT_HOST = "not_host"
    ALREADY_STARTED = "already_started"
    BAD_TIME_LIMIT = "bad_time_limit"
    NOT_IN_RACE = "not_in_race"
    RATED_HOST_DEAL = "rated_host_deal"
    RATED_MISMATCH = "rated_mismatch"
    # the daily challenge and its leaderboard (REST)
    BAD_DATE = "bad_date"
    BAD_PERIOD = "bad_period"
    BAD_RULES = "bad_rules"
    NO_DAILY = "no_daily"
    BAD_LIMIT = "bad_limit"
    BAD_CURSOR = "bad_cursor"
    BAD_RADIUS = "bad_radius"
    BAD_PLAYER_ID = "bad_player_id"
    BAD_GAME_ID = "bad_game_id"
    NOT_RANKED = "not_ranked"
    # following (docs/rules.md §4 "Following") and race invitations
    CANNOT_FOLLOW_SELF = "cannot_follow_self"
    FOLLOWING_LIMIT = "following_limit"
    NOT_FOLLOWING = "not_following"
    PLAYER_OFFLINE = "player_offline"
    PLAYER_BANNED = "player_banned"
    ALREADY_IN_RACE = "already_in_race"
    TOO_MANY_INVITES = "too_many_invites"
    # HTTP itself (REST)
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    REQUEST_ENTITY_TOO_LARGE = "request_entity_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    REQUEST_TIMEOUT = "request_timeout"
    ORIGIN_NOT_ALLOWED = "origin_not_allowed"
    # the server
    SERVER_BUSY = "server_busy"
    UNAVAILABLE = "unavailable"
    OUTCOME_UNKNOWN = "outcome_unknown"
    INTERNAL_ERROR = "internal_error"
    # the classes' own codes, used when no finer one applies
    INVALID_INPUT = "invalid_input"
    FORBIDDEN = "forbidden"
    CONFLICT = "conflict"


class TriPeaksError(Exception):
    """Base of every error the server raises on purpose."""


class ProtocolError(TriPeaksError, ValueError):
    """A client message that cannot be accepted (docs/protocol.md §7).

    Attributes:
        code: :attr:`ErrorCode.BAD_JSON`, ``NOT_AN_OBJECT``, ``UNKNOWN_TYPE``,
            ``INVALID_MESSAGE`` or ``BAD_CODE``.
        message: a human-readable explanation naming the offending field or value.
        request_id: the message's ``id`` when it could be read, so the error can echo it.
    """

    def __init__(self, code: ErrorCode, message: str, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.request_id = request_id


class ServiceError(TriPeaksError):
    """A request a service refused on purpose; nothing was changed.

    Attributes:
        code: the :class:`ErrorCode` the client is sent (the class's own unless a finer one is
            given).
        message: a human-readable English explanation naming what was wrong.
        http_status: the status a REST answer carries (a class attribute).
    """

    code: ErrorCode = ErrorCode.INVALID_INPUT
    http_status: ClassVar[int] = 400

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = ErrorCode(code)


class InvalidInputError(ServiceError):
    """The request's content is unacceptable (a bad name, a bad game code, a bad date)."""

    code = ErrorCode.INVALID_INPUT
    http_status = 400


class UnauthorizedError(ServiceError):
    """No valid bearer token was presented."""

    code = ErrorCode.UNAUTHORIZED
    http_status = 401


class ForbiddenError(ServiceError):
    """The player may not touch this resource (someone else's game)."""

    code = ErrorCode.FORBIDDEN
    http_status = 403


class BannedError(ForbiddenError):
    """A player a moderator banned asked for ranked play (code ``banned``).

    Attributes:
        since: the UTC date of the ban.
        reason: the moderator's reason, as given.
    """

    code = ErrorCode.BANNED

    def __init__(self, message: str, *, since: dt.date, reason: str) -> None:
        super().__init__(message)
        self.since = since
        self.reason = reason


class UnsupportedMediaTypeError(ServiceError):
    """A request body that is not sent as JSON (``Content-Type: application/json``)."""

    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    http_status = 415


class RequestTimeoutError(ServiceError):
    """A request body that did not arrive in time; the connection is closed."""

    code = ErrorCode.REQUEST_TIMEOUT
    http_status = 408


class NotFoundError(ServiceError):
    """The resource does not exist (unknown game, player, date or race)."""

    code = ErrorCode.NOT_FOUND
    http_status = 404


class ConflictError(ServiceError):
    """The request conflicts with the current state (a name already taken, a full room)."""

    code = ErrorCode.CONFLICT
    http_status = 409


class UnavailableError(ServiceError):
    """The database is unreachable or failed; nothing was changed. Retry later."""

    code = ErrorCode.UNAVAILABLE
    http_status = 503


class ServerBusyError(ServiceError):
    """Too many requests at this moment (a crowd arriving, every database connection taken);
    nothing was done. Come back after ``retry_after_s`` seconds."""

    code = ErrorCode.SERVER_BUSY
    http_status = 503

    def __init__(self, retry_after_s: float = BUSY_RETRY_S, message: str | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            message
            or f"too many players are arriving at once; try again in {math.ceil(retry_after_s)} s"
        )


class StorageError(TriPeaksError):
    """The database failed under a query; the query's transaction was rolled back.

    Raised by :mod:`server.storage` only, in place of the driver's and SQLAlchemy's exceptions
    (kept as ``__cause__`` for the logs)."""


class StorageBusy(StorageError):
    """No connection of the pool came free within the pool's time-out."""


class StorageConflict(StorageError):
    """A constraint of the database refused a write (a concurrent writer took the unique key
    first); the transaction was rolled back.

    Attributes:
        constraint: the constraint's name when the database gave it, else None.
    """

    def __init__(self, constraint: str | None) -> None:
        super().__init__(f"constraint {constraint or '(unnamed)'} refused the write")
        self.constraint = constraint


class StorageUnavailable(StorageError):
    """The database refused the connection, dropped it, or the query failed or timed out."""


class StorageOutcomeUnknown(StorageError):
    """A write was sent and its connection lost (or given up) before its commit was confirmed,
    and the database could not be asked since whether it was stored: it may or may not have
    been. Reading the stored row again tells, once the database answers."""


def refusal(exc: StorageError) -> ServiceError:
    """What a player is told when the database failed:
    :class:`ServerBusyError` when no pooled connection came free in time,
    :class:`ConflictError` for a write a concurrent one beat (a conflict the service did not
    expect), :class:`UnavailableError` otherwise: ``outcome_unknown`` for a write that may have
    been stored (the one refusal after which something may have changed: the client reads the
    state again), ``unavailable`` for the rest. Logged here, once.

    Args:
        exc: the storage failure.

    Returns:
        The service error to answer with (to raise or to send).
    """
    if isinstance(exc, StorageBusy):
        log.warning("no database connection came free in time")
        return ServerBusyError(
            message="the server is busy: every database connection is taken; nothing was "
            f"changed, try again in {math.ceil(BUSY_RETRY_S)} s"
        )
    if isinstance(exc, StorageConflict):
        log.warning("unexpected write conflict: %s", exc)
        return ConflictError(
            "a concurrent change conflicted with this request; nothing was changed, try again"
        )
    cause = exc.__cause__ or exc
    log.warning("database failure: %s", cause.__class__.__name__, exc_info=cause)
    if isinstance(exc, StorageOutcomeUnknown):
        return UnavailableError(
            "the game database stopped answering while storing this; it may or may not have "
            "been stored: resume the game to see",
            code=ErrorCode.OUTCOME_UNKNOWN,
        )
    return UnavailableError(
        "the game database is unavailable; nothing was changed, try again shortly"
    )
