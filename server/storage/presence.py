"""The queries of presence in race rooms (docs/rules.md §4 "Presence"): the connections that
follow rooms (``race_connections``) and each racer's or watcher's presence (``race_presence``);
the server processes' records in :mod:`server.storage.instances`
(:attr:`PresenceStore.instances`).

:class:`PresenceStore` is their contract (the presence and race services depend on it);
:class:`PostgresPresenceStore` keeps it in PostgreSQL. The rules (who is reconnecting, when the
grace period ends, what follows a departure) are the presence service's. Transactions are as in
:mod:`server.storage.races`: a step taking ``tx`` runs in the caller's
:class:`~server.storage.transactions.Transaction`, which
has locked the rooms concerned (``races`` rows, in id order) before it touches their presence
rows; a method without one is its own transaction. Rows leave as frozen dataclasses; times are
UTC. A database failure leaves the transaction's block as a
:class:`~server.errors.StorageError` (a lock not granted within the transaction's lock time-out
as :class:`~server.errors.StorageUnavailable`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import ColumnElement, Select, case, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.actions import Status
from server.storage.instances import InstanceStore, PostgresInstanceStore, unseen
from server.storage.models import (
    OPEN_RACE_STATUSES,
    Game,
    PresenceRole,
    PresenceState,
    Race,
    RaceConnection,
    RacePresence,
    RaceStatus,
    ServerInstance,
)
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of


@dataclass(frozen=True, slots=True)
class Connection:
    """One websocket as the presence records know it: its server process and its key there."""

    instance: str
    key: str


@dataclass(frozen=True, slots=True)
class GoneGame:
    """A gone racer's game still being played in a race that has started."""

    player_id: int
    game_id: int


@dataclass(frozen=True, slots=True)
class SweepWork:
    """Which steps of a presence sweep have anything to do (see
    :meth:`PresenceStore.sweep_work`)."""

    dead_instances: bool
    own_records: bool
    past_grace: bool
    gone_playing: bool


class PresenceStore(Protocol):
    """The presence records' queries. Every step may raise
    :class:`~server.errors.StorageError` (see the module's notes)."""

    @property
    def instances(self) -> InstanceStore:
        """The server processes' records."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """One transaction, committed by the caller (as
        :meth:`server.storage.races.RaceStore.transaction`)."""
        ...

    async def add_connection(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        connection: Connection,
        now: dt.datetime,
    ) -> None:
        """Record that ``connection`` follows the room for the player (nothing when it is on
        record already). Its process's record is made again if it was dropped (taken for dead
        after a stall; its heartbeat then notices and records its other connections again)."""
        ...

    async def drop_connection(self, tx: Transaction, race_id: int, connection: Connection) -> None:
        """Delete the record that ``connection`` follows the room (if there is one)."""
        ...

    async def connections(self, tx: Transaction, race_id: int, player_id: int) -> int:
        """How many connections on record follow the room for the player."""
        ...

    async def rooms_followed(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[int]:
        """The rooms (ids) that the connections of these processes follow — only connection
        ``key``'s when given (then ``instances`` is its process)."""
        ...

    async def drop_connections(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[tuple[int, int]]:
        """Delete the records of the connections of these processes (only connection ``key``'s
        when given); the caller has locked their rooms (:meth:`rooms_followed`).

        Returns:
            ``(race_id, player_id)`` of each record deleted (repeats possible).
        """
        ...

    async def own_keys(self, instance: str) -> list[str]:
        """The keys of the connections this process has on record. Its own transaction.

        Raises:
            StorageError: the database failed.
        """
        ...

    async def state(self, tx: Transaction, race_id: int, player_id: int) -> PresenceState | None:
        """The player's presence state in the room, or None when not on record."""
        ...

    async def mark_connected(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        role: PresenceRole,
        now: dt.datetime,
    ) -> bool:
        """The player is connected to the room as ``role``: a new row (since ``now``), or the
        row put to ``connected`` (since ``now``, when it was not) and to ``role``. The row stays
        locked until the transaction ends.

        Returns:
            True when the row is new or changed (state or role).
        """
        ...

    async def set_role(
        self, tx: Transaction, race_id: int, player_id: int, role: PresenceRole
    ) -> None:
        """Set the player's role in the room (their state kept)."""
        ...

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
        """Put the player's presence in the room to ``state`` since ``since`` — only if it is
        ``only_from`` now, when given.

        Returns:
            True when a row changed.
        """
        ...

    async def forget(self, tx: Transaction, race_id: int, player_id: int) -> bool:
        """Delete the player's connection records and presence in the room.

        Returns:
            True when there was a presence row.
        """
        ...

    async def end_grace(
        self, tx: Transaction, race_id: int, cutoff: dt.datetime, now: dt.datetime
    ) -> list[int]:
        """The room's players reconnecting since ``cutoff`` or earlier are gone since ``now``.

        Returns:
            Their player ids.
        """
        ...

    async def rooms_past_grace(self, cutoff: dt.datetime) -> list[int]:
        """Open rooms with a player reconnecting since ``cutoff`` or earlier (ids). Its own
        transaction.

        Raises:
            StorageError: the database failed.
        """
        ...

    async def gone_but_playing(self, now: dt.datetime) -> list[GoneGame]:
        """The games still being played by gone racers of running races whose ``starts_at``
        is ``now`` or earlier. Its own transaction.

        Raises:
            StorageError: the database failed.
        """
        ...

    async def sweep_work(
        self,
        *,
        instance: str,
        timeout_s: float | None,
        grace_cutoff: dt.datetime,
        now: dt.datetime,
    ) -> SweepWork:
        """In one round trip, whether there is anything for each step of a sweep: other
        processes unseen for ``timeout_s`` (not asked when None), connections of ``instance``
        on record, open rooms with a player reconnecting since ``grace_cutoff`` or earlier,
        gone racers still playing a started race (as :meth:`gone_but_playing`). Its own
        transaction.

        Raises:
            StorageError: the database failed.
        """
        ...


class PostgresPresenceStore:
    """:class:`PresenceStore` in PostgreSQL (``race_connections``, ``race_presence``, and
    ``server_instances`` through :class:`~server.storage.instances.PostgresInstanceStore`).

    Args:
        sessions: the session factory (its failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions
        #: The server processes' records.
        self.instances = PostgresInstanceStore(sessions)

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self._sessions()

    # ---------------------------------------------------------------------------- connections

    async def add_connection(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        connection: Connection,
        now: dt.datetime,
    ) -> None:
        session = session_of(tx)
        await session.execute(
            insert(ServerInstance).values(id=connection.instance).on_conflict_do_nothing()
        )
        await session.execute(
            insert(RaceConnection)
            .values(
                race_id=race_id,
                instance_id=connection.instance,
                connection=connection.key,
                player_id=player_id,
                connected_at=now,
            )
            .on_conflict_do_nothing()
        )

    async def drop_connection(self, tx: Transaction, race_id: int, connection: Connection) -> None:
        session = session_of(tx)
        await session.execute(
            delete(RaceConnection).where(
                RaceConnection.race_id == race_id,
                RaceConnection.instance_id == connection.instance,
                RaceConnection.connection == connection.key,
            )
        )

    async def connections(self, tx: Transaction, race_id: int, player_id: int) -> int:
        session = session_of(tx)
        count = await session.scalar(
            select(func.count())
            .select_from(RaceConnection)
            .where(RaceConnection.race_id == race_id, RaceConnection.player_id == player_id)
        )
        return count or 0

    async def rooms_followed(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[int]:
        session = session_of(tx)
        return list(
            (
                await session.scalars(
                    select(RaceConnection.race_id).where(*_matching(instances, key)).distinct()
                )
            ).all()
        )

    async def drop_connections(
        self, tx: Transaction, instances: Sequence[str], key: str | None = None
    ) -> list[tuple[int, int]]:
        session = session_of(tx)
        rows = await session.execute(
            delete(RaceConnection)
            .where(*_matching(instances, key))
            .returning(RaceConnection.race_id, RaceConnection.player_id)
        )
        return [(race_id, player_id) for race_id, player_id in rows]

    async def own_keys(self, instance: str) -> list[str]:
        async with self._sessions() as session:
            return list((await session.scalars(_own(instance))).all())

    # ------------------------------------------------------------------------ presence rows

    async def state(self, tx: Transaction, race_id: int, player_id: int) -> PresenceState | None:
        session = session_of(tx)
        return await session.scalar(
            select(RacePresence.state).where(
                RacePresence.race_id == race_id, RacePresence.player_id == player_id
            )
        )

    async def mark_connected(
        self,
        tx: Transaction,
        race_id: int,
        player_id: int,
        role: PresenceRole,
        now: dt.datetime,
    ) -> bool:
        session = session_of(tx)
        connected = PresenceState.CONNECTED
        values = {"race_id": race_id, "player_id": player_id, "role": role, "since": now}
        stmt = insert(RacePresence).values(**values, state=connected)
        row = await session.scalar(
            stmt.on_conflict_do_update(
                index_elements=[RacePresence.race_id, RacePresence.player_id],
                set_={
                    "role": stmt.excluded.role,
                    "state": connected,
                    "since": case(
                        (RacePresence.state == connected, RacePresence.since),
                        else_=stmt.excluded.since,
                    ),
                },
                where=or_(RacePresence.state != connected, RacePresence.role != stmt.excluded.role),
            ).returning(RacePresence.player_id)
        )
        return row is not None

    async def set_role(
        self, tx: Transaction, race_id: int, player_id: int, role: PresenceRole
    ) -> None:
        session = session_of(tx)
        await session.execute(
            update(RacePresence)
            .where(RacePresence.race_id == race_id, RacePresence.player_id == player_id)
            .values(role=role)
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
        session = session_of(tx)
        query = update(RacePresence).where(
            RacePresence.race_id == race_id, RacePresence.player_id == player_id
        )
        if only_from is not None:
            query = query.where(RacePresence.state == only_from)
        changed = await session.scalar(
            query.values(state=state, since=since).returning(RacePresence.player_id)
        )
        return changed is not None

    async def forget(self, tx: Transaction, race_id: int, player_id: int) -> bool:
        session = session_of(tx)
        await session.execute(
            delete(RaceConnection).where(
                RaceConnection.race_id == race_id, RaceConnection.player_id == player_id
            )
        )
        removed = await session.scalar(
            delete(RacePresence)
            .where(RacePresence.race_id == race_id, RacePresence.player_id == player_id)
            .returning(RacePresence.player_id)
        )
        return removed is not None

    async def end_grace(
        self, tx: Transaction, race_id: int, cutoff: dt.datetime, now: dt.datetime
    ) -> list[int]:
        session = session_of(tx)
        return list(
            (
                await session.scalars(
                    update(RacePresence)
                    .where(
                        RacePresence.race_id == race_id,
                        RacePresence.state == PresenceState.RECONNECTING,
                        RacePresence.since <= cutoff,
                    )
                    .values(state=PresenceState.GONE, since=now)
                    .returning(RacePresence.player_id)
                )
            ).all()
        )

    async def rooms_past_grace(self, cutoff: dt.datetime) -> list[int]:
        async with self._sessions() as session:
            return list((await session.scalars(_past_grace(cutoff))).all())

    async def gone_but_playing(self, now: dt.datetime) -> list[GoneGame]:
        async with self._sessions() as session:
            rows = await session.execute(_gone_playing(now))
            return [GoneGame(player_id, game_id) for player_id, game_id in rows]

    async def sweep_work(
        self,
        *,
        instance: str,
        timeout_s: float | None,
        grace_cutoff: dt.datetime,
        now: dt.datetime,
    ) -> SweepWork:
        asked = [
            exists(_own(instance)),
            exists(_past_grace(grace_cutoff)),
            exists(_gone_playing(now)),
        ]
        if timeout_s is not None:
            asked.insert(0, exists(unseen(instance, timeout_s)))
        async with self._sessions() as session:
            found = list((await session.execute(select(*asked))).one())
        dead = found.pop(0) if timeout_s is not None else False
        return SweepWork(dead, *found)


def _matching(instances: Sequence[str], key: str | None) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [RaceConnection.instance_id.in_(instances)]
    if key is not None:
        where.append(RaceConnection.connection == key)
    return where


def _own(instance: str) -> Select[str]:
    return (
        select(RaceConnection.connection).where(RaceConnection.instance_id == instance).distinct()
    )


def _past_grace(cutoff: dt.datetime) -> Select[int]:
    return (
        select(RacePresence.race_id)
        .join(Race, Race.id == RacePresence.race_id)
        .where(
            RacePresence.state == PresenceState.RECONNECTING,
            RacePresence.since <= cutoff,
            Race.status.in_(OPEN_RACE_STATUSES),
        )
        .distinct()
    )


def _gone_playing(now: dt.datetime) -> Select[int, int]:
    return (
        select(Game.player_id, Game.id)
        .join(Race, Race.id == Game.race_id)
        .join(
            RacePresence,
            (RacePresence.race_id == Game.race_id) & (RacePresence.player_id == Game.player_id),
        )
        .where(
            Race.status == RaceStatus.RUNNING,
            Race.starts_at <= now,
            RacePresence.state == PresenceState.GONE,
            Game.status == Status.PLAYING.value,
        )
    )


__all__ = [
    "Connection",
    "GoneGame",
    "PostgresPresenceStore",
    "PresenceRole",
    "PresenceState",
    "PresenceStore",
    "SweepWork",
]
