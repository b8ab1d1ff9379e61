"""The presence records' queries (server.storage.presence) on a real PostgreSQL: a process's
record by the database's clock, connections on record, the presence upsert and its transitions,
the grace period's end, and the one-round-trip question of what a sweep has to do."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine.codes import GameCode
from server.storage.models import RacePresence, ServerInstance
from server.storage.presence import Connection, PostgresPresenceStore, PresenceRole, PresenceState
from server.storage.races import PostgresRaceStore, RaceRow
from server.storage.sessions import Sessions
from tests.storage.test_models import T0, add_game, add_player

CODE = GameCode.parse("TP1-E-AAAAAAB")
ME, OTHER = "instance-a", "instance-b"
CONNECTED, RECONNECTING, GONE = (
    PresenceState.CONNECTED,
    PresenceState.RECONNECTING,
    PresenceState.GONE,
)
RACER, WATCHER = PresenceRole.RACER, PresenceRole.WATCHER


@pytest.fixture
def store(db: AsyncEngine) -> PostgresPresenceStore:
    return PostgresPresenceStore(Sessions(db))


@pytest.fixture
def races(db: AsyncEngine) -> PostgresRaceStore:
    return PostgresRaceStore(Sessions(db))


async def _room(races: PostgresRaceStore, host_id: int, invite: str = "ACDEFG") -> RaceRow:
    async with races.transaction() as session:
        race = await races.create(
            session,
            invite=invite,
            host_id=host_id,
            code=CODE,
            host_deal=True,
            time_limit_s=600,
            max_players=8,
            now=T0,
        )
        await session.commit()
    return race


async def _row(db: AsyncEngine, race_id: int, player_id: int) -> tuple[str, str, dt.datetime]:
    async with db.connect() as conn:
        row = (
            await conn.execute(
                select(RacePresence.role, RacePresence.state, RacePresence.since).where(
                    RacePresence.race_id == race_id, RacePresence.player_id == player_id
                )
            )
        ).one()
    return row.role, row.state, row.since


async def test_a_process_record_is_refreshed_by_the_database_clock_and_made_again(
    db: AsyncEngine, store: PostgresPresenceStore
) -> None:
    async with store.transaction() as session:
        started = await store.instances.register(session, ME)
        assert await store.instances.register(session, ME) == started  # made once
        assert await store.instances.beat(session, ME) == started
        assert await store.instances.beat(session, "never-registered") is None
        await session.commit()
    async with store.transaction() as session:
        await store.instances.forget(session, [ME])
        assert await store.instances.beat(session, ME) is None  # dropped: taken for dead
        assert await store.instances.register(session, ME) != started


async def test_processes_unseen_for_the_time_out_are_dead_but_never_the_asker(
    db: AsyncEngine, store: PostgresPresenceStore
) -> None:
    async with store.transaction() as session:
        for instance in (ME, OTHER, "instance-c"):
            await store.instances.register(session, instance)
        await session.execute(
            update(ServerInstance)
            .where(ServerInstance.id.in_([ME, OTHER]))
            .values(seen_at=text("statement_timestamp() - interval '60 seconds'"))
        )
        await session.commit()
    assert await store.instances.dead(ME, 30.0) == [OTHER]
    assert await store.instances.dead(ME, 120.0) == []


async def test_connections_on_record_and_dropped_by_process_or_key(
    db: AsyncEngine, store: PostgresPresenceStore, races: PostgresRaceStore
) -> None:
    ann, bob = await add_player(db, "Ann"), await add_player(db, "Bob")
    a, b = await _room(races, ann, "AAAAAA"), await _room(races, ann, "CCCCCC")
    mine, mine2, theirs = Connection(ME, "k1"), Connection(ME, "k2"), Connection(OTHER, "k3")
    async with store.transaction() as session:
        # A connection's process record is made when missing (dropped after a stall).
        await store.add_connection(session, a.id, ann, mine, T0)
        await store.add_connection(session, a.id, ann, mine, T0)  # once
        await store.add_connection(session, b.id, ann, mine, T0)
        await store.add_connection(session, a.id, ann, mine2, T0)
        await store.add_connection(session, a.id, bob, theirs, T0)
        assert await store.instances.beat(session, OTHER) is not None
        assert await store.connections(session, a.id, ann) == 2
        await session.commit()
    assert sorted(await store.own_keys(ME)) == ["k1", "k2"]
    async with store.transaction() as session:
        assert sorted(await store.rooms_followed(session, [ME], "k1")) == [a.id, b.id]
        assert await store.rooms_followed(session, [OTHER]) == [a.id]
        dropped = await store.drop_connections(session, [ME], "k1")
        assert sorted(dropped) == [(a.id, ann), (b.id, ann)]
        assert await store.connections(session, a.id, ann) == 1
        await store.drop_connection(session, a.id, mine2)
        assert await store.connections(session, a.id, ann) == 0
        assert await store.drop_connections(session, [OTHER, "instance-z"]) == [(a.id, bob)]
        await session.commit()
    assert await store.own_keys(ME) == []


async def test_marking_connected_reports_a_change_and_keeps_since_when_already_connected(
    db: AsyncEngine, store: PostgresPresenceStore, races: PostgresRaceStore
) -> None:
    ann = await add_player(db, "Ann")
    race = await _room(races, ann)
    t1, t2, t3 = (T0 + dt.timedelta(seconds=s) for s in (1, 2, 3))
    async with store.transaction() as session:
        assert await store.mark_connected(session, race.id, ann, WATCHER, T0) is True  # new
        assert await store.mark_connected(session, race.id, ann, WATCHER, t1) is False  # same
        assert await store.mark_connected(session, race.id, ann, RACER, t2) is True  # role
        await session.commit()
    assert await _row(db, race.id, ann) == ("racer", "connected", T0)  # since kept
    async with store.transaction() as session:
        assert await store.set_state(session, race.id, ann, RECONNECTING, t2) is True
        assert await store.state(session, race.id, ann) is RECONNECTING
        assert await store.mark_connected(session, race.id, ann, RACER, t3) is True  # back
        await session.commit()
    assert await _row(db, race.id, ann) == ("racer", "connected", t3)


async def test_state_changes_may_require_the_state_they_leave(
    db: AsyncEngine, store: PostgresPresenceStore, races: PostgresRaceStore
) -> None:
    ann = await add_player(db, "Ann")
    race = await _room(races, ann)
    t1 = T0 + dt.timedelta(seconds=1)
    async with store.transaction() as session:
        assert await store.state(session, race.id, ann) is None
        assert await store.set_state(session, race.id, ann, GONE, T0) is False  # no row
        await store.mark_connected(session, race.id, ann, RACER, T0)
        await store.set_state(session, race.id, ann, GONE, T0)
        moved = await store.set_state(session, race.id, ann, RECONNECTING, t1, only_from=CONNECTED)
        assert moved is False and await store.state(session, race.id, ann) is GONE
        await store.set_role(session, race.id, ann, WATCHER)
        await session.commit()
    assert await _row(db, race.id, ann) == ("watcher", "gone", T0)
    async with store.transaction() as session:
        await store.add_connection(session, race.id, ann, Connection(ME, "k"), T0)
        assert await store.forget(session, race.id, ann) is True
        assert await store.connections(session, race.id, ann) == 0
        assert await store.forget(session, race.id, ann) is False


async def test_the_grace_period_ends_only_for_those_reconnecting_since_the_cutoff(
    db: AsyncEngine, store: PostgresPresenceStore, races: PostgresRaceStore
) -> None:
    early, late, here = [await add_player(db, n) for n in ("Early", "Late", "Here")]
    race = await _room(races, here)
    cutoff, now = T0 + dt.timedelta(seconds=10), T0 + dt.timedelta(seconds=70)
    async with store.transaction() as session:
        for player in (early, late, here):
            await store.mark_connected(session, race.id, player, RACER, T0)
        await store.set_state(session, race.id, early, RECONNECTING, cutoff)
        await store.set_state(session, race.id, late, RECONNECTING, cutoff + dt.timedelta(0, 1))
        await session.commit()
    assert await store.rooms_past_grace(cutoff - dt.timedelta(seconds=1)) == []
    assert await store.rooms_past_grace(cutoff) == [race.id]
    async with store.transaction() as session:
        assert await store.end_grace(session, race.id, cutoff, now) == [early]
        await session.commit()
    assert await _row(db, race.id, early) == ("racer", "gone", now)
    assert (await _row(db, race.id, late))[1] == "reconnecting"
    # A room that is no longer open has nobody to wait for.
    async with races.transaction() as session:
        await races.close(session, race, now)
        await session.commit()
    assert await store.rooms_past_grace(now) == []


async def test_what_a_sweep_has_to_do_in_one_question(
    db: AsyncEngine, store: PostgresPresenceStore, races: PostgresRaceStore
) -> None:
    ann, bob = await add_player(db, "Ann"), await add_player(db, "Bob")
    race = await _room(races, ann)
    cutoff, now = T0 - dt.timedelta(seconds=60), T0 + dt.timedelta(seconds=1)

    async def work(timeout_s: float | None = 30.0) -> tuple[bool, ...]:
        found = await store.sweep_work(
            instance=ME, timeout_s=timeout_s, grace_cutoff=cutoff, now=now
        )
        return (found.dead_instances, found.own_records, found.past_grace, found.gone_playing)

    assert await work() == (False, False, False, False)
    async with store.transaction() as session:
        await store.instances.register(session, OTHER)
        await session.execute(
            update(ServerInstance).values(seen_at=text("now() - interval '1 hour'"))
        )
        await store.add_connection(session, race.id, ann, Connection(ME, "k"), T0)
        await store.mark_connected(session, race.id, bob, RACER, T0)
        await store.set_state(session, race.id, bob, RECONNECTING, cutoff)
        await session.commit()
    assert await work() == (True, True, True, False)
    assert await work(timeout_s=None) == (False, True, True, False)  # the dead not asked

    # A gone racer still playing a race that has started.
    async with races.transaction() as session:
        race = await races.start(session, race, T0, T0 + dt.timedelta(minutes=10), {})
        await session.commit()
    await add_game(db, bob, mode="race", daily_date=None, race_id=race.id)
    async with store.transaction() as session:
        await store.set_state(session, race.id, bob, GONE, T0)
        await session.commit()
    assert (await work())[3] is True
    gone = await store.gone_but_playing(now)
    assert [(g.player_id, type(g.game_id)) for g in gone] == [(bob, int)]
    assert await store.gone_but_playing(T0 - dt.timedelta(seconds=1)) == []  # not started yet
