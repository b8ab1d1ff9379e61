"""The presence rules a room operation applies in its own transaction (docs/rules.md §4
"Presence"): a connection that follows a room, a racer expected (matched, not there yet), a
seat freed, a watcher who stops watching, a
racer who leaves a running race, and the host's role passing on.

Shared by the race service (joins, leaves, starts) and the presence service (hellos, closed
connections, the sweeps). The caller has locked the room (its ``races`` row) and commits; the
queries are :mod:`server.storage.presence`'s and :mod:`server.storage.races`'s.
"""

from __future__ import annotations

import datetime as dt

from server.storage.presence import Connection, PresenceRole, PresenceState, PresenceStore
from server.storage.races import RaceRow, RaceStatus, RaceStore
from server.storage.transactions import Transaction


class RoomPresence:
    """The presence rules of a room operation, in its transaction: the caller has locked the
    room (:meth:`RaceStore.find` with ``lock``, :meth:`RaceStore.lock`) and commits.

    Args:
        races: the rooms' queries.
        store: the presence records' queries.
    """

    def __init__(self, races: RaceStore, store: PresenceStore) -> None:
        self._races = races
        self._store = store

    async def follow(
        self,
        tx: Transaction,
        race: RaceRow,
        player_id: int,
        role: PresenceRole,
        connection: Connection,
        now: dt.datetime,
    ) -> tuple[RaceRow, bool]:
        """Record that ``connection`` follows ``race`` for the player: they are connected, as
        ``role``. Does nothing for a room that is not open. A racer who comes back to a lobby
        whose host is gone takes the host's role if they are the first connected seat.

        Returns:
            The room (its host perhaps changed), and whether its presence changed (the caller
            announces it).
        """
        if not race.status.is_open:
            return race, False
        await self._store.add_connection(tx, race.id, player_id, connection, now)
        changed = await self._store.mark_connected(tx, race.id, player_id, role, now)
        if (
            changed
            and role == PresenceRole.RACER
            and race.status == RaceStatus.LOBBY
            and race.host_id != player_id
            and await self._store.state(tx, race.id, race.host_id) == PresenceState.GONE
        ):
            race = await self.pass_host(tx, race, connected_only=True)
        return race, changed

    async def expect(
        self, tx: Transaction, race: RaceRow, player_id: int, now: dt.datetime
    ) -> None:
        """A racer seated for them (a quick-race match) is expected: ``reconnecting`` since
        ``now``, with no connection yet, so that one who never takes their seat is gone when
        the grace period ends, as one who lost their connection is. Their first connection
        to the room makes them connected. Not announced (the room is new)."""
        await self._store.mark_connected(tx, race.id, player_id, PresenceRole.RACER, now)
        await self._store.set_state(tx, race.id, player_id, PresenceState.RECONNECTING, now)

    async def pass_host(self, tx: Transaction, race: RaceRow, *, connected_only: bool) -> RaceRow:
        """The host's role passes to the racer in the lowest seat who is connected; else
        (unless ``connected_only``) to the racer in the lowest seat; with nobody to take it, the
        host keeps it. Not announced."""
        heir = await self._races.seats.next_host(tx, race.id, connected_only=connected_only)
        return race if heir is None else await self._races.set_host(tx, race, heir)

    async def unseat(
        self,
        tx: Transaction,
        race: RaceRow,
        player_id: int,
        connection: Connection | None,
        now: dt.datetime,
    ) -> RaceRow:
        """Free a racer's lobby seat — by the player from ``connection``: that connection stops
        following the room, and if the player still follows it from another, they are listed as
        a watcher from then on; or for them (``connection`` None: dealt out, or their seat given
        away): their presence in the room ends. A host's role passes to the next seated racer
        (:meth:`pass_host`); a lobby left empty closes (at ``now``). Not announced.

        Returns:
            The room as changed.
        """
        await self._races.seats.remove(tx, race.id, player_id)
        await self._leave(tx, race.id, player_id, connection)
        if race.host_id != player_id:
            return race
        heir = await self._races.seats.next_host(tx, race.id, connected_only=False)
        if heir is None:  # nobody left
            return await self._races.close(tx, race, now)
        return await self._races.set_host(tx, race, heir)

    async def _leave(
        self, tx: Transaction, race_id: int, player_id: int, connection: Connection | None
    ) -> None:
        if connection is not None:
            await self._store.drop_connection(tx, race_id, connection)
            if await self._store.connections(tx, race_id, player_id):
                await self._store.set_role(tx, race_id, player_id, PresenceRole.WATCHER)
                return
        await self._store.forget(tx, race_id, player_id)

    async def unfollow_one(
        self, tx: Transaction, race_id: int, player_id: int, connection: Connection
    ) -> bool:
        """A watcher stops watching from ``connection``. With no other connection to the room
        left, they are no longer listed.

        Returns:
            True when the room's presence changed.
        """
        await self._store.drop_connection(tx, race_id, connection)
        if await self._store.connections(tx, race_id, player_id):
            return False
        return await self._store.forget(tx, race_id, player_id)

    async def mark_gone(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        connection: Connection | None,
        now: dt.datetime,
    ) -> None:
        """A racer left a running race: they are gone now (their game is resigned by the
        caller)."""
        if connection is not None:
            await self._store.drop_connection(tx, race_id, connection)
        await self._store.set_state(tx, race_id, player_id, PresenceState.GONE, now)


__all__ = ["RoomPresence"]
