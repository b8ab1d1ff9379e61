"""Events between server processes over PostgreSQL ``LISTEN/NOTIFY`` (no extra service).

An event is published inside the transaction that makes the change it reports, so it is
delivered exactly when (and only if) that transaction commits, to every process listening,
the publishing one included.

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
from collections.abc import Callable
from typing import Annotated

import asyncpg
import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from server.storage.db import direct_dsn
from server.storage.sessions import DATABASE_FAILURES

log = logging.getLogger(__name__)

CHANNEL = "tripeaks_events"
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


async def publish(session: AsyncSession, event: Event) -> None:
    """Queue ``event`` for delivery when ``session``'s transaction commits.

    Args:
        session: the session whose transaction makes the change the event reports.
        event: the event.

    Raises:
        EventTooLargeError: the JSON exceeds :data:`MAX_PAYLOAD` bytes.
    """
    payload = encode_event(event)
    await session.execute(
        text("SELECT pg_notify(:channel, :payload)"),
        {
            "channel": CHANNEL,
            "payload": payload,
        },
    )


class Listener:
    """Keeps one connection LISTENing on :data:`CHANNEL` and hands each event to ``handler``.

    Reconnects with a growing delay (up to 5 s) when the connection is lost; ``on_reconnect``
    is called after every reconnection so the caller can resynchronise from the database
    (events sent while disconnected are lost).

    ``LISTEN`` belongs to a session: behind a connection pooler in transaction mode the
    listener must be given a direct URL (``TRIPEAKS_DIRECT_DATABASE_URL``); publishing
    (``pg_notify`` in a transaction) works through the pooler.

    Args:
        url: a direct database URL (any form :func:`server.storage.db.async_url` accepts; the
            engine's own query options, such as ``prepared_statement_cache_size``, are left out).
        handler: called on the event loop with each decoded event.
        on_reconnect: called after a lost connection is re-established.
        on_restart: called when the listener failed other than by losing its connection (a
            driver's state it did not expect), before it reconnects all the same: it never
            stops listening until :meth:`stop`.
    """

    def __init__(
        self,
        url: str,
        handler: Callable[[Event], None],
        on_reconnect: Callable[[], None] | None = None,
        *,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self._dsn = direct_dsn(url)
        self._handler = handler
        self._on_reconnect = on_reconnect
        self._on_restart = on_restart
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

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
        conn = await asyncpg.connect(self._dsn, server_settings={"application_name": "tripeaks"})
        try:
            await conn.add_listener(CHANNEL, self._receive)
        except BaseException:
            conn.terminate()
            raise
        return conn

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
                with contextlib.suppress(Exception):
                    await conn.close(timeout=1)
                conn = await self._reconnect()
                if self._on_reconnect is not None:
                    try:
                        self._on_reconnect()
                    except Exception:
                        log.exception("event listener: resynchronising after a reconnection failed")
        finally:
            with contextlib.suppress(Exception):
                await conn.close(timeout=1)

    @staticmethod
    async def _watch(conn: asyncpg.Connection) -> None:
        """Return once the connection is found dead (checked every second)."""
        while not conn.is_closed():
            await asyncio.sleep(1.0)
            try:
                await asyncio.wait_for(conn.execute("SELECT 1"), timeout=5)
            except DATABASE_FAILURES:
                return

    async def _reconnect(self) -> asyncpg.Connection:
        delay = 0.1
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._connect()
            except Exception as exc:  # a server going down or coming up fails in many ways
                delay = min(5.0, delay * 2)
                log.warning("event listener: reconnect failed (%s)", exc.__class__.__name__)
