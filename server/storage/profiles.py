"""A player's profile as stored: their row, their daily games with each one's rank on its
date's board, and their finished races, read together from one snapshot.

:class:`ProfileStore` is the contract :class:`server.services.profiles.ProfileService` depends
on; :class:`PostgresProfileStore` keeps it in PostgreSQL. Nothing here is a counter: every
figure is read from the stored games at read time, in one REPEATABLE READ transaction, so a
profile read while games finish is the profile before or after each finish, never a mix.
What a profile shows of these rows (the streaks, shares of par, what stays secret) is the
service's.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import (
    Boolean,
    ColumnElement,
    ScalarSelect,
    case,
    func,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB

from server.engine.actions import Status
from server.storage.board_queries import better_on_its_date
from server.storage.enums import RaceStatus
from server.storage.leaderboards import MAX_PLAYER_ID
from server.storage.models import Game, Player, Race
from server.storage.replicas import ReadRouter, RoutedStore
from server.storage.sessions import Sessions
from server.storage.today import today_sql


@dataclass(frozen=True, slots=True)
class DailyResult:
    """One of the player's daily games that no moderator hid (docs/rules.md §4).

    Attributes:
        date: its UTC date.
        status: where the game stands (playing, won, blocked or resigned).
        score: its score (so far, while playing).
        moves: its moves.
        elapsed_ms: its playing time in ms once ended, else None.
        code: the date's game code — for the service's par only: never shown while secret.
        rank: its rank on the date's board (1 and up; tied entries share it), or None when it
            is no entry (not won or blocked).
    """

    date: dt.date
    status: Status
    score: int
    moves: int
    elapsed_ms: int | None
    code: str
    rank: int | None


@dataclass(frozen=True, slots=True)
class StoredProfile:
    """What one read of a player's profile found.

    Attributes:
        player_id: the player.
        name: their display name.
        created_at: when they registered (aware, UTC).
        today: the daily boundary's current UTC date at the read (the database's clock, or
            the simulated clock's date that was given).
        days: their daily games not hidden, by date (oldest first).
        races_played: finished races they had a game in.
        races_won: of those, the races whose results rank them first.
    """

    player_id: int
    name: str
    created_at: dt.datetime
    today: dt.date
    days: tuple[DailyResult, ...]
    races_played: int
    races_won: int


class ProfileStore(Protocol):
    """Where a player's profile is read. Every method may raise
    :class:`~server.errors.StorageError` when the database fails."""

    async def read(self, player_id: int, pinned_today: dt.date | None) -> StoredProfile | None:
        """The player's profile, every part from one snapshot, or None when there is no such
        player (also for ids outside 1..2⁶³−1).

        Args:
            player_id: the player.
            pinned_today: the date a simulated clock says it is (it then decides the daily
                boundary), or None for the database's clock.
        """
        ...


#: The race's results rank the game's player first (``results`` is the ranked list of
#: :func:`server.services.rooms.rank_results`, each racer's object with ``player_id`` and
#: ``rank``; every racer sharing rank 1 has won it).
_WON = Race.results.op("@>", return_type=Boolean)(
    type_coerce(
        func.jsonb_build_array(func.jsonb_build_object("player_id", Game.player_id, "rank", 1)),
        JSONB,
    )
)


def _finished_races(*more: ColumnElement[bool]) -> ScalarSelect[int]:
    """How many of the player's race games belong to a finished race (and meet ``more``)."""
    return (
        select(func.count())
        .select_from(Game)
        .join(Race, Race.id == Game.race_id)
        .where(
            Game.player_id == Player.id,
            Game.mode == literal_column("'race'"),
            Race.status == RaceStatus.FINISHED,
            *more,
        )
        .scalar_subquery()
    )


#: The player's name and registration, and their finished races and those they won (both
#: through ``ix_games_player_id``): add the player's id to its WHERE.
_PLAYER = select(
    Player.name,
    Player.created_at,
    _finished_races().label("races_played"),
    _finished_races(_WON).label("races_won"),
)

#: A daily game not hidden that is an entry of its date's board (docs/rules.md §4).
_ON_BOARD = Game.status.in_((Status.WON, Status.BLOCKED))
#: The player's daily games that no moderator hid, oldest date first, each entry of its board
#: with its rank there (:func:`~server.storage.board_queries.better_on_its_date`): add the
#: player's id to its WHERE.
_DAYS = (
    select(
        Game.daily_date,
        Game.status,
        Game.score,
        Game.moves,
        Game.elapsed_ms,
        Game.code,
        case((_ON_BOARD, better_on_its_date() + 1), else_=None).label("rank"),
    )
    .where(Game.mode == literal_column("'daily'"), Game.hidden_at.is_(None))
    .order_by(Game.daily_date)
)


class PostgresProfileStore:
    """:class:`ProfileStore` over PostgreSQL's ``players``, ``games`` (ranks as the board
    counts them: ``leaderboard_counts`` and the board index) and ``races``.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def read(self, player_id: int, pinned_today: dt.date | None) -> StoredProfile | None:
        """Three statements in one REPEATABLE READ transaction (one snapshot): the player's
        row with their finished races, today's date, and their daily games not hidden, each
        won or blocked one with its rank on its date's board.

        Args:
            player_id: the player.
            pinned_today: a simulated clock's date, or None for the database's.

        Returns:
            The profile as stored, or None when there is no such player.

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        async with self._sessions() as session:
            conn = await session.connection(
                execution_options={"isolation_level": "REPEATABLE READ"}
            )
            player = (await conn.execute(_PLAYER.where(Player.id == player_id))).first()
            if player is None:
                return None
            today = (await conn.execute(select(today_sql(pinned_today)))).scalar_one()
            rows = (await conn.execute(_DAYS.where(Game.player_id == player_id))).all()
            await session.commit()
        days = tuple(
            DailyResult(
                date=row.daily_date,
                status=Status(row.status),
                score=row.score,
                moves=row.moves,
                elapsed_ms=row.elapsed_ms,
                code=row.code,
                rank=None if row.rank is None else int(row.rank),
            )
            for row in rows
        )
        return StoredProfile(
            player_id=player_id,
            name=player.name,
            created_at=player.created_at,
            today=today,
            days=days,
            races_played=int(player.races_played),
            races_won=int(player.races_won),
        )


class ReplicaProfileStore:
    """:class:`ProfileStore` read on the database's replicas while they keep up (see
    :class:`~server.storage.replicas.ReadRouter`); a player a replica does not know yet (just
    registered) is read on the primary.

    Args:
        router: the router between the primary and the replicas.
    """

    def __init__(self, router: ReadRouter) -> None:
        self._stores = RoutedStore(router, PostgresProfileStore)

    async def read(self, player_id: int, pinned_today: dt.date | None) -> StoredProfile | None:
        """See :meth:`PostgresProfileStore.read`."""
        return await self._stores.read(
            lambda store: store.read(player_id, pinned_today),
            complete=lambda stored: stored is not None,
        )


__all__ = [
    "DailyResult",
    "PostgresProfileStore",
    "ProfileStore",
    "ReplicaProfileStore",
    "StoredProfile",
]
