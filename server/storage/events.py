"""Events between server processes over PostgreSQL ``LISTEN/NOTIFY`` (no extra service).

An event is published inside the transaction that makes the change it reports, so it is
delivered exactly when (and only if) that transaction commits, to every process listening,
the publishing one included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from server.storage.db import direct_dsn

log = logging.getLogger(__name__)

CHANNEL = "tripeaks_events"
#: PostgreSQL refuses NOTIFY payloads of 8000 bytes or more.
MAX_PAYLOAD = 7900

Event = dict[str, Any]


class EventTooLargeError(ValueError):
    """An event's JSON is longer than a NOTIFY payload may be."""


async def publish(session: AsyncSession, event: Event) -> None:
    """Queue ``event`` for delivery when ``session``'s transaction commits.

    Args:
        session: the session whose transaction makes the change the event reports.
        event: a JSON-serialisable dict with a ``kind``.

    Raises:
        EventTooLargeError: the JSON exceeds :data:`MAX_PAYLOAD` bytes.
    """
    payload = json.dumps(event, separators=(",", ":"))
    if len(payload.encode()) > MAX_PAYLOAD:
        raise EventTooLargeError(f"event {event.get('kind')!r} is {len(payload)} bytes")
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
    """

    def __init__(
        self,
        url: str,
        handler: Callable[[Event], None],
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self._dsn = direct_dsn(url)
        self._handler = handler
        self._on_reconnect = on_reconnect
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
            event = json.loads(payload)
        except ValueError:
            log.warning("ignoring an event that is not JSON")
            return
        try:
            self._handler(event)
        except Exception:
            log.exception("event handler failed for %s", event.get("kind"))

    async def _run(self, conn: asyncpg.Connection) -> None:
        try:
            while True:
                await self._watch(conn)
                log.warning("event listener lost its database connection; reconnecting")
                with contextlib.suppress(Exception):
                    await conn.close(timeout=1)
                conn = await self._reconnect()
                if self._on_reconnect is not None:
                    self._on_reconnect()
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
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
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
