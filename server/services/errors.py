"""The service error family. Only the web layer turns these into HTTP statuses or ws errors."""

from __future__ import annotations

import logging
import math

from sqlalchemy.exc import TimeoutError as PoolTimeout

log = logging.getLogger(__name__)

#: Seconds a client is told to wait when the server is too busy to take its request.
BUSY_RETRY_S = 2.0


class ServiceError(Exception):
    """Base of every error a service raises on purpose.

    Attributes:
        code: a stable machine-readable code (e.g. ``unknown_game``).
        message: a human-readable explanation naming what was wrong.
    """

    code = "service_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class InvalidInputError(ServiceError):
    """The request's content is unacceptable (a bad name, a bad game code, a bad date)."""

    code = "invalid_input"


class UnauthorizedError(ServiceError):
    """No valid bearer token was presented."""

    code = "unauthorized"


class ForbiddenError(ServiceError):
    """The player may not touch this resource (someone else's game)."""

    code = "forbidden"


class NotFoundError(ServiceError):
    """The resource does not exist (unknown game, player or date)."""

    code = "not_found"


class ConflictError(ServiceError):
    """The request conflicts with the current state (a name already taken)."""

    code = "conflict"


class UnavailableError(ServiceError):
    """The database is unreachable or failed; nothing was changed. Retry later."""

    code = "unavailable"


class ServerBusyError(ServiceError):
    """Too many requests at this moment (a crowd arriving, every database connection taken);
    nothing was done. Come back after ``retry_after_s`` seconds."""

    code = "server_busy"

    def __init__(self, retry_after_s: float = BUSY_RETRY_S, message: str | None = None) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(
            message
            or f"too many players are arriving at once; try again in {math.ceil(retry_after_s)} s"
        )


def database_failure(exc: BaseException) -> ServiceError:
    """What a database failure is answered with (nothing was changed either way):
    :class:`ServerBusyError` when no connection of the pool came free in time,
    :class:`UnavailableError` otherwise. Logged here, once."""
    if isinstance(exc, PoolTimeout):
        log.warning("no database connection came free in time")
        return ServerBusyError(
            message="the server is busy: every database connection is taken; nothing was "
            f"changed, try again in {math.ceil(BUSY_RETRY_S)} s"
        )
    log.warning("database failure: %s", exc.__class__.__name__, exc_info=exc)
    return UnavailableError(
        "the game database is unavailable; nothing was changed, try again shortly"
    )
