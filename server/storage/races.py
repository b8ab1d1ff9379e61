"""The queries of race rooms: ``races`` and their seats (``race_players``), the room as shown,
the racers' games for the results, and the room's events (docs/rules.md §4 "Races").

:class:`RaceStore` holds them. The rules (who may join, when a room closes, who becomes host,
when a race is over, how racers rank) are the services'; this module only reads and writes.

Transactions: a room operation is one transaction, opened by :meth:`RaceStore.transaction` and
committed by its caller; the methods taking ``session`` are steps within it. Every transaction
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
from typing import Any

from sqlalchemy import Row, case, delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.codes import GameCode, RuleSet
from server.storage.events import RaceFinished, RaceRoomChanged, RaceStarted, publish
from server.storage.models import (
    OPEN_RACE_STATUSES,
    Game,
    Player,
    PresenceRole,
    PresenceState,
    Race,
    RacePlayer,
    RacePresence,
    RaceStatus,
)
from server.storage.sessions import Sessions

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


@dataclass(frozen=True, slots=True)
class SeatRow:
    """A seat: the racer, their seat number (join order, from 1) and, once started, their game."""

    player_id: int
    seat: int
    game_id: int | None


@dataclass(frozen=True, slots=True)
class PresenceRow:
    """A racer's or watcher's stored presence: its state, and since when (UTC)."""

    state: PresenceState
    since: dt.datetime


@dataclass(frozen=True, slots=True)
class RoomSeatRow:
    """A seat as the room shows it: the racer's name, their game's counters (all None before
    the start) and their presence (None when not on record).

    Attributes:
        status: the game's status (``playing``, ``won``, ``blocked``, ``resigned``).
        elapsed_ms: the game's stored time, None while it is being played.
        game_created_at: when the game began (UTC; a race game begins at ``starts_at``).
        presence: the racer's presence, None when not on record.
    """

    player_id: int
    name: str
    seat: int
    game_id: int | None
    cards_left: int | None
    score: int | None
    moves: int | None
    status: str | None
    elapsed_ms: int | None
    game_created_at: dt.datetime | None
    presence: PresenceRow | None


@dataclass(frozen=True, slots=True)
class WatcherRow:
    """A watcher of a room: their name and presence."""

    player_id: int
    name: str
    presence: PresenceRow


@dataclass(frozen=True, slots=True)
class RacerGameRow:
    """A racer's race game, for the results: its status, score, cards left, moves and stored
    time (``elapsed_ms`` from the start to its end; None while it is being played)."""

    player_id: int
    name: str
    status: str
    score: int
    cards_left: int
    moves: int
    elapsed_ms: int | None


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


class RaceStore:
    """The race rooms' queries over one database.

    Args:
        sessions: the session factory (its failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]:
        """A session for one transaction (``async with store.transaction() as session:``),
        committed by the caller (``await session.commit()``); a failure inside leaves the block
        as a StorageError, the transaction rolled back."""
        return self._sessions()

    async def limit_lock_waits(self, session: AsyncSession, seconds: float) -> None:
        """Make the rest of this transaction fail, rather than wait, when a row it locks stays
        locked by another transaction for more than ``seconds`` (at least 1 ms): the block then
        leaves with :class:`~server.errors.StorageUnavailable` (a stuck session must not hold a
        sweep up)."""
        await session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(seconds * 1000))}"))

    # ------------------------------------------------------------------------- reading rooms

    async def find(
        self, session: AsyncSession, invite: str, *, lock: bool = False
    ) -> RaceRow | None:
        """The race with this (normalized) invite code, or None; ``lock``: its row locked
        (``FOR UPDATE``) until the transaction ends."""
        query = select(*_RACE).where(Race.invite == invite)
        row = (await session.execute(query.with_for_update() if lock else query)).one_or_none()
        return None if row is None else _race(row)

    async def lock(self, session: AsyncSession, race_id: int) -> RaceRow | None:
        """The race, its row locked (``FOR UPDATE``: waits for another transaction holding it,
        up to the lock time-out if one is set); None when there is no such race."""
        rows = await self.lock_all(session, [race_id])
        return rows[0] if rows else None

    async def lock_all(self, session: AsyncSession, race_ids: Iterable[int]) -> list[RaceRow]:
        """The races with these ids (those that exist), each row locked, in id order (the
        order every transaction locks rooms in)."""
        ids = sorted(set(race_ids))
        if not ids:
            return []
        rows = await session.execute(
            select(*_RACE).where(Race.id.in_(ids)).order_by(Race.id).with_for_update()
        )
        return [_race(row) for row in rows]

    async def open_rooms_of(self, session: AsyncSession, player_id: int) -> list[RaceRow]:
        """The open rooms (lobby or running) the player sits in, newest first."""
        rows = await session.execute(
            select(*_RACE)
            .join(RacePlayer, RacePlayer.race_id == Race.id)
            .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_RACE_STATUSES))
            .order_by(Race.created_at.desc(), Race.id.desc())
        )
        return [_race(row) for row in rows]

    async def room_seats(self, session: AsyncSession, race_id: int) -> list[RoomSeatRow]:
        """The room's seats as shown, by seat number."""
        rows = await session.execute(
            select(
                RacePlayer.player_id,
                Player.name,
                RacePlayer.seat,
                RacePlayer.game_id,
                Game.cards_left,
                Game.score,
                Game.moves,
                Game.status,
                Game.elapsed_ms,
                Game.created_at,
                RacePresence.state,
                RacePresence.since,
            )
            .join(Player, Player.id == RacePlayer.player_id)
            .outerjoin(Game, Game.id == RacePlayer.game_id)
            .outerjoin(
                RacePresence,
                (RacePresence.race_id == RacePlayer.race_id)
                & (RacePresence.player_id == RacePlayer.player_id),
            )
            .where(RacePlayer.race_id == race_id)
            .order_by(RacePlayer.seat)
        )
        return [
            RoomSeatRow(
                player_id=r.player_id,
                name=r.name,
                seat=r.seat,
                game_id=r.game_id,
                cards_left=r.cards_left,
                score=r.score,
                moves=r.moves,
                status=r.status,
                elapsed_ms=r.elapsed_ms,
                game_created_at=r.created_at,
                presence=None if r.state is None else PresenceRow(r.state, r.since),
            )
            for r in rows
        ]

    async def room_watchers(
        self, session: AsyncSession, race_id: int, limit: int
    ) -> tuple[list[WatcherRow], int]:
        """At most ``limit`` of the room's watchers — connected ones first, then by since and
        player id — and how many there are in all."""
        rows = (
            await session.execute(
                select(
                    RacePresence.player_id,
                    Player.name,
                    RacePresence.state,
                    RacePresence.since,
                    func.count().over().label("total"),
                )
                .join(Player, Player.id == RacePresence.player_id)
                .where(RacePresence.race_id == race_id, RacePresence.role == PresenceRole.WATCHER)
                .order_by(
                    case((RacePresence.state == PresenceState.CONNECTED, 0), else_=1),
                    RacePresence.since,
                    RacePresence.player_id,
                )
                .limit(limit)
            )
        ).all()
        watchers = [WatcherRow(r.player_id, r.name, PresenceRow(r.state, r.since)) for r in rows]
        return watchers, rows[0].total if rows else 0

    async def racer_games(self, session: AsyncSession, race_id: int) -> list[RacerGameRow]:
        """The race's games (one per racer who started), in no particular order."""
        rows = await session.execute(
            select(
                Game.player_id,
                Player.name,
                Game.status,
                Game.score,
                Game.cards_left,
                Game.moves,
                Game.elapsed_ms,
            )
            .join(Player, Player.id == Game.player_id)
            .where(Game.race_id == race_id)
        )
        return [RacerGameRow(*row) for row in rows]

    async def due(self, session: AsyncSession, now: dt.datetime) -> list[int]:
        """Running races whose ``ends_at`` is ``now`` or earlier (ids)."""
        return list(
            (
                await session.scalars(
                    select(Race.id).where(Race.status == RaceStatus.RUNNING, Race.ends_at <= now)
                )
            ).all()
        )

    # --------------------------------------------------------------------------------- seats

    async def seat(self, session: AsyncSession, race_id: int, player_id: int) -> SeatRow | None:
        """The player's seat in the room, or None."""
        row = (
            await session.execute(
                select(RacePlayer.player_id, RacePlayer.seat, RacePlayer.game_id).where(
                    RacePlayer.race_id == race_id, RacePlayer.player_id == player_id
                )
            )
        ).one_or_none()
        return None if row is None else SeatRow(*row)

    async def seats(self, session: AsyncSession, race_id: int) -> list[SeatRow]:
        """The room's seats, by seat number."""
        rows = await session.execute(
            select(RacePlayer.player_id, RacePlayer.seat, RacePlayer.game_id)
            .where(RacePlayer.race_id == race_id)
            .order_by(RacePlayer.seat)
        )
        return [SeatRow(*row) for row in rows]

    async def seats_taken(self, session: AsyncSession, race_id: int) -> int:
        """How many seats of the room are taken."""
        count = await session.scalar(
            select(func.count()).select_from(RacePlayer).where(RacePlayer.race_id == race_id)
        )
        return count or 0

    async def add_seat(
        self, session: AsyncSession, race_id: int, player_id: int, joined_at: dt.datetime
    ) -> int:
        """Seat the player after the last seat taken (the room is locked by the caller).

        Returns:
            Their seat number (1 in an empty room).
        """
        last = await session.scalar(
            select(func.max(RacePlayer.seat)).where(RacePlayer.race_id == race_id)
        )
        seat = (last or 0) + 1
        await session.execute(
            insert(RacePlayer).values(
                race_id=race_id, player_id=player_id, seat=seat, joined_at=joined_at
            )
        )
        return seat

    async def remove_seat(self, session: AsyncSession, race_id: int, player_id: int) -> None:
        """Free the player's seat (nothing when they have none)."""
        await session.execute(
            delete(RacePlayer).where(
                RacePlayer.race_id == race_id, RacePlayer.player_id == player_id
            )
        )

    async def rooms_held(self, session: AsyncSession, player_id: int) -> int:
        """How many open rooms (lobby or running) the player sits in, counted after locking the
        player's row (``FOR NO KEY UPDATE``, until the transaction ends): their joins and
        creates, from several connections or processes at once, then take turns, so none counts
        before another's seat is in."""
        await session.execute(
            select(Player.id).where(Player.id == player_id).with_for_update(key_share=True)
        )
        count = await session.scalar(
            select(func.count())
            .select_from(RacePlayer)
            .join(Race, Race.id == RacePlayer.race_id)
            .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_RACE_STATUSES))
        )
        return count or 0

    async def gone_racers(self, session: AsyncSession, race_id: int) -> list[int]:
        """The seated racers of the room who are gone, longest gone first (then by player id)."""
        return list(
            (
                await session.scalars(
                    select(RacePresence.player_id)
                    .join(
                        RacePlayer,
                        (RacePlayer.race_id == RacePresence.race_id)
                        & (RacePlayer.player_id == RacePresence.player_id),
                    )
                    .where(
                        RacePresence.race_id == race_id,
                        RacePresence.state == PresenceState.GONE,
                    )
                    .order_by(RacePresence.since, RacePresence.player_id)
                )
            ).all()
        )

    async def next_host(
        self, session: AsyncSession, race_id: int, *, connected_only: bool
    ) -> int | None:
        """The seated racer in the lowest seat who is connected; else (unless
        ``connected_only``) the racer in the lowest seat, whatever their presence (none on
        record included); None when there is nobody."""
        connected = RacePresence.state == PresenceState.CONNECTED
        query = (
            select(RacePlayer.player_id)
            .outerjoin(
                RacePresence,
                (RacePresence.race_id == RacePlayer.race_id)
                & (RacePresence.player_id == RacePlayer.player_id),
            )
            .where(RacePlayer.race_id == race_id)
        )
        if connected_only:
            query = query.where(connected)
        return await session.scalar(
            query.order_by(case((connected, 0), else_=1), RacePlayer.seat).limit(1)
        )

    # --------------------------------------------------------------------- writing the race

    async def create(
        self,
        session: AsyncSession,
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
        await self.add_seat(session, race.id, host_id, now)
        await publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def set_host(self, session: AsyncSession, race: RaceRow, host_id: int) -> RaceRow:
        """Give the host's role to ``host_id`` (not announced: the caller announces)."""
        return await self._update(session, race, host_id=host_id)

    async def close(self, session: AsyncSession, race: RaceRow, at: dt.datetime) -> RaceRow:
        """Close the room (``finished_at`` = ``at``; not announced: the caller announces)."""
        return await self._update(session, race, status=RaceStatus.CLOSED, finished_at=at)

    async def announce(self, session: AsyncSession, race: RaceRow) -> RaceRow:
        """Bump the room's ``version`` and announce its change (``race_room``)."""
        race = await self._update(session, race, version=Race.version + 1)
        await publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def start(
        self,
        session: AsyncSession,
        race: RaceRow,
        starts_at: dt.datetime,
        ends_at: dt.datetime,
        games: Mapping[int, int],
    ) -> RaceRow:
        """The race runs from ``starts_at`` to ``ends_at``: each racer's seat gets their game
        (``games``: ``{player_id: game_id}``, the games inserted in this transaction), the
        version grows and the start is announced (``race_start``, with ``games``)."""
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
        session: AsyncSession,
        race: RaceRow,
        finished_at: dt.datetime,
        results: list[dict[str, Any]],
    ) -> RaceRow:
        """Store the results (JSON objects) of a race that is over, bump its version and
        announce it (``race_finished``)."""
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
        self, session: AsyncSession, created_before: dt.datetime, now: dt.datetime
    ) -> list[int]:
        """Close every lobby created at ``created_before`` or earlier (``finished_at`` =
        ``now``, version bumped), each announced (``race_room`` without a version).

        Returns:
            The ids of the rooms closed.
        """
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
    "PresenceRow",
    "RaceRow",
    "RaceStatus",
    "RaceStore",
    "RacerGameRow",
    "RoomSeatRow",
    "SeatRow",
    "WatcherRow",
]
