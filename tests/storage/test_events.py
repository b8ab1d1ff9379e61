"""The event listener: it keeps listening across lost connections, however reconnecting fails."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from server.storage.events import CHANNEL, Listener
from tests.helpers import WAIT_S, eventually


async def test_the_listener_reconnects_through_any_failure_of_its_attempts(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[dict[str, Any]] = []
    reconnected = asyncio.Event()
    listener = Listener(database_url, received.append, reconnected.set)
    await listener.start()
    admin = await asyncpg.connect(database_url)
    try:
        # While a server shuts down or starts up, an attempt can fail in any of these ways.
        failures: list[Exception] = [
            asyncpg.CannotConnectNowError("the database system is starting up"),
            ConnectionResetError("reset by peer"),
            asyncpg.InterfaceError("cannot call Connection.add_listener(): connection is closed"),
        ]
        connect = listener._connect

        async def failing_at_first() -> asyncpg.Connection:
            if failures:
                raise failures.pop(0)
            return await connect()

        monkeypatch.setattr(listener, "_connect", failing_at_first)
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name = 'tripeaks'"
        )
        await asyncio.wait_for(reconnected.wait(), WAIT_S)
        assert failures == []

        await admin.execute("SELECT pg_notify($1, $2)", CHANNEL, '{"kind": "probe"}')
        await eventually(lambda: received, "an event after reconnecting")
        assert received == [{"kind": "probe"}]
    finally:
        await admin.close()
        await listener.stop()
