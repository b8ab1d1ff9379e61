"""Reads that tolerate lag, sent to streaming replicas of the database while they keep up.

A :class:`ReadRouter` holds the primary's sessions and one engine per read URL
(``TRIPEAKS_DATABASE_READ_URLS``). A background task (:meth:`ReadRouter.probe`, every
``TRIPEAKS_DATABASE_READ_PROBE_S``) measures each replica's lag; a read
(:meth:`ReadRouter.read`) goes to the next usable replica in turn, and to the primary when none
is usable. A replica is usable while its last probe answered within the deadline
(``TRIPEAKS_DATABASE_READ_TIMEOUT_S``) and found it at most ``TRIPEAKS_DATABASE_READ_MAX_LAG_S``
behind. A read on a replica that fails or misses the deadline takes the replica out of use until
its next good probe, and is read again on the primary.

**Read-your-writes.** A read may say what a complete answer must hold (``complete``): a player's
own board entry, profile or game. A replica's answer lacking it is read again on the primary.
Such rows never change once they exist in the form asked for (a daily game ranks once, when it
ends: docs/rules.md §4 "one attempt per date"), so the primary is asked only while the replica
has not yet replayed the write — whichever process committed it.

**Lag.** The probe reads the primary's WAL position, then each replica's replayed position. A
replica that has replayed the primary's position lags 0 s. One behind lags the smaller of two
bounds of how stale its view is: the time since its last replayed commit was made on the primary
(``pg_last_xact_replay_timestamp()``, by the replica's clock), and the time since the newest
earlier probe whose primary position it has replayed. (The first alone would call a replica
that is milliseconds behind the first write after an idle hour an hour late.) A read URL that
is not a standby (the primary itself, or a standby promoted since) lags 0 s.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, Protocol, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from server.errors import StorageError, StorageUnavailable
from server.storage.db import Pooler, create_engine
from server.storage.sessions import Sessions, storage_errors

log = logging.getLogger(__name__)

T = TypeVar("T")
S = TypeVar("S")


class ReadTarget(StrEnum):
    """Where a read was answered (the ``target`` label of ``tripeaks_db_reads_total``)."""

    PRIMARY = "primary"
    REPLICA = "replica"


class Fallback(StrEnum):
    """Why a read that could have gone to a replica was answered by the primary (the
    ``reason`` label of ``tripeaks_db_read_fallbacks_total``)."""

    #: No replica was usable (each lagging past the bound, down, or not yet measured).
    NO_REPLICA = "no_replica"
    #: The replica's read failed or missed its deadline.
    FAILED = "failed"
    #: The replica's answer lacked the player's own write (read-your-writes).
    MISSING = "missing"


class ReadObserver(Protocol):
    """What the router reports as it works (the metrics)."""

    def read(self, target: ReadTarget) -> None:
        """A read was answered by ``target``."""

    def fallback(self, reason: Fallback) -> None:
        """A read went to the primary instead of a replica, for ``reason``."""

    def lag(self, replica: str, seconds: float | None, usable: bool) -> None:
        """A probe measured ``replica``: its lag in seconds (None when it did not answer) and
        whether reads use it now."""


class _Silent:
    def read(self, target: ReadTarget) -> None:
        pass

    def fallback(self, reason: Fallback) -> None:
        pass

    def lag(self, replica: str, seconds: float | None, usable: bool) -> None:
        pass


#: Probes of the primary's position kept to bound a replica's lag (see the module's notes).
POSITIONS_KEPT = 600

_PRIMARY_POSITION = text("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
_REPLICA_POSITION = text(
    "SELECT pg_is_in_recovery() AS standby,"
    " pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint AS replayed,"
    " EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8 AS since_commit_s"
)


def replica_name(url: str) -> str:
    """A replica's name in logs and metrics: ``host:port`` of its URL (no user, no password;
    the hosts of a multi-host URL joined by ``,``)."""
    parsed = make_url(url.replace("postgres://", "postgresql://", 1))
    hosts = parsed.query.get("host")
    if hosts:
        return ",".join(hosts) if isinstance(hosts, tuple) else hosts
    return f"{parsed.host or 'localhost'}:{parsed.port or 5432}"


@dataclass(eq=False)
class Replica:
    """One read URL's engine and what its last probe found.

    Attributes:
        name: ``host:port`` (see :func:`replica_name`).
        engine: its engine, for :meth:`ReadRouter.close`.
        sessions: sessions over the engine.
        lag_s: its lag in seconds at the last probe (None before the first or when that one
            failed).
        usable: whether reads go to it now.
    """

    name: str
    engine: AsyncEngine
    sessions: Sessions
    lag_s: float | None = None
    usable: bool = False


@dataclass
class _Positions:
    """The primary's WAL positions seen by the probes: ``(monotonic s, bytes)``, oldest first."""

    seen: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=POSITIONS_KEPT))

    def add(self, at: float, position: int) -> None:
        self.seen.append((at, position))

    def stale_s(self, replayed: int, now: float) -> float:
        """Seconds since the newest probe whose primary position ``replayed`` has reached: at
        most how stale a view that has replayed to ``replayed`` is (infinite, unknown, when it
        has reached none of the probes kept)."""
        for at, position in reversed(self.seen):
            if position <= replayed:
                return now - at
        return math.inf


class ReadRouter:
    """Sends reads that tolerate lag to usable replicas, and the rest to the primary.

    Args:
        primary: the primary's sessions.
        replicas: ``(name, engine)`` of each read URL.
        max_lag_s: a replica more than this many seconds behind is not used.
        timeout_s: the deadline of each read on a replica and of each probe, in seconds.
        observer: told of reads, fallbacks and lags (the metrics).
    """

    def __init__(
        self,
        primary: Sessions,
        replicas: Sequence[tuple[str, AsyncEngine]],
        *,
        max_lag_s: float,
        timeout_s: float,
        observer: ReadObserver | None = None,
    ) -> None:
        self.primary = primary
        self.replicas = tuple(Replica(name, engine, Sessions(engine)) for name, engine in replicas)
        self.max_lag_s = max_lag_s
        self.timeout_s = timeout_s
        self._observer: ReadObserver = observer or _Silent()
        self._positions = _Positions()
        self._turn = 0

    @classmethod
    def over(
        cls,
        primary: AsyncEngine,
        urls: Sequence[str],
        *,
        pool_size: int,
        pooler: Pooler,
        max_lag_s: float,
        timeout_s: float,
        observer: ReadObserver | None = None,
    ) -> ReadRouter:
        """A router between the ``primary`` engine and an engine of its own for each read URL
        (``pool_size`` and ``pooler`` as :func:`~server.storage.db.create_engine` takes them;
        closed by :meth:`close`).

        Raises:
            DatabaseConfigError: a URL is not a PostgreSQL URL.
        """
        replicas = [
            (replica_name(url), create_engine(url, pool_size=pool_size, pooler=pooler))
            for url in urls
        ]
        return cls(
            Sessions(primary),
            replicas,
            max_lag_s=max_lag_s,
            timeout_s=timeout_s,
            observer=observer,
        )

    def usable(self) -> list[Replica]:
        """The replicas reads go to now."""
        return [replica for replica in self.replicas if replica.usable]

    def _next(self) -> Replica | None:
        usable = self.usable()
        if not usable:
            return None
        self._turn = (self._turn + 1) % len(usable)
        return usable[self._turn]

    async def read(
        self,
        run: Callable[[Sessions], Awaitable[T]],
        *,
        complete: Callable[[T], bool] | None = None,
    ) -> T:
        """Run ``run`` on the next usable replica's sessions, within the deadline; on the
        primary's when no replica is usable, the replica's read failed or missed the deadline
        (the replica is then out of use until its next good probe), or its answer is not
        ``complete``.

        Raises:
            StorageError: the primary's read failed.
        """
        replica = self._next()
        if replica is None:
            if self.replicas:
                self._observer.fallback(Fallback.NO_REPLICA)
            return await self._on_primary(run)
        try:
            answer = await self._bounded(run(replica.sessions))
        except StorageError as exc:
            replica.usable = False
            self._observer.fallback(Fallback.FAILED)
            self._observer.lag(replica.name, replica.lag_s, usable=False)
            log.warning("read replica %s failed (%s); reading on the primary", replica.name, exc)
            return await self._on_primary(run)
        if complete is not None and not complete(answer):
            self._observer.fallback(Fallback.MISSING)
            return await self._on_primary(run)
        self._observer.read(ReadTarget.REPLICA)
        return answer

    async def _on_primary(self, run: Callable[[Sessions], Awaitable[T]]) -> T:
        answer = await run(self.primary)
        self._observer.read(ReadTarget.PRIMARY)
        return answer

    async def _bounded(self, step: Awaitable[T]) -> T:
        """Await ``step`` for at most :attr:`timeout_s`. It runs as a task of its own, left
        behind if it does not end when cancelled (a frozen server holds a cancelled query's
        connection until it answers), so that the deadline holds.

        Raises:
            StorageUnavailable: the deadline passed.
            StorageError: the step failed.
        """
        task = asyncio.ensure_future(step)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.timeout_s)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.add_done_callback(lambda ended: ended.cancelled() or ended.exception())
            task.cancel()
            raise StorageUnavailable(f"no answer within {self.timeout_s:g} s")
        return task.result()

    async def probe(self) -> None:
        """Measure every replica's lag (each within the deadline) and take into use those
        that answered and lag at most :attr:`max_lag_s`; out of use the others.

        Raises:
            StorageError: the primary's position could not be read (the replicas are left as
                they were).
        """
        if not self.replicas:
            return
        with storage_errors():
            async with self.primary() as session:
                position = int((await session.execute(_PRIMARY_POSITION)).scalar_one())
        self._positions.add(time.monotonic(), position)
        await asyncio.gather(*(self._measure(replica, position) for replica in self.replicas))

    async def _measure(self, replica: Replica, primary: int) -> None:
        async def ask() -> tuple[bool, int | None, float | None]:
            async with replica.sessions() as session:
                row = (await session.execute(_REPLICA_POSITION)).one()
            return bool(row.standby), row.replayed, row.since_commit_s

        try:
            standby, replayed, since_commit_s = await self._bounded(ask())
        except StorageError as exc:
            if replica.usable or replica.lag_s is not None:
                log.warning("read replica %s does not answer (%s); not using it", replica.name, exc)
            replica.lag_s, replica.usable = None, False
            self._observer.lag(replica.name, None, usable=False)
            return
        replica.lag_s = self._lag(standby, replayed, since_commit_s, primary)
        usable = replica.lag_s <= self.max_lag_s
        if usable != replica.usable:
            log.info(
                "read replica %s %s (lag %.1f s, bound %g s)",
                replica.name,
                "in use" if usable else "lagging: not using it",
                replica.lag_s,
                self.max_lag_s,
            )
        replica.usable = usable
        self._observer.lag(replica.name, replica.lag_s, usable)

    def _lag(
        self, standby: bool, replayed: int | None, since_commit_s: float | None, primary: int
    ) -> float:
        """A replica's lag in seconds (see the module's notes)."""
        if not standby:
            return 0.0
        if replayed is None:
            return math.inf
        if replayed >= primary:
            return 0.0
        since_probe_s = self._positions.stale_s(replayed, time.monotonic())
        return max(0.0, min(since_probe_s, math.inf if since_commit_s is None else since_commit_s))

    async def close(self) -> None:
        """Close the replicas' engines."""
        for replica in self.replicas:
            await replica.engine.dispose()


class RoutedStore(Generic[S]):
    """One store per database (``make(sessions)``): the primary's, and each replica's, read
    through a :class:`ReadRouter`.

    Args:
        router: the router.
        make: builds a store over a database's sessions.
    """

    def __init__(self, router: ReadRouter, make: Callable[[Sessions], S]) -> None:
        self._router = router
        self._stores = {id(router.primary): make(router.primary)}
        for replica in router.replicas:
            self._stores[id(replica.sessions)] = make(replica.sessions)

    async def read(
        self, run: Callable[[S], Awaitable[T]], *, complete: Callable[[T], bool] | None = None
    ) -> T:
        """Run ``run`` on the store the router chooses (see :meth:`ReadRouter.read`)."""
        return await self._router.read(
            lambda sessions: run(self._stores[id(sessions)]), complete=complete
        )


__all__ = [
    "Fallback",
    "ReadObserver",
    "ReadRouter",
    "ReadTarget",
    "Replica",
    "RoutedStore",
    "replica_name",
]
