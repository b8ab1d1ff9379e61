"""Events between server processes over PostgreSQL ``LISTEN/NOTIFY`` (no extra service).

An event is handed to the process's :class:`Publisher` once the transaction that makes the
change it reports has committed (:func:`publish` on a session, or the group commit for a
stored action), never from inside it: a transaction that NOTIFYs takes a database-wide lock at
its commit, which would line every write of the service up behind one another. The
:class:`PgPublisher` sends what each process has to send in one statement on a connection of
its own — all that came while its previous statement was under way, and, if it is told to wait,
what came within a few milliseconds — (``pg_notify`` over an array), outside every write
transaction. The promise is *at most once*, in commit order from one process: an event is lost
when its process dies between the commit and the publish, when the publish fails, or when
more are waiting than the publisher holds — every such loss is counted
(``tripeaks_events_dropped_total``), and none delays or fails the write it reports. Receivers
therefore treat events as hints and converge from the database: the hub reads its rooms again
after its listener reconnects, and on a periodic sweep (:mod:`server.web.hub`).

Channels: a race's events (progress, room changes, start, finish) go to the room's own channel
(:func:`room_channel`, ``tripeaks_race_<race_id>``), which a process LISTENs to only while it
serves a follower of that room (:meth:`Listener.follow`); events for a player rather than a
room (:class:`TokensRevoked`, :class:`RaceInvited`, :class:`QueueMatched`) go to
:data:`CHANNEL`, which every process LISTENs to.

Events are typed: one :class:`msgspec.Struct` per ``kind``, encoded as a JSON object whose
``kind`` names it, and decoded back into its type by the listener (a payload that is no known
event is logged and dropped). A race's events name the race (``race_id``);
:class:`TokensRevoked` names a player whose bearer tokens were revoked (never a token or its
hash); :class:`RaceInvited` names a player invited to a room. Anyone who may connect to the
database may NOTIFY, so a receiver reads what an event announces from the database rather than
trusting the payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Protocol

import asyncpg
import msgspec
from sqlalchemy import event as orm_events
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from server.storage.db import direct_dsn, guarded_connect
from server.storage.sessions import DATABASE_FAILURES, PUBLISHER_KEY

log = logging.getLogger(__name__)

#: The channel of the events for a player rather than a room (every process LISTENs to it).
CHANNEL = "tripeaks_events"
#: The prefix of a room's channel: ``tripeaks_race_<race_id>`` (at most 33 bytes for a
#: BIGINT id: PostgreSQL's channel names are cut at 63).
ROOM_CHANNEL_PREFIX = "tripeaks_race_"
#: PostgreSQL refuses NOTIFY payloads of 8000 bytes or more.
MAX_PAYLOAD = 7900


class _Event(msgspec.Struct, frozen=True, tag_field="kind"):
    """An event between processes: its ``kind`` is its class's tag."""


class _RaceEvent(_Event, frozen=True):
    race_id: int


class RaceProgress(_RaceEvent, frozen=True, tag="race_progress"):
    """A racer's accepted action (never their cards): their game's counters after it;
    ``status`` is the engine's (``playing``, ``won``, ``blocked``, ``resigned``),
    ``elapsed_ms`` server time since the game began."""

    player_id: int
    game_id: int
    seq: int
    cards_left: int
    score: int
    moves: int
    status: str
    elapsed_ms: int


class RaceRoomChanged(_RaceEvent, frozen=True, tag="race_room"):
    """Something about the room changed (seats, presence, host, status): re-read it.
    ``version`` is the room's after the change (None from a sweep that closed a lobby)."""

    invite: str
    version: int | None = None


class RaceStarted(_RaceEvent, frozen=True, tag="race_start"):
    """The host started the race: the deal is released at ``starts_at`` (UTC); ``games``
    maps each racer's player id to their game id."""

    invite: str
    version: int
    starts_at: Annotated[dt.datetime, msgspec.Meta(tz=True)]
    games: dict[int, int]


class RaceFinished(_RaceEvent, frozen=True, tag="race_finished"):
    """The race is over and its results are stored."""

    invite: str
    version: int


class RaceInvited(_RaceEvent, frozen=True, tag="race_invited"):
    """A racer (``from_id``) invited a player they follow (``player_id``) to the room: the
    processes holding that player's websockets tell them. A receiver reads the room, the
    inviter and the follow from the database before telling anyone (the event is only a
    hint)."""

    invite: str
    player_id: int
    from_id: int


class TokensRevoked(_Event, frozen=True, tag="tokens_revoked"):
    """Some of a player's bearer tokens were revoked (a rotation, a sign-out of other devices):
    every process closes its websockets of that player whose token no longer exists, which it
    reads from the database (the event names no token)."""

    player_id: int


class QueueMatched(_RaceEvent, frozen=True, tag="queue_matched"):
    """A quick-race match opened race ``race_id`` (``invite``, under ``rules``) for
    ``player_ids``: the processes holding their websockets tell them (``queue_matched``). A
    receiver tells only the players seated in the room it reads from the database."""

    invite: str
    rules: str
    player_ids: list[int]


#: A race's events.
RaceEvent = RaceProgress | RaceRoomChanged | RaceStarted | RaceFinished | RaceInvited
#: Every event one process may send another.
Event = (
    RaceProgress
    | RaceRoomChanged
    | RaceStarted
    | RaceFinished
    | RaceInvited
    | QueueMatched
    | TokensRevoked
)

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(Event)


def room_channel(race_id: int) -> str:
    """The channel of one room's events."""
    return f"{ROOM_CHANNEL_PREFIX}{race_id}"


def channel_of(event: Event) -> str:
    """The channel ``event`` is sent on: its room's for a race's event, :data:`CHANNEL` for an
    event for a player (:class:`TokensRevoked`, :class:`RaceInvited`, :class:`QueueMatched`:
    the player's process follows no such room yet)."""
    if isinstance(event, TokensRevoked | RaceInvited | QueueMatched):
        return CHANNEL
    return room_channel(event.race_id)


def encode_event(event: Event) -> str:
    """The NOTIFY payload of ``event`` (compact JSON, ``kind`` first).

    Raises:
        EventTooLargeError: the JSON exceeds :data:`MAX_PAYLOAD` bytes.
    """
    payload = _ENCODER.encode(event)
    if len(payload) > MAX_PAYLOAD:
        raise EventTooLargeError(f"event {type(event).__name__} is {len(payload)} bytes")
    return payload.decode()


def decode_event(payload: str | bytes) -> Event:
    """The event a NOTIFY payload holds.

    Raises:
        msgspec.DecodeError: not JSON, or not a known event (its ``kind``, a field missing or
            of the wrong type, a time without its zone).
        RecursionError: JSON nested too deep to read.
    """
    return _DECODER.decode(payload)


class EventTooLargeError(ValueError):
    """An event's JSON is longer than a NOTIFY payload may be."""


@dataclass(frozen=True, slots=True)
class Outgoing:
    """An event ready to send: its channel and its payload (see :func:`outgoing`)."""

    channel: str
    payload: str


def outgoing(event: Event) -> Outgoing:
    """``event`` encoded for its channel.

    Raises:
        EventTooLargeError: the JSON exceeds :data:`MAX_PAYLOAD` bytes.
    """
    return Outgoing(channel_of(event), encode_event(event))


class Publisher(Protocol):
    """Where a process's committed events go: :meth:`send` never waits, never raises, and
    never fails the write that made the event (a message it cannot send is dropped and
    counted)."""

    def send(self, message: Outgoing) -> None:
        """Send ``message`` soon (its write is committed)."""
        ...


#: Where a session keeps the events its open transaction published (its publisher is under
#: :data:`server.storage.sessions.PUBLISHER_KEY`, set by ``Sessions``).
_PENDING_KEY = "tripeaks.events.pending"


def publish(session: AsyncSession, event: Event) -> None:
    """Send ``event`` once ``session``'s transaction commits (dropped if it rolls back).

    Nothing is sent from inside the transaction: the session's publisher
    (:data:`PUBLISHER_KEY` in its ``info``; none: the event goes nowhere) is handed it after
    the commit.

    Args:
        session: the session whose transaction makes the change the event reports.
        event: the event.

    Raises:
        EventTooLargeError: the JSON exceeds :data:`MAX_PAYLOAD` bytes.
    """
    message = outgoing(event)
    info = session.info
    if info.get(PUBLISHER_KEY) is None:
        return
    pending = info.get(_PENDING_KEY)
    if pending is None:
        pending = info[_PENDING_KEY] = []
        sync = session.sync_session
        orm_events.listen(sync, "after_commit", _after_commit)
        orm_events.listen(sync, "after_rollback", _after_rollback)
    pending.append(message)


def _after_commit(session: Session) -> None:
    pending: list[Outgoing] = session.info.get(_PENDING_KEY) or []
    if not pending:
        return
    publisher: Publisher = session.info[PUBLISHER_KEY]
    for message in pending:
        publisher.send(message)
    pending.clear()


def _after_rollback(session: Session) -> None:
    pending: list[Outgoing] | None = session.info.get(_PENDING_KEY)
    if pending:
        pending.clear()


async def _connect(dsn: str, application_name: str, timeout_s: float) -> asyncpg.Connection:
    """A direct connection; one cancelled while it is being made is closed once made
    (:func:`server.storage.db.guarded_connect`)."""
    connection: asyncpg.Connection = await guarded_connect(
        dsn, timeout_s, server_settings={"application_name": application_name}
    )
    return connection


#: One statement sends a whole batch: channels and payloads as two arrays, in order.
PUBLISH_SQL = "SELECT count(pg_notify(c, p)) FROM unnest($1::text[], $2::text[]) AS e(c, p)"


class PgPublisher:
    """Sends a process's events with PostgreSQL ``NOTIFY``: what :meth:`send` is given within
    ``every_s`` goes in one statement (:data:`PUBLISH_SQL`), on a connection of its own to the
    direct URL, never inside a write transaction.

    At most ``max_pending`` messages wait; past that a message is dropped (``full``). A batch
    whose statement fails (the database down, its NOTIFY queue full, no answer within
    ``timeout_s``) is dropped (``failed``), its connection given up and made again for the next
    batch. Nothing is retried: receivers converge from the database (see the module's doc).

    Args:
        url: a direct database URL (as :class:`Listener`'s).
        every_s: how long the messages of one batch are gathered, in seconds (0: none; a batch
            is what came while the previous one was being sent).
        max_pending: most messages waiting to be sent.
        max_batch: most messages in one statement.
        timeout_s: deadline of a connection and of a batch's statement, in seconds.
        on_sent: called with the number of messages of each batch sent.
        on_dropped: called with a reason (``full``, ``failed``) and a number of messages.

    Attributes:
        sent: messages sent.
        dropped: messages dropped, for any reason.
    """

    def __init__(
        self,
        url: str,
        *,
        every_s: float = 0.0,
        max_pending: int = 10_000,
        max_batch: int = 1_000,
        timeout_s: float = 5.0,
        on_sent: Callable[[int], None] | None = None,
        on_dropped: Callable[[str, int], None] | None = None,
    ) -> None:
        self._dsn = direct_dsn(url)
        self._every_s = every_s
        self._max_pending = max_pending
        self._max_batch = max_batch
        self._timeout_s = timeout_s
        self._on_sent = on_sent
        self._on_dropped = on_dropped
        self._pending: list[Outgoing] = []
        self._wake = asyncio.Event()
        #: Set while nothing waits to be sent or is being sent.
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None
        self._warned = 0.0
        self.sent = 0
        self.dropped = 0

    def send(self, message: Outgoing) -> None:
        """Queue ``message`` for the next batch (dropped and counted when ``max_pending`` are
        waiting already)."""
        if len(self._pending) >= self._max_pending:
            self._drop("full", 1)
            return
        self._pending.append(message)
        self._idle.clear()
        self._wake.set()

    async def start(self) -> None:
        """Start the sending task (it connects when it first has something to send)."""
        self._task = asyncio.create_task(self._run(), name="tripeaks-publisher")

    async def stop(self, flush_s: float = 1.0) -> None:
        """Send what is waiting (for at most ``flush_s`` seconds), then stop and close."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(flush_s):
                await self._idle.wait()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._conn is not None:
            self._conn.terminate()
            self._conn = None
        if self._pending:
            self._drop("failed", len(self._pending))
            self._pending.clear()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._every_s and len(self._pending) < self._max_batch:
                await asyncio.sleep(self._every_s)  # gather what the next few ms bring
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            if not self._pending:
                self._wake.clear()
            try:
                await self._send(batch)
            except DATABASE_FAILURES as exc:
                self._drop("failed", len(batch))
                self._warn(f"publishing {len(batch)} event(s) failed ({exc.__class__.__name__})")
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None
            else:
                self.sent += len(batch)
                if self._on_sent is not None:
                    self._on_sent(len(batch))
            if not self._pending:
                self._idle.set()

    async def _send(self, batch: list[Outgoing]) -> None:
        if self._conn is None or self._conn.is_closed():
            self._conn = await _connect(self._dsn, "tripeaks-publisher", self._timeout_s)
        await self._conn.fetchval(
            PUBLISH_SQL,
            [m.channel for m in batch],
            [m.payload for m in batch],
            timeout=self._timeout_s,
        )

    def _drop(self, reason: str, count: int) -> None:
        self.dropped += count
        if self._on_dropped is not None:
            self._on_dropped(reason, count)
        if reason == "full":
            self._warn(f"{self._max_pending} events waiting to be published: dropping more")

    def _warn(self, message: str) -> None:
        """Log ``message`` at most once every 10 s."""
        now = time.monotonic()
        if now - self._warned >= 10.0:
            self._warned = now
            log.warning("event publisher: %s", message)


class Listener:
    """Keeps one connection LISTENing on :data:`CHANNEL` and on the channel of every room it
    is told to :meth:`follow`, and hands each event to ``handler``.

    Reconnects with a growing delay (up to 5 s) when the connection is lost; ``on_reconnect``
    is called after every reconnection so the caller can resynchronise from the database
    (events sent while disconnected are lost). Once a second it reads the database's NOTIFY
    queue usage (``pg_notification_queue_usage()``, 0..1) and hands it to ``on_queue_usage``,
    warning when it passes :data:`QUEUE_WARN`; a connection that does not answer that read
    within 5 s — lost, or so far behind on its notifications that they hold the queue — is
    given up and made again (then ``on_reconnect``).

    ``LISTEN`` belongs to a session: behind a connection pooler in transaction mode the
    listener must be given a direct URL (``TRIPEAKS_DIRECT_DATABASE_URL``).

    Args:
        url: a direct database URL (any form :func:`server.storage.db.async_url` accepts; the
            engine's own query options, such as ``prepared_statement_cache_size``, are left out).
        handler: called on the event loop with each decoded event.
        on_reconnect: called after a lost connection is re-established.
        on_restart: called when the listener failed other than by losing its connection (a
            driver's state it did not expect), before it reconnects all the same: it never
            stops listening until :meth:`stop`.
        on_queue_usage: called with each reading of the NOTIFY queue's usage (0..1).
        on_channels: called with the number of room channels listened to, each time it
            changes.
    """

    def __init__(
        self,
        url: str,
        handler: Callable[[Event], None],
        on_reconnect: Callable[[], None] | None = None,
        *,
        on_restart: Callable[[], None] | None = None,
        on_queue_usage: Callable[[float], None] | None = None,
        on_channels: Callable[[int], None] | None = None,
    ) -> None:
        self._dsn = direct_dsn(url)
        self._on_channels = on_channels
        self._handler = handler
        self._on_reconnect = on_reconnect
        self._on_restart = on_restart
        self._on_queue_usage = on_queue_usage
        self._task: asyncio.Task[None] | None = None
        #: The rooms whose channels should be listened to, and those that are on the
        #: connection now.
        self._rooms: set[int] = set()
        self._listening: set[int] = set()
        self._changed = asyncio.Event()
        self._warned = 0.0
        #: The connection listening now (the last one made).
        self.connection: asyncpg.Connection | None = None

    def follow(self, race_id: int) -> None:
        """Listen to the room's channel from now on (within a round trip)."""
        if race_id not in self._rooms:
            self._rooms.add(race_id)
            self._changed.set()

    def unfollow(self, race_id: int) -> None:
        """Stop listening to the room's channel."""
        if race_id in self._rooms:
            self._rooms.discard(race_id)
            self._changed.set()

    @property
    def following(self) -> frozenset[int]:
        """The rooms whose channels are listened to on the connection now."""
        return frozenset(self._listening)

    async def start(self) -> None:
        """Connect and start listening; returns once the first LISTEN is in place.

        Raises:
            OSError, asyncpg.PostgresError: the first connection failed.
        """
        conn = await self._connect()
        self._task = asyncio.create_task(self._run(conn), name="tripeaks-listener")

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _connect(self) -> asyncpg.Connection:
        conn = await _connect(self._dsn, "tripeaks", WATCH_TIMEOUT_S)
        self._listening = set()
        try:
            await conn.add_listener(CHANNEL, self._receive)
            await self._sync(conn)
        except BaseException:
            conn.terminate()
            raise
        self.connection = conn
        return conn

    async def _sync(self, conn: asyncpg.Connection) -> None:
        """LISTEN to the rooms followed since, UNLISTEN those let go."""
        self._changed.clear()
        for race_id in sorted(self._rooms - self._listening):
            await conn.add_listener(room_channel(race_id), self._receive)
            self._listening.add(race_id)
        for race_id in sorted(self._listening - self._rooms):
            await conn.remove_listener(room_channel(race_id), self._receive)
            self._listening.discard(race_id)
        if self._on_channels is not None:
            self._on_channels(len(self._listening))

    def _receive(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            event = decode_event(payload)
        except (msgspec.DecodeError, RecursionError) as exc:
            log.warning("ignoring a payload that is no known event: %s", exc)
            return
        try:
            self._handler(event)
        except Exception:
            log.exception("event handler failed for %s", type(event).__name__)

    async def _run(self, conn: asyncpg.Connection) -> None:
        try:
            while True:
                try:
                    await self._watch(conn)
                    log.warning("event listener lost its database connection; reconnecting")
                except Exception:  # not the connection's loss: a failure of its own
                    log.exception("event listener failed; reconnecting")
                    if self._on_restart is not None:
                        self._on_restart()
                conn.terminate()
                conn = await self._reconnect()
                if self._on_reconnect is not None:
                    try:
                        self._on_reconnect()
                    except Exception:
                        log.exception("event listener: resynchronising after a reconnection failed")
        finally:
            conn.terminate()

    async def _watch(self, conn: asyncpg.Connection) -> None:
        """Keep the rooms listened to in step with those followed, and read the queue's usage
        every second; return once the connection is found dead or too slow to answer."""
        loop = asyncio.get_running_loop()
        next_check = loop.time()
        while not conn.is_closed():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, next_check - loop.time())):
                    await self._changed.wait()
            try:
                if self._changed.is_set():
                    async with asyncio.timeout(WATCH_TIMEOUT_S):
                        await self._sync(conn)
                if loop.time() >= next_check:
                    next_check = loop.time() + 1.0
                    usage = await conn.fetchval(
                        "SELECT pg_notification_queue_usage()", timeout=WATCH_TIMEOUT_S
                    )
                    self._queue_usage(float(usage))
            except DATABASE_FAILURES:
                return

    def _queue_usage(self, usage: float) -> None:
        if self._on_queue_usage is not None:
            self._on_queue_usage(usage)
        now = time.monotonic()
        if usage >= QUEUE_WARN and now - self._warned >= 10.0:
            self._warned = now
            log.warning(
                "the database's NOTIFY queue is %.0f%% full: a listener of some process is not "
                "reading its notifications; once it is full, events are dropped",
                usage * 100,
            )

    async def _reconnect(self) -> asyncpg.Connection:
        delay = 0.1
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._connect()
            except Exception as exc:  # a server going down or coming up fails in many ways
                delay = min(5.0, delay * 2)
                log.warning("event listener: reconnect failed (%s)", exc.__class__.__name__)


#: Seconds the listener's connection has to answer a read of the queue's usage, or a LISTEN.
WATCH_TIMEOUT_S = 5.0
#: The NOTIFY queue usage (0..1) from which the listener warns, every 10 s at most.
QUEUE_WARN = 0.1
