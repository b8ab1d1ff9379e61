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
cycle. The queries are :mod:`server.storage.presence`'s and :mod:`server.storage.races`'s; here
are the rules of this process's connections and of the sweeps; those of a room operation's own
transaction (shared with the race service) are :mod:`server.services.room_presence`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence

from server.errors import ServiceError, StorageError
from server.services.clock import Clock
from server.services.games import GameService
from server.services.room_presence import RoomPresence
from server.services.rooms import Presence, Watcher, presence_of
from server.storage.presence import Connection, PresenceRole, PresenceState, PresenceStore
from server.storage.races import RaceStatus, RaceStore
from server.storage.transactions import Transaction

log = logging.getLogger(__name__)

#: Longest a presence transaction waits for a room row another transaction holds (seconds);
#: past it, the change is left to the next sweep.
LOCK_WAIT_S = 2.0


class PresenceService:
    """Keeps the presence records of this server process's connections, and (from any process,
    each sweep) moves players along: dead processes' connections dropped, this process's
    records of closed connections dropped, grace periods ended, gone racers' games resigned.

    Args:
        store: the presence records' queries.
        races: the rooms' queries (rooms are locked, their host passed and changes announced).
        clock: the UTC clock (presence times, grace periods).
        games: the game service (a gone racer's game is resigned through it).
        instance: this process's id in ``server_instances``.
        grace_s: seconds a reconnecting racer or watcher keeps their place.
        instance_timeout_s: seconds after which a process that has not refreshed its
            ``seen_at`` (the database's clock) is taken for dead.
    """

    def __init__(
        self,
        store: PresenceStore,
        races: RaceStore,
        clock: Clock,
        games: GameService,
        instance: str,
        grace_s: float,
        instance_timeout_s: float,
    ) -> None:
        self._store = store
        self._races = races
        self._rooms = RoomPresence(races, store)
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
        async with self._store.transaction() as tx:
            self._registered_at = await self._store.instances.register(tx, self.instance)
            await tx.commit()
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
            async with self._store.transaction() as tx:
                started = await self._store.instances.beat(tx, self.instance)
                if started is None:
                    started = await self._store.instances.register(tx, self.instance)
                await tx.commit()
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
        async with self._races.transaction() as tx:
            await self._races.limit_lock_waits(tx, LOCK_WAIT_S)
            seated = await self._races.open_rooms_of(tx, player_id)
            now = self._clock.now()
            for race in await self._races.lock_all(tx, [r.id for r in seated]):
                race, changed = await self._rooms.follow(
                    tx, race, player_id, PresenceRole.RACER, connection, now
                )
                if changed:
                    await self._races.announce(tx, race)
            await tx.commit()
            return bool(seated)

    async def unfollow(self, connection: Connection) -> None:
        """A connection closed: its player, left with no other connection to a room it
        followed, is reconnecting there.

        Raises:
            StorageError: the database failed or a room stayed locked (the sweep drops
                the closed connection's records later).
        """
        async with self._store.transaction() as tx:
            await self._drop_connections(tx, [connection.instance], connection.key)
            await tx.commit()

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
                async with self._races.transaction() as tx:
                    await self._races.limit_lock_waits(tx, LOCK_WAIT_S)
                    race = await self._races.lock(tx, race_id)
                    if race is None:
                        continue
                    changed, now = False, self._clock.now()
                    for player_id, key in members:
                        seated = await self._races.seats.find(tx, race_id, player_id)
                        role = PresenceRole.RACER if seated else PresenceRole.WATCHER
                        race, moved = await self._rooms.follow(
                            tx, race, player_id, role, self.connection(key), now
                        )
                        changed |= moved
                    if changed:
                        await self._races.announce(tx, race)
                    await tx.commit()
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
        try:
            work = await self._store.sweep_work(
                instance=self.instance,
                timeout_s=self.instance_timeout_s if self._healthy() else None,
                grace_cutoff=self._grace_cutoff(now),
                now=now,
            )
        except StorageError as exc:
            log.info("presence: the sweep is left for the next one (%s)", type(exc).__name__)
            return
        steps = {
            self._drop_dead: work.dead_instances,
            self._drop_closed: work.own_records,
            self._end_grace: work.past_grace,
            self._resign_gone: work.gone_playing,
        }
        for step, wanted in steps.items():
            if not wanted:
                continue
            try:
                await step(now, open_keys)
            except StorageError as exc:
                log.info(
                    "presence: %s left for the next sweep (%s)", step.__name__, type(exc).__name__
                )

    # -------------------------------------------------------------------- the sweep's steps

    def _healthy(self) -> bool:
        """Whether this process has been seen in time for a whole time-out, and still is (then
        it may take others for dead).

        "Still" matters after a stall (the process descheduled on a loaded machine, paused,
        its event loop held up): whatever held it up may have held up the others too (its
        fellow workers on the machine), and a sweep that runs before this process's own
        late heartbeat would otherwise take them for dead by records the stall kept from
        being refreshed. So a last beat older than the heartbeat's own lateness (half the
        time-out) counts as unhealthy at once, before the next beat says so.
        """
        now = time.monotonic()
        return (
            self._healthy_since is not None
            and self._last_beat is not None
            and now - self._last_beat <= self.instance_timeout_s / 2
            and now - self._healthy_since >= self.instance_timeout_s
        )

    def _grace_cutoff(self, now: dt.datetime) -> dt.datetime:
        """Players reconnecting since this time or earlier are past their grace period."""
        return now - dt.timedelta(seconds=self.grace_s)

    async def _drop_dead(
        self, _now: dt.datetime, _open_keys: Callable[[], Collection[str]]
    ) -> None:
        dead = await self._store.instances.dead(self.instance, self.instance_timeout_s)
        if dead and self._healthy():  # not held up itself while it asked
            log.warning("presence: server processes %s stopped answering", ", ".join(dead))
            await self._drop_instances(dead)

    async def _drop_closed(
        self, _now: dt.datetime, open_keys: Callable[[], Collection[str]]
    ) -> None:
        for key in await self._store.own_keys(self.instance):
            # Asked now, after the records were read: a connection that opened (and recorded
            # itself) since is open, and keys are never used twice.
            if key not in open_keys():
                log.info("presence: dropping the records of closed connection %s", key)
                try:
                    await self.unfollow(self.connection(key))
                except StorageError:
                    continue  # its room is locked: the next sweep

    async def _end_grace(self, now: dt.datetime, _open_keys: Callable[[], Collection[str]]) -> None:
        """Reconnecting players whose grace period is over are gone (each room in its own
        transaction, so a locked room holds up only itself); a lobby whose host is gone passes
        the role on."""
        cutoff = self._grace_cutoff(now)
        for race_id in await self._store.rooms_past_grace(cutoff):
            try:
                async with self._races.transaction() as tx:
                    await self._races.limit_lock_waits(tx, LOCK_WAIT_S)
                    race = await self._races.lock(tx, race_id)
                    if race is None or not race.status.is_open:
                        continue
                    gone = await self._store.end_grace(tx, race.id, cutoff, now)
                    if not gone:
                        continue
                    if race.status == RaceStatus.LOBBY and race.host_id in gone:
                        race = await self._rooms.pass_host(tx, race, connected_only=True)
                    await self._races.announce(tx, race)
                    await tx.commit()
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
        for gone in await self._store.gone_but_playing(now):
            try:
                await self._games.resign(gone.player_id, gone.game_id)
                log.info(
                    "presence: player %s is gone; game %s resigned", gone.player_id, gone.game_id
                )
            except ServiceError as exc:
                log.info(
                    "presence: game %s of a gone racer not resigned (%s)", gone.game_id, exc.code
                )
            except StorageError as exc:
                log.info("presence: game %s of a gone racer not resigned (%s)", gone.game_id, exc)

    # ------------------------------------------------------------------------------ helpers

    async def _drop_instances(self, instances: Sequence[str]) -> None:
        async with self._store.transaction() as tx:
            await self._drop_connections(tx, instances)
            await self._store.instances.forget(tx, instances)
            await tx.commit()

    async def _drop_connections(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> None:
        """Drop the connection records of these processes (only connection ``key``'s when
        given), their rooms locked first, in id order, waiting at most :data:`LOCK_WAIT_S`;
        players left with no connection to an open room start reconnecting there, and each
        room so changed is announced."""
        await self._races.limit_lock_waits(tx, LOCK_WAIT_S)
        followed = await self._store.rooms_followed(tx, instances, key)
        rooms = {race.id: race for race in await self._races.lock_all(tx, followed)}
        pairs = await self._store.drop_connections(tx, instances, key)
        changed: set[int] = set()
        now = self._clock.now()
        for race_id, player_id in sorted(set(pairs)):
            race = rooms.get(race_id)
            if race is None or not race.status.is_open:
                continue  # a finished or closed room's presence stays as it ended
            if await self._store.connections(tx, race_id, player_id):
                continue
            if await self._store.set_state(
                tx,
                race_id,
                player_id,
                PresenceState.RECONNECTING,
                now,
                only_from=PresenceState.CONNECTED,
            ):
                changed.add(race_id)
        for race_id in sorted(changed):
            await self._races.announce(tx, rooms[race_id])


__all__ = [
    "LOCK_WAIT_S",
    "Connection",
    "Presence",
    "PresenceService",
    "Watcher",
    "presence_of",
]
