"""The race rooms' queries (server.storage.races) on a real PostgreSQL: typed rows out, the
row locks the room operations rely on (one room at a time, rooms in id order, a player's joins
in turn, a lock time-out), the host-passing and gone-racer orders, the room's watchers, and the
events each write announces."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from server.engine.codes import GameCode, RuleSet
from server.errors import StorageConflict, StorageUnavailable
from server.storage.events import PgPublisher, room_channel
from server.storage.models import Race, RacePlayer, RacePresence, RaceStatus
from server.storage.presence import PresenceRole, PresenceState
from server.storage.races import INVITE_KEY, RaceRow
from server.storage.races_postgres import PostgresRaceStore
from server.storage.sessions import Sessions
from tests.helpers import eventually
from tests.storage.test_models import T0, add_game, add_player

CODE = GameCode.parse("TP1-E-AAAAAAB")


@pytest.fixture
async def publisher(database_url: str) -> AsyncIterator[PgPublisher]:
    sender = PgPublisher(database_url)
    await sender.start()
    yield sender
    await sender.stop()


@pytest.fixture
def store(db: AsyncEngine, publisher: PgPublisher) -> PostgresRaceStore:
    return PostgresRaceStore(Sessions(db, publisher))


async def _room(
    store: PostgresRaceStore, host_id: int, invite: str = "ACDEFG", now: dt.datetime = T0
) -> RaceRow:
    async with store.transaction() as session:
        race = await store.create(
            session,
            invite=invite,
            host_id=host_id,
            code=CODE,
            host_deal=True,
            time_limit_s=600,
            max_players=8,
            now=now,
        )
        await session.commit()
    return race


async def _seat(db: AsyncEngine, race_id: int, player_id: int, seat: int) -> None:
    async with db.begin() as conn:
        await conn.execute(
            insert(RacePlayer).values(race_id=race_id, player_id=player_id, seat=seat, joined_at=T0)
        )


async def _presence(
    db: AsyncEngine,
    race_id: int,
    player_id: int,
    state: PresenceState,
    since: dt.datetime = T0,
    role: PresenceRole = PresenceRole.RACER,
) -> None:
    async with db.begin() as conn:
        await conn.execute(
            insert(RacePresence).values(
                race_id=race_id, player_id=player_id, role=role, state=state, since=since
            )
        )


async def _waiting_on_a_lock(db: AsyncEngine) -> bool:
    """Whether some other session of the test's database waits for a lock."""
    async with db.connect() as conn:
        waiting = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
    return bool(waiting)


# --------------------------------------------------------------------------------- typed rows


async def test_a_new_room_is_a_typed_lobby_with_its_host_in_seat_one(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host = await add_player(db, "Host")
    race = await _room(store, host)
    assert race.status is RaceStatus.LOBBY and race.version == 1
    assert race.code == CODE and race.rules is RuleSet.EASY and race.host_deal
    assert race.created_at == T0
    assert race.starts_at is None and race.ends_at is None and race.results is None
    async with store.transaction() as session:
        assert await store.find(session, "ACDEFG") == race
        assert await store.find(session, "XXXXXX") is None
        seats = await store.seats.all(session, race.id)
        assert [(s.player_id, s.seat, s.game_id) for s in seats] == [(host, 1, None)]
        assert await store.seats.taken(session, race.id) == 1
        # Stored as the plain value.
        assert await session.scalar(text("SELECT status FROM races")) == "lobby"


async def test_an_invite_code_taken_meanwhile_is_a_conflict_on_the_invite_key(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host = await add_player(db, "Host")
    await _room(store, host)
    with pytest.raises(StorageConflict) as caught:
        await _room(store, host)
    assert caught.value.constraint == INVITE_KEY


async def test_seats_are_added_after_the_last_and_freed(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host, ann, bob = [await add_player(db, n) for n in ("Host", "Ann", "Bob")]
    race = await _room(store, host)
    async with store.transaction() as session:
        assert await store.seats.add(session, race.id, ann, T0) == 2
        await store.seats.remove(session, race.id, host)
        assert await store.seats.add(session, race.id, bob, T0) == 3  # after the last, not a gap
        await session.commit()
    async with store.transaction() as session:
        assert [s.seat for s in await store.seats.all(session, race.id)] == [2, 3]
        assert (await store.seats.find(session, race.id, bob)) is not None
        assert await store.seats.find(session, race.id, host) is None


# ------------------------------------------------------------------------------------ locking


async def test_a_locked_room_waits_for_the_holder_and_then_reads_its_change(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host, heir = await add_player(db, "Host"), await add_player(db, "Heir")
    race = await _room(store, host)

    async def lock_after() -> RaceRow | None:
        async with store.transaction() as session:
            return await store.find(session, race.invite, lock=True)

    async with store.transaction() as session:
        held = await store.find(session, race.invite, lock=True)
        assert held is not None
        waiter = asyncio.create_task(lock_after())
        await eventually(lambda: _waiting_on_a_lock(db), "the second lock to wait")
        assert not waiter.done()
        await store.set_host(session, held, heir)
        await session.commit()
    after = await waiter
    assert after is not None and after.host_id == heir


async def test_a_lock_time_out_fails_the_transaction_instead_of_waiting(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    race = await _room(store, await add_player(db, "Host"))
    async with store.transaction() as holder:
        assert await store.lock(holder, race.id) is not None
        with pytest.raises(StorageUnavailable):
            async with store.transaction() as session:
                await store.limit_lock_waits(session, 0.05)
                await store.lock(session, race.id)
        # Another room is not held up.
        other = await _room(store, await add_player(db, "Other"), invite="HJKMNP")
        async with store.transaction() as session:
            await store.limit_lock_waits(session, 0.05)
            assert await store.lock(session, other.id) == other


async def test_rooms_are_locked_in_id_order_and_missing_ones_skipped(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host = await add_player(db, "Host")
    a = await _room(store, host, invite="AAAAAA")
    b = await _room(store, host, invite="CCCCCC")
    async with store.transaction() as session:
        assert await store.lock_all(session, [b.id, 999_999, a.id, b.id]) == [a, b]
        assert await store.lock_all(session, []) == []
        assert await store.lock(session, 999_999) is None


async def test_a_players_room_count_takes_turns_on_the_player_row(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    ann = await add_player(db, "Ann")
    lobby = await _room(store, ann, invite="AAAAAA")
    running = await _room(store, ann, invite="CCCCCC")
    finished = await _room(store, ann, invite="DDDDDD")
    async with store.transaction() as session:
        await store.start(session, running, T0, T0 + dt.timedelta(minutes=1), {})
        done = await store.start(session, finished, T0, T0 + dt.timedelta(minutes=1), {})
        await store.finish(session, done, T0, [])
        await session.commit()
    async with store.transaction() as holder:
        assert await store.seats.rooms_held(holder, ann) == 2  # the lobby and the running race
        with pytest.raises(StorageUnavailable):  # a second count waits for the first's end
            async with store.transaction() as session:
                await store.limit_lock_waits(session, 0.05)
                await store.seats.rooms_held(session, ann)
        open_rooms = await store.open_rooms_of(holder, ann)
        assert [r.id for r in open_rooms] == [running.id, lobby.id]  # newest first (by id here)
        assert all(r.status.is_open for r in open_rooms)


# --------------------------------------------------------------------------- who is in a room


async def test_the_host_passes_to_the_lowest_connected_seat_else_the_lowest(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host, *racers = [await add_player(db, n) for n in ("Host", "A", "B", "C", "D")]
    race = await _room(store, host)
    for seat, player in enumerate(racers, 2):
        await _seat(db, race.id, player, seat)
    a, b, c, d = racers
    await _presence(db, race.id, host, PresenceState.GONE)
    await _presence(db, race.id, a, PresenceState.RECONNECTING)
    await _presence(db, race.id, b, PresenceState.GONE)
    await _presence(db, race.id, c, PresenceState.CONNECTED)
    await _presence(db, race.id, d, PresenceState.CONNECTED)
    async with store.transaction() as session:
        assert await store.seats.next_host(session, race.id, connected_only=True) == c
        assert await store.seats.next_host(session, race.id, connected_only=False) == c
        await store.seats.remove(session, race.id, c)
        await store.seats.remove(session, race.id, d)
        assert await store.seats.next_host(session, race.id, connected_only=True) is None
        # Nobody connected: the lowest seat, whatever its presence (none on record included).
        assert await store.seats.next_host(session, race.id, connected_only=False) == host
        await session.execute(text("DELETE FROM race_presence WHERE player_id = :p"), {"p": host})
        assert await store.seats.next_host(session, race.id, connected_only=False) == host
        for player in (host, a, b):
            await store.seats.remove(session, race.id, player)
        assert await store.seats.next_host(session, race.id, connected_only=False) is None


async def test_gone_racers_are_listed_longest_gone_first_and_watchers_are_not(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host, a, b, watcher = [await add_player(db, n) for n in ("Host", "A", "B", "W")]
    race = await _room(store, host)
    await _seat(db, race.id, a, 2)
    await _seat(db, race.id, b, 3)
    later = T0 + dt.timedelta(seconds=5)
    await _presence(db, race.id, host, PresenceState.CONNECTED)
    await _presence(db, race.id, a, PresenceState.GONE, later)
    await _presence(db, race.id, b, PresenceState.GONE, T0)
    await _presence(db, race.id, watcher, PresenceState.GONE, T0, PresenceRole.WATCHER)
    async with store.transaction() as session:
        assert await store.seats.gone_racers(session, race.id) == [b, a]


async def test_a_rooms_seats_and_watchers_as_shown(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host, racer, *watchers = [await add_player(db, n) for n in ("Host", "Ann", "W1", "W2", "W3")]
    race = await _room(store, host)
    await _seat(db, race.id, racer, 2)
    await _presence(db, race.id, host, PresenceState.RECONNECTING)
    w1, w2, w3 = watchers
    await _presence(db, race.id, w1, PresenceState.GONE, T0, PresenceRole.WATCHER)
    await _presence(
        db, race.id, w2, PresenceState.CONNECTED, T0 + dt.timedelta(seconds=9), PresenceRole.WATCHER
    )
    await _presence(
        db, race.id, w3, PresenceState.CONNECTED, T0 + dt.timedelta(seconds=1), PresenceRole.WATCHER
    )
    async with store.transaction() as session:
        seats = await store.seats.shown(session, race.id)
        shown, total = await store.seats.watchers(session, race.id, limit=2)
        everyone, _ = await store.seats.watchers(session, race.id, limit=50)
    assert [(s.name, s.seat, s.game_id, s.score) for s in seats] == [
        ("Host", 1, None, None),
        ("Ann", 2, None, None),
    ]
    assert seats[0].presence is not None and seats[0].presence.state is PresenceState.RECONNECTING
    assert seats[1].presence is None
    assert total == 3 and [w.player_id for w in shown] == [w3, w2]  # connected first, by since
    assert [w.player_id for w in everyone] == [w3, w2, w1]
    async with store.transaction() as session:
        assert await store.seats.watchers(session, 999_999, limit=5) == ([], 0)


# ------------------------------------------------------------------- writes and their events


async def test_each_write_returns_the_new_row_and_announces_it_on_commit(
    db: AsyncEngine, store: PostgresRaceStore, database_url: str
) -> None:
    host, ann = await add_player(db, "Host"), await add_player(db, "Ann")
    heard: asyncio.Queue[dict[str, object]] = asyncio.Queue()
    async with db.begin() as conn:  # the room's id, to listen to its channel before it is made
        taken = await conn.scalar(text("SELECT nextval(pg_get_serial_sequence('races', 'id'))"))
    listener = await asyncpg.connect(database_url)
    await listener.add_listener(
        room_channel(taken + 1), lambda *args: heard.put_nowait(json.loads(args[-1]))
    )
    try:
        race = await _room(store, host)
        assert await asyncio.wait_for(heard.get(), 10) == {
            "kind": "race_room",
            "race_id": race.id,
            "invite": race.invite,
            "version": 1,
        }
        async with store.transaction() as session:
            await store.seats.add(session, race.id, ann, T0)
            race = await store.announce(session, race)
            assert race.version == 2 and heard.empty()  # delivered on commit only
            await session.commit()
        assert (await asyncio.wait_for(heard.get(), 10))["version"] == 2

        starts, ends = T0 + dt.timedelta(seconds=5), T0 + dt.timedelta(seconds=65)
        async with store.transaction() as session:
            games = {
                p: await add_game(db, p, mode="race", daily_date=None, race_id=race.id)
                for p in (host, ann)
            }
            race = await store.start(session, race, starts, ends, games)
            await session.commit()
        assert (race.status, race.starts_at, race.ends_at, race.version) == (
            RaceStatus.RUNNING,
            starts,
            ends,
            3,
        )
        start = await asyncio.wait_for(heard.get(), 10)
        assert start["kind"] == "race_start" and start["version"] == 3
        assert start["games"] == {str(p): g for p, g in games.items()}
        async with store.transaction() as session:
            assert {
                s.player_id: s.game_id for s in await store.seats.all(session, race.id)
            } == games
            assert await store.due(session, ends - dt.timedelta(seconds=1)) == []
            assert await store.due(session, ends) == [race.id]
            played = await store.seats.games(session, race.id)
            assert sorted((g.player_id, g.status, g.elapsed_ms) for g in played) == [
                (host, "playing", None),
                (ann, "playing", None),
            ]
            results = [{"player_id": host, "rank": 1}, {"player_id": ann, "rank": 2}]
            race = await store.finish(session, race, ends, results)
            await session.commit()
        assert (race.status, race.finished_at, race.results, race.version) == (
            RaceStatus.FINISHED,
            ends,
            results,
            4,
        )
        assert (await asyncio.wait_for(heard.get(), 10))["kind"] == "race_finished"
    finally:
        await listener.close()


async def test_stale_lobbies_close_and_a_closed_room_is_no_longer_open(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    host = await add_player(db, "Host")
    old = await _room(store, host, invite="AAAAAA", now=T0)
    fresh = await _room(store, host, invite="CCCCCC", now=T0 + dt.timedelta(minutes=10))
    now = T0 + dt.timedelta(minutes=20)
    async with store.transaction() as session:
        assert await store.close_lobbies(session, T0 + dt.timedelta(minutes=5), now) == [old.id]
        await session.commit()
    async with store.transaction() as session:
        closed = await store.find(session, old.invite)
        assert closed is not None
        assert (closed.status, closed.finished_at, closed.version) == (RaceStatus.CLOSED, now, 2)
        assert not closed.status.is_open
        assert [r.id for r in await store.open_rooms_of(session, host)] == [fresh.id]
        # Closing a room by hand: status and time, the version left to the announcement.
        reopened = await store.find(session, fresh.invite, lock=True)
        assert reopened is not None
        shut = await store.close(session, reopened, now)
        assert (shut.status, shut.finished_at, shut.version) == (RaceStatus.CLOSED, now, 1)


async def test_statuses_are_enums_in_orm_queries_too(
    db: AsyncEngine, store: PostgresRaceStore
) -> None:
    race = await _room(store, await add_player(db, "Host"))
    async with AsyncSession(db) as session:
        stored = await session.scalar(select(Race.status).where(Race.id == race.id))
        assert stored is RaceStatus.LOBBY
        # A bare string still binds (checked against the enum's values).
        assert await session.scalar(select(Race.id).where(Race.status == "lobby")) == race.id
