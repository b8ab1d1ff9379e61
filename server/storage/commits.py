"""Group commit of game actions: one transaction for every action waiting at that moment.

Each accepted action needs its log row inserted and its game row moved on (only if nobody else
moved it first), committed before the player is told; a race game's progress event is handed to
the process's event publisher once its batch has committed (never sent from inside the batch's
transaction: a NOTIFY there would take PostgreSQL's commit-time lock of notifying transactions
and line up the batches of every process, :mod:`server.storage.events`). Committing each action
alone costs a transaction and a disk flush per action; here a single writer task takes every
write queued while the previous batch committed and stores them all with one statement (arrays
unnested server-side), which is its own transaction: one round trip and one commit per batch.
The writer keeps its connection while writes keep coming and gives it back to the pool after a
quiet moment or a failure. Each caller is answered
only after that commit; a write whose game had moved on is answered with :class:`GameMovedOn`
and changes nothing.

The batch goes to the database through the asyncpg connection under the engine's, as one
array per column ($1..$18), not through SQLAlchemy's statement
execution, whose own cost per statement outweighs the rest of a batch of one or a few writes
(human-pace play; ``benchmarks/group_commit.py``: client CPU per batch of one write about
360 µs through SQLAlchemy, about 160 µs this way). Reached directly, PostgreSQL gets the
statement prepared once per connection (kept with the pool's record of that connection, so it
outlives the writer's quiet moments) and executed with each batch's arrays. Behind a
connection pooler in transaction mode no prepared statement may outlive its statement (see
:data:`server.storage.db.TRANSACTION_POOLER_CONNECT_ARGS`): there the statement is sent
unnamed with each batch, parsed, bound and run in one message sequence. Which of the two
follows the driver's own rule: asyncpg names statements only while its statement cache is on,
and :func:`server.storage.db.create_engine` turns it off for a transaction pooler.

The driver's errors reach callers as the SQLAlchemy exceptions the engine raises for them,
with no parameter values in their messages (:mod:`server.storage.driver_errors`), so a failed
batch looks the same whichever way it was sent. After a failed batch the writer lets go of its
connection (discarded when the driver saw it close) and of the statement prepared on it: the
next batch takes a pre-pinged connection and prepares again. A batch the driver refuses before
sending any of it (a connection the server dropped, not yet seen closed) goes once to a fresh
connection instead of failing.

A game row locked by another transaction (a slow statement, a stuck session) holds up only
that game's writes: the statement skips rows it cannot lock at once (``SKIP LOCKED``), stores
the rest of the batch, and the skipped writes are tried again in later batches (after 10 ms,
doubling to 250 ms) until the write timeout, when they fail with :class:`GameBusy`. A batch
whose statement itself is held up (a lock on a whole table, a stalled connection) is ended
after the write timeout and the writer goes on, so no stuck statement holds up every game of
the process for longer than that. Reached directly, PostgreSQL ends a statement held up that
long itself (the writer's connection carries that ``statement_timeout``); the driver gives up a
second later. Behind a transaction pooler (no session settings there) the driver's cancel is all
there is.

A batch that was sent and whose commit was not confirmed — its connection lost, its backend
ended at COMMIT, or the driver giving up (a commit waiting for a synchronous standby is
committed locally once that wait is cancelled) — may have committed: its writes are not told
"nothing was stored" before that is known. The writer asks the database on a fresh connection,
after ending the batch's backend and waiting for it to be gone (reached directly), which of the
writes' log rows exist, and answers each by that; when the database cannot be asked its writes
fail with :class:`~server.errors.StorageOutcomeUnknown` (``GroupCommitter._settle``). A write
found stored that way, or a batch that came back committed with a warning (its wait for the
synchronous standby cancelled: committed on the primary alone), is acknowledged only once a
later commit on the same server has waited for the standby
(:mod:`server.storage.replication`); if that fails, its outcome is unknown.

The daily boundary is the database's: a daily game's action is stored only while the
database's clock, read by the committing statement, is still on the game's date (UTC;
:mod:`server.storage.today`). Every process therefore agrees on when a date closes, whatever
its own clock says; a write refused for it is answered with :class:`DailyClosed` and changes
nothing.

One module, over 400 lines, because its parts change together: a column of the batch is one
field of :class:`ActionWrite`, one array of :func:`_arguments` and one ``unnest`` column of
:data:`COMMIT_BATCH_SQL`, and the outcomes that statement returns are the ones the writer
answers. The writer's loop (``GroupCommitter._run``) keeps the awaits of the action path
inline (the queue, a connection when it has none, the statement), its other steps in helpers.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.errors import StorageOutcomeUnknown
from server.storage import replication
from server.storage.db import names_statements, process_statement_name
from server.storage.driver_errors import DriverError, database_error, unsent
from server.storage.events import Event, Outgoing, Publisher, outgoing
from server.storage.sessions import DATABASE_FAILURES, as_storage_error
from server.storage.today import DATABASE_TODAY_SQL

log = logging.getLogger(__name__)

#: Seconds the driver waits for a batch statement past the write timeout, after which
#: PostgreSQL has ended it itself (reached directly; see GroupCommitter._commit).
STATEMENT_TIMEOUT_MARGIN_S = 1.0

#: One statement for a whole batch: move each game row on (only if it still has the expected
#: seq and status), log the actions of the rows that moved. Run alone (no BEGIN/COMMIT around
#: it) it is its own transaction: all of it commits, or none of it. Its parameters are one array
#: per column of the batch, in the order of ``unnest`` ($1..$18, see :func:`_arguments`).
COMMIT_BATCH_SQL = f"""
    WITH v AS (
        SELECT * FROM unnest(
               $1::bigint[], $2::integer[], $3::integer[], $4::text[], $5::integer[],
               $6::integer[], $7::integer[], $8::timestamptz[], $9::bigint[], $10::smallint[],
               $11::text[], $12::text[], $13::smallint[], $14::text[], $15::integer[],
               $16::timestamptz[], $17::date[], $18::bigint[]
             ) AS v(game_id, expected, seq, status, score, moves, undos, finished_at, elapsed_ms,
                    cards_left, expected_status, kind, pos, card, score_after, created_at,
                    pinned_today, token_id)
    ), checked AS (
        SELECT v.*,
               g.daily_date IS NULL
               OR g.daily_date >= COALESCE(v.pinned_today, {DATABASE_TODAY_SQL})
               AS on_date,
               v.token_id IS NULL
               OR EXISTS (SELECT 1 FROM player_tokens AS t WHERE t.id = v.token_id)
               AS signed_in
          FROM v JOIN games AS g ON g.id = v.game_id
           FOR UPDATE OF g SKIP LOCKED
    ), moved AS (
        UPDATE games AS g
           SET status = v.status, score = v.score, moves = v.moves, undos = v.undos,
               seq = v.seq, finished_at = v.finished_at, elapsed_ms = v.elapsed_ms,
               cards_left = v.cards_left
          FROM checked AS v
         WHERE g.id = v.game_id AND g.seq = v.expected AND g.status = v.expected_status
           AND v.on_date AND v.signed_in
        RETURNING g.id, g.seq
    ), logged AS (
        INSERT INTO game_actions (game_id, seq, kind, pos, card, score_after, created_at)
        SELECT v.game_id, v.seq, v.kind, v.pos, v.card, v.score_after, v.created_at
          FROM v JOIN moved ON moved.id = v.game_id AND moved.seq = v.seq
    )
    SELECT moved.id, 'stored' AS outcome FROM moved
    UNION ALL
    SELECT checked.game_id, 'closed' FROM checked WHERE NOT checked.on_date
    UNION ALL
    SELECT checked.game_id, 'signed_out' FROM checked
     WHERE checked.on_date AND NOT checked.signed_in
    UNION ALL
    SELECT v.game_id, 'busy' FROM v
     WHERE NOT EXISTS (SELECT 1 FROM checked WHERE checked.game_id = v.game_id)
       AND EXISTS (SELECT 1 FROM games AS g WHERE g.id = v.game_id)
    """


#: The stored seq of the games of a batch whose fate is unknown: a game still below a write's
#: seq has not stored it (read first: it needs no lock the log may be held under).
GAME_SEQS_SQL = "SELECT id, seq FROM games WHERE id = ANY($1::bigint[])"

#: Which writes of a batch whose fate is unknown were stored: each write's log row, by its game,
#: seq and time of acceptance (another writer's row at that seq has another time).
STORED_WRITES_SQL = """
    SELECT v.game_id
      FROM unnest($1::bigint[], $2::integer[], $3::timestamptz[]) AS v(game_id, seq, at)
      JOIN game_actions AS a ON a.game_id = v.game_id AND a.seq = v.seq AND a.created_at = v.at
    """

#: Ends the backend that ran a batch whose fate is unknown and waits (up to $3 ms) until it is
#: gone: then nothing of the batch can still commit. No row: that backend is gone already (or
#: is not on this server: the host list led elsewhere). ``backend_start`` tells a pid reused.
END_BACKEND_SQL = """
    SELECT pg_terminate_backend(pid, $3)
      FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2
    """

#: The writer's connection's own: its statement timeout, and which backend it is.
WRITER_SETUP_SQL = """
    SELECT set_config('statement_timeout', $1, false),
           (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())
    """


@dataclass(frozen=True, slots=True)
class ActionWrite:
    """One accepted action to store: its log row, its game row's new values, and an optional
    event to publish once it is stored.

    Attributes:
        expected_seq / expected_status: the game row's ``seq`` and ``status`` before this
            action; the write applies only if the row still has them (a resignation elsewhere
            changes the status, not the seq).
        at: when the action was accepted (UTC).
        pinned_today: the UTC date a simulated clock says it is, deciding a daily game's
            boundary in place of the database's clock; None (always, in production) leaves it
            to the database.
        token_id: the bearer token (``player_tokens.id``) of the device that sent the action:
            the write applies only while that token exists, so an action sent after its device
            was signed out (or its token replaced) is never stored; None: no such check.
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
    event: Event | None = None
    pinned_today: dt.date | None = None
    token_id: int | None = None


class GameMovedOn(Exception):
    """The game row was changed by another writer first; this write changed nothing."""


class SignedOut(Exception):
    """The token of the device that sent the action was revoked (its device signed out, or
    the token replaced); this write changed nothing."""


class DailyClosed(Exception):
    """The game is a daily whose date the database's clock has left; this write changed
    nothing."""


class GameBusy(Exception):
    """The game's row stayed locked by another transaction for the whole write timeout; this
    write changed nothing."""


class WriteOutcome(asyncio.Future[None]):
    """The outcome of a queued write (result None once committed, else its error), which a
    cancellation of the task awaiting it does not cancel: that task is cancelled only once the
    outcome is in (see :func:`~server.services.completion.settled`), so a commit is never left
    unaccounted for, without a second future and a turn of the loop to shield it.

    Only :meth:`withdraw` cancels it: the writer's own way to drop a write it will not store.
    """

    def cancel(self, msg: Any | None = None) -> bool:
        """Refuse: the write runs to its outcome (a waiting task is cancelled after it)."""
        return False

    def withdraw(self) -> bool:
        """Cancel the outcome: the write was dropped unstored (the writer is closing)."""
        return super().cancel()


@dataclass(slots=True, eq=False)
class _Pending:
    """A queued write: its event encoded once (checked for size when queued), the future its
    caller awaits, when it must have been stored by (event loop time) and its last wait before
    a retry."""

    write: ActionWrite
    event: Outgoing | None
    future: WriteOutcome
    deadline: float
    delay_s: float = 0.0


#: First and longest wait before a write whose game row was locked is tried again.
BUSY_RETRY_S = (0.01, 0.25)

#: Where a connection's prepared batch statement is kept: the pool's record of the connection
#: (``info``), which the pool empties when it replaces the connection.
_PREPARED_KEY = "tripeaks.group_commit.prepared"


@dataclass(slots=True, eq=False)
class _Link:
    """The writer's connection while it holds one.

    Attributes:
        conn: the engine's connection, checked out of its pool.
        driver: the ``asyncpg.Connection`` under it, which the batches are sent on.
        named: whether the batch statement is prepared on it and kept (asyncpg's statement
            cache on: PostgreSQL reached directly) rather than sent unnamed with each batch (a
            transaction pooler).
        prepared: the batch statement prepared on ``driver``, once it is.
        info: the pool's record of the connection, where ``prepared`` is kept between
            check-outs.
        backend: the server process running its statements, ``(pid, backend_start)``, when
            reached directly (behind a transaction pooler each statement may run on another).
    """

    conn: AsyncConnection
    driver: Any
    named: bool
    prepared: Any
    info: dict[Any, Any]
    backend: tuple[int, dt.datetime] | None = None


class GroupCommitter:
    """Batches :class:`ActionWrite`\\ s into shared transactions.

    Args:
        engine: the database engine (the writer holds one of its connections while busy).
        max_batch: most writes in one transaction.
        idle_s: seconds without writes after which the writer gives its connection back.
        timeout_s: how long a write whose game row is locked by another transaction keeps
            being tried before it fails with :class:`GameBusy`.
        observe: called after each committed batch with its number of writes and the time its
            statement took, in seconds (operational metrics); it must not raise.
        publisher: where the events of stored writes go once their batch has committed
            (None: nowhere).

    Attributes:
        batches: batches committed.
        writes: writes answered by a committed batch (stored, closed or moved on).
        prepares: times the batch statement was prepared (once per connection, and again
            after a failed batch).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        max_batch: int = 512,
        idle_s: float = 1.0,
        timeout_s: float = 5.0,
        observe: Callable[[int, float], None] | None = None,
        publisher: Publisher | None = None,
    ) -> None:
        self._engine = engine
        self._observe = observe
        self._publisher = publisher
        self._max_batch = max_batch
        self._idle_s = idle_s
        self._timeout_s = timeout_s
        self._queue: asyncio.Queue[_Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiting: set[asyncio.TimerHandle] = set()
        self._retrying: set[_Pending] = set()
        self.batches = 0
        self.writes = 0
        self.prepares = 0

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
            SignedOut: the write's ``token_id`` no longer exists (its device was signed out);
                nothing was stored.
            GameBusy: the game's row stayed locked by another transaction for ``timeout_s``;
                nothing was stored.
            EventTooLargeError: the event does not fit a NOTIFY payload.
            StorageConflict: a constraint refused the batch; nothing of it was stored.
            StorageBusy: no pooled connection came free in time; nothing was stored.
            StorageUnavailable: the batch's transaction failed, or its connection was lost
                or the statement outlived the write timeout and the database, asked since,
                shows the write not stored (see :meth:`_settle`); nothing of it was stored.
                Its ``__cause__`` is the ``DBAPIError`` the engine raises for the driver's
                error (see :func:`database_error`), whose message holds no parameter values.
            StorageOutcomeUnknown: the batch was sent and its commit not confirmed, and the
                database could not be asked since: the write may or may not be stored.
        """
        await self.submit(write)

    def submit(self, write: ActionWrite) -> WriteOutcome:
        """Queue one action for storing; the outcome is done once it is committed or failed,
        with the outcomes and errors of :meth:`write`. A task awaiting it that is cancelled
        still waits for it (see :class:`WriteOutcome`).

        Raises:
            EventTooLargeError: the event does not fit a NOTIFY payload (nothing is queued).
        """
        event = None if write.event is None else outgoing(write.event)
        loop = asyncio.get_running_loop()
        future = WriteOutcome(loop=loop)
        self._enqueue(_Pending(write, event, future, loop.time() + self._timeout_s))
        return future

    def _enqueue(self, pending: _Pending) -> None:
        """Queue a write for the writer task (started when it is not running)."""
        if self._task is None or self._task.done():
            self._queue = asyncio.Queue()
            # Everyone's writer: in a context of its own, not that of the request that
            # happened to start it (its log fields, its place in the loop's queues).
            self._task = asyncio.create_task(
                self._run(), name="group-commit", context=contextvars.Context()
            )
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
            pending.future.withdraw()
        self._retrying.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            self._queue.get_nowait().future.withdraw()

    async def _run(self) -> None:
        """The writer: takes the queued writes a batch at a time, stores each batch in one
        statement and answers its callers; holds a connection while writes keep coming."""
        assert self._queue is not None
        queue = self._queue
        link: _Link | None = None
        carried: _Pending | None = None
        try:
            while True:
                if carried is not None:
                    first, carried = carried, None
                elif link is None:
                    first = await queue.get()
                else:
                    try:
                        # (asyncio.timeout, not wait_for: on Python 3.11 wait_for may lose a
                        # cancellation that arrives as the queue hands over a write.)
                        async with asyncio.timeout(self._idle_s):
                            first = await queue.get()
                    except TimeoutError:  # idle: give the connection back
                        await self._give_back(link)
                        link = None
                        continue
                batch, carried = self._batch(first, queue)
                try:
                    if link is not None and link.driver.is_closed():
                        # The server went away while the writer held it (a database restart):
                        # nothing of this batch was sent, so it goes to a fresh connection.
                        await self._let_go(link, invalidate=True)
                        link = None
                    started = time.perf_counter()
                    stored: dict[int, str] = {}
                    for attempt in range(2):
                        if link is None:
                            link = await self._connect()
                        try:
                            # Its outcomes are in ``stored`` as soon as it commits, before its
                            # replication is confirmed; a batch sent and never answered is
                            # settled by reading its rows (_settle).
                            await replication.acknowledged(
                                link.driver,
                                functools.partial(self._commit, link, batch, stored),
                                self._timeout_s + STATEMENT_TIMEOUT_MARGIN_S,
                                caller_settles=True,
                            )
                            break
                        except DBAPIError as exc:
                            if attempt or not unsent(exc):
                                raise
                            # The driver refused it before sending anything (a connection the
                            # server dropped, not yet seen closed): a fresh one takes it.
                            await self._let_go(link, invalidate=True)
                            link = None
                    seconds = time.perf_counter() - started
                except asyncio.CancelledError:
                    if link is not None:  # cancelled mid-statement: its state is unknown
                        await link.conn.invalidate()
                    _cancel([*batch, *([carried] if carried else [])])
                    raise
                except StorageOutcomeUnknown as exc:  # committed, its replication unconfirmed
                    assert link is not None
                    await self._let_go(link, invalidate=True)
                    link = None
                    self._answer(batch, stored, time.perf_counter() - started, unconfirmed=exc)
                    continue
                except Exception as exc:
                    unknown = link is not None and _fate_unknown(exc, link)
                    if link is not None:  # take a fresh (pre-pinged) connection next time
                        backend = link.backend
                        lost = getattr(exc, "connection_invalidated", False)
                        await self._let_go(link, invalidate=lost or link.driver.is_closed())
                        link = None
                    if unknown:
                        await self._settle(batch, exc, backend)
                    else:
                        _fail(batch, exc)
                    continue
                self._answer(batch, stored, seconds)
        finally:
            if link is not None:  # (no round trip to reset it here: it may be a cancellation)
                await self._let_go(link, invalidate=link.named)

    async def _settle(
        self,
        batch: Sequence[_Pending],
        exc: Exception,
        backend: tuple[int, dt.datetime] | None,
    ) -> None:
        """Answer the writes of a batch that was sent and whose commit was not confirmed (its
        connection lost, or given up at the write timeout): the batch may have committed — a
        backend ended at COMMIT, a cancelled wait for a synchronous standby, after which the
        transaction is committed locally — so nobody is told "nothing was changed" unless that
        is known.

        On a fresh connection: the batch's backend is ended and waited for (then nothing of it
        can commit any more; reached directly only), and each write's log row looked for where
        its game's stored seq has reached the write's.
        A write found is answered as stored; one not found, with ``exc``'s error when its
        backend is surely gone, else with :class:`StorageOutcomeUnknown`. When the database
        cannot be asked (it does not answer within its deadlines), every write is answered
        with :class:`StorageOutcomeUnknown`.
        """
        waiting = [pending for pending in batch if not pending.future.done()]
        if not waiting:
            return
        writes = [pending.write for pending in waiting]
        bound = self._timeout_s + STATEMENT_TIMEOUT_MARGIN_S
        found: set[int] = set()
        gone = False
        try:
            async with self._engine.connect() as conn:
                raw = await conn.get_raw_connection()
                driver = raw.driver_connection
                assert driver is not None
                try:
                    if backend is not None:
                        ended = await driver.fetch(
                            END_BACKEND_SQL,
                            backend[0],
                            backend[1],
                            round(bound * 1000),
                            timeout=bound + STATEMENT_TIMEOUT_MARGIN_S,
                        )
                        gone = not ended or bool(ended[0][0])
                    seqs = await driver.fetch(
                        GAME_SEQS_SQL, [w.game_id for w in writes], timeout=bound
                    )
                    seq_of = {row[0]: row[1] for row in seqs}
                    maybe = [w for w in writes if seq_of.get(w.game_id, -1) >= w.seq]
                    rows = []
                    if maybe:
                        rows = await driver.fetch(
                            STORED_WRITES_SQL,
                            [w.game_id for w in maybe],
                            [w.seq for w in maybe],
                            [w.at for w in maybe],
                            timeout=bound,
                        )
                    if rows:
                        # Found on this server: perhaps on it alone (committed locally once
                        # its wait for the synchronous standby was cancelled or its backend
                        # ended): acknowledged only once replicated.
                        await replication.confirm_replicated(driver, bound)
                except StorageOutcomeUnknown as unconfirmed:
                    await conn.invalidate()
                    log.warning("group commit: stored writes' replication unconfirmed")
                    for pending in waiting:
                        pending.future.set_exception(unconfirmed)
                    return
                except BaseException:
                    await conn.invalidate()  # (a statement past its deadline: see create_engine)
                    raise
                found = {row[0] for row in rows}
        except DATABASE_FAILURES as failure:  # (a TimeoutError is an OSError)
            log.warning("group commit: a batch's fate could not be read: %r", failure)
            unknown = StorageOutcomeUnknown(f"the batch's commit is unconfirmed: {exc!r}")
            unknown.__cause__ = exc
            for pending in waiting:
                pending.future.set_exception(unknown)
            return
        log.warning(
            "group commit: a batch's commit was unconfirmed (%r): %d of %d writes were stored",
            exc,
            len(found),
            len(writes),
        )
        for pending in waiting:
            if pending.future.done():
                continue
            if pending.write.game_id in found:
                self.writes += 1
                if pending.event is not None and self._publisher is not None:
                    self._publisher.send(pending.event)
                pending.future.set_result(None)
            elif gone:
                pending.future.set_exception(as_storage_error(exc))
            else:
                unknown = StorageOutcomeUnknown(f"the batch's commit is unconfirmed: {exc!r}")
                unknown.__cause__ = exc
                pending.future.set_exception(unknown)

    def _answer(
        self,
        batch: Sequence[_Pending],
        stored: dict[int, str],
        seconds: float,
        unconfirmed: StorageOutcomeUnknown | None = None,
    ) -> None:
        """Count a committed batch and answer each of its writes by its game's outcome (see
        :meth:`_commit`); a busy one is tried again later. ``unconfirmed``: the batch
        committed on the primary and its replication could not be confirmed: its stored
        writes fail with it (their outcome is unknown)."""
        self.batches += 1
        if self._observe is not None:
            self._observe(len(batch), seconds)
        for pending in batch:
            outcome = stored.get(pending.write.game_id)
            if outcome != "busy":  # a busy write is counted when it is answered
                self.writes += 1
            if (
                outcome == "stored"
                and unconfirmed is None
                and pending.event is not None
                and self._publisher is not None
            ):
                self._publisher.send(pending.event)  # (its caller may have gone: it is stored)
            if pending.future.done():
                continue
            if outcome == "stored" and unconfirmed is not None:
                pending.future.set_exception(unconfirmed)
            elif outcome == "stored":
                pending.future.set_result(None)
            elif outcome == "busy":
                self._retry_later(pending)
            elif outcome == "closed":
                pending.future.set_exception(DailyClosed(pending.write.game_id))
            elif outcome == "signed_out":
                pending.future.set_exception(SignedOut(pending.write.game_id))
            else:
                pending.future.set_exception(GameMovedOn(pending.write.game_id))

    async def _let_go(self, link: _Link, *, invalidate: bool) -> None:
        """Give up the writer's connection and the statement prepared on it (the next batch
        takes a pre-pinged connection and prepares again); ``invalidate``: the connection is
        discarded rather than pooled."""
        link.info.pop(_PREPARED_KEY, None)
        if invalidate or not await self._reset(link):
            await link.conn.invalidate()
        await self._release(link.conn)

    async def _give_back(self, link: _Link) -> None:
        """Give the idle writer's connection back to the pool, the statement prepared on it
        kept for the next check-out."""
        if await self._reset(link):
            await self._release(link.conn)
        else:
            await self._let_go(link, invalidate=True)

    async def _reset(self, link: _Link) -> bool:
        """Give the connection the server's own statement timeout back (the pool's other
        users must not inherit the writer's, set in :meth:`_connect`); False if it failed."""
        if not link.named:
            return True
        try:
            await link.driver.execute("RESET statement_timeout", timeout=self._timeout_s)
        except DATABASE_FAILURES:
            return False
        return True

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

    async def _connect(self) -> _Link:
        """Check a connection out of the engine's pool for the writer, with the batch statement
        prepared on it earlier, if it was."""
        conn = await self._engine.connect()
        try:
            # Nothing of SQLAlchemy's opens a transaction on it: each batch is its own.
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            raw = await conn.get_raw_connection()
        except asyncio.CancelledError:
            await conn.invalidate()
            raise
        except Exception:
            await self._release(conn)
            raise
        driver = raw.driver_connection
        assert driver is not None  # a connection just checked out is attached to its driver
        named = names_statements(driver)
        backend = None
        if named:
            # PostgreSQL itself ends a batch statement held up past the write timeout (see
            # _commit; reset on release); and the backend is noted, to be ended should a
            # batch's fate be unknown (see _settle).
            try:
                row = await driver.fetchrow(
                    WRITER_SETUP_SQL,
                    str(max(1, round(self._timeout_s * 1000))),
                    timeout=self._timeout_s,
                )
            except BaseException:
                await conn.invalidate()
                raise
            backend = (driver.get_server_pid(), row[1])
        kept = raw.info.get(_PREPARED_KEY)
        prepared = kept[1] if named and kept is not None and kept[0] is driver else None
        return _Link(conn, driver, named, prepared, raw.info, backend)

    @staticmethod
    async def _release(conn: AsyncConnection) -> None:
        """Give the writer's connection back to the pool."""
        try:
            await conn.close()
        except Exception:
            log.warning("group commit: closing its connection failed", exc_info=True)

    async def _commit(
        self, link: _Link, batch: Sequence[_Pending], outcomes: dict[int, str]
    ) -> None:
        """Store one batch in one statement (its own transaction); puts each game's outcome in
        ``outcomes`` (game id → outcome): ``stored``, ``closed`` (a daily whose date is over),
        ``signed_out`` (the device's token is gone), ``busy`` (its row was locked by another
        transaction: nothing of it was stored), or nothing (its row had moved on).

        Raises:
            sqlalchemy.exc.DBAPIError: the driver's error, as :func:`database_error` makes it.
            sqlalchemy.exc.OperationalError: the statement did not end within the write
                timeout (a table lock, a stalled connection); it is cancelled, and the
                connection is given up (``connection_invalidated``).
            OSError: the connection failed.
        """
        arguments = _arguments(batch)
        # No batch holds up every game for longer than a write may wait. Reached directly,
        # PostgreSQL ends the statement at the write timeout itself (statement_timeout, set in
        # _connect): the batch then surely did not commit. The driver's own bound is a little
        # later, for a connection that stalled: a cancel it sends may reach a server that has
        # not started the statement yet, and is lost then. Behind a transaction pooler the
        # driver's bound is the only one.
        bound = self._timeout_s + STATEMENT_TIMEOUT_MARGIN_S if link.named else self._timeout_s
        try:
            if not link.named:
                # With asyncpg's statement cache off this is an unnamed statement, parsed,
                # bound and run in one message sequence.
                rows = await link.driver.fetch(COMMIT_BATCH_SQL, *arguments, timeout=bound)
            else:
                if link.prepared is None:
                    link.prepared = await link.driver.prepare(
                        COMMIT_BATCH_SQL, name=process_statement_name(), timeout=bound
                    )
                    link.info[_PREPARED_KEY] = (link.driver, link.prepared)
                    self.prepares += 1
                rows = await link.prepared.fetch(*arguments, timeout=bound)
        except TimeoutError:
            raise OperationalError(
                COMMIT_BATCH_SQL,
                None,
                DriverError(f"the batch statement took longer than {bound:g} s", None),
                connection_invalidated=True,
            ) from None
        except asyncpg.DataError as exc:  # its message quotes the value: not shown
            raise database_error(
                exc, COMMIT_BATCH_SQL, connection_invalidated=link.driver.is_closed()
            ) from None
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError) as exc:
            raise database_error(
                exc, COMMIT_BATCH_SQL, connection_invalidated=link.driver.is_closed()
            ) from exc
        outcomes.update((row[0], row[1]) for row in rows)


def _fail(batch: Sequence[_Pending], exc: Exception) -> None:
    """Fail the writes of a batch that failed (those still awaited) with the StorageError of
    ``exc``."""
    for pending in batch:
        if not pending.future.done():
            pending.future.set_exception(as_storage_error(exc))


def _fate_unknown(exc: Exception, link: _Link) -> bool:
    """Whether a failed batch may have committed: it was sent (not refused by the driver
    first, see :func:`unsent`) and its connection was lost or given up before the outcome came
    back — the write timeout passed, the connection closed, the server ended the session
    (SQLSTATE class 08, or 57P: an administrator's or a shutdown's). Any other error of the
    server rolled the whole batch back."""
    if isinstance(exc, DBAPIError) and unsent(exc):
        return False
    if getattr(exc, "connection_invalidated", False) or link.driver.is_closed():
        return True
    if isinstance(exc, OSError):
        return True
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None) or ""
    return sqlstate.startswith(("08", "57P"))


def _cancel(writes: Sequence[_Pending]) -> None:
    """Cancel the writes of a writer that is cancelled itself."""
    for pending in writes:
        pending.future.withdraw()


def _arguments(batch: Sequence[_Pending]) -> list[Any]:
    """The batch statement's parameters: one array per column, in the order of ``unnest`` in
    :data:`COMMIT_BATCH_SQL`."""
    writes = [pending.write for pending in batch]
    return [
        [w.game_id for w in writes],
        [w.expected_seq for w in writes],
        [w.seq for w in writes],
        [w.status for w in writes],
        [w.score for w in writes],
        [w.moves for w in writes],
        [w.undos for w in writes],
        [w.finished_at for w in writes],
        [w.elapsed_ms for w in writes],
        [w.cards_left for w in writes],
        [w.expected_status for w in writes],
        [w.kind for w in writes],
        [w.pos for w in writes],
        [w.card for w in writes],
        [w.score_after for w in writes],
        [w.at for w in writes],
        [w.pinned_today for w in writes],
        [w.token_id for w in writes],
    ]
