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
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import func, select, text

from server.storage.events import RaceInvited, publish
from server.storage.models import PlayerConnection, ServerInstance
from server.storage.players import MAX_PLAYER_ID
from server.storage.sessions import Sessions
from server.storage.single import write_single


@dataclass(frozen=True, slots=True)
class OnlineConnection:
    """A connection that said hello: its key (unique within its process), its player and when
    (aware UTC)."""

    key: str
    player_id: int
    at: dt.datetime


#: A batch of changes in one statement, its own transaction: forget process $1's connections
#: $2 (keys), make the process's record again if it was dropped (only when connections are
#: added), and record the connections $3 (keys), $4 (players), $5 (when) whose player exists.
#: A batch never names a key in both: keys are never reused, and a connection that closes
#: before its batch is written leaves it (:class:`~server.services.online.OnlineRecorder`).
RECORD_SQL = """
    WITH forgotten AS (
        DELETE FROM player_connections
        WHERE instance_id = $1 AND connection = ANY($2::varchar[])
    ), process AS (
        INSERT INTO server_instances (id)
        SELECT $1 WHERE cardinality($3::varchar[]) > 0
        ON CONFLICT DO NOTHING
    )
    INSERT INTO player_connections (instance_id, connection, player_id, connected_at)
    SELECT $1, c.key, c.player_id, c.at
    FROM unnest($3::varchar[], $4::bigint[], $5::timestamptz[]) AS c(key, player_id, at)
    JOIN players ON players.id = c.player_id
    ON CONFLICT DO NOTHING
"""


class OnlineStore(Protocol):
    """Where open connections are kept. Every method may raise
    :class:`~server.errors.StorageError` when the database fails."""

    async def record(
        self,
        instance: str,
        added: Sequence[OnlineConnection],
        removed: Collection[str],
    ) -> None:
        """In one transaction, forget process ``instance``'s connections ``removed`` (keys; none
        on record is no error), then record ``added`` (one already on record stays as it is; one
        whose player no longer exists is left out). The process's record is made again if it
        was dropped."""
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

    async def record(
        self,
        instance: str,
        added: Sequence[OnlineConnection],
        removed: Collection[str],
    ) -> None:
        """See :meth:`OnlineStore.record`: one statement through the driver whatever the
        batch's size (:data:`RECORD_SQL`, its own transaction, one round trip).

        Raises:
            StorageError: the database failed; nothing of the batch is stored (or, for
                :class:`~server.errors.StorageOutcomeUnknown`, it may all be).
        """
        if not added and not removed:
            return
        await write_single(
            self._sessions.engine,
            RECORD_SQL,
            (
                instance,
                sorted(set(removed)),
                [c.key for c in added],
                [c.player_id for c in added],
                [c.at for c in added],
            ),
        )

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
        """See :meth:`OnlineStore.announce_invite` (handed to the event publisher: no
        statement of its own).

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            publish(session, event)
            await session.commit()


__all__ = ["OnlineStore", "PostgresOnlineStore"]
