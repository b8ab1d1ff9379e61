"""The read router over real databases: which database answers, and when a replica is not
used (one refusing connections; an answer lacking the asker's own row). A standby streaming
from a primary is in ``tests/e2e/test_read_replicas.py``."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.bench.process import free_port
from server.errors import StorageUnavailable
from server.storage.db import create_engine
from server.storage.replicas import (
    Fallback,
    ReadRouter,
    ReadTarget,
    RoutedStore,
    replica_name,
)
from server.storage.sessions import Sessions


class Seen:
    """A :class:`~server.storage.replicas.ReadObserver` that keeps what it is told."""

    def __init__(self) -> None:
        self.reads: list[ReadTarget] = []
        self.fallbacks: list[Fallback] = []
        self.lags: list[tuple[str, float | None, bool]] = []

    def read(self, target: ReadTarget) -> None:
        self.reads.append(target)

    def fallback(self, reason: Fallback) -> None:
        self.fallbacks.append(reason)

    def lag(self, replica: str, seconds: float | None, usable: bool) -> None:
        self.lags.append((replica, seconds, usable))


class Named:
    """A store that answers its database's name."""

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def name(self) -> str:
        async with self._sessions() as session:
            return str((await session.execute(text("SELECT current_database()"))).scalar())


@pytest.fixture
async def second(database_url: str) -> AsyncIterator[AsyncEngine]:
    """Another engine on the test's database: a "replica" that is not a standby (lag 0)."""
    async with _disposed(create_engine(database_url, pool_size=1)) as engine:
        yield engine


@pytest.fixture
async def refusing() -> AsyncIterator[AsyncEngine]:
    """An engine on a loopback port nobody listens on."""
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    async with _disposed(create_engine(url, pool_size=1)) as engine:
        yield engine


@contextlib.asynccontextmanager
async def _disposed(engine: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    try:
        yield engine
    finally:
        await engine.dispose()


async def test_reads_go_to_a_probed_replica_and_a_missing_own_row_to_the_primary(
    db: AsyncEngine, second: AsyncEngine
) -> None:
    seen = Seen()
    router = ReadRouter(
        Sessions(db), [("second", second)], max_lag_s=5, timeout_s=10, observer=seen
    )
    which: list[str] = []

    async def read(sessions: Sessions) -> str:
        which.append("primary" if sessions is router.primary else "replica")
        async with sessions() as session:
            return str((await session.execute(text("SELECT 1"))).scalar())

    # Not measured yet: the primary answers.
    assert await router.read(read) == "1"
    assert (which, seen.fallbacks) == (["primary"], [Fallback.NO_REPLICA])
    await router.probe()
    assert seen.lags == [("second", 0.0, True)]
    which.clear()
    assert await router.read(read) == "1"
    assert which == ["replica"]
    assert seen.reads[-1:] == [ReadTarget.REPLICA]
    # An answer that lacks what the asker wrote is read again on the primary.
    which.clear()
    assert await router.read(read, complete=lambda answer: answer == "2") == "1"
    assert which == ["replica", "primary"]
    assert seen.fallbacks[-1] is Fallback.MISSING
    assert seen.reads[-1:] == [ReadTarget.PRIMARY]


async def test_a_replica_that_refuses_is_read_no_more_and_the_primary_answers(
    db: AsyncEngine, second: AsyncEngine, refusing: AsyncEngine
) -> None:
    seen = Seen()
    router = ReadRouter(
        Sessions(db),
        [("second", second), ("refusing", refusing)],
        max_lag_s=5,
        timeout_s=10,
        observer=seen,
    )
    await router.probe()
    assert sorted(seen.lags, key=str) == [("refusing", None, False), ("second", 0.0, True)]
    assert [r.name for r in router.usable()] == ["second"]
    # Taken into use by hand, as if it had stopped since its last probe.
    router.replicas[1].usable = True
    stores = RoutedStore(router, Named)
    answers = [await stores.read(lambda store: store.name()) for _ in range(4)]
    assert len(set(answers)) == 1  # each read answered, by the primary or the other replica
    assert Fallback.FAILED in seen.fallbacks
    assert [r.name for r in router.usable()] == ["second"]


async def test_a_read_past_the_deadline_is_given_up(db: AsyncEngine, second: AsyncEngine) -> None:
    router = ReadRouter(Sessions(db), [("second", second)], max_lag_s=5, timeout_s=0.2)

    async def sleeps(sessions: Sessions) -> None:
        async with sessions() as session:
            await session.execute(text("SELECT pg_sleep(30)"))

    with pytest.raises(StorageUnavailable, match=r"no answer within 0\.2 s"):
        await router._bounded(sleeps(router.replicas[0].sessions))


def test_a_standby_behind_lags_the_smaller_of_its_two_bounds(db: AsyncEngine) -> None:
    router = ReadRouter(Sessions(db), [], max_lag_s=5, timeout_s=1)
    assert router._lag(False, None, None, 100) == 0.0  # not a standby
    assert router._lag(True, None, None, 100) == math.inf  # replayed nothing
    assert router._lag(True, 100, 999.0, 100) == 0.0  # has replayed the primary's position
    # Behind, no earlier probe seen: the time since its last replayed commit.
    assert router._lag(True, 50, 7.5, 100) == 7.5
    router._positions.add(0.0, 40)
    router._positions.add(1.0, 60)
    stale = router._positions.stale_s(50, 11.0)
    assert stale == 11.0  # reached the probe at 0.0 s, not the one at 1.0 s
    assert router._positions.stale_s(60, 11.0) == 10.0
    # Before every probe kept: no bound from the probes, the one from its last commit holds.
    assert router._positions.stale_s(10, 11.0) == math.inf
    assert router._lag(True, 10, 7.5, 100) == 7.5


def test_a_replica_is_named_by_its_host_and_port_only() -> None:
    assert replica_name("postgresql://user:pw@db-r1:6432/tripeaks") == "db-r1:6432"
    assert replica_name("postgres://user@db-r2/tripeaks") == "db-r2:5432"
    assert replica_name("postgresql://u@/db?host=r1:5432,r2:5433") == "r1:5432,r2:5433"
