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

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, Literal, TypeVar

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.errors import StorageOutcomeUnknown
from server.storage import replication
from server.storage.db import names_statements, process_statement_name
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
            raw, driver = await _checked_out(conn)
            try:
                prepared = await _prepared(raw.info, driver, statement)
            except (TimeoutError, asyncio.CancelledError):
                await conn.invalidate()  # (a cancel pending on it, see read_single)
                raise

            async def send() -> Any:
                return await _send(driver, prepared, statement, arguments, "fetchval")

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
            raw, driver = await _checked_out(conn)
            try:
                prepared = await _prepared(raw.info, driver, statement)
                row: asyncpg.Record | None = await _send(
                    driver, prepared, statement, arguments, "fetchrow"
                )
            except (TimeoutError, asyncio.CancelledError):
                # Past its deadline (or its caller gone) mid-statement, the connection waits
                # for the server to confirm a cancel: back in the pool, the next checkout's
                # ping would wait for that as long as the server does not answer.
                await conn.invalidate()
                raise
            return row


async def _checked_out(conn: AsyncConnection) -> tuple[Any, asyncpg.Connection]:
    """The pool's record of a connection just checked out of the engine's pool, and the
    driver's connection under it."""
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert driver is not None  # a connection just checked out is attached
    return raw, driver


#: Where the statements prepared on a connection are kept, by their text: the pool's record of
#: the connection (``info``), which the pool empties when it replaces the connection.
_PREPARED_KEY = "tripeaks.single.prepared"


async def _prepared(
    info: dict[Any, Any], driver: asyncpg.Connection, statement: str
) -> asyncpg.prepared_stmt.PreparedStatement | None:
    """``statement`` prepared on ``driver`` once (kept in ``info``, the pool's record of the
    connection), under a name no other process uses
    (:func:`~server.storage.db.process_statement_name`, as the engine's own statements: the
    driver's names would collide on a server session two processes share); None behind a
    transaction pooler, where each statement is unnamed
    (:func:`~server.storage.db.names_statements`)."""
    if not names_statements(driver):
        return None
    kept: dict[str, tuple[asyncpg.Connection, Any]] = info.setdefault(_PREPARED_KEY, {})
    found = kept.get(statement)
    if found is None or found[0] is not driver:
        prepared = await _as_engines(
            driver, statement, driver.prepare(statement, name=process_statement_name())
        )
        found = kept[statement] = (driver, prepared)
    result: asyncpg.prepared_stmt.PreparedStatement = found[1]
    return result


async def _send(
    driver: asyncpg.Connection,
    prepared: asyncpg.prepared_stmt.PreparedStatement | None,
    statement: str,
    arguments: Sequence[object],
    fetch: Literal["fetchval", "fetchrow"],
) -> Any:
    """Run ``statement`` with ``arguments`` by the driver's ``fetch`` (``fetchval``,
    ``fetchrow``): through ``prepared`` when it is, else unnamed on ``driver``; the driver's
    errors raised as the engine's."""
    sent = (
        getattr(driver, fetch)(statement, *arguments)
        if prepared is None
        else getattr(prepared, fetch)(*arguments)
    )
    return await _as_engines(driver, statement, sent)


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
