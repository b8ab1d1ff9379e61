"""Database sessions whose failures leave as :class:`~server.errors.StorageError`.

Every query of the server runs in a session opened here (or in the group commit, which
translates its own failures the same way, :mod:`server.storage.commits`), so above the storage
layer no SQLAlchemy or driver exception is ever seen: :func:`storage_errors` is the one
translation, and :data:`DATABASE_FAILURES` what it translates.

Not every driver error reaches SQLAlchemy's own translation: a pooled connection is set up by
SQLAlchemy's connect hook (``set_type_codec`` for JSON on asyncpg), which lets the driver's
exceptions through as they are — a backend killed meanwhile raises
``ConnectionDoesNotExistError``, ``InternalClientError`` ("cannot switch to state …") or a
``BrokenPipeError`` out of ``Session.execute``. They are database failures all the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import asyncpg
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from server.errors import StorageBusy, StorageConflict, StorageError, StorageUnavailable

#: Where a session keeps the publisher of its committed events (:mod:`server.storage.events`).
PUBLISHER_KEY = "tripeaks.events.publisher"

#: What a failure of the database, the driver or the connection may be raised as: SQLAlchemy's
#: exceptions, the driver's own (from the connect hook, or from statements sent on the driver's
#: connection), and the socket's (``OSError``: refused, reset, a broken pipe, a time-out).
DATABASE_FAILURES: tuple[type[BaseException], ...] = (
    SQLAlchemyError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


def as_storage_error(exc: BaseException) -> BaseException:
    """The :class:`StorageError` a database failure is raised as (``exc`` kept as its
    ``__cause__``); any other exception is returned as it is.

    Returns:
        :class:`StorageBusy` for the pool's time-out, :class:`StorageConflict` for a constraint
        that refused a write (``constraint`` names it when known), :class:`StorageUnavailable`
        for any other failure of the database, the driver or the connection (a refused or
        dropped connection, a statement time-out, one of the driver's own exceptions: see
        :data:`DATABASE_FAILURES`); ``exc`` itself otherwise.
    """
    error: StorageError
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, PoolTimeout):
        error = StorageBusy("no database connection came free in time")
    elif isinstance(exc, IntegrityError):
        diag = getattr(exc.orig, "__cause__", None) or exc.orig
        error = StorageConflict(getattr(diag, "constraint_name", None))
    elif isinstance(exc, DATABASE_FAILURES):
        error = StorageUnavailable(f"database failure: {exc.__class__.__name__}")
    else:
        return exc
    error.__cause__ = exc
    return error


@contextmanager
def storage_errors() -> Iterator[None]:
    """Raise a database failure of the block as a :class:`StorageError` (see
    :func:`as_storage_error`)."""
    try:
        yield
    except DATABASE_FAILURES as exc:
        raise as_storage_error(exc) from exc


class Sessions:
    """Opens ORM sessions over one engine; a failure inside ``async with sessions() as s:``
    leaves the block as a :class:`StorageError` after the session is closed (its transaction
    rolled back).

    Args:
        engine: the async engine the sessions use.
        publisher: where the events its sessions publish go once committed (a
            :class:`server.storage.events.Publisher`); None: nowhere.

    Attributes:
        engine: the async engine the sessions use.
    """

    def __init__(self, engine: AsyncEngine, publisher: object | None = None) -> None:
        self.engine = engine
        self._maker: async_sessionmaker[AsyncSession] = async_sessionmaker(
            engine, expire_on_commit=False, info={PUBLISHER_KEY: publisher}
        )

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        with storage_errors():
            async with self._maker() as session:
                yield session
