"""The group commit tells the truth about a batch whose commit it did not see confirmed, on a
PostgreSQL of the test's own whose commits wait for a synchronous standby that does not exist:
committed locally once that wait is cancelled (by the driver giving up, an administrator's
cancel) or its backend terminated at COMMIT, a write is acknowledged only once a later commit's
wait for the standby ends (here: when no standby is asked for any more), and answered "outcome
unknown" while it does not; ended before its commit it is answered "nothing was stored"; and
when the database cannot be asked (frozen) it is answered "outcome unknown", never "nothing was
changed"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from server.errors import StorageOutcomeUnknown, StorageUnavailable
from server.storage.commits import GroupCommitter
from server.storage.db import DatabaseDeadlines, create_engine, migrate_url
from tests.e2e.conftest import PrivatePostgres
from tests.freeze import freeze, thaw
from tests.helpers import eventually
from tests.storage.test_commits import draw, games, stored

#: How long a wait may take before the test calls it a hang.
HANG_S = 60.0
DEADLINES = DatabaseDeadlines(connect_s=1.0, statement_s=2.0, checkout_s=5.0)


@pytest.fixture
async def engine(private_postgres: PrivatePostgres) -> AsyncIterator[AsyncEngine]:
    """An engine on a migrated database of the test's own PostgreSQL."""
    await migrate_url(private_postgres.url)
    engine = create_engine(private_postgres.url, pool_size=2, deadlines=DEADLINES)
    try:
        yield engine
    finally:
        await asyncio.wait_for(engine.dispose(), HANG_S)


async def _admin(server: PrivatePostgres, *statements: str) -> None:
    conn = await asyncpg.connect(server.admin_url)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _without_its_standby(server: PrivatePostgres) -> None:
    """Every commit from now on waits for a synchronous standby that never comes."""
    await _admin(
        server,
        "ALTER SYSTEM SET synchronous_standby_names = 'missing_standby'",
        "SELECT pg_reload_conf()",
    )


async def _standby_back(server: PrivatePostgres) -> None:
    """No synchronous standby is asked for any more: waiting commits end (as when
    pg_auto_failover's monitor turns synchronous replication off)."""
    await _admin(server, "ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()")


async def _writer_waiting_on(
    server: PrivatePostgres, wait_event: str, running: str | None = None
) -> int:
    """The pid of the server's backend that runs the batch, once it waits on ``wait_event``
    (and runs a statement containing ``running``, when given)."""
    conn = await asyncpg.connect(server.url)
    try:
        query = (
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'tripeaks' "
            "AND wait_event = $1 AND ($2::text IS NULL OR strpos(query, $2) > 0)"
        )
        pid: int | None = None

        async def found() -> bool:
            nonlocal pid
            pid = await conn.fetchval(query, wait_event, running)
            return pid is not None

        await eventually(found, f"a backend of the batch waiting on {wait_event}")
        assert pid is not None
        return pid
    finally:
        await conn.close()


async def _barrier_waiting(server: PrivatePostgres) -> int:
    """The pid of the backend that confirms a commit's replication, once it waits for the
    standby."""
    return await _writer_waiting_on(server, "SyncRep", "pg_logical_emit_message")


async def test_a_batch_committed_while_its_wait_for_the_standby_was_given_up_is_unknown(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    (game,) = await games(engine, 1)
    await _without_its_standby(private_postgres)
    committer = GroupCommitter(engine, timeout_s=0.5)
    try:
        # The driver gives up at the write timeout and cancels the wait, after which the
        # transaction is committed locally; found stored, it is not acknowledged while no
        # standby has it (a later commit's wait for it fails too).
        with pytest.raises(StorageOutcomeUnknown):
            await asyncio.wait_for(committer.write(draw(game, 0)), HANG_S)
    finally:
        await committer.close()
    assert await stored(engine, game) == (1, [1])  # on this primary alone


async def test_a_batch_whose_wait_for_the_standby_is_cancelled_is_acknowledged_once_replicated(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    (game,) = await games(engine, 1)
    await _without_its_standby(private_postgres)
    committer = GroupCommitter(engine, timeout_s=30)
    try:
        writing = asyncio.ensure_future(committer.write(draw(game, 0)))
        pid = await _writer_waiting_on(private_postgres, "SyncRep")
        # Cancelled, the wait ends with a warning and the batch comes back as committed.
        await _admin(private_postgres, f"SELECT pg_cancel_backend({pid})")
        await _barrier_waiting(private_postgres)
        assert not writing.done()  # not acknowledged while its replication is unconfirmed
        await _standby_back(private_postgres)
        await asyncio.wait_for(writing, HANG_S)
    finally:
        await committer.close()
    assert await stored(engine, game) == (1, [1])


async def test_a_batch_whose_wait_for_the_standby_is_cancelled_for_good_is_unknown(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    first, second = await games(engine, 2)
    await _without_its_standby(private_postgres)
    committer = GroupCommitter(engine, timeout_s=30)
    try:
        writing = asyncio.ensure_future(committer.write(draw(first, 0)))
        pid = await _writer_waiting_on(private_postgres, "SyncRep")
        await _admin(private_postgres, f"SELECT pg_cancel_backend({pid})")
        # The confirming commit's wait is cancelled too: nothing shows the batch replicated.
        barrier = await _barrier_waiting(private_postgres)
        await _admin(private_postgres, f"SELECT pg_cancel_backend({barrier})")
        with pytest.raises(StorageOutcomeUnknown):
            await asyncio.wait_for(writing, HANG_S)
        await _standby_back(private_postgres)
        # The writer goes on, on a fresh connection.
        await asyncio.wait_for(committer.write(draw(second, 0)), HANG_S)
    finally:
        await committer.close()
    assert await stored(engine, first) == (1, [1])
    assert await stored(engine, second) == (1, [1])


async def test_a_batch_whose_backend_is_terminated_at_commit_is_answered_by_what_was_stored(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    (game,) = await games(engine, 1)
    await _without_its_standby(private_postgres)
    committer = GroupCommitter(engine, timeout_s=30)
    try:
        writing = asyncio.ensure_future(committer.write(draw(game, 0)))
        pid = await _writer_waiting_on(private_postgres, "SyncRep")
        await _admin(private_postgres, f"SELECT pg_terminate_backend({pid})")
        # Found stored, it is acknowledged once a later commit's wait for the standby ends.
        await _barrier_waiting(private_postgres)
        assert not writing.done()
        await _standby_back(private_postgres)
        await asyncio.wait_for(writing, HANG_S)  # stored: not "nothing was changed"
    finally:
        await committer.close()
    assert await stored(engine, game) == (1, [1])


async def test_a_batch_whose_backend_is_terminated_before_its_commit_stored_nothing(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    (game,) = await games(engine, 1)
    locker = await asyncpg.connect(private_postgres.url)
    committer = GroupCommitter(engine, timeout_s=30)
    try:
        locking = locker.transaction()
        await locking.start()
        await locker.execute("LOCK TABLE games IN ACCESS EXCLUSIVE MODE")
        writing = asyncio.ensure_future(committer.write(draw(game, 0)))
        pid = await _writer_waiting_on(private_postgres, "relation")
        await _admin(private_postgres, f"SELECT pg_terminate_backend({pid})")
        await locking.rollback()
        with pytest.raises(StorageUnavailable):  # its backend is gone: nothing can commit
            await asyncio.wait_for(writing, HANG_S)
    finally:
        await committer.close()
        await locker.close()
    assert await stored(engine, game) == (0, [])


async def test_a_batch_sent_to_a_frozen_database_is_answered_outcome_unknown(
    private_postgres: PrivatePostgres, engine: AsyncEngine
) -> None:
    first, second = await games(engine, 2)
    committer = GroupCommitter(engine, timeout_s=0.5, idle_s=HANG_S)
    frozen: list[int] = []
    try:
        await committer.write(draw(first, 0))  # the writer holds its connection from now on
        frozen = freeze(private_postgres)
        with pytest.raises(StorageOutcomeUnknown):
            await asyncio.wait_for(committer.write(draw(second, 0)), HANG_S)
    finally:
        thaw(frozen)
        await committer.close()
    # Once the database answers again, the stored row tells (here: not stored, as the batch
    # had not run when the server was frozen; either answer would have been possible).
    assert (await stored(engine, second))[0] in (0, 1)
    committer = GroupCommitter(engine, timeout_s=5)
    try:
        await asyncio.wait_for(committer.write(draw(first, 1)), HANG_S)
    finally:
        await committer.close()
    assert await stored(engine, first) == (2, [1, 2])
