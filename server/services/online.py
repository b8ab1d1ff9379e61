"""This process's records of who is online, written in batches (docs/rules.md §4 "Following").

Every websocket that says hello is recorded, and forgotten at its close, so that any process can
tell whether a player has one open anywhere. One write per hello would make a crowd arriving at
once (the daily's release) pay a transaction per connection; instead the changes asked for while
one write is in flight wait for it and go together in the next, as the group commit does for
actions: a lone hello is written at once, a thousand at once in a handful of writes.

Each caller waits for the write that holds its change and sees its failure
(:class:`~server.errors.StorageError`), except a close, which need not wait
(:meth:`OnlineRecorder.forget`: no task of its own for each of the thousands a cut closes at
once); a failed write marks the records as possibly out of line, is logged, and the next
:meth:`OnlineRecorder.reconcile` brings them back in line with the open connections (until
then it does nothing, so an idle process reads nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from server.errors import StorageUnavailable
from server.services.clock import Clock
from server.storage.online import OnlineConnection, OnlineStore

log = logging.getLogger(__name__)


@dataclass
class _Batch:
    """Changes written together: connections said hello (by key) and keys closed."""

    added: dict[str, OnlineConnection] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class OnlineRecorder:
    """This process's connections on record in ``store``, changed in batches.

    Args:
        store: where open connections are kept.
        instance: this server process's id.
        clock: the UTC clock (when a connection said hello).
    """

    def __init__(self, store: OnlineStore, instance: str, clock: Clock) -> None:
        self._store = store
        self._instance = instance
        self._clock = clock
        self._next: _Batch | None = None
        self._writer: asyncio.Task[None] | None = None
        #: A write failed since the records were last brought in line.
        self.out_of_line = False
        #: Writes made (each one transaction), for the metrics and the tests.
        self.writes = 0
        self._closed = False

    async def connected(self, key: str, player_id: int) -> None:
        """Record that connection ``key`` said hello for the player (now).

        Raises:
            StorageError: the write failed (:meth:`reconcile` records it later).
        """
        await self._submit([(key, player_id)], ())

    async def disconnected(self, key: str) -> None:
        """Forget connection ``key`` (nothing once :meth:`close` ran: the process's record,
        dropped at its shutdown, takes its connections' with it).

        Raises:
            StorageError: the write failed (:meth:`reconcile` forgets it later).
        """
        if not self._closed:
            await self._submit((), [key])

    def forget(self, key: str) -> None:
        """Forget connection ``key`` in the next write without waiting for it: a failed write
        is logged and mended by the next :meth:`reconcile` (nothing once :meth:`close` ran)."""
        if not self._closed:
            self._queue((), [key])

    async def connected_all(self, connections: Iterable[tuple[int, str]]) -> None:
        """Record every ``(player_id, key)`` again (after this process's records were dropped
        with its process record).

        Raises:
            StorageError: the write failed.
        """
        await self._submit([(key, player_id) for player_id, key in connections], ())

    async def reconcile(
        self,
        open_keys: Callable[[], Collection[str]],
        signed_in: Callable[[], Iterable[tuple[int, str]]],
    ) -> None:
        """After a failed write, bring the records in line with the connections: forget those
        no longer open, record those that said hello and are not on record (``open_keys()``
        and ``signed_in()``, ``(player_id, key)``, are asked after the records are read, so a
        change made meanwhile is not undone). Nothing when no write failed.

        Raises:
            StorageError: the database failed (the next call tries again).
        """
        if not self.out_of_line:
            return
        self.out_of_line = False
        try:
            keys = set(await self._store.own_keys(self._instance))
            still_open = set(open_keys())
            await self._submit(
                [(key, player_id) for player_id, key in signed_in() if key not in keys],
                keys - still_open,
            )
        except BaseException:
            self.out_of_line = True
            raise

    async def close(self) -> None:
        """At shutdown, before the process's record goes: write what is waiting (its callers
        get their outcome) and write nothing more (a hello after this fails with
        :class:`~server.errors.StorageUnavailable`; a close is a no-op)."""
        self._closed = True
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer

    async def _submit(self, added: Iterable[tuple[str, int]], removed: Iterable[str]) -> None:
        """Put the changes in the next batch, start the writer if it is idle, and wait for the
        batch's write (not cancelled with the caller: the others in the batch wait for it).

        Raises:
            StorageError: the write failed, or the recorder is closed.
        """
        if self._closed:
            raise StorageUnavailable("the server is stopping")
        await asyncio.shield(self._queue(added, removed).done)

    def _queue(self, added: Iterable[tuple[str, int]], removed: Iterable[str]) -> _Batch:
        """Put the changes in the next batch and start the writer if it is idle; the batch."""
        if self._next is None:
            self._next = _Batch()
        batch = self._next
        for key in removed:
            batch.added.pop(key, None)
            batch.removed.add(key)
        now = self._clock.now()
        for key, player_id in added:
            batch.added[key] = OnlineConnection(key, player_id, now)
        if self._writer is None or self._writer.done():
            # A context of its own: not the log fields of the connection that started it.
            self._writer = asyncio.create_task(self._write(), context=contextvars.Context())
        return batch

    async def _write(self) -> None:
        """Write the batches one after the other until none is waiting."""
        while self._next is not None:
            batch, self._next = self._next, None
            try:
                self.writes += 1
                await self._store.record(self._instance, list(batch.added.values()), batch.removed)
            except asyncio.CancelledError:
                self.out_of_line = True
                for left in (batch, self._next):
                    if left is not None:
                        _fail(left, StorageUnavailable("the server is stopping"))
                self._next = None
                raise
            except Exception as exc:
                self.out_of_line = True
                log.warning(
                    "online: a write of %d hellos and %d closes failed (%s); the next sweep "
                    "brings the records in line",
                    len(batch.added),
                    len(batch.removed),
                    type(exc).__name__,
                )
                _fail(batch, exc)
            else:
                batch.done.set_result(None)


def _fail(batch: _Batch, exc: BaseException) -> None:
    """Fail the batch's waiters with ``exc`` (retrieved here too: a batch whose waiters all
    left logs nothing)."""
    if not batch.done.done():
        batch.done.set_exception(exc)
        batch.done.exception()
