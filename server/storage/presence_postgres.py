"""The presence records in PostgreSQL: :class:`PostgresPresenceStore` keeps
:class:`~server.storage.presence.PresenceStore` (its contract, rows, transactions and errors are
described there) in ``race_connections`` and ``race_presence``, and ``server_instances``
through :class:`~server.storage.instances.PostgresInstanceStore`. The statements of the sweep's
questions (a process's own connections, rooms past the grace period, gone racers still
playing) follow the class: each is asked alone and inside :meth:`PostgresPresenceStore.sweep_work`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from sqlalchemy import ColumnElement, Select, case, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.actions import Status
from server.storage.instances import PostgresInstanceStore, unseen
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
from server.storage.presence import Connection, GoneGame, SweepWork
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of


class PostgresPresenceStore:
    """:class:`~server.storage.presence.PresenceStore` in PostgreSQL (``race_connections``,
    ``race_presence``, and ``server_instances`` through
    :class:`~server.storage.instances.PostgresInstanceStore`).

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
