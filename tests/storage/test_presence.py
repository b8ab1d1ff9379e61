"""The presence records' contract (:class:`~server.storage.presence.PresenceStore` and its
:class:`~server.storage.instances.InstanceStore`) on either store (in memory and PostgreSQL): a
process's record by the database's clock, processes taken for dead after the time-out,
connections on record and deleted with their process, no record for a room or player that
has no row, the presence upsert and its transitions
(a role change while connected keeps "since"), the grace period's end, and what a sweep has to
do."""

from __future__ import annotations

import datetime as dt

import pytest

from server.engine.codes import GameCode
from server.engine.game import Status
from server.errors import StorageConflict
from server.storage.presence import Connection, PresenceRole, PresenceState
from server.storage.races import RaceRow
from tests.backends import Backend

CODE = GameCode.parse("TP1-E-AAAAAAB")
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
ME, OTHER = "instance-a", "instance-b"
CONNECTED, RECONNECTING, GONE = (
    PresenceState.CONNECTED,
    PresenceState.RECONNECTING,
    PresenceState.GONE,
)
RACER, WATCHER = PresenceRole.RACER, PresenceRole.WATCHER


async def _room(backend: Backend, host_id: int, invite: str = "ACDEFG") -> RaceRow:
    async with backend.races.transaction() as tx:
        race = await backend.races.create(
            tx,
            invite=invite,
            host_id=host_id,
            code=CODE,
            host_deal=True,
            time_limit_s=600,
            max_players=8,
            now=T0,
        )
        await tx.commit()
    return race


async def test_a_process_record_is_refreshed_by_the_database_clock_and_made_again(
    backend: Backend,
) -> None:
    store = backend.presence
    async with store.transaction() as tx:
        started = await store.instances.register(tx, ME)
        assert await store.instances.register(tx, ME) == started  # made once
        assert await store.instances.beat(tx, ME) == started
        assert await store.instances.beat(tx, "never-registered") is None
        await tx.commit()
    async with store.transaction() as tx:
        await store.instances.forget(tx, [ME])
        assert await store.instances.beat(tx, ME) is None  # dropped: taken for dead
        assert await store.instances.register(tx, ME) != started


async def test_processes_unseen_for_the_time_out_are_dead_but_never_the_asker(
    backend: Backend,
) -> None:
    store = backend.presence
    async with store.transaction() as tx:
        for instance in (ME, OTHER, "instance-c"):
            await store.instances.register(tx, instance)
        await tx.commit()
    await backend.set_seen([ME, OTHER], 60.0)
    assert await store.instances.dead(ME, 30.0) == [OTHER]
    assert await store.instances.dead(ME, 120.0) == []
    async with store.transaction() as tx:
        await store.instances.beat(tx, OTHER)  # seen again: alive
        await tx.commit()
    assert await store.instances.dead("instance-c", 30.0) == [ME]


async def test_connections_on_record_and_dropped_by_process_or_key(backend: Backend) -> None:
    store = backend.presence
    ann, bob = await backend.add_players(["Ann", "Bob"])
    a, b = await _room(backend, ann, "AAAAAA"), await _room(backend, ann, "CCCCCC")
    mine, mine2, theirs = Connection(ME, "k1"), Connection(ME, "k2"), Connection(OTHER, "k3")
    async with store.transaction() as tx:
        # A connection's process record is made when missing (dropped after a stall).
        await store.add_connection(tx, a.id, ann, mine, T0)
        await store.add_connection(tx, a.id, ann, mine, T0)  # once
        await store.add_connection(tx, b.id, ann, mine, T0)
        await store.add_connection(tx, a.id, ann, mine2, T0)
        await store.add_connection(tx, a.id, bob, theirs, T0)
        assert await store.instances.beat(tx, OTHER) is not None
        assert await store.connections(tx, a.id, ann) == 2
        await tx.commit()
    assert sorted(await store.own_keys(ME)) == ["k1", "k2"]
    async with store.transaction() as tx:
        assert sorted(await store.rooms_followed(tx, [ME], "k1")) == [a.id, b.id]
        assert await store.rooms_followed(tx, [OTHER]) == [a.id]
        dropped = await store.drop_connections(tx, [ME], "k1")
        assert sorted(dropped) == [(a.id, ann), (b.id, ann)]
        assert await store.connections(tx, a.id, ann) == 1
        await store.drop_connection(tx, a.id, mine2)
        assert await store.connections(tx, a.id, ann) == 0
        assert await store.drop_connections(tx, [OTHER, "instance-z"]) == [(a.id, bob)]
        await tx.commit()
    assert await store.own_keys(ME) == []


async def test_forgetting_a_process_deletes_its_connections_and_only_its_own(
    backend: Backend,
) -> None:
    store = backend.presence
    ann, bob = await backend.add_players(["Ann", "Bob"])
    race = await _room(backend, ann)
    async with store.transaction() as tx:
        await store.add_connection(tx, race.id, ann, Connection(ME, "k1"), T0)
        await store.add_connection(tx, race.id, ann, Connection(ME, "k2"), T0)
        await store.add_connection(tx, race.id, bob, Connection(OTHER, "k3"), T0)
        await tx.commit()
    async with store.transaction() as tx:
        await store.instances.forget(tx, [ME, "never-registered"])
        await tx.commit()
    assert await store.own_keys(ME) == []
    assert await store.own_keys(OTHER) == ["k3"]
    async with store.transaction() as tx:
        assert await store.connections(tx, race.id, ann) == 0
        assert await store.connections(tx, race.id, bob) == 1
        assert await store.rooms_followed(tx, [ME]) == []
        assert await store.instances.beat(tx, ME) is None
        assert await store.instances.beat(tx, OTHER) is not None


async def test_a_room_or_player_with_no_row_is_refused_and_nothing_is_left(
    backend: Backend,
) -> None:
    store = backend.presence
    (ann,) = await backend.add_players(["Ann"])
    race = await _room(backend, ann)
    no_room, no_player = race.id + 1000, ann + 1000
    for race_id, player_id in ((no_room, ann), (race.id, no_player)):
        with pytest.raises(StorageConflict):
            async with store.transaction() as tx:
                await store.add_connection(tx, race_id, player_id, Connection(ME, "k"), T0)
                await tx.commit()
        with pytest.raises(StorageConflict):
            async with store.transaction() as tx:
                await store.mark_connected(tx, race_id, player_id, RACER, T0)
                await tx.commit()
    assert await store.own_keys(ME) == []
    async with store.transaction() as tx:
        # The process record the refused transaction made went with it.
        assert await store.instances.beat(tx, ME) is None
        assert await store.connections(tx, race.id, no_player) == 0
    assert await backend.stored_presence(no_room, ann) is None
    assert await backend.stored_presence(race.id, no_player) is None


async def test_marking_connected_reports_a_change_and_keeps_since_when_already_connected(
    backend: Backend,
) -> None:
    store = backend.presence
    (ann,) = await backend.add_players(["Ann"])
    race = await _room(backend, ann)
    t1, t2, t3 = (T0 + dt.timedelta(seconds=s) for s in (1, 2, 3))
    async with store.transaction() as tx:
        assert await store.mark_connected(tx, race.id, ann, WATCHER, T0) is True  # new
        assert await store.mark_connected(tx, race.id, ann, WATCHER, t1) is False  # same
        assert await store.mark_connected(tx, race.id, ann, RACER, t2) is True  # role
        await tx.commit()
    assert await backend.stored_presence(race.id, ann) == ("racer", "connected", T0)  # kept
    async with store.transaction() as tx:
        assert await store.set_state(tx, race.id, ann, RECONNECTING, t2) is True
        assert await store.state(tx, race.id, ann) is RECONNECTING
        assert await store.mark_connected(tx, race.id, ann, RACER, t3) is True  # back
        await tx.commit()
    assert await backend.stored_presence(race.id, ann) == ("racer", "connected", t3)


async def test_state_changes_may_require_the_state_they_leave(backend: Backend) -> None:
    store = backend.presence
    (ann,) = await backend.add_players(["Ann"])
    race = await _room(backend, ann)
    t1 = T0 + dt.timedelta(seconds=1)
    async with store.transaction() as tx:
        assert await store.state(tx, race.id, ann) is None
        assert await store.set_state(tx, race.id, ann, GONE, T0) is False  # no row
        await store.mark_connected(tx, race.id, ann, RACER, T0)
        await store.set_state(tx, race.id, ann, GONE, T0)
        moved = await store.set_state(tx, race.id, ann, RECONNECTING, t1, only_from=CONNECTED)
        assert moved is False and await store.state(tx, race.id, ann) is GONE
        await store.set_role(tx, race.id, ann, WATCHER)
        await tx.commit()
    assert await backend.stored_presence(race.id, ann) == ("watcher", "gone", T0)
    async with store.transaction() as tx:
        await store.add_connection(tx, race.id, ann, Connection(ME, "k"), T0)
        assert await store.forget(tx, race.id, ann) is True
        assert await store.connections(tx, race.id, ann) == 0
        assert await store.forget(tx, race.id, ann) is False
        await tx.commit()
    assert await backend.stored_presence(race.id, ann) is None


async def test_the_grace_period_ends_only_for_those_reconnecting_since_the_cutoff(
    backend: Backend,
) -> None:
    store = backend.presence
    early, late, here = await backend.add_players(["Early", "Late", "Here"])
    race = await _room(backend, here)
    cutoff, now = T0 + dt.timedelta(seconds=10), T0 + dt.timedelta(seconds=70)
    async with store.transaction() as tx:
        for player in (early, late, here):
            await store.mark_connected(tx, race.id, player, RACER, T0)
        await store.set_state(tx, race.id, early, RECONNECTING, cutoff)
        await store.set_state(tx, race.id, late, RECONNECTING, cutoff + dt.timedelta(0, 1))
        await tx.commit()
    assert await store.rooms_past_grace(cutoff - dt.timedelta(seconds=1)) == []
    assert await store.rooms_past_grace(cutoff) == [race.id]
    async with store.transaction() as tx:
        assert await store.end_grace(tx, race.id, cutoff, now) == [early]
        await tx.commit()
    assert await backend.stored_presence(race.id, early) == ("racer", "gone", now)
    assert await backend.stored_presence(race.id, late) == (
        "racer",
        "reconnecting",
        cutoff + dt.timedelta(0, 1),
    )
    # A room that is no longer open has nobody to wait for.
    async with backend.races.transaction() as tx:
        await backend.races.close(tx, race, now)
        await tx.commit()
    assert await store.rooms_past_grace(now) == []


async def test_what_a_sweep_has_to_do_in_one_question(backend: Backend) -> None:
    store = backend.presence
    ann, bob = await backend.add_players(["Ann", "Bob"])
    race = await _room(backend, ann)
    cutoff, now = T0 - dt.timedelta(seconds=60), T0 + dt.timedelta(seconds=1)

    async def work(timeout_s: float | None = 30.0) -> tuple[bool, ...]:
        found = await store.sweep_work(
            instance=ME, timeout_s=timeout_s, grace_cutoff=cutoff, now=now
        )
        return (found.dead_instances, found.own_records, found.past_grace, found.gone_playing)

    assert await work() == (False, False, False, False)
    async with store.transaction() as tx:
        await store.instances.register(tx, OTHER)
        await tx.commit()
    await backend.set_seen([OTHER], 3600.0)
    async with store.transaction() as tx:
        await store.add_connection(tx, race.id, ann, Connection(ME, "k"), T0)
        await store.mark_connected(tx, race.id, bob, RACER, T0)
        await store.set_state(tx, race.id, bob, RECONNECTING, cutoff)
        await tx.commit()
    assert await work() == (True, True, True, False)
    assert await work(timeout_s=None) == (False, True, True, False)  # the dead not asked

    # A gone racer still playing a race that has started.
    async with backend.races.transaction() as tx:
        race = await backend.races.start(tx, race, T0, T0 + dt.timedelta(minutes=10), {})
        await backend.games.insert_race_games(tx, race.id, CODE, Status.PLAYING, 0, [bob], T0)
        await tx.commit()
    async with store.transaction() as tx:
        await store.set_state(tx, race.id, bob, GONE, T0)
        await tx.commit()
    assert (await work())[3] is True
    gone = await store.gone_but_playing(now)
    assert [(g.player_id, type(g.game_id)) for g in gone] == [(bob, int)]
    assert await store.gone_but_playing(T0 - dt.timedelta(seconds=1)) == []  # not started yet
