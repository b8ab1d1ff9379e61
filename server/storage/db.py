"""Database connections, the embedded PostgreSQL, and migrations under an advisory lock."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

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


def create_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    """Create the async SQLAlchemy engine (asyncpg) with a bounded, pre-pinged pool.

    Args:
        url: a PostgreSQL URL (see :func:`async_url`).
        pool_size: connections kept open; up to as many again may overflow under load.
    """
    return create_async_engine(
        async_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=10,
        # A failed statement's error names no values: they may hold a secret deal's code.
        hide_parameters=True,
        # A database host that stops answering fails a request within seconds, not asyncpg's
        # default of a minute.
        connect_args={
            "timeout": CONNECT_TIMEOUT_S,
            "server_settings": {"application_name": "tripeaks", "timezone": "UTC"},
        },
    )


def session_factory(engine: AsyncEngine) -> async_sessionmaker[Any]:
    """A session factory: one session per unit of work, objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


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


def _upgrade(connection: Connection) -> None:
    connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
    try:
        connection.commit()
        command.upgrade(alembic_config(connection), "head")
        connection.commit()
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
        connection.commit()


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest migration, holding an advisory lock meanwhile.

    Safe to call from several processes at once: they take turns, and the later ones find the
    schema already at head.
    """
    async with engine.connect() as conn:
        await conn.run_sync(_upgrade)
    log.info("database schema is at the newest migration")


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
