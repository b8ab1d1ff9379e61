"""The transaction of a room operation, on either store (in memory and PostgreSQL): what it
writes (the race, its seats, its racers' games) is kept only when it commits and vanishes when
it leaves by an exception; it goes on after a commit; its events are delivered when it commits;
a locked room waits for its holder, and a limited wait gives up with ``StorageUnavailable``."""

from __future__ import annotations

import datetime as dt

import pytest

from server.engine.codes import GameCode
from server.engine.game import Status
from server.errors import StorageUnavailable
from server.storage.events import Event, RaceRoomChanged, RaceStarted
from server.storage.races import RaceRow
from server.storage.transactions import Transaction
from tests.backends import Backend
from tests.helpers import eventually

CODE = GameCode.parse("TP1-E-AAAAAAB")
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
INVITE = "ACDEFG"


class Boom(Exception):
    """Leaves a transaction's block."""


async def _create(backend: Backend, tx: Transaction, host: int, invite: str = INVITE) -> RaceRow:
    return await backend.races.create(
        tx,
        invite=invite,
        host_id=host,
        code=CODE,
        host_deal=True,
        time_limit_s=600,
        max_players=8,
        now=T0,
    )


async def _marker(backend: Backend, host: int) -> RaceRow:
    """A room committed after the rest: once its event is in, every earlier one is."""
    async with backend.races.transaction() as tx:
        race = await _create(backend, tx, host, invite="MARKER")
        await tx.commit()
    return race


def _rooms(events: list[Event]) -> list[tuple[str, str, int | None]]:
    """The room events delivered: kind, invite, version."""
    shown = []
    for event in events:
        if isinstance(event, RaceRoomChanged):
            shown.append(("room", event.invite, event.version))
        elif isinstance(event, RaceStarted):
            shown.append(("start", event.invite, event.version))
    return shown


async def test_a_start_that_leaves_by_an_exception_keeps_nothing(backend: Backend) -> None:
    host, ann = await backend.add_players(["Host", "Ann"])
    async with backend.events() as events:
        with pytest.raises(Boom):
            async with backend.races.transaction() as tx:
                race = await _create(backend, tx, host)
                await backend.races.seats.add(tx, race.id, ann, T0)
                games = await backend.games.insert_race_games(
                    tx, race.id, CODE, Status.PLAYING, 0, [host, ann], T0
                )
                assert sorted(games) == [host, ann]
                await backend.races.start(tx, race, T0, T0 + dt.timedelta(minutes=10), games)
                raise Boom
        marker = await _marker(backend, host)
        await eventually(lambda: _rooms(events), "the marker's event")
        assert _rooms(events) == [("room", "MARKER", 1)]
    async with backend.races.transaction() as tx:
        assert await backend.races.find(tx, INVITE) is None
        assert await backend.races.open_rooms_of(tx, ann) == []
        assert await backend.races.seats.all(tx, race.id) == []
        assert await backend.races.seats.games(tx, race.id) == []
        assert [s.player_id for s in await backend.races.seats.all(tx, marker.id)] == [host]
    for game_id in games.values():
        assert await backend.games.record(game_id) is None


async def test_a_transaction_goes_on_after_its_commit_and_rolls_back_what_follows(
    backend: Backend,
) -> None:
    host, ann = await backend.add_players(["Host", "Ann"])
    async with backend.events() as events:
        async with backend.races.transaction() as tx:
            race = await _create(backend, tx, host)
            await tx.commit()
            await backend.races.seats.add(tx, race.id, ann, T0)  # the next transaction
            announced = await backend.races.announce(tx, race)
            assert announced.version == 2
            assert len(await backend.races.seats.all(tx, race.id)) == 2  # its own writes
            await tx.commit()
            await backend.races.seats.remove(tx, race.id, ann)
            await backend.races.announce(tx, announced)  # never committed
        await _marker(backend, host)
        await eventually(lambda: ("room", "MARKER", 1) in _rooms(events), "the marker's event")
        assert _rooms(events) == [("room", INVITE, 1), ("room", INVITE, 2), ("room", "MARKER", 1)]
    async with backend.races.transaction() as tx:
        kept = await backend.races.find(tx, INVITE)
        assert kept is not None and kept.version == 2
        assert [s.player_id for s in await backend.races.seats.all(tx, race.id)] == [host, ann]


async def test_a_locked_room_waits_for_its_holder_and_a_limited_wait_gives_up(
    backend: Backend,
) -> None:
    (host,) = await backend.add_players(["Host"])
    async with backend.races.transaction() as tx:
        race = await _create(backend, tx, host)
        await tx.commit()
    async with backend.races.transaction() as holder:
        assert await backend.races.find(holder, INVITE, lock=True) == race
        for wait in ("find", "lock", "lock_all"):
            with pytest.raises(StorageUnavailable):
                async with backend.races.transaction() as waiter:
                    await backend.races.limit_lock_waits(waiter, 0.05)
                    if wait == "find":
                        await backend.races.find(waiter, INVITE, lock=True)
                    elif wait == "lock":
                        await backend.races.lock(waiter, race.id)
                    else:
                        await backend.races.lock_all(waiter, [race.id])
        async with backend.races.transaction() as reader:  # reading takes no lock
            assert await backend.races.find(reader, INVITE) == race
        await backend.races.announce(holder, race)
        await holder.commit()  # the lock goes with the commit
        async with backend.races.transaction() as waiter:
            await backend.races.limit_lock_waits(waiter, 5.0)
            locked = await backend.races.lock(waiter, race.id)
            assert locked is not None and locked.version == 2
