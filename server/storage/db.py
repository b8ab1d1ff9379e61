"""Database connections, the embedded PostgreSQL, and migrations under an advisory lock."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import warnings
import weakref
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

log = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock held while migrating, so that several server processes
#: starting at once run the migrations one after the other (the later ones find nothing to do).
MIGRATION_LOCK_KEY = 0x7472_6970_6B73  # "tripks"

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "migrations"


class DatabaseConfigError(ValueError):
    """The database URL is not a PostgreSQL URL this server can use."""


def async_url(url: str) -> URL:
    """Normalise a PostgreSQL URL to the asyncpg driver.

    Args:
        url: ``postgresql://…``, ``postgres://…`` or ``postgresql+asyncpg://…``.

    Returns:
        The same URL with the ``postgresql+asyncpg`` driver.

    Raises:
        DatabaseConfigError: the URL cannot be parsed or names another database system.
    """
    try:
        parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    except Exception as exc:  # sqlalchemy raises ArgumentError with a generic message
        raise DatabaseConfigError(f"DATABASE_URL is not a valid URL: {exc}") from exc
    if parsed.get_backend_name() != "postgresql":
        raise DatabaseConfigError(
            f"DATABASE_URL must be a PostgreSQL URL, got backend {parsed.get_backend_name()!r}"
        )
    return parsed.set(drivername="postgresql+asyncpg")


#: Seconds to wait for a new database connection before the request fails.
CONNECT_TIMEOUT_S = 5.0

#: What ``DATABASE_URL`` reaches (``TRIPEAKS_DB_POOLER``): PostgreSQL itself (or a pooler in
#: session mode, which gives each client one server session), or a pooler in transaction mode.
Pooler = Literal["none", "transaction"]

#: Startup parameters of every connection. PgBouncer (1.18 and later) accepts and tracks both per
#: client, restoring each client's values on whichever server connection it is given; a pooler
#: refuses any other startup parameter unless configured to ignore it.
SERVER_SETTINGS = {"application_name": "tripeaks", "timezone": "UTC"}

#: Driver options behind a transaction pooler, where consecutive statements of one client may run
#: on different server sessions: no prepared statement may outlive its statement. With asyncpg's
#: cache off (``statement_cache_size=0``) and SQLAlchemy's off
#: (``prepared_statement_cache_size=0``), each statement is prepared unnamed and parsed again in
#: the same message sequence that binds and executes it (asyncpg >= 0.29), so it never depends
#: on an earlier round trip.
#:
#: SQLAlchemy's recipe also names each statement uniquely (``prepared_statement_name_func``);
#: that makes it a named statement prepared in one round trip and executed in the next, which a
#: statement outside a transaction (our AUTOCOMMIT reads and group commits) may run on another
#: server session. Measured through PgBouncer 1.18 in transaction mode, 300 AUTOCOMMIT
#: statements at a time on 20 connections: with unique names one statement failed with
#: "prepared statement ... does not exist" in each of three runs (900, 3,000 and 9,000
#: statements) and the names stayed allocated (440 on one server session after 9,000); unnamed,
#: none failed in 9,000 and none stayed; with the default caches 5,723 of 9,000 failed.
TRANSACTION_POOLER_CONNECT_ARGS: dict[str, Any] = {
    "statement_cache_size": 0,
    "prepared_statement_cache_size": 0,
}

#: Engines created for a transaction pooler: :func:`migrate` refuses them.
_POOLED: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()


def create_engine(url: str, *, pool_size: int = 10, pooler: Pooler = "none") -> AsyncEngine:
    """Create the async SQLAlchemy engine (asyncpg) with a bounded, pre-pinged pool.

    Args:
        url: a PostgreSQL URL (see :func:`async_url`).
        pool_size: connections kept open; up to as many again may overflow under load.
        pooler: ``transaction`` when ``url`` is a connection pooler in transaction mode
            (PgBouncer ``pool_mode = transaction``): no statement then relies on a server-side
            prepared statement of an earlier round trip (see
            :data:`TRANSACTION_POOLER_CONNECT_ARGS`). Such an engine cannot :func:`migrate`.
    """
    connect_args: dict[str, Any] = {
        # A database host that stops answering fails a request within seconds, not asyncpg's
        # default of a minute.
        "timeout": CONNECT_TIMEOUT_S,
        "server_settings": dict(SERVER_SETTINGS),
    }
    if pooler == "transaction":
        connect_args.update(TRANSACTION_POOLER_CONNECT_ARGS)
    elif pooler != "none":
        raise DatabaseConfigError(f"unknown pooler {pooler!r}: none or transaction")
    engine = create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=10,
        # A failed statement's error names no values: they may hold a secret deal's code.
        hide_parameters=True,
        connect_args=connect_args,
    )
    if pooler == "transaction":
        _POOLED.add(engine)
    return engine


#: Query options of a URL that configure SQLAlchemy's asyncpg adapter, not the connection:
#: given to ``asyncpg.connect`` they would be sent as server settings and refused.
ENGINE_ONLY_QUERY_OPTIONS = ("prepared_statement_cache_size",)


def direct_dsn(url: str) -> str:
    """A ``postgresql://`` DSN for a plain ``asyncpg.connect`` (the event listener): ``url`` in
    any form :func:`async_url` accepts, without the engine-only query options
    (:data:`ENGINE_ONLY_QUERY_OPTIONS`)."""
    parsed = async_url(url).difference_update_query(ENGINE_ONLY_QUERY_OPTIONS)
    return parsed.set(drivername="postgresql").render_as_string(hide_password=False)


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic configuration pointing at ``migrations/``.

    Args:
        connection: an open synchronous connection for ``env.py`` to use, or None.
        url: a database URL for ``env.py`` when no connection is given.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", async_url(url).render_as_string(hide_password=False))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


#: Seconds between tries of the migration lock while another process holds it.
MIGRATION_LOCK_POLL_S = 0.05


def _upgrade(connection: Connection) -> None:
    """Migrate to head on a connection that holds the migration lock."""
    command.upgrade(alembic_config(connection), "head")
    connection.commit()


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest migration, holding an advisory lock meanwhile.

    Safe to call from several processes at once: they take turns, and the later ones find the
    schema already at head. The lock is a session's, held across several transactions: the
    engine must reach PostgreSQL directly (see :func:`migrate_url`). A process waiting for it
    tries again every :data:`MIGRATION_LOCK_POLL_S` outside any transaction, rather than
    blocking in ``pg_advisory_lock``: a waiting statement would hold a snapshot, which a
    migration building an index ``CONCURRENTLY`` (under the lock) must wait out — a deadlock.

    Raises:
        DatabaseConfigError: ``engine`` was created for a transaction pooler.
    """
    if engine in _POOLED:
        raise DatabaseConfigError(
            "migrations hold a session-level advisory lock, which a transaction pooler cannot "
            "carry: migrate over the direct URL (TRIPEAKS_DIRECT_DATABASE_URL)"
        )
    lock = text("SELECT pg_try_advisory_lock(:k)").bindparams(k=MIGRATION_LOCK_KEY)
    async with engine.connect() as conn:
        while True:
            locked = await conn.scalar(lock)
            await conn.commit()  # no transaction, hence no snapshot, while waiting
            if locked:
                break
            await asyncio.sleep(MIGRATION_LOCK_POLL_S)
        try:
            await conn.run_sync(_upgrade)
        finally:
            await conn.rollback()
            await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
            await conn.commit()
    log.info("database schema is at the newest migration")


async def migrate_url(url: str) -> None:
    """:func:`migrate` the database at ``url`` (a direct URL, not a transaction pooler's) over a
    connection of its own, closed afterwards."""
    engine = create_engine(url, pool_size=1)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir/pg`` and return its URL.

    The server keeps running while this process lives and stops when it exits. A database named
    ``tripeaks`` is created on first use.

    Returns:
        A ``postgresql://`` URL using the server's unix socket.
    """
    # pgserver logs every initdb/pg_ctl command with its output at INFO: keep its warnings only.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        forget_dead_handles(data_dir.resolve() / "pg")
        server = pgserver.get_server(  # type: ignore[attr-defined]
            data_dir.resolve() / "pg", cleanup_mode="stop"
        )
        exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'tripeaks';")
        if "(1 row)" not in exists:
            server.psql("CREATE DATABASE tripeaks;")
        uri: str = server.get_uri("tripeaks")
    _EMBEDDED.append(server)
    return uri


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that no longer run from pgserver's list of processes using the
    embedded PostgreSQL (``<pgdata>/.handle_pids.json``).

    pgserver stops the server when the last process on that list exits; a process killed with
    SIGKILL never takes itself off, so without this every later clean stop would leave the
    server running.

    Returns:
        The pids dropped.
    """
    path = pgdata / ".handle_pids.json"
    try:
        pids = [int(pid) for pid in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
    alive = [pid for pid in pids if _running(pid)]
    if len(alive) != len(pids):
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


_EMBEDDED: list[object] = []  # keeps the embedded server's handle alive for the process


async def database_answers(engine: AsyncEngine) -> None:
    """Ask the database one trivial question (``SELECT 1``) on a pooled connection: the health
    check's.

    Raises:
        Exception: whatever the pool or the driver raised (the caller reports it).
    """
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
