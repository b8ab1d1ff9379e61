"""Who is online (table ``player_connections``): every open websocket that said hello, under
its server process, so that any process can tell whether a player has one anywhere; and the
announcement of a race invitation to the processes holding the invited player's sockets
(:class:`~server.storage.events.RaceInvited`).

:class:`OnlineStore` is the contract :class:`server.services.friends.FriendService` depends on;
:class:`PostgresOnlineStore` keeps it in PostgreSQL (an in-memory one for tests keeps it in
``tests/fakes/follows.py``). A player is online while a row of theirs belongs to a process
seen within the time-out (``server_instances.seen_at``, the database's clock): the rows of a
process taken for dead go with its record, and those of a process that stalls stop counting
at once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from typing import Protocol

from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert

from server.storage.events import RaceInvited, publish
from server.storage.models import PlayerConnection, ServerInstance
from server.storage.players import MAX_PLAYER_ID
from server.storage.sessions import Sessions


class OnlineStore(Protocol):
    """Where open connections are kept. Every method may raise
    :class:`~server.errors.StorageError` when the database fails."""

    async def connected(self, instance: str, key: str, player_id: int, at: dt.datetime) -> None:
        """Record that process ``instance``'s connection ``key`` said hello for the player at
        ``at`` (aware UTC); nothing when it is on record already. The process's record is
        made again if it was dropped."""
        ...

    async def disconnected(self, instance: str, key: str) -> None:
        """Forget process ``instance``'s connection ``key`` (nothing when not on record)."""
        ...

    async def own_keys(self, instance: str) -> list[str]:
        """The keys of process ``instance``'s connections on record."""
        ...

    async def online_among(self, player_ids: Collection[int], timeout_s: float) -> set[int]:
        """Which of ``player_ids`` have a connection on record under a process seen within the
        last ``timeout_s`` seconds (by the database's clock)."""
        ...

    async def announce_invite(self, event: RaceInvited) -> None:
        """Tell every process (delivered when the announcement commits)."""
        ...


class PostgresOnlineStore:
    """:class:`OnlineStore` in PostgreSQL's ``player_connections`` (keyed by process and
    connection, indexed by player) and ``server_instances``.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def connected(self, instance: str, key: str, player_id: int, at: dt.datetime) -> None:
        """See :meth:`OnlineStore.connected`.

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            await session.execute(
                insert(ServerInstance).values(id=instance).on_conflict_do_nothing()
            )
            await session.execute(
                insert(PlayerConnection)
                .values(instance_id=instance, connection=key, player_id=player_id, connected_at=at)
                .on_conflict_do_nothing()
            )
            await session.commit()

    async def disconnected(self, instance: str, key: str) -> None:
        """See :meth:`OnlineStore.disconnected`.

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            await session.execute(
                delete(PlayerConnection).where(
                    PlayerConnection.instance_id == instance, PlayerConnection.connection == key
                )
            )
            await session.commit()

    async def own_keys(self, instance: str) -> list[str]:
        """See :meth:`OnlineStore.own_keys`.

        Raises:
            StorageError: the database failed.
        """
        statement = select(PlayerConnection.connection).where(
            PlayerConnection.instance_id == instance
        )
        async with self._sessions() as session:
            return list((await session.scalars(statement)).all())

    async def online_among(self, player_ids: Collection[int], timeout_s: float) -> set[int]:
        """See :meth:`OnlineStore.online_among` (the ``player_id`` index, one statement).

        Raises:
            StorageError: the database failed.
        """
        ids = sorted({i for i in player_ids if 0 < i <= MAX_PLAYER_ID})
        if not ids:
            return set()
        statement = (
            select(PlayerConnection.player_id)
            .distinct()
            .join(ServerInstance, ServerInstance.id == PlayerConnection.instance_id)
            .where(
                PlayerConnection.player_id.in_(ids),
                ServerInstance.seen_at
                >= func.statement_timestamp() - text(f"interval '{float(timeout_s)} seconds'"),
            )
        )
        async with self._sessions() as session:
            return set((await session.scalars(statement)).all())

    async def announce_invite(self, event: RaceInvited) -> None:
        """See :meth:`OnlineStore.announce_invite` (``pg_notify`` in a transaction of its own).

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            await publish(session, event)
            await session.commit()


__all__ = ["OnlineStore", "PostgresOnlineStore"]
