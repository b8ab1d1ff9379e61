"""The queries of race rooms (docs/rules.md §4 "Races"): the ``races`` rows, their locks and
the room's events here, in :class:`RaceStore`; the seats and what a room shows in
:mod:`server.storage.seats` (:attr:`RaceStore.seats`). The rules (who may join, when a room
closes, who becomes host, when a race is over, how racers rank) are the services'; storage only
reads and writes.

:class:`RaceStore` (with :class:`~server.storage.seats.SeatStore`) is the contract the race and
presence services depend on, with the rows it returns;
:class:`~server.storage.races_postgres.PostgresRaceStore` keeps it in PostgreSQL.

Transactions: a room operation is one :class:`~server.storage.transactions.Transaction`, opened
by :meth:`RaceStore.transaction` and committed by its caller; the methods taking ``tx`` are steps
within it. Every transaction
that changes a room locks its ``races`` row first (:meth:`RaceStore.lock`, ``FOR UPDATE``; several
in id order, :meth:`RaceStore.lock_all`), and only then its seats and presence rows, so two never
wait on each other in a cycle. A change is announced (:mod:`server.storage.events`) once the
transaction that makes it commits, and never when it rolls back (at most once: see there).

Rows leave as frozen dataclasses (never ORM objects): a :class:`RaceRow` is the race as read or
as just written; every write returns the new row. Times are UTC (``timestamptz``); durations are
named for their unit (``_s``, ``_ms``).

Errors: a database failure leaves the transaction's block as a
:class:`~server.errors.StorageError` (:class:`~server.storage.sessions.Sessions` translates it,
after rolling the transaction back): :class:`~server.errors.StorageConflict` for a unique key
taken meanwhile (``uq_races_invite``: an invite code collision), :class:`~server.errors.StorageBusy`
when no pooled connection came free, :class:`~server.errors.StorageUnavailable` otherwise — a
lock not granted within :meth:`RaceStore.limit_lock_waits` included.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from server.engine.codes import GameCode, RuleSet
from server.storage.enums import OPEN_RACE_STATUSES, RaceStatus
from server.storage.moderation import PlayerRecord
from server.storage.seats import SeatStore
from server.storage.transactions import Transaction

#: The unique key an invite code collision breaks (:class:`~server.errors.StorageConflict`).
INVITE_KEY = "uq_races_invite"


@dataclass(frozen=True, slots=True)
class RaceRow:
    """A ``races`` row.

    Attributes:
        id / invite: the room's id and its 6-character invite code.
        host_id: the host's player id.
        code / rules: the deal (secret while the race runs, unless ``host_deal``).
        status: see :class:`RaceStatus`.
        host_deal: the host chose the code.
        rated: the results move the racers' ratings (never with ``host_deal``).
        time_limit_s: seconds from ``starts_at`` to ``ends_at``.
        max_players: seats.
        version: grows by one with every announced change of the room.
        created_at / starts_at / ends_at / finished_at: UTC; ``starts_at`` and ``ends_at`` once
            started, ``finished_at`` once finished or closed.
        results: once finished, one dict per racer (see ``rank_results`` in the race service).
    """

    id: int
    invite: str
    host_id: int
    code: GameCode
    rules: RuleSet
    status: RaceStatus
    host_deal: bool
    rated: bool
    time_limit_s: int
    max_players: int
    version: int
    created_at: dt.datetime
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    finished_at: dt.datetime | None
    results: list[dict[str, Any]] | None


#: What changes with every change of a room or of a racer's progress: the room's ``version``,
#: the ``moves`` of its games added up, and how many of its games have ended (see
#: :meth:`RaceStore.digests`).
RoomDigest = tuple[int, int, int]


class RaceStore(Protocol):
    """The race rooms' queries. Every step may raise :class:`~server.errors.StorageError`
    (see the module's notes)."""

    @property
    def seats(self) -> SeatStore:
        """The rooms' seats and what a room shows."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """One transaction (``async with store.transaction() as tx:``), committed by the caller
        (``await tx.commit()``); a failure inside leaves the block as a StorageError, the
        transaction rolled back."""
        ...

    async def ban_of(self, tx: Transaction, player_id: int) -> PlayerRecord | None:
        """The player's record when they are banned, else None (also for an unknown player),
        read in this transaction."""
        ...

    async def limit_lock_waits(self, tx: Transaction, seconds: float) -> None:
        """Make the rest of this transaction fail, rather than wait, when a row it locks stays
        locked by another transaction for more than ``seconds`` (at least 1 ms): the block then
        leaves with :class:`~server.errors.StorageUnavailable` (a stuck session must not hold a
        sweep up)."""
        ...

    async def find(self, tx: Transaction, invite: str, *, lock: bool = False) -> RaceRow | None:
        """The race with this (normalized) invite code, or None; ``lock``: its row locked
        (``FOR UPDATE``) until the transaction ends."""
        ...

    async def lock(self, tx: Transaction, race_id: int) -> RaceRow | None:
        """The race, its row locked (``FOR UPDATE``: waits for another transaction holding it,
        up to the lock time-out if one is set); None when there is no such race."""
        ...

    async def lock_all(self, tx: Transaction, race_ids: Iterable[int]) -> list[RaceRow]:
        """The races with these ids (those that exist), each row locked, in id order (the
        order every transaction locks rooms in)."""
        ...

    async def open_rooms_of(self, tx: Transaction, player_id: int) -> list[RaceRow]:
        """The open rooms (lobby or running) the player sits in, newest first."""
        ...

    async def digests(self, tx: Transaction, race_ids: Iterable[int]) -> dict[int, RoomDigest]:
        """The :data:`RoomDigest` of each of these races that exists, in one read."""
        ...

    async def due(self, tx: Transaction, now: dt.datetime) -> list[int]:
        """Running races whose ``ends_at`` is ``now`` or earlier (ids)."""
        ...

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
        """Insert a lobby (``version`` 1) with the host in seat 1, and announce it; ``rated``:
        its results will move the racers' ratings (never with ``host_deal``).

        Raises (from the transaction's block):
            StorageConflict: ``constraint`` :data:`INVITE_KEY`: the invite code is taken.
        """
        ...

    async def set_host(self, tx: Transaction, race: RaceRow, host_id: int) -> RaceRow:
        """Give the host's role to ``host_id`` (not announced: the caller announces)."""
        ...

    async def close(self, tx: Transaction, race: RaceRow, at: dt.datetime) -> RaceRow:
        """Close the room (``finished_at`` = ``at``; not announced: the caller announces)."""
        ...

    async def announce(self, tx: Transaction, race: RaceRow) -> RaceRow:
        """Bump the room's ``version`` and announce its change (``race_room``)."""
        ...

    async def start(
        self,
        tx: Transaction,
        race: RaceRow,
        starts_at: dt.datetime,
        ends_at: dt.datetime,
        games: Mapping[int, int],
    ) -> RaceRow:
        """The race runs from ``starts_at`` to ``ends_at``: each racer's seat gets their game
        (``games``: ``{player_id: game_id}``, the games inserted in this transaction), the
        version grows and the start is announced (``race_start``, with ``games``)."""
        ...

    async def finish(
        self,
        tx: Transaction,
        race: RaceRow,
        finished_at: dt.datetime,
        results: list[dict[str, Any]],
    ) -> RaceRow:
        """Store the results (JSON objects) of a race that is over, bump its version and
        announce it (``race_finished``)."""
        ...

    async def close_lobbies(
        self, tx: Transaction, created_before: dt.datetime, now: dt.datetime
    ) -> list[int]:
        """Close every lobby created at ``created_before`` or earlier (``finished_at`` =
        ``now``, version bumped), each announced (``race_room`` without a version).

        Returns:
            The ids of the rooms closed.
        """
        ...


__all__ = [
    "INVITE_KEY",
    "OPEN_RACE_STATUSES",
    "RaceRow",
    "RaceStatus",
    "RaceStore",
]
