"""Group commit of game actions: one transaction for every action waiting at that moment.

Each accepted action needs its log row inserted, its game row moved on (only if nobody else
moved it first) and, for a race game, its progress event published — all committed before the
player is told. Committing each action alone costs a transaction and a disk flush per action;
here a single writer task takes every write queued while the previous batch committed and
stores them all with one statement (arrays unnested server-side), which is its own transaction:
one round trip and one commit per batch. The writer keeps its connection while writes keep
coming and gives it back to the pool after a quiet moment or a failure. Each caller is answered
only after that commit; a write whose game had moved on is answered with :class:`GameMovedOn`
and changes nothing.

A game row locked by another transaction (a slow statement, a stuck session) holds up only
that game's writes: the statement skips rows it cannot lock at once (``SKIP LOCKED``), stores
the rest of the batch, and the skipped writes are tried again in later batches (after 10 ms,
doubling to 250 ms) until the write timeout, when they fail with :class:`GameBusy`.

The daily boundary is the database's: a daily game's action is stored only while the
database's clock, read by the committing statement, is still on the game's date (UTC). Every
process therefore agrees on when a date closes, whatever its own clock says; a write refused
for it is answered with :class:`DailyClosed` and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.storage.events import CHANNEL, MAX_PAYLOAD, EventTooLargeError

log = logging.getLogger(__name__)

#: The database's current UTC date, as the statement that stores a daily game's row or action
#: sees it: the one clock every process's daily boundary follows.
DATABASE_TODAY_SQL = "(statement_timestamp() AT TIME ZONE 'UTC')::date"

# One statement for a whole batch: move each game row on (only if it still has the expected
# seq and status), log the actions of the rows that moved, publish their events. Run alone (no
# BEGIN/COMMIT around it) it is its own transaction: all of it commits, or none of it.
_COMMIT_BATCH = text(
    f"""
    WITH v AS (
        SELECT * FROM unnest(
               CAST(:game_id AS bigint[]), CAST(:expected AS integer[]), CAST(:seq AS integer[]),
               CAST(:status AS text[]), CAST(:score AS integer[]), CAST(:moves AS integer[]),
               CAST(:undos AS integer[]), CAST(:finished_at AS timestamptz[]),
               CAST(:elapsed_ms AS bigint[]), CAST(:cards_left AS smallint[]),
               CAST(:expected_status AS text[]), CAST(:kind AS text[]), CAST(:pos AS smallint[]),
               CAST(:card AS text[]), CAST(:score_after AS integer[]),
               CAST(:created_at AS timestamptz[]), CAST(:event AS text[]),
               CAST(:pinned_today AS date[])
             ) AS v(game_id, expected, seq, status, score, moves, undos, finished_at, elapsed_ms,
                    cards_left, expected_status, kind, pos, card, score_after, created_at, event,
                    pinned_today)
    ), checked AS (
        SELECT v.*,
               g.daily_date IS NULL
               OR g.daily_date >= COALESCE(v.pinned_today, {DATABASE_TODAY_SQL})
               AS on_date
          FROM v JOIN games AS g ON g.id = v.game_id
           FOR UPDATE OF g SKIP LOCKED
    ), moved AS (
        UPDATE games AS g
           SET status = v.status, score = v.score, moves = v.moves, undos = v.undos,
               seq = v.seq, finished_at = v.finished_at, elapsed_ms = v.elapsed_ms,
               cards_left = v.cards_left
          FROM checked AS v
         WHERE g.id = v.game_id AND g.seq = v.expected AND g.status = v.expected_status
           AND v.on_date
        RETURNING g.id, g.seq
    ), logged AS (
        INSERT INTO game_actions (game_id, seq, kind, pos, card, score_after, created_at)
        SELECT v.game_id, v.seq, v.kind, v.pos, v.card, v.score_after, v.created_at
          FROM v JOIN moved ON moved.id = v.game_id AND moved.seq = v.seq
    ), published AS (
        SELECT count(pg_notify(:channel, v.event)) AS n
          FROM v JOIN moved ON moved.id = v.game_id AND moved.seq = v.seq
         WHERE v.event IS NOT NULL
    )
    SELECT moved.id, 'stored' AS outcome FROM moved, published
    UNION ALL
    SELECT checked.game_id, 'closed' FROM checked WHERE NOT checked.on_date
    UNION ALL
    SELECT v.game_id, 'busy' FROM v
     WHERE NOT EXISTS (SELECT 1 FROM checked WHERE checked.game_id = v.game_id)
       AND EXISTS (SELECT 1 FROM games AS g WHERE g.id = v.game_id)
    """
)


@dataclass(frozen=True, slots=True)
class ActionWrite:
    """One accepted action to store: its log row, its game row's new values, and an optional
    event to publish with it.

    Attributes:
        expected_seq / expected_status: the game row's ``seq`` and ``status`` before this
            action; the write applies only if the row still has them (a resignation elsewhere
            changes the status, not the seq).
        at: when the action was accepted (UTC).
        pinned_today: the UTC date a simulated clock says it is, deciding a daily game's
            boundary in place of the database's clock; None (always, in production) leaves it
            to the database.
    """

    game_id: int
    expected_seq: int
    seq: int
    kind: str
    pos: int | None
    card: str
    score_after: int
    at: dt.datetime
    status: str
    score: int
    moves: int
    undos: int
    finished_at: dt.datetime | None
    elapsed_ms: int | None
    cards_left: int
    expected_status: str = "playing"
    event: dict[str, Any] | None = None
    pinned_today: dt.date | None = None


class GameMovedOn(Exception):
    """The game row was changed by another writer first; this write changed nothing."""


class DailyClosed(Exception):
    """The game is a daily whose date the database's clock has left; this write changed
    nothing."""


class GameBusy(Exception):
    """The game's row stayed locked by another transaction for the whole write timeout; this
    write changed nothing."""


@dataclass(slots=True, eq=False)
class _Pending:
    """A queued write: its event encoded once (checked for size when queued), the future its
    caller awaits, when it must have been stored by (event loop time) and its last wait before
    a retry."""

    write: ActionWrite
    event: str | None
    future: asyncio.Future[None]
    deadline: float
    delay_s: float = 0.0


#: First and longest wait before a write whose game row was locked is tried again.
BUSY_RETRY_S = (0.01, 0.25)


class GroupCommitter:
    """Batches :class:`ActionWrite`\\ s into shared transactions.

    Args:
        engine: the database engine (the writer holds one of its connections while busy).
        max_batch: most writes in one transaction.
        idle_s: seconds without writes after which the writer gives its connection back.
        timeout_s: how long a write whose game row is locked by another transaction keeps
            being tried before it fails with :class:`GameBusy`.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        max_batch: int = 512,
        idle_s: float = 1.0,
        timeout_s: float = 5.0,
    ) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._idle_s = idle_s
        self._timeout_s = timeout_s
        self._queue: asyncio.Queue[_Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiting: set[asyncio.TimerHandle] = set()
        self._retrying: set[_Pending] = set()
        self.batches = 0
        self.writes = 0

    @property
    def timeout_s(self) -> float:
        """How long a write waits for its game row's lock, in seconds."""
        return self._timeout_s

    async def write(self, write: ActionWrite) -> None:
        """Store one action; returns once it is committed.

        Raises:
            GameMovedOn: the game row had moved on; nothing was stored.
            DailyClosed: a daily game whose date is over by the database's clock; nothing was
                stored.
            GameBusy: the game's row stayed locked by another transaction for ``timeout_s``;
                nothing was stored.
            EventTooLargeError: the event does not fit a NOTIFY payload.
            sqlalchemy.exc.SQLAlchemyError, OSError: the batch's transaction failed; nothing
                of it was stored.
        """
        event = None
        if write.event is not None:
            event = json.dumps(write.event, separators=(",", ":"))
            if len(event.encode()) > MAX_PAYLOAD:
                raise EventTooLargeError(f"event of {len(event)} bytes")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._enqueue(_Pending(write, event, future, loop.time() + self._timeout_s))
        await future

    def _enqueue(self, pending: _Pending) -> None:
        """Queue a write for the writer task (started when it is not running)."""
        if self._task is None or self._task.done():
            self._queue = asyncio.Queue()
            self._task = asyncio.create_task(self._run(), name="group-commit")
        assert self._queue is not None
        self._queue.put_nowait(pending)

    def _retry_later(self, pending: _Pending) -> None:
        """Try a write whose game row was locked again after a short wait (doubling each
        time), or fail it with :class:`GameBusy` once its deadline has passed."""
        loop = asyncio.get_running_loop()
        first, longest = BUSY_RETRY_S
        pending.delay_s = min(longest, max(first, pending.delay_s * 2))
        if loop.time() + pending.delay_s > pending.deadline:
            pending.future.set_exception(GameBusy(pending.write.game_id))
            return

        def requeue() -> None:
            self._waiting.discard(handle)
            self._retrying.discard(pending)
            if not pending.future.done():
                self._enqueue(pending)

        handle = loop.call_later(pending.delay_s, requeue)
        self._waiting.add(handle)
        self._retrying.add(pending)

    async def close(self) -> None:
        """Stop the writer task (writes still queued or waiting to be retried fail with
        CancelledError)."""
        for handle in self._waiting:
            handle.cancel()
        self._waiting.clear()
        for pending in self._retrying:
            pending.future.cancel()
        self._retrying.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            self._queue.get_nowait().future.cancel()

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        conn: AsyncConnection | None = None
        carried: _Pending | None = None
        try:
            while True:
                if carried is not None:
                    first, carried = carried, None
                elif conn is None:
                    first = await queue.get()
                else:
                    try:
                        # (asyncio.timeout, not wait_for: on Python 3.11 wait_for may lose a
                        # cancellation that arrives as the queue hands over a write.)
                        async with asyncio.timeout(self._idle_s):
                            first = await queue.get()
                    except TimeoutError:  # idle: give the connection back
                        await self._release(conn)
                        conn = None
                        continue
                batch, carried = self._batch(first, queue)
                try:
                    if conn is not None and await self._closed(conn):
                        # The server went away while the writer held it (a database restart):
                        # nothing of this batch was sent, so it goes to a fresh connection.
                        await conn.invalidate()
                        await self._release(conn)
                        conn = None
                    if conn is None:
                        conn = await self._engine.connect()
                        await conn.execution_options(isolation_level="AUTOCOMMIT")
                    stored = await self._commit(conn, batch)
                except asyncio.CancelledError:
                    if conn is not None:  # cancelled mid-statement: its state is unknown
                        await conn.invalidate()
                    for pending in [*batch, *([carried] if carried else [])]:
                        pending.future.cancel()
                    raise
                except Exception as exc:
                    for pending in batch:
                        if not pending.future.done():
                            pending.future.set_exception(exc)
                    if conn is not None:  # take a fresh (pre-pinged) connection next time
                        await self._release(conn)
                        conn = None
                    continue
                self.batches += 1
                for pending in batch:
                    outcome = stored.get(pending.write.game_id)
                    if outcome != "busy":  # a busy write is counted when it is answered
                        self.writes += 1
                    if pending.future.done():
                        continue
                    if outcome == "stored":
                        pending.future.set_result(None)
                    elif outcome == "busy":
                        self._retry_later(pending)
                    elif outcome == "closed":
                        pending.future.set_exception(DailyClosed(pending.write.game_id))
                    else:
                        pending.future.set_exception(GameMovedOn(pending.write.game_id))
        finally:
            if conn is not None:
                await self._release(conn)

    def _batch(
        self, first: _Pending, queue: asyncio.Queue[_Pending]
    ) -> tuple[list[_Pending], _Pending | None]:
        """``first`` and the writes queued after it, up to the batch size; returns them and the
        write that must wait for the next batch, if any: a second write of one game (within one
        statement it would see the row as it was before the first)."""
        batch = [first]
        games = {first.write.game_id}
        while len(batch) < self._max_batch and not queue.empty():
            pending = queue.get_nowait()
            if pending.write.game_id in games:
                return batch, pending
            games.add(pending.write.game_id)
            batch.append(pending)
        return batch, None

    @staticmethod
    async def _closed(conn: AsyncConnection) -> bool:
        """Whether the driver has seen the server close the writer's connection."""
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        return driver is None or bool(driver.is_closed())

    @staticmethod
    async def _release(conn: AsyncConnection) -> None:
        """Give the writer's connection back to the pool."""
        try:
            await conn.close()
        except Exception:
            log.warning("group commit: closing its connection failed", exc_info=True)

    @staticmethod
    async def _commit(conn: AsyncConnection, batch: list[_Pending]) -> dict[int, str]:
        """Store one batch in one statement (its own transaction); returns each game's outcome:
        ``stored``, ``closed`` (a daily whose date is over), ``busy`` (its row was locked by
        another transaction: nothing of it was stored), or nothing (its row had moved on)."""
        writes = [pending.write for pending in batch]
        result = await conn.execute(
            _COMMIT_BATCH,
            {
                "game_id": [w.game_id for w in writes],
                "expected": [w.expected_seq for w in writes],
                "seq": [w.seq for w in writes],
                "status": [w.status for w in writes],
                "score": [w.score for w in writes],
                "moves": [w.moves for w in writes],
                "undos": [w.undos for w in writes],
                "finished_at": [w.finished_at for w in writes],
                "elapsed_ms": [w.elapsed_ms for w in writes],
                "cards_left": [w.cards_left for w in writes],
                "expected_status": [w.expected_status for w in writes],
                "kind": [w.kind for w in writes],
                "pos": [w.pos for w in writes],
                "card": [w.card for w in writes],
                "score_after": [w.score_after for w in writes],
                "created_at": [w.at for w in writes],
                "event": [pending.event for pending in batch],
                "pinned_today": [w.pinned_today for w in writes],
                "channel": CHANNEL,
            },
        )
        return {row[0]: str(row[1]) for row in result}
