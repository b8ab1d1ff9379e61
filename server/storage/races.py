"""The queries of race rooms (docs/rules.md §4 "Races"): the ``races`` rows, their locks and
the room's events here, in :class:`RaceStore`; the seats and what a room shows in
:mod:`server.storage.seats` (:attr:`RaceStore.seats`). The rules (who may join, when a room
closes, who becomes host, when a race is over, how racers rank) are the services'; storage only
reads and writes.

:class:`RaceStore` (with :class:`~server.storage.seats.SeatStore`) is the contract the race and
presence services depend on; :class:`PostgresRaceStore` keeps it in PostgreSQL.

Transactions: a room operation is one :class:`~server.storage.transactions.Transaction`, opened
by :meth:`RaceStore.transaction` and committed by its caller; the methods taking ``tx`` are steps
within it. Every transaction
that changes a room locks its ``races`` row first (:meth:`RaceStore.lock`, ``FOR UPDATE``; several
in id order, :meth:`RaceStore.lock_all`), and only then its seats and presence rows, so two never
wait on each other in a cycle. A change is announced (``pg_notify``, :mod:`server.storage.events`)
in the transaction that makes it, so it is delivered exactly when the change commits.

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

from sqlalchemy import Row, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.codes import GameCode, RuleSet
from server.storage import moderation
from server.storage.enums import OPEN_RACE_STATUSES, RaceStatus
from server.storage.events import RaceFinished, RaceRoomChanged, RaceStarted, publish
from server.storage.models import Race, RacePlayer
from server.storage.moderation import PlayerRecord
from server.storage.seats import PostgresSeatStore, SeatStore
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of

#: The unique key an invite code collision breaks (:class:`~server.errors.StorageConflict`).
INVITE_KEY = "uq_races_invite"

_RACE = tuple(Race.__table__.c)


@dataclass(frozen=True, slots=True)
class RaceRow:
    """A ``races`` row.

    Attributes:
        id / invite: the room's id and its 6-character invite code.
        host_id: the host's player id.
        code / rules: the deal (secret while the race runs, unless ``host_deal``).
        status: see :class:`RaceStatus`.
        host_deal: the host chose the code.
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
    time_limit_s: int
    max_players: int
    version: int
    created_at: dt.datetime
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    finished_at: dt.datetime | None
    results: list[dict[str, Any]] | None


def _race(row: Row[Any]) -> RaceRow:
    return RaceRow(
        id=row.id,
        invite=row.invite,
        host_id=row.host_id,
        code=GameCode.parse(row.code),
        rules=RuleSet(row.rules),
        status=RaceStatus(row.status),
        host_deal=row.host_deal,
        time_limit_s=row.time_limit_s,
        max_players=row.max_players,
        version=row.version,
        created_at=row.created_at,
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        finished_at=row.finished_at,
        results=row.results,
    )


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
    ) -> RaceRow:
        """Insert a lobby (``version`` 1) with the host in seat 1, and announce it.

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


class PostgresRaceStore:
    """:class:`RaceStore` in PostgreSQL (``races``, and ``race_players`` through
    :class:`~server.storage.seats.PostgresSeatStore`).

    Args:
        sessions: the session factory (its failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions
        #: The rooms' seats and what a room shows.
        self.seats = PostgresSeatStore()

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self._sessions()

    async def ban_of(self, tx: Transaction, player_id: int) -> PlayerRecord | None:
        return await moderation.ban_of(session_of(tx), player_id)

    async def limit_lock_waits(self, tx: Transaction, seconds: float) -> None:
        session = session_of(tx)
        await session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(seconds * 1000))}"))

    # ------------------------------------------------------------------------- reading rooms

    async def find(self, tx: Transaction, invite: str, *, lock: bool = False) -> RaceRow | None:
        session = session_of(tx)
        query = select(*_RACE).where(Race.invite == invite)
        row = (await session.execute(query.with_for_update() if lock else query)).one_or_none()
        return None if row is None else _race(row)

    async def lock(self, tx: Transaction, race_id: int) -> RaceRow | None:
        session = session_of(tx)
        rows = await self.lock_all(session, [race_id])
        return rows[0] if rows else None

    async def lock_all(self, tx: Transaction, race_ids: Iterable[int]) -> list[RaceRow]:
        session = session_of(tx)
        ids = sorted(set(race_ids))
        if not ids:
            return []
        rows = await session.execute(
            select(*_RACE).where(Race.id.in_(ids)).order_by(Race.id).with_for_update()
        )
        return [_race(row) for row in rows]

    async def open_rooms_of(self, tx: Transaction, player_id: int) -> list[RaceRow]:
        session = session_of(tx)
        rows = await session.execute(
            select(*_RACE)
            .join(RacePlayer, RacePlayer.race_id == Race.id)
            .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_RACE_STATUSES))
            .order_by(Race.created_at.desc(), Race.id.desc())
        )
        return [_race(row) for row in rows]

    async def due(self, tx: Transaction, now: dt.datetime) -> list[int]:
        session = session_of(tx)
        return list(
            (
                await session.scalars(
                    select(Race.id).where(Race.status == RaceStatus.RUNNING, Race.ends_at <= now)
                )
            ).all()
        )

    # --------------------------------------------------------------------- writing the race

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
    ) -> RaceRow:
        session = session_of(tx)
        row = (
            await session.execute(
                insert(Race)
                .values(
                    invite=invite,
                    host_id=host_id,
                    code=str(code),
                    rules=code.rules.value,
                    status=RaceStatus.LOBBY,
                    host_deal=host_deal,
                    time_limit_s=time_limit_s,
                    max_players=max_players,
                    version=1,
                    created_at=now,
                )
                .returning(*_RACE)
            )
        ).one()
        race = _race(row)
        await self.seats.add(session, race.id, host_id, now)
        await publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def set_host(self, tx: Transaction, race: RaceRow, host_id: int) -> RaceRow:
        session = session_of(tx)
        return await self._update(session, race, host_id=host_id)

    async def close(self, tx: Transaction, race: RaceRow, at: dt.datetime) -> RaceRow:
        session = session_of(tx)
        return await self._update(session, race, status=RaceStatus.CLOSED, finished_at=at)

    async def announce(self, tx: Transaction, race: RaceRow) -> RaceRow:
        session = session_of(tx)
        race = await self._update(session, race, version=Race.version + 1)
        await publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def start(
        self,
        tx: Transaction,
        race: RaceRow,
        starts_at: dt.datetime,
        ends_at: dt.datetime,
        games: Mapping[int, int],
    ) -> RaceRow:
        session = session_of(tx)
        for player_id, game_id in games.items():
            await session.execute(
                update(RacePlayer)
                .where(RacePlayer.race_id == race.id, RacePlayer.player_id == player_id)
                .values(game_id=game_id)
            )
        race = await self._update(
            session,
            race,
            status=RaceStatus.RUNNING,
            starts_at=starts_at,
            ends_at=ends_at,
            version=Race.version + 1,
        )
        await publish(
            session, RaceStarted(race.id, race.invite, race.version, starts_at, dict(games))
        )
        return race

    async def finish(
        self,
        tx: Transaction,
        race: RaceRow,
        finished_at: dt.datetime,
        results: list[dict[str, Any]],
    ) -> RaceRow:
        session = session_of(tx)
        race = await self._update(
            session,
            race,
            status=RaceStatus.FINISHED,
            finished_at=finished_at,
            results=results,
            version=Race.version + 1,
        )
        await publish(session, RaceFinished(race.id, race.invite, race.version))
        return race

    async def close_lobbies(
        self, tx: Transaction, created_before: dt.datetime, now: dt.datetime
    ) -> list[int]:
        session = session_of(tx)
        closed = (
            await session.execute(
                update(Race)
                .where(Race.status == RaceStatus.LOBBY, Race.created_at <= created_before)
                .values(status=RaceStatus.CLOSED, finished_at=now, version=Race.version + 1)
                .returning(Race.id, Race.invite)
            )
        ).all()
        for race_id, invite in closed:
            await publish(session, RaceRoomChanged(race_id, invite))
        return [race_id for race_id, _ in closed]

    async def _update(self, session: AsyncSession, race: RaceRow, **values: Any) -> RaceRow:
        row = (
            await session.execute(
                update(Race).where(Race.id == race.id).values(**values).returning(*_RACE)
            )
        ).one()
        return _race(row)


__all__ = [
    "INVITE_KEY",
    "OPEN_RACE_STATUSES",
    "PostgresRaceStore",
    "RaceRow",
    "RaceStatus",
    "RaceStore",
]
