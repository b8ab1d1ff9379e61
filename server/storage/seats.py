"""The queries of the seats of race rooms (``race_players``) and of what a room shows: its
racers with their games' counters and presence, its watchers, and the racers' games for the
results.

:class:`SeatStore` is their contract, as :attr:`server.storage.races.RaceStore.seats`;
:class:`PostgresSeatStore` keeps it in PostgreSQL. Every method is a step of the caller's
:class:`~server.storage.transactions.Transaction` (see :mod:`server.storage.races`: the room's
``races`` row locked first by a transaction that changes it). Rows leave as frozen dataclasses;
times are UTC.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Subquery, case, delete, func, insert, or_, select

from server.storage.enums import OPEN_RACE_STATUSES, PresenceRole, PresenceState
from server.storage.models import Game, GameAction, Player, Race, RacePlayer, RacePresence
from server.storage.transactions import Transaction, session_of

#: ``race_presence`` joined to ``race_players``: a seat's presence (none on record: NULLs).
_SEAT_PRESENCE = (RacePresence.race_id == RacePlayer.race_id) & (
    RacePresence.player_id == RacePlayer.player_id
)


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
    time (``elapsed_ms`` from the start to its end; None while it is being played), its id
    (the results link to its replay), and when its last removal still in effect was made.

    Attributes:
        last_removal_at: the time (UTC, as stored with the action) of the game's last removal
            that no undo took back (docs/rules.md §2 "Undo": an undo takes back the most recent
            removal or draw not yet taken back); None when every removal was taken back or
            there was none.
    """

    player_id: int
    name: str
    status: str
    score: int
    cards_left: int
    moves: int
    elapsed_ms: int | None
    game_id: int
    last_removal_at: dt.datetime | None


class SeatStore(Protocol):
    """The seats' and the room view's steps, each in the caller's transaction."""

    async def find(self, tx: Transaction, race_id: int, player_id: int) -> SeatRow | None:
        """The player's seat in the room, or None."""
        ...

    async def all(self, tx: Transaction, race_id: int) -> list[SeatRow]:
        """The room's seats, by seat number."""
        ...

    async def taken(self, tx: Transaction, race_id: int) -> int:
        """How many seats of the room are taken."""
        ...

    async def add(
        self, tx: Transaction, race_id: int, player_id: int, joined_at: dt.datetime
    ) -> int:
        """Seat the player after the last seat taken (the room is locked by the caller).

        Returns:
            Their seat number (1 in an empty room).
        """
        ...

    async def remove(self, tx: Transaction, race_id: int, player_id: int) -> None:
        """Free the player's seat (nothing when they have none)."""
        ...

    async def rooms_held(self, tx: Transaction, player_id: int) -> int:
        """How many open rooms (lobby or running) the player sits in, counted after locking the
        player's row (``FOR NO KEY UPDATE``, until the transaction ends): their joins and
        creates, from several connections or processes at once, then take turns, so none counts
        before another's seat is in."""
        ...

    async def gone_racers(self, tx: Transaction, race_id: int) -> list[int]:
        """The seated racers of the room who are gone, longest gone first (then by player id)."""
        ...

    async def next_host(self, tx: Transaction, race_id: int, *, connected_only: bool) -> int | None:
        """The seated racer in the lowest seat who is connected; else (unless
        ``connected_only``) the racer in the lowest seat, whatever their presence (none on
        record included); None when there is nobody."""
        ...

    async def shown(self, tx: Transaction, race_id: int) -> list[RoomSeatRow]:
        """The room's seats as shown, by seat number."""
        ...

    async def watchers(
        self, tx: Transaction, race_id: int, limit: int
    ) -> tuple[list[WatcherRow], int]:
        """At most ``limit`` of the room's watchers — connected ones first, then by since and
        player id — and how many there are in all."""
        ...

    async def games(self, tx: Transaction, race_id: int) -> list[RacerGameRow]:
        """The race's games (one per racer who started), in no particular order, each with the
        time of its last removal still in effect (read from its action log)."""
        ...


class PostgresSeatStore:
    """:class:`SeatStore` in PostgreSQL (``race_players``, joined to ``players``, ``games`` and
    ``race_presence``), each query in the caller's session."""

    async def find(self, tx: Transaction, race_id: int, player_id: int) -> SeatRow | None:
        session = session_of(tx)
        row = (
            await session.execute(
                select(RacePlayer.player_id, RacePlayer.seat, RacePlayer.game_id).where(
                    RacePlayer.race_id == race_id, RacePlayer.player_id == player_id
                )
            )
        ).one_or_none()
        return None if row is None else SeatRow(*row)

    async def all(self, tx: Transaction, race_id: int) -> list[SeatRow]:
        session = session_of(tx)
        rows = await session.execute(
            select(RacePlayer.player_id, RacePlayer.seat, RacePlayer.game_id)
            .where(RacePlayer.race_id == race_id)
            .order_by(RacePlayer.seat)
        )
        return [SeatRow(*row) for row in rows]

    async def taken(self, tx: Transaction, race_id: int) -> int:
        session = session_of(tx)
        count = await session.scalar(
            select(func.count()).select_from(RacePlayer).where(RacePlayer.race_id == race_id)
        )
        return count or 0

    async def add(
        self, tx: Transaction, race_id: int, player_id: int, joined_at: dt.datetime
    ) -> int:
        session = session_of(tx)
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

    async def remove(self, tx: Transaction, race_id: int, player_id: int) -> None:
        session = session_of(tx)
        await session.execute(
            delete(RacePlayer).where(
                RacePlayer.race_id == race_id, RacePlayer.player_id == player_id
            )
        )

    async def rooms_held(self, tx: Transaction, player_id: int) -> int:
        session = session_of(tx)
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

    async def gone_racers(self, tx: Transaction, race_id: int) -> list[int]:
        session = session_of(tx)
        return list(
            (
                await session.scalars(
                    select(RacePresence.player_id)
                    .join(RacePlayer, _SEAT_PRESENCE)
                    .where(
                        RacePresence.race_id == race_id,
                        RacePresence.state == PresenceState.GONE,
                    )
                    .order_by(RacePresence.since, RacePresence.player_id)
                )
            ).all()
        )

    async def next_host(self, tx: Transaction, race_id: int, *, connected_only: bool) -> int | None:
        session = session_of(tx)
        connected = RacePresence.state == PresenceState.CONNECTED
        query = (
            select(RacePlayer.player_id)
            .outerjoin(RacePresence, _SEAT_PRESENCE)
            .where(RacePlayer.race_id == race_id)
        )
        if connected_only:
            query = query.where(connected)
        return await session.scalar(
            query.order_by(case((connected, 0), else_=1), RacePlayer.seat).limit(1)
        )

    async def shown(self, tx: Transaction, race_id: int) -> list[RoomSeatRow]:
        session = session_of(tx)
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
            .outerjoin(RacePresence, _SEAT_PRESENCE)
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

    async def watchers(
        self, tx: Transaction, race_id: int, limit: int
    ) -> tuple[list[WatcherRow], int]:
        session = session_of(tx)
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

    async def games(self, tx: Transaction, race_id: int) -> list[RacerGameRow]:
        session = session_of(tx)
        last = _last_removals(race_id)
        rows = await session.execute(
            select(
                Game.player_id,
                Player.name,
                Game.status,
                Game.score,
                Game.cards_left,
                Game.moves,
                Game.elapsed_ms,
                Game.id,
                last.c.created_at,
            )
            .join(Player, Player.id == Game.player_id)
            .outerjoin(last, last.c.game_id == Game.id)
            .where(Game.race_id == race_id)
        )
        return [RacerGameRow(*row) for row in rows]


def _last_removals(race_id: int) -> Subquery:
    """Each game of the race that has a removal still in effect: its ``game_id`` and the
    ``created_at`` of the last such removal.

    The undo history is a stack (docs/rules.md §2 "Undo"): a removal or draw pushes, an undo
    pops the most recent one not yet taken back. After each action the log's *depth* is the
    number of pushes less the number of undos so far; an action that pushed to depth d was
    taken back exactly when the depth later fell below d. So a removal is still in effect when
    no later action's depth is below its own.
    """
    push = case((GameAction.kind == "undo", -1), else_=1)
    steps = (
        select(
            GameAction.game_id,
            GameAction.seq,
            GameAction.kind,
            GameAction.created_at,
            func.sum(push)
            .over(partition_by=GameAction.game_id, order_by=GameAction.seq)
            .label("depth"),
        )
        .join(Game, Game.id == GameAction.game_id)
        .where(Game.race_id == race_id)
        .subquery("steps")
    )
    marked = select(
        steps,
        func.min(steps.c.depth)
        .over(partition_by=steps.c.game_id, order_by=steps.c.seq, rows=(1, None))
        .label("lowest_after"),
    ).subquery("marked")
    kept = (
        select(
            marked.c.game_id,
            marked.c.created_at,
            func.row_number()
            .over(partition_by=marked.c.game_id, order_by=marked.c.seq.desc())
            .label("newest"),
        )
        .where(
            marked.c.kind == "remove",
            or_(marked.c.lowest_after.is_(None), marked.c.lowest_after >= marked.c.depth),
        )
        .subquery("kept")
    )
    return (
        select(kept.c.game_id, kept.c.created_at)
        .where(kept.c.newest == 1)
        .subquery("last_removals")
    )


__all__ = [
    "PostgresSeatStore",
    "PresenceRow",
    "RacerGameRow",
    "RoomSeatRow",
    "SeatRow",
    "SeatStore",
    "WatcherRow",
]
