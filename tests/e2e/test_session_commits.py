"""A write of a session (a resignation, a new game, a race's join or leave, a follow: every
write outside the group commit) tells the truth about a COMMIT whose outcome it did not see,
on a PostgreSQL of the test's own whose commits wait for a synchronous standby that does not
exist: past its deadline or with its backend ended while waiting, the commit may have been
made (locally) and is answered ``outcome_unknown``, never "nothing was changed"; cancelled
while waiting (committed locally, with a warning), it is acknowledged only once a later
commit's wait for the standby ends; refused by the server at COMMIT, it changed nothing and
says so. A transaction that stored nothing (a read) whose COMMIT never answers changed nothing
either: it is ``unavailable``, never ``outcome_unknown``."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.bench.process import free_port
from server.engine import GameCode
from server.errors import StorageConflict, StorageOutcomeUnknown, StorageUnavailable
from server.storage.daily import PostgresDailyStore
from server.storage.db import DatabaseDeadlines, create_engine, migrate_url
from server.storage.sessions import Sessions, storage_errors
from tests.e2e.conftest import PrivatePostgres
from tests.e2e.test_cli import _start
from tests.e2e.test_commit_outcomes import (
    _admin,
    _barrier_waiting,
    _standby_back,
    _without_its_standby,
    _writer_waiting_on,
)
from tests.e2e.test_database_restart import outage_env
from tests.freeze import thaw
from tests.helpers import connect_player, eventually

#: How long a wait may take before the test calls it a hang.
HANG_S = 60.0
#: Each statement's deadline (a COMMIT's too), short so that the tests that reach it are quick.
DEADLINES = DatabaseDeadlines(connect_s=2.0, statement_s=2.0, checkout_s=5.0)
#: A deadline long enough never to be reached while the test does something else.
PATIENT = DatabaseDeadlines(connect_s=2.0, statement_s=HANG_S, checkout_s=5.0)


async def _engine(server: PrivatePostgres, deadlines: DatabaseDeadlines) -> AsyncEngine:
    conn = await asyncpg.connect(server.url)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS probe (n integer UNIQUE DEFERRABLE INITIALLY DEFERRED)"
        )
    finally:
        await conn.close()
    return create_engine(server.url, pool_size=2, deadlines=deadlines)


@pytest.fixture
async def engine(private_postgres: PrivatePostgres) -> AsyncIterator[AsyncEngine]:
    """An engine whose statements have a short deadline, with a ``probe`` table."""
    engine = await _engine(private_postgres, DEADLINES)
    try:
        yield engine
    finally:
        await asyncio.wait_for(engine.dispose(), HANG_S)


@pytest.fixture
async def patient(private_postgres: PrivatePostgres) -> AsyncIterator[AsyncEngine]:
    """An engine whose statements wait as long as the test, with a ``probe`` table."""
    engine = await _engine(private_postgres, PATIENT)
    try:
        yield engine
    finally:
        await asyncio.wait_for(engine.dispose(), HANG_S)


async def _insert(sessions: Sessions, n: int) -> None:
    async with sessions() as session:
        await session.execute(text("INSERT INTO probe VALUES (:n)"), {"n": n})
        await session.commit()


async def _stored(server: PrivatePostgres) -> list[int]:
    conn = await asyncpg.connect(server.url)
    try:
        return [row[0] for row in await conn.fetch("SELECT n FROM probe ORDER BY n")]
    finally:
        await conn.close()


async def test_a_commit_past_its_deadline_waiting_for_the_standby_is_outcome_unknown(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    await _without_its_standby(private_postgres)
    # Not StorageUnavailable: the COMMIT was sent, and its transaction commits when the wait
    # ends (cancelled by the driver, or the standby no longer asked for).
    with pytest.raises(StorageOutcomeUnknown):
        await asyncio.wait_for(_insert(Sessions(engine), 1), HANG_S)
    # The same through a connection's own transaction (how a new game is stored).
    with pytest.raises(StorageOutcomeUnknown), storage_errors():
        async with engine.begin() as conn:
            await conn.execute(text("INSERT INTO probe VALUES (2)"))
    await _standby_back(private_postgres)

    async def both_stored() -> bool:
        return await _stored(private_postgres) == [1, 2]

    await eventually(both_stored, "both commits to be made")


async def test_a_commit_whose_backend_is_ended_waiting_for_the_standby_is_outcome_unknown(
    private_postgres: PrivatePostgres, patient: AsyncEngine
) -> None:
    await _without_its_standby(private_postgres)
    writing = asyncio.ensure_future(_insert(Sessions(patient), 1))
    pid = await _writer_waiting_on(private_postgres, "SyncRep")
    await _admin(private_postgres, f"SELECT pg_terminate_backend({pid})")
    with pytest.raises(StorageOutcomeUnknown):
        await asyncio.wait_for(writing, HANG_S)
    assert await _stored(private_postgres) == [1]


async def test_a_commit_whose_wait_is_cancelled_is_acknowledged_once_replicated(
    private_postgres: PrivatePostgres, patient: AsyncEngine
) -> None:
    await _without_its_standby(private_postgres)
    writing = asyncio.ensure_future(_insert(Sessions(patient), 1))
    pid = await _writer_waiting_on(private_postgres, "SyncRep")
    # Cancelled, the wait ends with a warning and the COMMIT comes back as done.
    await _admin(private_postgres, f"SELECT pg_cancel_backend({pid})")
    barrier = await _barrier_waiting(private_postgres)
    assert barrier == pid  # confirmed on the same server, the same connection
    assert not writing.done()  # not acknowledged while its replication is unconfirmed
    await _standby_back(private_postgres)
    await asyncio.wait_for(writing, HANG_S)
    assert await _stored(private_postgres) == [1]


async def test_a_commit_whose_replication_cannot_be_confirmed_is_outcome_unknown(
    private_postgres: PrivatePostgres, patient: AsyncEngine
) -> None:
    await _without_its_standby(private_postgres)
    sessions = Sessions(patient)
    writing = asyncio.ensure_future(_insert(sessions, 1))
    pid = await _writer_waiting_on(private_postgres, "SyncRep")
    await _admin(private_postgres, f"SELECT pg_cancel_backend({pid})")
    barrier = await _barrier_waiting(private_postgres)
    await _admin(private_postgres, f"SELECT pg_cancel_backend({barrier})")
    with pytest.raises(StorageOutcomeUnknown):
        await asyncio.wait_for(writing, HANG_S)
    await _standby_back(private_postgres)
    await asyncio.wait_for(_insert(sessions, 2), HANG_S)  # the pool goes on
    assert await _stored(private_postgres) == [1, 2]


async def test_a_commit_refused_by_the_server_changed_nothing(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    sessions = Sessions(engine)
    await _insert(sessions, 1)
    # The deferred unique constraint refuses the second row at COMMIT: rolled back, and said so.
    with pytest.raises(StorageConflict):
        await asyncio.wait_for(_insert(sessions, 1), HANG_S)
    assert await _stored(private_postgres) == [1]


async def _stop_backend(conn: AsyncConnection) -> int:
    """Stop (``SIGSTOP``) the backend of ``conn``'s session, as a server that hangs: its COMMIT
    is then sent and never answered. Returns its pid, for :func:`tests.freeze.thaw`."""
    pid: int = await conn.scalar(text("SELECT pg_backend_pid()"))
    os.kill(pid, signal.SIGSTOP)
    return pid


@pytest.mark.parametrize(
    ("statement", "raised"),
    [
        ("SELECT n FROM probe", StorageUnavailable),
        ("SELECT n FROM probe FOR UPDATE", StorageUnavailable),
        ("WITH p AS (SELECT n FROM probe) SELECT count(*) FROM p", StorageUnavailable),
        ("INSERT INTO probe VALUES (1)", StorageOutcomeUnknown),
        (
            "WITH p AS (INSERT INTO probe VALUES (1) RETURNING n) SELECT n FROM p",
            StorageOutcomeUnknown,
        ),
    ],
)
async def test_a_commit_never_answered_is_unavailable_for_a_read_and_unknown_for_a_write(
    private_postgres: PrivatePostgres,
    engine: AsyncEngine,
    statement: str,
    raised: type[Exception],
) -> None:
    sessions = Sessions(engine)
    stopped: list[int] = []
    try:
        # A session's transaction, then a connection's own (engine.begin()): its backend stops
        # before the COMMIT, which the driver gives up at its deadline. A read changed nothing
        # whatever became of its COMMIT: the database is unavailable, nothing is in doubt.
        with pytest.raises(raised):
            async with sessions() as session:
                await session.execute(text(statement))
                stopped.append(await _stop_backend(await session.connection()))
                await asyncio.wait_for(session.commit(), HANG_S)
        with pytest.raises(raised), storage_errors():
            async with engine.begin() as conn:
                await conn.execute(text(statement))
                stopped.append(await _stop_backend(conn))
    finally:
        thaw(stopped)
    await asyncio.wait_for(_insert(sessions, 2), HANG_S)  # the pool goes on


async def test_a_daily_deal_whose_commit_is_unconfirmed_is_unavailable(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    await migrate_url(private_postgres.url)
    store = PostgresDailyStore(Sessions(engine))
    date = dt.date(2026, 12, 6)
    code = GameCode.parse("TP1-E-AAAAAAB")
    await _without_its_standby(private_postgres)
    # Read by a GET of the daily challenge: whether the deal was stored changes nothing its
    # reader asked for, who is told "unavailable", never that their read may have changed
    # something.
    with pytest.raises(StorageUnavailable):
        await asyncio.wait_for(store.keep_deal(date, code, dt.datetime.now(dt.UTC)), HANG_S)
    await _standby_back(private_postgres)
    kept = await asyncio.wait_for(store.keep_deal(date, code, dt.datetime.now(dt.UTC)), HANG_S)
    assert kept.code == code


async def test_a_resignation_whose_commit_is_unconfirmed_is_answered_outcome_unknown(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    await migrate_url(private_postgres.url)
    port = free_port()
    env = outage_env(port, tmp_path, private_postgres.url, TRIPEAKS_DB_STATEMENT_TIMEOUT_S="1")
    proc = _start(env, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            player = await connect_player(http, base, "Resigner")
            reply = await player.request({"type": "new_game", "rules": "c"})
            assert reply["type"] == "game", reply
            game_id = reply["game"]["game_id"]
            await _without_its_standby(private_postgres)
            reply = await player.request({"type": "resign", "game_id": game_id})
            # Committed on the primary, its COMMIT not confirmed: never "nothing was changed".
            assert (reply["type"], reply.get("code")) == ("error", "outcome_unknown"), reply
            assert "nothing was changed" not in reply["message"]
            await _standby_back(private_postgres)
            # The client resolves it by reading the game again: it was resigned.
            reply = await player.request({"type": "resume", "game_id": game_id})
            assert reply["type"] == "game", reply
            assert reply["game"]["status"] == "resigned", reply["game"]
            await player.close()
    finally:
        proc.terminate()
        proc.wait(30)
