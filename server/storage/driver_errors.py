"""The database driver's errors raised as the SQLAlchemy exceptions the engine raises for them,
with no parameter values in their messages, for the statements sent on the asyncpg connection
itself rather than through SQLAlchemy (the group commit's batch, :mod:`server.storage.commits`):
a failed batch then looks the same to its callers whichever way it was sent, and
:func:`server.storage.sessions.as_storage_error` translates it like any other.

No value reaches a message: a broken constraint's failing row and a value the driver could not
encode or the database refused may hold a secret deal's cards.
"""

from __future__ import annotations

import asyncpg
from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
)

#: The SQLAlchemy exception each error of the driver is raised as (the first entry it is an
#: instance of wins): the ones the engine raises for the same errors, so that callers handle
#: a failed batch as they handle any other failed statement.
DRIVER_ERRORS: tuple[tuple[type[Exception], type[DBAPIError]], ...] = (
    (asyncpg.IntegrityConstraintViolationError, IntegrityError),
    (asyncpg.InvalidCachedStatementError, NotSupportedError),
    (asyncpg.SyntaxOrAccessError, ProgrammingError),
    (asyncpg.InternalServerError, InternalError),
    (asyncpg.QueryCanceledError, OperationalError),
    (asyncpg.PostgresError, DBAPIError),
    (asyncpg.InterfaceError, InterfaceError),
    (asyncpg.InternalClientError, InternalError),
)


class DriverError(Exception):
    """An error of the database driver, as the ``orig`` of the SQLAlchemy exception it is
    raised as (the engine's own errors have one like it): the driver's message without the
    values it may quote (the failing row of a broken constraint, a parameter it could not
    use), which may hold a secret deal's cards.

    Attributes:
        sqlstate / pgcode: the error's SQLSTATE (None for the driver's own errors).
        constraint_name: the constraint that refused the write, when one did (a name, no
            value).
    """

    def __init__(
        self, message: str, sqlstate: str | None, constraint_name: str | None = None
    ) -> None:
        super().__init__(message)
        self.sqlstate = self.pgcode = sqlstate
        self.constraint_name = constraint_name


def database_error(
    exc: Exception, statement: str, *, connection_invalidated: bool = False
) -> DBAPIError:
    """The SQLAlchemy exception to raise for an error of the driver (see
    :data:`DRIVER_ERRORS`), its message free of values: the driver's message without the
    failing row it may add, and a data error's (an argument the driver could not encode, a
    value the database refused) cut at its first colon, after which it quotes the value.

    Raised from the driver's exception, it shows that in tracebacks as the engine's errors do
    (with the failing row of a broken constraint, as theirs); raised from None for a data
    error.

    Args:
        exc: an ``asyncpg.PostgresError``, ``asyncpg.InterfaceError`` or
            ``asyncpg.InternalClientError``.
        statement: the SQL that failed (its parameters are never shown).
        connection_invalidated: the connection was lost with it.
    """
    kind = next((kind for driver, kind in DRIVER_ERRORS if isinstance(exc, driver)), DBAPIError)
    message = str(exc.args[0]) if exc.args else type(exc).__name__
    if isinstance(exc, asyncpg.DataError):
        message = message.split(":", 1)[0]
    orig = DriverError(
        f"{type(exc).__name__}: {message}",
        getattr(exc, "sqlstate", None),
        getattr(exc, "constraint_name", None),
    )
    return kind(
        statement,
        None,
        orig,
        hide_parameters=True,
        connection_invalidated=connection_invalidated,
    )


def unsent(exc: DBAPIError) -> bool:
    """Whether the driver refused a batch before sending any of it: its connection was in a
    state that allows no statement (the server dropped it, and the driver has not noticed):
    ``InternalClientError``, ``InterfaceError``. A connection lost mid-statement (a
    ``PostgresError`` such as ``ConnectionDoesNotExistError``) is not: the batch's fate is
    unknown."""
    return isinstance(exc.__cause__, asyncpg.InternalClientError | asyncpg.InterfaceError)


def commit_unconfirmed(exc: BaseException) -> bool:
    """Whether a ``COMMIT`` that failed with ``exc`` may have committed all the same: it was
    sent (the driver did not refuse it first: ``InterfaceError``, ``InternalClientError``)
    and its outcome never came back — the driver's deadline passed (``TimeoutError``), the
    socket failed (``OSError``), the connection was lost (SQLSTATE class 08) or the server
    ended the session (57P: an administrator's or a shutdown's, which may end a backend
    waiting for its synchronous standby after its local commit). Any other error of the
    server rolled the transaction back.

    ``exc`` may be the driver's exception, the SQLAlchemy adapter's for it, or SQLAlchemy's
    (the driver's is then found among its causes)."""
    seen: BaseException | None = exc
    for _ in range(4):  # SQLAlchemy's error, the adapter's, the driver's
        if seen is None:
            break
        if isinstance(seen, asyncpg.InterfaceError | asyncpg.InternalClientError):
            return False
        if isinstance(seen, OSError):  # (TimeoutError is one)
            return True
        sqlstate = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None) or ""
        if sqlstate.startswith(("08", "57P")):
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


__all__ = ["DRIVER_ERRORS", "DriverError", "commit_unconfirmed", "database_error", "unsent"]
