"""In-memory :class:`~server.storage.races.RaceStore` (with its
:class:`~server.storage.seats.SeatStore`), :class:`~server.storage.presence.PresenceStore` and
:class:`~server.storage.instances.InstanceStore`, over a :class:`MemoryDatabase`'s races, seats,
presence rows, connections and server processes (and its players and games, which a room shows
and a race's games are).

A room operation is one :class:`~tests.fakes.database.MemoryTransaction`, shared by every store
here and by the game fake's :meth:`~tests.fakes.games.MemoryGameStore.insert_race_games`: its
writes are undone if it ends without committing (a start rolled back leaves no games), it goes
on after a commit, and its events reach the database's ``events`` only when it commits. A
``races`` row read with ``lock`` (``find``, ``lock``, ``lock_all`` in id order), written, or
counted by ``rooms_held`` (the player's row) stays locked until the transaction commits or ends,
so concurrent joins, starts and finishes take turns as PostgreSQL's row locks make them;
``limit_lock_waits`` bounds the wait (then :class:`~server.errors.StorageUnavailable`).

Unlike PostgreSQL, a write is seen by other transactions before it commits (a reader that
locks nothing sees it; a new room is locked by its creator until the commit, so one that locks
it waits for the commit rather than not finding it). The services read what they change under
its room's lock, so their rules see what they would see in PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from server.engine.actions import Status
from server.engine.codes import GameCode
from server.errors import StorageConflict
from server.storage.enums import OPEN_RACE_STATUSES, PresenceRole, PresenceState, RaceStatus
from server.storage.events import RaceFinished, RaceRoomChanged, RaceStarted
from server.storage.moderation import PlayerRecord
from server.storage.presence import Connection, GoneGame, SweepWork
from server.storage.races import INVITE_KEY, RaceRow, RoomDigest
from server.storage.seats import PresenceRow, RacerGameRow, RoomSeatRow, SeatRow, WatcherRow
from server.storage.transactions import Transaction
from tests.fakes.database import (
    ActionRecord,
    ConnectionRecord,
    InstanceRecord,
    MemoryDatabase,
    MemoryTransaction,
    PresenceRecord,
    RaceRecord,
    SeatRecord,
    memory_transaction,
)


def _race(row: RaceRecord) -> RaceRow:
    code = GameCode.parse(row.code)
    return RaceRow(
        id=row.id,
        invite=row.invite,
        host_id=row.host_id,
        code=code,
        rules=code.rules,
        status=RaceStatus(row.status),
        host_deal=row.host_deal,
        rated=row.rated,
        time_limit_s=row.time_limit_s,
        max_players=row.max_players,
        version=row.version,
        created_at=row.created_at,
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        finished_at=row.finished_at,
        results=row.results,
    )


@asynccontextmanager
async def _transaction(database: MemoryDatabase) -> AsyncIterator[MemoryTransaction]:
    """One transaction, rolled back (what it has not committed) when its block ends."""
    tx = database.transaction()
    try:
        yield tx
    finally:
        tx.end()


class MemorySeatStore:
    """:class:`~server.storage.seats.SeatStore` over a :class:`MemoryDatabase`.

    Args:
        database: the tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    def _seats(self, race_id: int) -> list[SeatRecord]:
        """The room's seats, by seat number."""
        return sorted((s for s in self._db.seats.values() if s.race_id == race_id), key=_seat_no)

    async def find(self, tx: Transaction, race_id: int, player_id: int) -> SeatRow | None:
        await self._db.query()
        seat = self._db.seats.get((race_id, player_id))
        return None if seat is None else SeatRow(seat.player_id, seat.seat, seat.game_id)

    async def all(self, tx: Transaction, race_id: int) -> list[SeatRow]:
        await self._db.query()
        return [SeatRow(s.player_id, s.seat, s.game_id) for s in self._seats(race_id)]

    async def taken(self, tx: Transaction, race_id: int) -> int:
        await self._db.query()
        return len(self._seats(race_id))

    async def add(
        self, tx: Transaction, race_id: int, player_id: int, joined_at: dt.datetime
    ) -> int:
        memory = memory_transaction(tx)
        await self._db.query()
        if race_id not in self._db.races:
            raise StorageConflict("fk_race_players_race_id_races")
        if player_id not in self._db.players:
            raise StorageConflict("fk_race_players_player_id_players")
        if (race_id, player_id) in self._db.seats:
            raise StorageConflict("pk_race_players")
        seat = max((s.seat for s in self._seats(race_id)), default=0) + 1
        memory.put(
            self._db.seats, (race_id, player_id), SeatRecord(race_id, player_id, seat, joined_at)
        )
        return seat

    async def remove(self, tx: Transaction, race_id: int, player_id: int) -> None:
        memory = memory_transaction(tx)
        await self._db.query()
        memory.delete(self._db.seats, (race_id, player_id))

    async def rooms_held(self, tx: Transaction, player_id: int) -> int:
        memory = memory_transaction(tx)
        await self._db.query()
        if player_id in self._db.players:
            await memory.lock("players", player_id)
        await self._db.query()
        return sum(
            1
            for s in self._db.seats.values()
            if s.player_id == player_id and self._db.races[s.race_id].status in OPEN_RACE_STATUSES
        )

    async def gone_racers(self, tx: Transaction, race_id: int) -> list[int]:
        await self._db.query()
        gone = [
            p
            for p in self._db.presence.values()
            if p.race_id == race_id
            and p.state == PresenceState.GONE
            and (race_id, p.player_id) in self._db.seats
        ]
        return [p.player_id for p in sorted(gone, key=lambda p: (p.since, p.player_id))]

    async def next_host(self, tx: Transaction, race_id: int, *, connected_only: bool) -> int | None:
        await self._db.query()

        def connected(seat: SeatRecord) -> bool:
            presence = self._db.presence.get((race_id, seat.player_id))
            return presence is not None and presence.state == PresenceState.CONNECTED

        seats = [s for s in self._seats(race_id) if connected(s) or not connected_only]
        seats.sort(key=lambda s: (not connected(s), s.seat))
        return seats[0].player_id if seats else None

    async def shown(self, tx: Transaction, race_id: int) -> list[RoomSeatRow]:
        await self._db.query()
        rows = []
        for s in self._seats(race_id):
            game = None if s.game_id is None else self._db.games.get(s.game_id)
            presence = self._db.presence.get((race_id, s.player_id))
            rows.append(
                RoomSeatRow(
                    player_id=s.player_id,
                    name=self._db.players[s.player_id].name,
                    seat=s.seat,
                    game_id=s.game_id,
                    cards_left=None if game is None else game.cards_left,
                    score=None if game is None else game.score,
                    moves=None if game is None else game.moves,
                    status=None if game is None else game.status,
                    elapsed_ms=None if game is None else game.elapsed_ms,
                    game_created_at=None if game is None else game.created_at,
                    presence=None if presence is None else _presence(presence),
                )
            )
        return rows

    async def watchers(
        self, tx: Transaction, race_id: int, limit: int
    ) -> tuple[list[WatcherRow], int]:
        await self._db.query()
        watching = sorted(
            (
                p
                for p in self._db.presence.values()
                if p.race_id == race_id and p.role == PresenceRole.WATCHER
            ),
            key=lambda p: (p.state != PresenceState.CONNECTED, p.since, p.player_id),
        )
        shown = [
            WatcherRow(p.player_id, self._db.players[p.player_id].name, _presence(p))
            for p in watching[:limit]
        ]
        return shown, len(watching)

    async def games(self, tx: Transaction, race_id: int) -> list[RacerGameRow]:
        await self._db.query()
        return [
            RacerGameRow(
                g.player_id,
                self._db.players[g.player_id].name,
                g.status,
                g.score,
                g.cards_left,
                g.moves,
                g.elapsed_ms,
                g.id,
                _last_removal_at(self._db.game_actions(g.id)),
            )
            for g in self._db.games.values()
            if g.race_id == race_id
        ]


def _last_removal_at(log: Sequence[ActionRecord]) -> dt.datetime | None:
    """When the last removal still in effect of an action log (in seq order) was made: the log
    replayed on a stack, an undo taking back the most recent removal or draw not yet taken
    back (docs/rules.md §2 "Undo"); None when no removal is left on it."""
    kept: list[ActionRecord] = []
    for action in log:
        if action.kind != "undo":
            kept.append(action)
        elif kept:  # a stored undo always had one to take back
            kept.pop()
    return next((a.created_at for a in reversed(kept) if a.kind == "remove"), None)


def _unseen(database: MemoryDatabase, instance: str, timeout_s: float) -> list[str]:
    """The processes other than ``instance`` unseen for more than ``timeout_s`` seconds by the
    database's clock (ids)."""
    cutoff = database.now() - dt.timedelta(seconds=timeout_s)
    return [i.id for i in database.instances.values() if i.seen_at < cutoff and i.id != instance]


def _check_refs(database: MemoryDatabase, table: str, race_id: int, player_id: int) -> None:
    """Refuse a row of ``table`` (``race_connections`` or ``race_presence``) for a room or a
    player that has no row, as its foreign keys do.

    Raises:
        StorageConflict: ``fk_<table>_race_id_races`` or ``fk_<table>_player_id_players``.
    """
    if race_id not in database.races:
        raise StorageConflict(f"fk_{table}_race_id_races")
    if player_id not in database.players:
        raise StorageConflict(f"fk_{table}_player_id_players")


def _seat_no(seat: SeatRecord) -> int:
    return seat.seat


def _presence(row: PresenceRecord) -> PresenceRow:
    return PresenceRow(PresenceState(row.state), row.since)


class MemoryRaceStore:
    """:class:`~server.storage.races.RaceStore` over a :class:`MemoryDatabase`.

    Args:
        database: the tables (shared with the other in-memory stores).
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database
        #: The rooms' seats and what a room shows.
        self.seats = MemorySeatStore(database)

    def transaction(self) -> AbstractAsyncContextManager[MemoryTransaction]:
        return _transaction(self._db)

    async def ban_of(self, tx: Transaction, player_id: int) -> PlayerRecord | None:
        await self._db.query()
        player = self._db.players.get(player_id)
        if player is None or player.banned_at is None:
            return None
        return PlayerRecord(
            player.id, player.name, player.banned_at, player.ban_reason, player.ban_action_id
        )

    async def limit_lock_waits(self, tx: Transaction, seconds: float) -> None:
        await self._db.query()
        memory_transaction(tx).lock_timeout_s = max(0.001, seconds)

    async def find(self, tx: Transaction, invite: str, *, lock: bool = False) -> RaceRow | None:
        await self._db.query()
        row = next((r for r in self._db.races.values() if r.invite == invite), None)
        if row is None:
            return None
        if lock:
            await memory_transaction(tx).lock("races", row.id)
            locked = self._db.races.get(row.id)  # as it is once locked (gone: rolled back)
            if locked is None:
                return None
            row = locked
        return _race(row)

    async def digests(self, tx: Transaction, race_ids: Iterable[int]) -> dict[int, RoomDigest]:
        await self._db.query()
        found: dict[int, RoomDigest] = {}
        for race_id in set(race_ids):
            race = self._db.races.get(race_id)
            if race is None:
                continue
            games = [g for g in self._db.games.values() if g.race_id == race_id]
            ended = sum(1 for g in games if g.status != "playing")
            found[race_id] = (race.version, sum(g.moves for g in games), ended)
        return found

    async def lock(self, tx: Transaction, race_id: int) -> RaceRow | None:
        rows = await self.lock_all(tx, [race_id])
        return rows[0] if rows else None

    async def lock_all(self, tx: Transaction, race_ids: Iterable[int]) -> list[RaceRow]:
        memory = memory_transaction(tx)
        ids = sorted(set(race_ids))
        if not ids:
            return []
        await self._db.query()
        for race_id in ids:
            if race_id in self._db.races:
                await memory.lock("races", race_id)
        return [_race(self._db.races[i]) for i in ids if i in self._db.races]

    async def open_rooms_of(self, tx: Transaction, player_id: int) -> list[RaceRow]:
        await self._db.query()
        rooms = [
            self._db.races[s.race_id]
            for s in self._db.seats.values()
            if s.player_id == player_id and self._db.races[s.race_id].status in OPEN_RACE_STATUSES
        ]
        rooms.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        return [_race(r) for r in rooms]

    async def due(self, tx: Transaction, now: dt.datetime) -> list[int]:
        await self._db.query()
        return [
            r.id
            for r in self._db.races.values()
            if r.status == RaceStatus.RUNNING and r.ends_at is not None and r.ends_at <= now
        ]

    async def create(
        self,
        tx: Transaction,
        *,
        invite: str,
        host_id: int,
        code: GameCode,
        host_deal: bool,
        time_limit_s: int,
        max_players: int,
        now: dt.datetime,
        rated: bool = False,
    ) -> RaceRow:
        memory = memory_transaction(tx)
        await self._db.query()
        if any(r.invite == invite for r in self._db.races.values()):
            raise StorageConflict(INVITE_KEY)
        if host_id not in self._db.players:
            raise StorageConflict("fk_races_host_id_players")
        row = RaceRecord(
            self._db.next_race_id(),
            RaceStatus.LOBBY.value,
            None,
            None,
            invite=invite,
            host_id=host_id,
            code=str(code),
            host_deal=host_deal,
            rated=rated,
            time_limit_s=time_limit_s,
            max_players=max_players,
            version=1,
            created_at=now,
        )
        memory.put(self._db.races, row.id, row)
        await memory.lock("races", row.id)  # a new row is its inserter's until it commits
        race = _race(row)
        await self.seats.add(tx, race.id, host_id, now)
        memory.publish(RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def set_host(self, tx: Transaction, race: RaceRow, host_id: int) -> RaceRow:
        return await self._update(tx, race, host_id=host_id)

    async def close(self, tx: Transaction, race: RaceRow, at: dt.datetime) -> RaceRow:
        return await self._update(tx, race, status=RaceStatus.CLOSED.value, finished_at=at)

    async def announce(self, tx: Transaction, race: RaceRow) -> RaceRow:
        race = await self._update(tx, race, bump=True)
        memory_transaction(tx).publish(RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def start(
        self,
        tx: Transaction,
        race: RaceRow,
        starts_at: dt.datetime,
        ends_at: dt.datetime,
        games: Mapping[int, int],
    ) -> RaceRow:
        memory = memory_transaction(tx)
        for player_id, game_id in games.items():
            await self._db.query()
            seat = self._db.seats.get((race.id, player_id))
            if seat is not None:
                memory.put(
                    self._db.seats, (race.id, player_id), dataclasses.replace(seat, game_id=game_id)
                )
        race = await self._update(
            tx,
            race,
            status=RaceStatus.RUNNING.value,
            starts_at=starts_at,
            ends_at=ends_at,
            bump=True,
        )
        memory.publish(RaceStarted(race.id, race.invite, race.version, starts_at, dict(games)))
        return race

    async def finish(
        self,
        tx: Transaction,
        race: RaceRow,
        finished_at: dt.datetime,
        results: list[dict[str, Any]],
    ) -> RaceRow:
        race = await self._update(
            tx,
            race,
            status=RaceStatus.FINISHED.value,
            finished_at=finished_at,
            results=results,
            bump=True,
        )
        memory_transaction(tx).publish(RaceFinished(race.id, race.invite, race.version))
        return race

    async def close_lobbies(
        self, tx: Transaction, created_before: dt.datetime, now: dt.datetime
    ) -> list[int]:
        memory = memory_transaction(tx)
        await self._db.query()

        def stale(row: RaceRecord) -> bool:
            return row.status == RaceStatus.LOBBY and row.created_at <= created_before

        closed = []
        for race_id in sorted(r.id for r in self._db.races.values() if stale(r)):
            await memory.lock("races", race_id)  # the UPDATE waits for the row
            row = self._db.races[race_id]
            if not stale(row):  # and checks it again once it has it
                continue
            memory.put(
                self._db.races,
                race_id,
                dataclasses.replace(
                    row, status=RaceStatus.CLOSED.value, finished_at=now, version=row.version + 1
                ),
            )
            memory.publish(RaceRoomChanged(race_id, row.invite))
            closed.append(race_id)
        return closed

    async def _update(
        self, tx: Transaction, race: RaceRow, *, bump: bool = False, **values: Any
    ) -> RaceRow:
        """Change the race's row (locked first, as an UPDATE locks it); ``bump``: its version
        grows by one."""
        memory = memory_transaction(tx)
        await memory.lock("races", race.id)
        await self._db.query()
        row = self._db.races[race.id]
        if bump:
            values["version"] = row.version + 1
        new = dataclasses.replace(row, **values)
        memory.put(self._db.races, race.id, new)
        return _race(new)


class MemoryInstanceStore:
    """:class:`~server.storage.instances.InstanceStore` over a :class:`MemoryDatabase` (its
    clock is the database's).

    Args:
        database: the tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def register(self, tx: Transaction, instance: str) -> dt.datetime:
        memory = memory_transaction(tx)
        await self._db.query()
        if instance not in self._db.instances:
            now = self._db.now()
            memory.put(self._db.instances, instance, InstanceRecord(instance, now, now))
        return self._db.instances[instance].started_at

    async def beat(self, tx: Transaction, instance: str) -> dt.datetime | None:
        memory = memory_transaction(tx)
        await self._db.query()
        row = self._db.instances.get(instance)
        if row is None:
            return None
        memory.put(self._db.instances, instance, dataclasses.replace(row, seen_at=self._db.now()))
        return row.started_at

    async def dead(self, instance: str, timeout_s: float) -> list[str]:
        await self._db.query()
        return _unseen(self._db, instance, timeout_s)

    async def forget(self, tx: Transaction, instances: Sequence[str]) -> None:
        memory = memory_transaction(tx)
        await self._db.query()
        for instance in instances:
            if memory.delete(self._db.instances, instance) is None:
                continue
            for key in [k for k in self._db.connections if k[1] == instance]:  # ON DELETE CASCADE
                memory.delete(self._db.connections, key)


class MemoryPresenceStore:
    """:class:`~server.storage.presence.PresenceStore` over a :class:`MemoryDatabase`.

    Args:
        database: the tables (shared with the other in-memory stores).
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database
        #: The server processes' records.
        self.instances = MemoryInstanceStore(database)

    def transaction(self) -> AbstractAsyncContextManager[MemoryTransaction]:
        return _transaction(self._db)

    async def add_connection(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        connection: Connection,
        now: dt.datetime,
    ) -> None:
        memory = memory_transaction(tx)
        await self._db.query()
        _check_refs(self._db, "race_connections", race_id, player_id)
        if connection.instance not in self._db.instances:
            at = self._db.now()
            memory.put(
                self._db.instances,
                connection.instance,
                InstanceRecord(connection.instance, at, at),
            )
        key = (race_id, connection.instance, connection.key)
        if key not in self._db.connections:
            memory.put(
                self._db.connections,
                key,
                ConnectionRecord(race_id, connection.instance, connection.key, player_id, now),
            )

    async def drop_connection(self, tx: Transaction, race_id: int, connection: Connection) -> None:
        memory = memory_transaction(tx)
        await self._db.query()
        memory.delete(self._db.connections, (race_id, connection.instance, connection.key))

    async def connections(self, tx: Transaction, race_id: int, player_id: int) -> int:
        await self._db.query()
        return sum(
            1
            for c in self._db.connections.values()
            if c.race_id == race_id and c.player_id == player_id
        )

    def _matching(self, instances: Sequence[str], key: str | None) -> list[ConnectionRecord]:
        return [
            c
            for c in self._db.connections.values()
            if c.instance_id in instances and (key is None or c.connection == key)
        ]

    async def rooms_followed(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[int]:
        await self._db.query()
        return sorted({c.race_id for c in self._matching(instances, key)})

    async def drop_connections(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[tuple[int, int]]:
        memory = memory_transaction(tx)
        await self._db.query()
        dropped = self._matching(instances, key)
        for c in dropped:
            memory.delete(self._db.connections, (c.race_id, c.instance_id, c.connection))
        return [(c.race_id, c.player_id) for c in dropped]

    async def own_keys(self, instance: str) -> list[str]:
        await self._db.query()
        return sorted(
            {c.connection for c in self._db.connections.values() if c.instance_id == instance}
        )

    async def state(self, tx: Transaction, race_id: int, player_id: int) -> PresenceState | None:
        await self._db.query()
        row = self._db.presence.get((race_id, player_id))
        return None if row is None else PresenceState(row.state)

    async def mark_connected(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        role: PresenceRole,
        now: dt.datetime,
    ) -> bool:
        memory = memory_transaction(tx)
        await self._db.query()
        _check_refs(self._db, "race_presence", race_id, player_id)
        await memory.lock("race_presence", (race_id, player_id))
        key = (race_id, player_id)
        row = self._db.presence.get(key)
        connected = PresenceState.CONNECTED.value
        if row is None:
            memory.put(
                self._db.presence,
                key,
                PresenceRecord(race_id, player_id, role.value, connected, now),
            )
            return True
        if row.state == connected and row.role == role.value:
            return False
        since = row.since if row.state == connected else now
        memory.put(
            self._db.presence,
            key,
            dataclasses.replace(row, role=role.value, state=connected, since=since),
        )
        return True

    async def set_role(
        self, tx: Transaction, race_id: int, player_id: int, role: PresenceRole
    ) -> None:
        memory = memory_transaction(tx)
        await self._db.query()
        row = self._db.presence.get((race_id, player_id))
        if row is not None:
            memory.put(
                self._db.presence, (race_id, player_id), dataclasses.replace(row, role=role.value)
            )

    async def set_state(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        state: PresenceState,
        since: dt.datetime,
        *,
        only_from: PresenceState | None = None,
    ) -> bool:
        memory = memory_transaction(tx)
        await self._db.query()
        row = self._db.presence.get((race_id, player_id))
        if row is None or (only_from is not None and row.state != only_from):
            return False
        memory.put(
            self._db.presence,
            (race_id, player_id),
            dataclasses.replace(row, state=state.value, since=since),
        )
        return True

    async def forget(self, tx: Transaction, race_id: int, player_id: int) -> bool:
        memory = memory_transaction(tx)
        await self._db.query()
        for key in [
            k
            for k, c in self._db.connections.items()
            if (c.race_id, c.player_id) == (race_id, player_id)
        ]:
            memory.delete(self._db.connections, key)
        return memory.delete(self._db.presence, (race_id, player_id)) is not None

    async def end_grace(
        self, tx: Transaction, race_id: int, cutoff: dt.datetime, now: dt.datetime
    ) -> list[int]:
        memory = memory_transaction(tx)
        await self._db.query()
        ended = [
            p
            for p in self._db.presence.values()
            if p.race_id == race_id and p.state == PresenceState.RECONNECTING and p.since <= cutoff
        ]
        for p in ended:
            memory.put(
                self._db.presence,
                (race_id, p.player_id),
                dataclasses.replace(p, state=PresenceState.GONE.value, since=now),
            )
        return [p.player_id for p in ended]

    def _past_grace(self, cutoff: dt.datetime) -> list[int]:
        return sorted(
            {
                p.race_id
                for p in self._db.presence.values()
                if p.state == PresenceState.RECONNECTING
                and p.since <= cutoff
                and self._db.races[p.race_id].status in OPEN_RACE_STATUSES
            }
        )

    async def rooms_past_grace(self, cutoff: dt.datetime) -> list[int]:
        await self._db.query()
        return self._past_grace(cutoff)

    def _gone_playing(self, now: dt.datetime) -> list[GoneGame]:
        gone = []
        for g in self._db.games.values():
            race = None if g.race_id is None else self._db.races[g.race_id]
            presence = None if race is None else self._db.presence.get((race.id, g.player_id))
            if (
                race is not None
                and race.status == RaceStatus.RUNNING
                and race.starts_at is not None
                and race.starts_at <= now
                and presence is not None
                and presence.state == PresenceState.GONE
                and g.status == Status.PLAYING.value
            ):
                gone.append(GoneGame(g.player_id, g.id))
        return gone

    async def gone_but_playing(self, now: dt.datetime) -> list[GoneGame]:
        await self._db.query()
        return self._gone_playing(now)

    async def sweep_work(
        self,
        *,
        instance: str,
        timeout_s: float | None,
        grace_cutoff: dt.datetime,
        now: dt.datetime,
    ) -> SweepWork:
        await self._db.query()
        dead = timeout_s is not None and bool(_unseen(self._db, instance, timeout_s))
        own = any(c.instance_id == instance for c in self._db.connections.values())
        return SweepWork(
            dead, own, bool(self._past_grace(grace_cutoff)), bool(self._gone_playing(now))
        )
