"""PresenceService's rules on either store (in memory and PostgreSQL; docs/rules.md §4
"Presence"): a hello follows the player's open rooms, a racer is connected while one of their
connections follows a room and reconnecting once the last closes, the grace period ends in gone
(a lobby's host role passing on, a running race's game resigned), and the sweeps drop what dead
processes and closed connections left on record, a process taken for dead recording its
connections again. (Over websockets on real servers: ``tests/web/test_race_presence.py``.)"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass

import pytest

from server.engine import GameCode, Status
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.games import GameService
from server.services.players import PlayerInfo, PlayerService
from server.services.presence import PresenceService
from server.services.races import RaceLimits, RaceService, Room
from server.storage.presence import PresenceState
from tests.backends import Backend
from tests.helpers import eventually

CODE = GameCode.parse("TP1-E-AAAAAAB")
GRACE_S = 30.0
CONNECTED, RECONNECTING, GONE = (
    PresenceState.CONNECTED,
    PresenceState.RECONNECTING,
    PresenceState.GONE,
)


@dataclass(frozen=True, slots=True)
class Services:
    """The services presence works with, over one backend's stores."""

    players: PlayerService
    games: GameService
    races: RaceService
    backend: Backend
    clock: FakeClock

    def presence(self, instance: str, instance_timeout_s: float = 60.0) -> PresenceService:
        """The presence service of one server process."""
        return PresenceService(
            self.backend.presence,
            self.backend.races,
            self.clock,
            self.games,
            instance,
            GRACE_S,
            instance_timeout_s,
        )


@pytest.fixture
async def services(backend: Backend, clock: FakeClock) -> AsyncIterator[Services]:
    daily = DailyService(backend.daily, clock, b"test-daily-key-0123456789abcdefghij")
    games = GameService(backend.games, backend.committer, clock, daily)
    limits = RaceLimits(countdown_s=1, grace_s=GRACE_S)
    races = RaceService(backend.races, backend.presence, clock, games, limits)
    try:
        yield Services(PlayerService(backend.players, clock), games, races, backend, clock)
    finally:
        await games.close()


async def _players(services: Services, *names: str) -> list[PlayerInfo]:
    return [(await services.players.register(name)).player for name in names]


def _state(room: Room, player_id: int) -> PresenceState | None:
    """The racer's presence state as the room shows it (None: not on record)."""
    seat = next(s for s in room.seats if s.player_id == player_id)
    return None if seat.presence is None else seat.presence.state


def _open(*keys: str) -> Collection[str]:
    return set(keys)


async def test_a_racer_is_connected_while_a_connection_follows_and_reconnecting_after(
    services: Services,
) -> None:
    host, loner = await _players(services, "Host", "Loner")
    presence = services.presence("a")
    await presence.register()
    room = await services.races.create(host, CODE)
    assert _state(room, host.id) is None  # no connection yet

    assert await presence.follow_rooms(host.id, presence.connection("k1"))
    followed = await services.races.room(room.invite)
    assert _state(followed, host.id) == CONNECTED and followed.version == room.version + 1
    assert await presence.follow_rooms(host.id, presence.connection("k2"))  # a second device
    assert (await services.races.room(room.invite)).version == followed.version  # no change
    assert not await presence.follow_rooms(loner.id, presence.connection("k3"))  # no room

    await presence.unfollow(presence.connection("k1"))
    still = await services.races.room(room.invite)
    assert _state(still, host.id) == CONNECTED and still.version == followed.version
    await presence.unfollow(presence.connection("k2"))
    left = await services.races.room(room.invite)
    assert _state(left, host.id) == RECONNECTING and left.version == followed.version + 1
    seat = next(s for s in left.seats if s.player_id == host.id)
    assert seat.presence is not None and seat.presence.until is not None
    assert (seat.presence.until - seat.presence.since).total_seconds() == GRACE_S
    # Coming back within the grace period: connected again, the seat kept.
    await presence.follow_rooms(host.id, presence.connection("k4"))
    assert _state(await services.races.room(room.invite), host.id) == CONNECTED


async def test_the_grace_period_ends_in_gone_and_a_gone_host_passes_the_role(
    services: Services, clock: FakeClock
) -> None:
    host, ann = await _players(services, "Host", "Ann")
    presence = services.presence("a")
    await presence.register()
    room = await services.races.create(host, CODE, connection=presence.connection("h"))
    await services.races.join(ann, room.invite, connection=presence.connection("a"))
    await presence.unfollow(presence.connection("h"))

    clock.advance(seconds=GRACE_S - 1)
    await presence.sweep(lambda: _open("a"))
    within = await services.races.room(room.invite)
    assert _state(within, host.id) == RECONNECTING and within.host_id == host.id

    clock.advance(seconds=1)  # the grace period is over
    await presence.sweep(lambda: _open("a"))
    after = await services.races.room(room.invite)
    assert _state(after, host.id) == GONE and after.host_id == ann.id
    assert after.version == within.version + 1
    assert [s.player_id for s in after.seats] == [host.id, ann.id]  # the seat stays, gone


async def test_a_gone_racer_s_game_is_resigned_by_the_sweep(
    services: Services, clock: FakeClock
) -> None:
    host, ann = await _players(services, "Host", "Ann")
    presence = services.presence("a")
    await presence.register()
    room = await services.races.create(host, CODE, connection=presence.connection("h"))
    await services.races.join(ann, room.invite, connection=presence.connection("a"))
    started = await services.races.start(host, room.invite)
    games = {s.player_id: s.game_id for s in started.seats}
    clock.advance(seconds=2)  # the countdown is over
    await presence.unfollow(presence.connection("a"))
    clock.advance(seconds=GRACE_S)
    await presence.sweep(lambda: _open("h"))  # gone
    assert _state(await services.races.room(room.invite), ann.id) == GONE
    await presence.sweep(lambda: _open("h"))  # and their game resigned
    ann_game = games[ann.id]
    assert ann_game is not None
    head = await services.backend.games.head(ann_game)
    assert head is not None and head.status == Status.RESIGNED
    host_game = games[host.id]
    assert host_game is not None
    head = await services.backend.games.head(host_game)
    assert head is not None and head.status == Status.PLAYING  # connected: still playing


async def test_the_sweep_drops_the_records_of_connections_closed_unannounced(
    services: Services,
) -> None:
    (host,) = await _players(services, "Host")
    presence = services.presence("a")
    await presence.register()
    room = await services.races.create(host, CODE, connection=presence.connection("h1"))
    await presence.follow_rooms(host.id, presence.connection("h2"))
    await presence.sweep(lambda: _open("h1", "h2"))
    assert _state(await services.races.room(room.invite), host.id) == CONNECTED
    await presence.sweep(lambda: _open("h2"))  # h1 closed without its close being recorded
    assert _state(await services.races.room(room.invite), host.id) == CONNECTED
    await presence.sweep(lambda: _open())
    assert _state(await services.races.room(room.invite), host.id) == RECONNECTING


async def test_a_dead_process_s_connections_are_dropped_and_it_records_them_again(
    services: Services,
) -> None:
    host, ann = await _players(services, "Host", "Ann")
    alive, stalled = services.presence("alive", 0.2), services.presence("stalled", 0.2)
    await alive.register()
    await stalled.register()
    room = await services.races.create(host, CODE, connection=alive.connection("h"))
    await services.races.join(ann, room.invite, connection=stalled.connection("a"))
    assert _state(await services.races.room(room.invite), ann.id) == CONNECTED

    async def dropped() -> bool:
        # The alive process beats and sweeps; the stalled one does neither.
        await alive.heartbeat()
        await alive.sweep(lambda: _open("h"))
        return _state(await services.races.room(room.invite), ann.id) == RECONNECTING

    await eventually(dropped, "the stalled process taken for dead")
    assert _state(await services.races.room(room.invite), host.id) == CONNECTED  # not its own

    # The stalled process wakes up: its record was dropped, so it records its connection again.
    assert await stalled.heartbeat() is False
    assert await stalled.refollow([(room.id, ann.id, "a")])
    assert await stalled.heartbeat() is True
    assert _state(await services.races.room(room.invite), ann.id) == CONNECTED


async def test_a_process_held_up_itself_takes_nobody_for_dead_before_its_next_beat(
    services: Services, backend: Backend
) -> None:
    """A stall that held every process up (a loaded machine, a paused one) leaves the others'
    records as old as this process's own; a sweep that runs before this process's own late
    heartbeat must not take them for dead by it (it did, having been healthy before)."""
    host, ann = await _players(services, "Host", "Ann")
    timeout = 0.2
    alive, other = services.presence("alive", timeout), services.presence("other", timeout)
    await alive.register()
    await other.register()
    room = await services.races.create(host, CODE, connection=alive.connection("h"))
    await services.races.join(ann, room.invite, connection=other.connection("a"))
    started = time.monotonic()

    async def both_beat_for_a_while() -> bool:  # healthy for more than a whole time-out
        await alive.heartbeat()
        await other.heartbeat()
        return time.monotonic() - started > 1.5 * timeout

    await eventually(both_beat_for_a_while, "both processes to beat for a time-out", every_s=0.02)
    stalled = time.monotonic()
    # The stall: nobody beats for longer than the heartbeat's lateness (half the time-out),
    # and the others' records age past the time-out by the database's clock.
    await eventually(lambda: time.monotonic() - stalled > timeout, "the stall")
    await backend.set_seen(["other"], 2 * timeout)
    await alive.sweep(lambda: _open("h"))
    assert _state(await services.races.room(room.invite), ann.id) == CONNECTED
    # Its own beat, late: it takes nobody for dead before a whole time-out of beats.
    await alive.heartbeat()
    await alive.sweep(lambda: _open("h"))
    assert _state(await services.races.room(room.invite), ann.id) == CONNECTED
