"""The event listener: it keeps listening across lost connections, however reconnecting fails."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import asyncpg
import pytest

from server.storage.events import (
    CHANNEL,
    Event,
    Listener,
    RaceRoomChanged,
    RaceStarted,
    decode_event,
    encode_event,
    room_channel,
)
from tests.helpers import WAIT_S, eventually


async def test_the_listener_reconnects_through_any_failure_of_its_attempts(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[Event] = []
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

        probe = encode_event(RaceRoomChanged(7, "ACDEFG", 3))
        await admin.execute("SELECT pg_notify($1, $2)", CHANNEL, probe)
        await eventually(lambda: received, "an event after reconnecting")
        assert received == [RaceRoomChanged(7, "ACDEFG", 3)]
    finally:
        await admin.close()
        await listener.stop()


async def test_a_payload_that_is_no_known_event_is_dropped_and_listening_goes_on(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[Event] = []
    listener = Listener(database_url, received.append)
    await listener.start()
    admin = await asyncpg.connect(database_url)
    try:
        junk_payloads = (
            "not json",
            '{"kind": "probe"}',
            '{"kind": "race_room", "race_id": "7"}',
            '{"kind": ' + "[" * 3000 + "]" * 3000 + "}",
            '{"kind": "race_start", "race_id": 7, "invite": "ACDEFG", "version": 1, '
            '"starts_at": "2020-01-01T00:00:00", "games": {}}',
        )
        for junk in junk_payloads:
            await admin.execute("SELECT pg_notify($1, $2)", CHANNEL, junk)
        await admin.execute(
            "SELECT pg_notify($1, $2)", CHANNEL, encode_event(RaceRoomChanged(8, "BCDEFG"))
        )
        await eventually(lambda: received, "the valid event after the junk")
        assert received == [RaceRoomChanged(8, "BCDEFG")]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        dropped = [r for r in caplog.records if "no known event" in r.getMessage()]
        assert len(dropped) == 5
    finally:
        await admin.close()
        await listener.stop()


async def test_a_listener_that_stops_reading_is_dropped_and_listens_again_to_its_rooms(
    database_url: str,
) -> None:
    """A listener whose process stops reading its connection (notifications pile up there,
    holding the database's NOTIFY queue) is found out by its next reading of the queue's usage,
    which gets no answer, and makes a new connection listening to the same rooms."""
    received: list[Event] = []
    reconnected = asyncio.Event()
    usage: list[float] = []
    listener = Listener(database_url, received.append, reconnected.set, on_queue_usage=usage.append)
    await listener.start()
    admin = await asyncpg.connect(database_url)
    try:
        listener.follow(5)
        await eventually(lambda: listener.following == {5}, "the room's channel listened to")
        await eventually(lambda: usage, "a reading of the queue's usage")
        stuck = listener.connection
        assert stuck is not None
        stuck._transport.pause_reading()  # as a process that no longer reads its socket
        await asyncio.wait_for(reconnected.wait(), WAIT_S)
        assert listener.connection is not stuck and stuck.is_closed()
        assert listener.following == {5}
        probe = encode_event(RaceRoomChanged(5, "ACDEFG", 2))
        await admin.execute("SELECT pg_notify($1, $2)", room_channel(5), probe)
        await eventually(lambda: received, "the room's event on the new connection")
        assert received == [RaceRoomChanged(5, "ACDEFG", 2)]
    finally:
        await admin.close()
        await listener.stop()


def test_events_round_trip_through_their_payload() -> None:
    started = RaceStarted(
        race_id=5,
        invite="ACDEFG",
        version=2,
        starts_at=dt.datetime(2026, 3, 14, 12, 0, 5, tzinfo=dt.UTC),
        games={11: 101, 12: 102},
    )
    payload = encode_event(started)
    assert payload.startswith('{"kind":"race_start",')
    assert decode_event(payload) == started
