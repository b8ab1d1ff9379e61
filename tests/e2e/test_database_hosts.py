"""Real PostgreSQL servers of the tests' own behind the storage layer: a URL's host list in each
form, ``target_session_attrs=read-write`` passing over a server that refuses writes, and every
wait on a frozen server (``SIGSTOP``) ending at its deadline, after which the same engine plays
on once the server is thawed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from sqlalchemy import text

from server.errors import StorageError
from server.storage.db import (
    DatabaseDeadlines,
    create_engine,
    database_answers,
    direct_dsn,
    hosts_in_turn,
    migrate_url,
    parse_database_url,
)
from server.storage.sessions import Sessions
from tests.e2e.conftest import PrivatePostgres, own_postgres
from tests.freeze import freeze, thaw

#: Short deadlines, so that the test does not wait long for each.
DEADLINES = DatabaseDeadlines(connect_s=1.0, statement_s=2.0, checkout_s=5.0)
#: How long a wait may take before the test calls it a hang: every deadline, several times
#: over (a loaded machine), far below the minutes a wait without one lasts.
HANG_S = 60.0


@pytest.fixture
async def read_only() -> AsyncIterator[PrivatePostgres]:
    """A server that refuses writes: ``default_transaction_read_only`` on (set once its
    ``tripeaks`` database is there), as a standby (or a demoted primary) answers."""
    with own_postgres() as server:
        admin = await asyncpg.connect(server.admin_url)
        try:
            await admin.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            await admin.execute("SELECT pg_reload_conf()")
        finally:
            await admin.close()
        yield server


@pytest.fixture
def writable() -> Iterator[PrivatePostgres]:
    """A second server, taking writes."""
    with own_postgres() as server:
        yield server


def _forms(first: PrivatePostgres, second: PrivatePostgres) -> list[str]:
    """The same two servers, read-write wanted, in each form of URL users write."""
    a, b = first.port, second.port
    wanted = "target_session_attrs=read-write"
    return [
        f"postgresql://postgres@127.0.0.1:{a},127.0.0.1:{b}/tripeaks?{wanted}",
        f"postgresql://postgres@/tripeaks?host=127.0.0.1:{a}&host=127.0.0.1:{b}&{wanted}",
        f"postgresql://postgres@/tripeaks?host=127.0.0.1,127.0.0.1&port={a},{b}&{wanted}",
    ]


async def _port_of(url: str) -> int:
    """The port of the server a new engine over ``url`` reaches."""
    engine = create_engine(url, pool_size=1, deadlines=DEADLINES)
    try:
        async with engine.connect() as conn:
            return int(await conn.scalar(text("SELECT current_setting('port')")))
    finally:
        await engine.dispose()


async def test_read_write_passes_over_a_server_that_refuses_writes_in_each_url_form(
    read_only: PrivatePostgres, writable: PrivatePostgres
) -> None:
    for url in _forms(read_only, writable):
        # The engine, the migrations and the event listener's connection reach the same one.
        assert await _port_of(url) == writable.port, url
        listener = await asyncpg.connect(direct_dsn(url), timeout=HANG_S)
        try:
            assert await listener.fetchval("SELECT current_setting('port')") == str(writable.port)
        finally:
            await listener.close()
    await asyncio.wait_for(migrate_url(_forms(read_only, writable)[0]), HANG_S)
    stored = await asyncpg.connect(writable.url)
    try:
        assert await stored.fetchval("SELECT count(*) FROM alembic_version") == 1
    finally:
        await stored.close()
    # Without read-write wanted, the first host is taken as it is.
    anyone = f"postgresql://postgres@127.0.0.1:{read_only.port},127.0.0.1:{writable.port}/tripeaks"
    assert await _port_of(anyone) == read_only.port


async def test_a_frozen_first_host_is_passed_over_within_its_own_deadline(
    read_only: PrivatePostgres, writable: PrivatePostgres
) -> None:
    frozen = freeze(read_only)
    try:
        url = _forms(read_only, writable)[0].replace("?target_session_attrs=read-write", "")
        assert await asyncio.wait_for(_port_of(url), HANG_S) == writable.port
        # The next connections of this process try the frozen host last.
        target = parse_database_url(url)
        in_turn = hosts_in_turn(target.hosts, target.target_session_attrs)
        assert [h.port for h in in_turn] == [writable.port, read_only.port]
        assert await asyncio.wait_for(_port_of(url), HANG_S) == writable.port
    finally:
        thaw(frozen)


@pytest.fixture
async def engine_sessions(writable: PrivatePostgres) -> AsyncIterator[Sessions]:
    """Sessions over an engine with :data:`DEADLINES` on ``writable``, one connection pooled."""
    engine = create_engine(writable.url, pool_size=1, deadlines=DEADLINES)
    try:
        await database_answers(engine)
        yield Sessions(engine)
    finally:
        await asyncio.wait_for(engine.dispose(), HANG_S)


async def test_each_wait_on_a_frozen_server_ends_and_the_engine_plays_on_after_the_thaw(
    writable: PrivatePostgres, engine_sessions: Sessions
) -> None:
    sessions = engine_sessions
    engine = sessions.engine

    async def ask(session_query: str) -> int:
        async with sessions() as session:
            return int((await session.execute(text(session_query))).scalar_one())

    frozen: list[int] = []

    async def frozen_midway() -> None:
        async with sessions() as session:
            await session.execute(text("SELECT 1"))
            frozen.extend(freeze(writable))
            await session.execute(text("SELECT 2"))

    try:
        # A statement on a connection the server stopped answering: its deadline; the
        # session's end (a rollback on that connection) does not wait for the server either.
        with pytest.raises(StorageError):
            await asyncio.wait_for(frozen_midway(), HANG_S)
    except BaseException:
        thaw(frozen)
        raise
    try:
        # The pooled connection's pre-ping, then a new connection: their deadlines.
        with pytest.raises(Exception) as failed:
            await asyncio.wait_for(database_answers(engine), HANG_S)
        assert not isinstance(failed.value, TimeoutError), "a wait outlived the test's bound"
        with pytest.raises(StorageError):
            await asyncio.wait_for(ask("SELECT 3"), HANG_S)
    finally:
        thaw(frozen)
    # The same engine answers again once the server does, without a restart.
    assert await asyncio.wait_for(ask("SELECT 4"), HANG_S) == 4
