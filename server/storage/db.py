"""Database connections, the embedded PostgreSQL, and migrations under an advisory lock."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import uuid
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

#: Names of this process's prepared statements: ``(pid, tag)`` of the process that drew the tag
#: (a process started by fork draws its own), and a counter.
_statement_tag: tuple[int, str] | None = None
_statement_numbers = itertools.count(1)


def process_statement_name() -> str:
    """A name for a prepared statement that no other process uses: ``__tp_<tag>_<n>__``, with a
    random tag drawn once per process and a counter.

    The driver's own names (``__asyncpg_stmt_<n>__``) come from a counter per Python process, so
    two server processes name different statements alike; wherever a server session can be
    handed from one client to another (a pooler, in session mode without its ``DISCARD ALL``),
    the second process's statement would then be refused (``prepared statement
    "__asyncpg_stmt_5__" already exists``).
    """
    global _statement_tag
    pid = os.getpid()
    if _statement_tag is None or _statement_tag[0] != pid:
        _statement_tag = (pid, uuid.uuid4().hex[:16])
    return f"__tp_{_statement_tag[1]}_{next(_statement_numbers):x}__"


def unnamed_statement() -> str:
    """The name of every statement behind a transaction pooler: the empty one, PostgreSQL's
    unnamed statement (see :data:`TRANSACTION_POOLER_CONNECT_ARGS`)."""
    return ""


#: Driver options behind a transaction pooler, where consecutive statements of one client may run
#: on different server sessions, each shared with other clients (other processes): no prepared
#: statement may outlive its statement, and none may have a name.
#:
#: SQLAlchemy prepares every statement (``Connection.prepare``) in one round trip and runs it in
#: the next. Given no name, asyncpg names it ``__asyncpg_stmt_<n>__`` from a counter of its
#: process — whatever its statement caches — so two processes behind one PgBouncer name
#: different statements alike on the server sessions they share: ``prepared statement
#: "__asyncpg_stmt_5__" already exists`` (SQLAlchemy 2.1.9, asyncpg 0.30, PgBouncer 1.18). A
#: name unique to the process does not help either: a statement outside a transaction (the
#: AUTOCOMMIT reads) may be prepared on one server session and run on another (``… does not
#: exist``), and its name stays allocated on the first. So the statement gets the empty name,
#: PostgreSQL's unnamed statement (``prepared_statement_name_func``): with asyncpg's statement
#: cache off (``statement_cache_size=0``) asyncpg marks an unnamed statement unprepared and
#: sends it again (Parse, Bind, Execute, Sync) in the message sequence that runs it, so it never
#: depends on an earlier round trip or on which server session runs it. SQLAlchemy's cache of
#: prepared statements is off too (``prepared_statement_cache_size=0``): a cached unnamed
#: statement would be overwritten by the next. asyncpg's own statements (its type introspection,
#: the group commit's batch) are unnamed with its cache off.
TRANSACTION_POOLER_CONNECT_ARGS: dict[str, Any] = {
    "statement_cache_size": 0,
    "prepared_statement_cache_size": 0,
    "prepared_statement_name_func": unnamed_statement,
}

#: Driver options otherwise (PostgreSQL itself, or a pooler in session mode): statements stay
#: prepared on their connection, named uniquely to the process (:func:`process_statement_name`).
DIRECT_CONNECT_ARGS: dict[str, Any] = {
    "prepared_statement_name_func": process_statement_name,
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
    elif pooler == "none":
        connect_args.update(DIRECT_CONNECT_ARGS)
    else:
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
