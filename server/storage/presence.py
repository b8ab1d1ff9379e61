"""The contract of presence in race rooms (docs/rules.md §4 "Presence"): the connections that
follow rooms (``race_connections``) and each racer's or watcher's presence (``race_presence``);
the server processes' records in :mod:`server.storage.instances`
(:attr:`PresenceStore.instances`).

:class:`PresenceStore` is their contract (the presence and race services depend on it), with the
rows it returns; :class:`~server.storage.presence_postgres.PostgresPresenceStore` keeps it in
PostgreSQL. The rules (who is reconnecting, when the grace period ends, what follows a
departure) are the presence service's. Transactions are as in :mod:`server.storage.races`: a
step taking ``tx`` runs in the caller's :class:`~server.storage.transactions.Transaction`,
which has locked the rooms concerned (``races`` rows, in id order) before it touches their
presence rows; a method without one is its own transaction. Rows leave as frozen dataclasses;
times are UTC. A database failure leaves the transaction's block as a
:class:`~server.errors.StorageError` (a lock not granted within the transaction's lock time-out
as :class:`~server.errors.StorageUnavailable`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from server.storage.enums import PresenceRole, PresenceState
from server.storage.instances import InstanceStore
from server.storage.transactions import Transaction


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


__all__ = [
    "Connection",
    "GoneGame",
    "PresenceRole",
    "PresenceState",
    "PresenceStore",
    "SweepWork",
]
