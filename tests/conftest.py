"""Shared fixtures: throw-away PostgreSQL databases, a fake clock, real servers on loopback.

Every test that needs a database gets its own, copied from a template migrated once per run, on
the PostgreSQL at ``TRIPEAKS_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``).
The databases are dropped afterwards; nothing else on that server is touched.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.engine import make_url

from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.storage.db import create_engine, migrate
from server.web.app import create_app

ADMIN_URL = os.environ.get("TRIPEAKS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
START = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


def _db_url(name: str) -> str:
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _make_template(name: str) -> None:
    await _admin(f'CREATE DATABASE "{name}"')
    engine = create_engine(_db_url(name), pool_size=1)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database migrated to head, used as the template of each test's database."""
    name = f"tripeaks_test_tmpl_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_make_template(name))
    except OSError as exc:
        pytest.exit(f"PostgreSQL is not reachable at {ADMIN_URL}: {exc}", returncode=3)
    yield name
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def database_url(template_db: str) -> AsyncIterator[str]:
    """A fresh, migrated, empty database for one test."""
    name = f"tripeaks_test_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield _db_url(name)
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def empty_database_url() -> AsyncIterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    name = f"tripeaks_test_empty_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    yield _db_url(name)
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clock() -> FakeClock:
    """A fake UTC clock starting at 2026-03-14 12:00 UTC."""
    return FakeClock(START)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Settings for a test server on the test's database."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path / "data",
        daily_secret="test-daily-key-0123456789abcdefghij",
        # Dates get their deal from their first player, unless a test turns preparing on.
        daily_prepare_every_s=0,
        ws_rate_per_second=1000,
        register_per_minute=100_000,
    )


ServerFactory = Callable[..., Awaitable[TestServer]]


@pytest.fixture(scope="session")
def analyzer() -> Iterator[Analyzer]:
    """One solver pool for the whole run (its cache spares re-solving the same deals)."""
    pool = Analyzer(workers=1)
    yield pool
    pool.close()


@pytest.fixture
async def make_server(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> AsyncIterator[ServerFactory]:
    """Start real servers (on 127.0.0.1, a free port) over the test's database.

    Call it again for a second process-like server on the same database (a restart).
    """
    servers: list[TestServer] = []

    async def start(**overrides: object) -> TestServer:
        app_settings = settings.model_copy(update=overrides) if overrides else settings
        app = create_app(app_settings, clock=clock, analyzer=analyzer)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def server(make_server: ServerFactory) -> TestServer:
    """One running server."""
    return await make_server()


@pytest.fixture
async def client(server: TestServer) -> AsyncIterator[TestClient[object, object]]:
    """An HTTP/websocket client of ``server``."""
    async with TestClient(server) as test_client:
        yield test_client
