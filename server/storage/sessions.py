"""Database sessions whose failures leave as :class:`~server.errors.StorageError`.

Every query of the server runs in a session opened here (or in the group commit, which
translates its own failures the same way, :mod:`server.storage.commits`), so above the storage
layer no SQLAlchemy or driver exception is ever seen: :func:`storage_errors` is the one
translation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from server.errors import StorageBusy, StorageConflict, StorageError, StorageUnavailable


def as_storage_error(exc: BaseException) -> BaseException:
    """The :class:`StorageError` a database failure is raised as (``exc`` kept as its
    ``__cause__``); any other exception is returned as it is.

    Returns:
        :class:`StorageBusy` for the pool's time-out, :class:`StorageConflict` for a constraint
        that refused a write (``constraint`` names it when known), :class:`StorageUnavailable`
        for any other failure of the database, the driver or the connection (a refused or
        dropped connection, a statement time-out); ``exc`` itself otherwise.
    """
    error: StorageError
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, PoolTimeout):
        error = StorageBusy("no database connection came free in time")
    elif isinstance(exc, IntegrityError):
        diag = getattr(exc.orig, "__cause__", None) or exc.orig
        error = StorageConflict(getattr(diag, "constraint_name", None))
    elif isinstance(exc, SQLAlchemyError | OSError):
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
    except (SQLAlchemyError, OSError) as exc:
        raise as_storage_error(exc) from exc


class Sessions:
    """Opens ORM sessions over one engine; a failure inside ``async with sessions() as s:``
    leaves the block as a :class:`StorageError` after the session is closed (its transaction
    rolled back).

    Attributes:
        engine: the async engine the sessions use.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._maker: async_sessionmaker[AsyncSession] = async_sessionmaker(
            engine, expire_on_commit=False
        )

    @asynccontextmanager
    async def __call__(self) -> AsyncIterator[AsyncSession]:
        with storage_errors():
            async with self._maker() as session:
                yield session
