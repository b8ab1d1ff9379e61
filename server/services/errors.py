"""The service error family. Only the web layer turns these into HTTP statuses or ws errors."""

from __future__ import annotations


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
