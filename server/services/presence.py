"""Presence in race rooms: who is there, who is reconnecting, who is gone (docs/rules.md §4
"Presence").

Every open websocket that follows a room is on record (``race_connections``, under its server
process, ``server_instances``), so any process can tell whether a player still has one. A racer
or watcher is

- ``connected`` while at least one of their connections follows the room;
- ``reconnecting`` from the moment their last one closes (cleanly, or dropped by the heartbeat,
  or with its server process): their seat and game are kept for the grace period;
- ``gone`` when they leave, or when the grace period ends without them. In a lobby the host's
  role passes to the first seated racer who is connected, a start deals them out, and a newcomer
  may take their seat in a full room; in a running race their game is resigned.

Each change bumps the room's ``version`` and is announced (``race_room``) in the transaction
that makes it. Every transaction here locks the rooms it touches (``races`` rows, in id order)
before their presence rows, as the room operations do, so they never wait on each other in a
cycle.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, case, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from server.errors import ServiceError, StorageError
from server.services.clock import Clock
from server.services.games import GameService
from server.storage.events import RaceRoomChanged, publish
from server.storage.models import (
    Game,
    PresenceRole,
    PresenceState,
    Race,
    RaceConnection,
    RacePlayer,
    RacePresence,
    ServerInstance,
)
from server.storage.sessions import Sessions

log = logging.getLogger(__name__)

CONNECTED = PresenceState.CONNECTED
RECONNECTING = PresenceState.RECONNECTING
GONE = PresenceState.GONE
RACER = PresenceRole.RACER
WATCHER = PresenceRole.WATCHER
#: Room states in which presence is kept (a finished or closed room has nobody to wait for).
OPEN_ROOMS = ("lobby", "running")
#: Longest a presence transaction waits for a room row another transaction holds (seconds);
#: past it, the change is left to the next sweep.
LOCK_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class Connection:
    """One websocket as the presence records know it: its server process and its key there."""

    instance: str
    key: str


@dataclass(frozen=True, slots=True)
class Presence:
    """A racer's or watcher's presence in a room.

    Attributes:
        state: ``connected``, ``reconnecting`` or ``gone``.
        since: when the state began (UTC).
        until: for ``reconnecting``, when the grace period ends (UTC); otherwise None.
    """

    state: str
    since: dt.datetime
    until: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Watcher:
    """A player watching a room without a seat."""

    player_id: int
    name: str
    presence: Presence


def presence_of(state: str, since: dt.datetime, grace_s: float) -> Presence:
    """A stored presence row as shown: ``until`` is the end of a reconnecting player's grace."""
    until = since + dt.timedelta(seconds=grace_s) if state == RECONNECTING else None
    return Presence(state, since, until)


# ------------------------------------------------------------------ within a room's transaction


async def follow(
    session: AsyncSession,
    race: Race,
    player_id: int,
    role: PresenceRole,
    connection: Connection,
    now: dt.datetime,
) -> bool:
    """Record that ``connection`` follows ``race`` (locked by the caller) for the player:
    they are connected, as ``role``. Does nothing for a room that is not open. A racer who
    comes back to a lobby whose host is gone takes the host's role if they are the first
    connected seat.

    Returns:
        True when the room's presence changed (the caller announces it).
    """
    if race.status not in OPEN_ROOMS:
        return False
    # The process's record may have been dropped (taken for dead after a stall): put it back
    # (its heartbeat then notices the new record and records its other connections again).
    await session.execute(
        insert(ServerInstance).values(id=connection.instance).on_conflict_do_nothing()
    )
    await session.execute(
        insert(RaceConnection)
        .values(
            race_id=race.id,
            instance_id=connection.instance,
            connection=connection.key,
            player_id=player_id,
            connected_at=now,
        )
        .on_conflict_do_nothing()
    )
    row = await session.get(RacePresence, (race.id, player_id), with_for_update=True)
    if row is None:
        session.add(
            RacePresence(
                race_id=race.id, player_id=player_id, role=role, state=CONNECTED, since=now
            )
        )
        changed = True
    else:
        changed = row.state != CONNECTED or row.role != role
        if row.state != CONNECTED:
            row.state, row.since = CONNECTED, now
        row.role = role
    if changed and role == RACER and race.status == "lobby" and race.host_id != player_id:
        await session.flush()
        host = await session.get(RacePresence, (race.id, race.host_id))
        if host is not None and host.state == GONE:
            heir = await next_host(session, race.id, connected_only=True)
            if heir is not None:
                race.host_id = heir
    return changed


async def leave_seat(
    session: AsyncSession, race_id: int, player_id: int, connection: Connection | None
) -> None:
    """A racer's lobby seat is freed (the caller deletes it). Freed by the player from
    ``connection``: that connection stops following the room, and if the player still follows
    it from another, they are listed as a watcher from then on. Freed for them (dealt out,
    their seat given away; ``connection`` None): their presence in the room ends."""
    if connection is not None:
        await _drop_connection(session, race_id, connection)
        if await _connections(session, race_id, player_id):
            await session.execute(
                update(RacePresence)
                .where(RacePresence.race_id == race_id, RacePresence.player_id == player_id)
                .values(role=WATCHER)
            )
            return
    await session.execute(
        delete(RaceConnection).where(
            RaceConnection.race_id == race_id, RaceConnection.player_id == player_id
        )
    )
    await session.execute(
        delete(RacePresence).where(
            RacePresence.race_id == race_id, RacePresence.player_id == player_id
        )
    )


async def unfollow_one(
    session: AsyncSession, race_id: int, player_id: int, connection: Connection
) -> bool:
    """A watcher stops watching from ``connection``. With no other connection to the room left,
    they are no longer listed.

    Returns:
        True when the room's presence changed.
    """
    await _drop_connection(session, race_id, connection)
    if await _connections(session, race_id, player_id):
        return False
    removed = await session.execute(
        delete(RacePresence).where(
            RacePresence.race_id == race_id, RacePresence.player_id == player_id
        )
    )
    return bool(removed.rowcount)  # type: ignore[attr-defined]


async def mark_gone(
    session: AsyncSession,
    race_id: int,
    player_id: int,
    connection: Connection | None,
    now: dt.datetime,
) -> None:
    """A racer left a running race: they are gone now (their game is resigned by the caller)."""
    if connection is not None:
        await _drop_connection(session, race_id, connection)
    await session.execute(
        update(RacePresence)
        .where(RacePresence.race_id == race_id, RacePresence.player_id == player_id)
        .values(state=GONE, since=now)
    )


async def limit_lock_waits(session: AsyncSession, seconds: float = LOCK_WAIT_S) -> None:
    """Make this transaction fail, rather than wait, when a row it locks stays locked by another
    transaction for more than ``seconds`` (a stuck session must not hold presence up)."""
    await session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(seconds * 1000))}"))


async def gone_racers(session: AsyncSession, race_id: int) -> list[int]:
    """The seated racers of a room who are gone, longest gone first."""
    return list(
        (
            await session.scalars(
                select(RacePresence.player_id)
                .join(
                    RacePlayer,
                    (RacePlayer.race_id == RacePresence.race_id)
                    & (RacePlayer.player_id == RacePresence.player_id),
                )
                .where(RacePresence.race_id == race_id, RacePresence.state == GONE)
                .order_by(RacePresence.since, RacePresence.player_id)
            )
        ).all()
    )


async def next_host(session: AsyncSession, race_id: int, *, connected_only: bool) -> int | None:
    """Who the host's role passes to in a lobby: the racer in the lowest seat who is connected;
    else (unless ``connected_only``) the racer in the lowest seat; None when there is nobody."""
    query = (
        select(RacePlayer.player_id)
        .outerjoin(
            RacePresence,
            (RacePresence.race_id == RacePlayer.race_id)
            & (RacePresence.player_id == RacePlayer.player_id),
        )
        .where(RacePlayer.race_id == race_id)
    )
    if connected_only:
        query = query.where(RacePresence.state == CONNECTED)
    return await session.scalar(
        query.order_by(case((RacePresence.state == CONNECTED, 0), else_=1), RacePlayer.seat).limit(
            1
        )
    )


async def announce(session: AsyncSession, race: Race) -> None:
    """Bump the room's version and announce its change (``race_room``)."""
    race.version += 1
    await publish_room(session, race)


async def publish_room(session: AsyncSession, race: Race) -> None:
    """Announce the room as it is (``race_room``, with its version), in the caller's
    transaction."""
    await publish(session, RaceRoomChanged(race.id, race.invite, race.version))


async def _drop_connection(session: AsyncSession, race_id: int, connection: Connection) -> None:
    await session.execute(
        delete(RaceConnection).where(
            RaceConnection.race_id == race_id,
            RaceConnection.instance_id == connection.instance,
            RaceConnection.connection == connection.key,
        )
    )


async def _connections(session: AsyncSession, race_id: int, player_id: int) -> int:
    return (
        await session.scalar(
            select(func.count())
            .select_from(RaceConnection)
            .where(RaceConnection.race_id == race_id, RaceConnection.player_id == player_id)
        )
    ) or 0


async def _lock_rooms(session: AsyncSession, race_ids: Iterable[int]) -> list[Race]:
    ids = sorted(set(race_ids))
    if not ids:
        return []
    return list(
        (
            await session.scalars(
                select(Race).where(Race.id.in_(ids)).order_by(Race.id).with_for_update()
            )
        ).all()
    )


# ----------------------------------------------------------------------------------- service


class PresenceService:
    """Keeps the presence records of this server process's connections, and (from any process,
    each sweep) moves players along: dead processes' connections dropped, this process's
    records of closed connections dropped, grace periods ended, gone racers' games resigned.

    Args:
        sessions: database session factory.
        clock: the UTC clock (presence times, grace periods).
        games: the game service (a gone racer's game is resigned through it).
        instance: this process's id in ``server_instances``.
        grace_s: seconds a reconnecting racer or watcher keeps their place.
        instance_timeout_s: seconds after which a process that has not refreshed its
            ``seen_at`` (the database's clock) is taken for dead.
    """

    def __init__(
        self,
        sessions: Sessions,
        clock: Clock,
        games: GameService,
        instance: str,
        grace_s: float,
        instance_timeout_s: float,
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._games = games
        self.instance = instance
        self.grace_s = grace_s
        self.instance_timeout_s = instance_timeout_s
        #: ``started_at`` of this process's record as it registered it: a record with another
        #: one was dropped and made again meanwhile.
        self._registered_at: dt.datetime | None = None
        #: Since when (monotonic s) every heartbeat has reached the database in time: a process
        #: that could not refresh its own record (a database outage, a stall) does not take
        #: the others for dead until it has been refreshing its own for a whole time-out.
        self._healthy_since: float | None = None
        self._last_beat: float | None = None
        #: This process's records were dropped and not all recorded again yet.
        self._refollow_pending = False

    def connection(self, key: str) -> Connection:
        """This process's connection ``key`` as the presence records know it."""
        return Connection(self.instance, key)

    async def register(self) -> None:
        """Record this process as running (at start, before it serves anyone)."""
        async with self._sessions() as session:
            self._registered_at = await self._record(session)
            await session.commit()
        self._healthy_since = self._last_beat = time.monotonic()

    async def unregister(self) -> None:
        """At shutdown: every connection of this process is closed; its players start
        reconnecting (to another process, or to this one restarted)."""
        await self._drop_instances([self.instance])

    async def heartbeat(self) -> bool:
        """Refresh this process's ``seen_at`` (by the database's clock).

        Returns:
            False when its record had been dropped meanwhile (it was taken for dead) and its
            connections are not all recorded again yet: the caller records them
            (:meth:`refollow`).

        Raises:
            StorageError: the database did not answer.
        """
        try:
            async with self._sessions() as session:
                started = await session.scalar(
                    update(ServerInstance)
                    .where(ServerInstance.id == self.instance)
                    .values(seen_at=func.statement_timestamp())
                    .returning(ServerInstance.started_at)
                )
                if started is None:
                    started = await self._record(session)
                await session.commit()
        except BaseException:
            self._healthy_since = None
            raise
        now = time.monotonic()
        late = self._last_beat is None or now - self._last_beat > self.instance_timeout_s / 2
        if self._healthy_since is None or late:
            self._healthy_since = now
        self._last_beat = now
        if started != self._registered_at:
            self._refollow_pending = True
        self._registered_at = started
        return not self._refollow_pending

    async def follow_rooms(self, player_id: int, connection: Connection) -> bool:
        """``connection`` (which said hello for the player) follows every open room the player
        sits in: they are connected there.

        Returns:
            Whether the player sits in any open room.

        Raises:
            StorageError: the database failed, or a room stayed locked (nothing recorded).
        """
        async with self._sessions() as session:
            await limit_lock_waits(session)
            race_ids = (
                await session.scalars(
                    select(RacePlayer.race_id)
                    .join(Race, Race.id == RacePlayer.race_id)
                    .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_ROOMS))
                )
            ).all()
            now = self._clock.now()
            for race in await _lock_rooms(session, race_ids):
                if await follow(session, race, player_id, RACER, connection, now):
                    await announce(session, race)
            await session.commit()
            return bool(race_ids)

    async def unfollow(self, connection: Connection) -> None:
        """A connection closed: its player, left with no other connection to a room it
        followed, is reconnecting there.

        Raises:
            StorageError: the database failed or a room stayed locked (the sweep drops
                the closed connection's records later).
        """
        async with self._sessions() as session:
            await self._drop_connections(
                session,
                RaceConnection.instance_id == connection.instance,
                RaceConnection.connection == connection.key,
            )
            await session.commit()

    async def refollow(self, follows: Iterable[tuple[int, int, str]]) -> bool:
        """Record again connections this process holds, after its records were dropped (it was
        taken for dead, say after a long stall): each room in its own transaction, so a locked
        room holds up only itself. Until every room is done, :meth:`heartbeat` keeps asking
        for this again.

        Args:
            follows: ``(race_id, player_id, connection key)`` of each connection following a room.

        Returns:
            Whether every room was recorded.
        """
        by_room: dict[int, list[tuple[int, str]]] = {}
        for race_id, player_id, key in follows:
            by_room.setdefault(race_id, []).append((player_id, key))
        done = True
        for race_id, members in sorted(by_room.items()):
            try:
                async with self._sessions() as session:
                    await limit_lock_waits(session)
                    rooms = await _lock_rooms(session, [race_id])
                    if not rooms:
                        continue
                    room, changed, now = rooms[0], False, self._clock.now()
                    for player_id, key in members:
                        seated = await session.get(RacePlayer, (race_id, player_id))
                        role = RACER if seated is not None else WATCHER
                        connection = self.connection(key)
                        changed |= await follow(session, room, player_id, role, connection, now)
                    if changed:
                        await announce(session, room)
                    await session.commit()
            except StorageError as exc:
                log.info(
                    "presence: room %s not recorded again yet (%s)", race_id, type(exc).__name__
                )
                done = False
        self._refollow_pending = not done
        return done

    async def sweep(self, open_keys: Callable[[], Collection[str]]) -> None:
        """One pass: drop the connections of processes unseen for :attr:`instance_timeout_s`
        (only once this process has itself been seen in time for as long); drop this process's
        records of connections no longer open (``open_keys()`` gives those that are, asked
        for each record at the moment it would be dropped: a close recorded too late or not at
        all); end grace periods (gone); resign the games of gone racers in running races. One
        round trip first asks which steps have anything to do. Each step, and each room within
        one, is its own transaction: one that fails (a locked room, the database) is logged and
        tried again by the next sweep, and the others go on.
        """
        now = self._clock.now()
        steps = {
            self._drop_dead: self._dead_instances() if self._healthy() else None,
            self._drop_closed: self._own_records(),
            self._end_grace: self._past_grace(now),
            self._resign_gone: self._gone_but_playing(now),
        }
        wanted = [query for query in steps.values() if query is not None]
        try:
            async with self._sessions() as session:
                found = iter((await session.execute(select(*(q.exists() for q in wanted)))).one())
        except StorageError as exc:
            log.info("presence: the sweep is left for the next one (%s)", type(exc).__name__)
            return
        for step, query in steps.items():
            if query is None or not next(found):
                continue
            try:
                await step(now, open_keys)
            except StorageError as exc:
                log.info(
                    "presence: %s left for the next sweep (%s)", step.__name__, type(exc).__name__
                )

    # -------------------------------------------------------------------- the sweep's steps

    def _healthy(self) -> bool:
        """Whether this process has been seen in time for a whole time-out (then it may take
        others for dead)."""
        return self._healthy_since is not None and (
            time.monotonic() - self._healthy_since >= self.instance_timeout_s
        )

    def _dead_instances(self) -> Select[str]:
        """Other processes whose record is older than the time-out (the database's clock)."""
        return select(ServerInstance.id).where(
            ServerInstance.seen_at
            < func.statement_timestamp()
            - text(f"interval '{float(self.instance_timeout_s)} seconds'"),
            ServerInstance.id != self.instance,
        )

    def _own_records(self) -> Select[str]:
        """The connections this process has on record."""
        return (
            select(RaceConnection.connection)
            .where(RaceConnection.instance_id == self.instance)
            .distinct()
        )

    def _past_grace(self, now: dt.datetime) -> Select[int]:
        """Open rooms with a player reconnecting for longer than the grace period."""
        return (
            select(RacePresence.race_id)
            .join(Race, Race.id == RacePresence.race_id)
            .where(
                RacePresence.state == RECONNECTING,
                RacePresence.since <= now - dt.timedelta(seconds=self.grace_s),
                Race.status.in_(OPEN_ROOMS),
            )
            .distinct()
        )

    def _gone_but_playing(self, now: dt.datetime) -> Select[int, int]:
        """``(player_id, game_id)`` of gone racers still playing a race that has started."""
        return (
            select(Game.player_id, Game.id)
            .join(Race, Race.id == Game.race_id)
            .join(
                RacePresence,
                (RacePresence.race_id == Game.race_id) & (RacePresence.player_id == Game.player_id),
            )
            .where(
                Race.status == "running",
                Race.starts_at <= now,
                RacePresence.state == GONE,
                Game.status == "playing",
            )
        )

    async def _drop_dead(
        self, _now: dt.datetime, _open_keys: Callable[[], Collection[str]]
    ) -> None:
        async with self._sessions() as session:
            dead = (await session.scalars(self._dead_instances())).all()
        if dead:
            log.warning("presence: server processes %s stopped answering", ", ".join(dead))
            await self._drop_instances(list(dead))

    # ------------------------------------------------------------------------------ helpers

    async def _record(self, session: AsyncSession) -> dt.datetime:
        """Make this process's record if there is none; its ``started_at``."""
        await session.execute(
            insert(ServerInstance).values(id=self.instance).on_conflict_do_nothing()
        )
        started = await session.scalar(
            select(ServerInstance.started_at).where(ServerInstance.id == self.instance)
        )
        assert started is not None
        return started

    async def _drop_closed(
        self, _now: dt.datetime, open_keys: Callable[[], Collection[str]]
    ) -> None:
        async with self._sessions() as session:
            keys = (await session.scalars(self._own_records())).all()
        for key in keys:
            # Asked now, after the records were read: a connection that opened (and recorded
            # itself) since is open, and keys are never used twice.
            if key not in open_keys():
                log.info("presence: dropping the records of closed connection %s", key)
                try:
                    await self.unfollow(self.connection(key))
                except StorageError:
                    continue  # its room is locked: the next sweep

    async def _drop_instances(self, instances: list[str]) -> None:
        async with self._sessions() as session:
            await self._drop_connections(session, RaceConnection.instance_id.in_(instances))
            await session.execute(delete(ServerInstance).where(ServerInstance.id.in_(instances)))
            await session.commit()

    async def _drop_connections(self, session: AsyncSession, *where: ColumnElement[bool]) -> None:
        """Drop the connection records matching ``where`` (their rooms locked first, in id
        order, waiting at most :data:`LOCK_WAIT_S`); players left with no connection to a room
        start reconnecting there (:meth:`_settle`)."""
        await limit_lock_waits(session)
        race_ids = (
            await session.scalars(select(RaceConnection.race_id).where(*where).distinct())
        ).all()
        rooms = await _lock_rooms(session, race_ids)
        pairs = (
            await session.execute(
                delete(RaceConnection)
                .where(*where)
                .returning(RaceConnection.race_id, RaceConnection.player_id)
            )
        ).all()
        await self._settle(session, rooms, [(p.race_id, p.player_id) for p in pairs])

    async def _settle(
        self, session: AsyncSession, rooms: list[Race], pairs: list[tuple[int, int]]
    ) -> None:
        """Players of ``pairs`` left with no connection to a room (locked in ``rooms``) start
        reconnecting; each room so changed is announced."""
        by_id = {room.id: room for room in rooms}
        changed: set[int] = set()
        now = self._clock.now()
        for race_id, player_id in sorted(set(pairs)):
            room = by_id.get(race_id)
            if room is None or room.status not in OPEN_ROOMS:
                continue  # a finished or closed room's presence stays as it ended
            if await _connections(session, race_id, player_id):
                continue
            moved = await session.execute(
                update(RacePresence)
                .where(
                    RacePresence.race_id == race_id,
                    RacePresence.player_id == player_id,
                    RacePresence.state == CONNECTED,
                )
                .values(state=RECONNECTING, since=now)
            )
            if moved.rowcount:  # type: ignore[attr-defined]
                changed.add(race_id)
        for race_id in sorted(changed):
            await announce(session, by_id[race_id])

    async def _end_grace(self, now: dt.datetime, _open_keys: Callable[[], Collection[str]]) -> None:
        """Reconnecting players whose grace period is over are gone (each room in its own
        transaction, so a locked room holds up only itself); a lobby whose host is gone passes
        the role on."""
        cutoff = now - dt.timedelta(seconds=self.grace_s)
        async with self._sessions() as session:
            race_ids = (await session.scalars(self._past_grace(now))).all()
        for race_id in race_ids:
            try:
                async with self._sessions() as session:
                    await limit_lock_waits(session)
                    rooms = await _lock_rooms(session, [race_id])
                    if not rooms or rooms[0].status not in OPEN_ROOMS:
                        continue
                    race = rooms[0]
                    gone = (
                        await session.scalars(
                            update(RacePresence)
                            .where(
                                RacePresence.race_id == race.id,
                                RacePresence.state == RECONNECTING,
                                RacePresence.since <= cutoff,
                            )
                            .values(state=GONE, since=now)
                            .returning(RacePresence.player_id)
                        )
                    ).all()
                    if not gone:
                        continue
                    if race.status == "lobby" and race.host_id in gone:
                        heir = await next_host(session, race.id, connected_only=True)
                        if heir is not None:
                            race.host_id = heir
                    await announce(session, race)
                    await session.commit()
            except StorageError as exc:
                log.info(
                    "presence: room %s left for the next sweep (%s)",
                    race_id,
                    exc.__class__.__name__,
                )

    async def _resign_gone(
        self, now: dt.datetime, _open_keys: Callable[[], Collection[str]]
    ) -> None:
        """Resign the games of gone racers in running races (again on the next sweep, should
        one fail: the race's start not reached yet, a busy row, the database)."""
        async with self._sessions() as session:
            rows = (await session.execute(self._gone_but_playing(now))).all()
        for player_id, game_id in rows:
            try:
                await self._games.resign(player_id, game_id)
                log.info("presence: player %s is gone; game %s resigned", player_id, game_id)
            except ServiceError as exc:
                log.info("presence: game %s of a gone racer not resigned (%s)", game_id, exc.code)
            except StorageError as exc:
                log.info("presence: game %s of a gone racer not resigned (%s)", game_id, exc)


__all__ = [
    "CONNECTED",
    "GONE",
    "LOCK_WAIT_S",
    "RACER",
    "RECONNECTING",
    "WATCHER",
    "Connection",
    "Presence",
    "PresenceService",
    "Watcher",
    "announce",
    "follow",
    "gone_racers",
    "leave_seat",
    "limit_lock_waits",
    "mark_gone",
    "next_host",
    "presence_of",
    "publish_room",
    "unfollow_one",
]
