"""A write of one statement sent through the driver, its own implicit transaction.

One round trip, as the group commit's batch (:mod:`server.storage.commits`): SQLAlchemy's
transaction and statement execution around a write cost more of the process's CPU than the
statement itself, and a transaction of several statements costs a round trip for each (its
``BEGIN``, each statement, its ``COMMIT``). The driver prepares the statement once per
connection (unnamed behind a transaction pooler, see :func:`~server.storage.db.create_engine`);
its errors are raised as the engine's (:mod:`server.storage.driver_errors`), and its commit is
acknowledged only once it is known to be replicated
(:func:`~server.storage.replication.acknowledged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from server.errors import StorageOutcomeUnknown
from server.storage import replication
from server.storage.driver_errors import database_error
from server.storage.sessions import storage_errors


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
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            assert driver is not None  # a connection just checked out is attached

            async def send() -> Any:
                try:
                    return await driver.fetchval(statement, *arguments)
                except (
                    asyncpg.PostgresError,
                    asyncpg.InterfaceError,
                    asyncpg.InternalClientError,
                ) as exc:
                    raise database_error(
                        exc, statement, connection_invalidated=driver.is_closed()
                    ) from exc

            try:
                return await replication.acknowledged(driver, send, None)
            except StorageOutcomeUnknown:
                await conn.invalidate()  # (its state is unknown: never reused)
                raise


__all__ = ["write_single"]
