"""Alembic environment (async template): migrates with a connection handed in by the server
(``config.attributes["connection"]``), or connects to ``sqlalchemy.url`` / ``DATABASE_URL``."""

from __future__ import annotations

import asyncio
import os

from alembic import context
from sqlalchemy import Connection

from server.storage.db import MIGRATION_DEADLINES, create_engine
from server.storage.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_engine(url, pool_size=1, deadlines=MIGRATION_DEADLINES)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


def run_migrations_online() -> None:
    """Run migrations on the given connection or on a fresh one."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("Set DATABASE_URL to the PostgreSQL database to migrate.")
    asyncio.run(_run_async(url))


if context.is_offline_mode():
    raise SystemExit("Offline (SQL script) migrations are not supported; run against a database.")
run_migrations_online()
