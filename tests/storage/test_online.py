"""Who is online (``server/storage/online.py``): a batch of connections opened and closed is
one statement, kept alike by PostgreSQL's store and the in-memory one."""

from __future__ import annotations

import datetime as dt
import secrets

import asyncpg

from server.names import name_key
from server.storage.online import OnlineConnection, OnlineStore
from tests.backends import Backend, open_backend

T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)


async def _player(backend: Backend, name: str) -> int:
    added = await backend.players.add(name, name_key(name), secrets.token_bytes(32), T0)
    assert added is not None
    return added.player.id


async def test_a_batch_forgets_and_records_connections_at_once(backend: Backend) -> None:
    ada, bob = await _player(backend, "Ada"), await _player(backend, "Bob")
    online = backend.online
    await online.record("p1", [OnlineConnection("a1", ada, T0)], ())
    assert await online.own_keys("p1") == ["a1"]
    assert await online.online_among([ada, bob], timeout_s=60) == {ada}
    # One batch: a1 closed, b1 and a2 opened, a connection of a player who is gone left out,
    # one already on record kept as it is, a key never on record forgotten without error.
    await online.record(
        "p1",
        [
            OnlineConnection("b1", bob, T0),
            OnlineConnection("a2", ada, T0),
            OnlineConnection("x1", bob + ada + 1000, T0),
        ],
        ["a1", "never"],
    )
    assert sorted(await online.own_keys("p1")) == ["a2", "b1"]
    await online.record("p1", [OnlineConnection("b1", bob, T0)], ())
    assert sorted(await online.own_keys("p1")) == ["a2", "b1"]
    await online.record("p1", (), ["a2", "b1"])  # only closes
    assert await online.own_keys("p1") == []
    assert await online.online_among([ada, bob], timeout_s=60) == set()
    await online.record("p2", [], [])  # nothing to do: nothing asked of the database


async def test_a_process_whose_record_was_dropped_is_recorded_again_with_its_connections(
    database_url: str,
) -> None:
    """PostgreSQL's alone: the memory store keeps no process record."""
    async with open_backend("postgres", database_url) as backend:
        ada = await _player(backend, "Ada")
        await _recorded_again(backend.online, ada, database_url)


async def _recorded_again(store: OnlineStore, ada: int, database_url: str) -> None:
    await store.record("p1", [OnlineConnection("a1", ada, T0)], ())
    admin = await asyncpg.connect(database_url)
    try:
        # Taken for dead by another process: its record goes, and its connections with it.
        await admin.execute("DELETE FROM server_instances WHERE id = 'p1'")
        assert await store.own_keys("p1") == []
        await store.record("p1", [OnlineConnection("a2", ada, T0)], ["a1"])
        assert await admin.fetchval("SELECT count(*) FROM server_instances WHERE id = 'p1'") == 1
        assert await store.own_keys("p1") == ["a2"]
        # A batch of closes alone does not make the record again.
        await admin.execute("DELETE FROM server_instances WHERE id = 'p1'")
        await store.record("p1", (), ["a2"])
        assert await admin.fetchval("SELECT count(*) FROM server_instances WHERE id = 'p1'") == 0
    finally:
        await admin.close()
