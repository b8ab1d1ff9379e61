"""One statement sent through the driver, its own implicit transaction: a write
(:func:`write_single`), or a read whose parts must be of one moment (:func:`read_single`: one
statement sees one snapshot).

One round trip, as the group commit's batch (:mod:`server.storage.commits`): SQLAlchemy's
transaction and statement execution around a statement cost more of the process's CPU than the
statement itself, and a transaction of several statements costs a round trip for each (its
``BEGIN``, each statement, its ``COMMIT``), each holding a pooled connection for another turn
of the event loop: under a reconnect storm, when every turn is long, reads of several
statements held every pooled connection and the writes waited behind them. The driver
prepares the statement once per connection (unnamed behind a transaction pooler, see
:func:`~server.storage.db.create_engine`); its errors are raised as the engine's
(:mod:`server.storage.driver_errors`), and a write's commit is acknowledged only once it is
known to be replicated (:func:`~server.storage.replication.acknowledged`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.errors import StorageOutcomeUnknown
from server.storage import replication
from server.storage.driver_errors import database_error
from server.storage.sessions import storage_errors

T = TypeVar("T")


async def write_single(engine: AsyncEngine, statement: str, arguments: Sequence[object]) -> Any:
    """Send ``statement`` with ``arguments`` ($1, $2, …) on a pooled connection, as its own
    transaction, and return the first value of its first row (None without one) once its
    commit is known to be replicated.

    Raises:
        StorageConflict: a constraint refused it; nothing was stored.
        StorageOutcomeUnknown: it was sent and its commit not confirmed, or it came back
            committed on the primary alone and its replication could not be confirmed: it may
            be stored (its connection is never used again).
        StorageError: the database failed; nothing was stored.
    """
    with storage_errors():
        async with engine.connect() as conn:
            driver = await _driver(conn)

            async def send() -> Any:
                return await _as_engines(driver, statement, driver.fetchval(statement, *arguments))

            try:
                return await replication.acknowledged(driver, send, None)
            except StorageOutcomeUnknown:
                await conn.invalidate()  # (its state is unknown: never reused)
                raise


async def read_single(
    engine: AsyncEngine, statement: str, arguments: Sequence[object]
) -> asyncpg.Record | None:
    """Send ``statement`` with ``arguments`` ($1, $2, …) on a pooled connection, as its own
    transaction, and return its first row (None without one).

    Raises:
        StorageError: the database failed.
    """
    with storage_errors():
        async with engine.connect() as conn:
            driver = await _driver(conn)
            row: asyncpg.Record | None = await _as_engines(
                driver, statement, driver.fetchrow(statement, *arguments)
            )
            return row


async def _driver(conn: AsyncConnection) -> asyncpg.Connection:
    """The driver's connection under a connection just checked out of the engine's pool."""
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None  # a connection just checked out is attached
    return driver


async def _as_engines(driver: asyncpg.Connection, statement: str, sent: Awaitable[T]) -> T:
    """``sent``'s result, the driver's errors raised as the engine's."""
    try:
        return await sent
    except (
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
    ) as exc:
        raise database_error(exc, statement, connection_invalidated=driver.is_closed()) from exc


__all__ = ["read_single", "write_single"]
