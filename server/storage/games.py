"""The games aggregate's queries: a game's row, its action log and its race's window.

Every action is stored by the group commit (:mod:`server.storage.commits`); this module holds
the rest: creating games, reading them back (for the live-game cache and the REST summary),
resigning, marking a game hinted, and whether its player is banned from ranked play.

:class:`GameStore` is the contract :class:`server.services.games.GameService` (and its
live-game cache) depends on; :class:`PostgresGameStore` keeps it in PostgreSQL (an in-memory
one for tests keeps it in ``tests/fakes/games.py``). Every method raises only
:class:`~server.errors.StorageError` for a database failure (through :class:`Sessions`). The
rules (who may see what, when a daily or a race is over, what a ban refuses) are the service's.

Past 400 lines because the contract and its PostgreSQL keeping sit side by side, as in every
store here: the Protocol's docstrings are what the in-memory store is written and tested to.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.codes import GameCode
from server.engine.game import ActionKind, Status
from server.storage import moderation
from server.storage.enums import RaceStatus
from server.storage.events import RaceProgress, publish
from server.storage.models import Game as GameRow
from server.storage.models import GameAction, Player, Race
from server.storage.moderation import PlayerRecord
from server.storage.sessions import Sessions
from server.storage.single import read_single, write_single
from server.storage.today import DATABASE_TODAY_SQL, today_sql
from server.storage.transactions import Transaction, session_of


class GameMode(StrEnum):
    """How a game is played: free play (unranked), the daily challenge, or a race. The value is
    the ``games.mode`` column's."""

    FREE = "free"
    DAILY = "daily"
    RACE = "race"

    @property
    def ranked(self) -> bool:
        """Ranked games end when blocked (docs/rules.md §4 "Ranked play")."""
        return self is not GameMode.FREE


@dataclass(frozen=True, slots=True)
class RaceWindow:
    """When a race game may be played: from ``starts_at`` (the deal's release) to ``ends_at``
    (UTC)."""

    race_id: int
    starts_at: dt.datetime
    ends_at: dt.datetime


@dataclass(frozen=True, slots=True)
class StoredAction:
    """One row of a game's action log (``at``: UTC)."""

    seq: int
    kind: ActionKind
    pos: int | None
    card: str
    score_after: int
    at: dt.datetime


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A game's stored row (times UTC, ``elapsed_ms`` in ms), with its player's name and, for a
    race game, its race's status and invite code (None for other games; a store that does not
    keep invites may leave ``race_invite`` None)."""

    id: int
    player_id: int
    player_name: str
    mode: GameMode
    code: GameCode
    daily_date: dt.date | None
    status: Status
    score: int
    moves: int
    undos: int
    seq: int
    elapsed_ms: int | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    hinted: bool
    race_status: RaceStatus | None
    race_invite: str | None = None


@dataclass(frozen=True, slots=True)
class StoredGame:
    """What rebuilds a game in memory: its row and its action log, read in one snapshot.

    Attributes:
        actions: ``(kind, pos)`` of each stored action, in ``seq`` order.
        race: the race's window for a race game, else None.
    """

    id: int
    player_id: int
    mode: GameMode
    code: GameCode
    daily_date: dt.date | None
    status: Status
    score: int
    seq: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    elapsed_ms: int | None
    hinted: bool
    actions: tuple[tuple[str, int | None], ...]
    race: RaceWindow | None


@dataclass(frozen=True, slots=True)
class GameHead:
    """How far a stored game is: its ``seq`` and ``status``."""

    id: int
    seq: int
    status: Status


class ReplayStore(Protocol):
    """Where games are read to be replayed. May raise :class:`~server.errors.StorageError`."""

    async def replay_rows(self, game_id: int) -> tuple[GameRecord, tuple[StoredAction, ...]] | None:
        """A game's record and then its action log, from one database; None when there is no
        such game."""
        ...


class GameStore(ReplayStore, Protocol):
    """Where games, their action logs and their races' windows are read, and games are created,
    resigned and marked hinted (an action is stored by the group commit, see
    :mod:`server.storage.commits`). Times are aware UTC datetimes, durations whole ms. Every
    method may raise :class:`~server.errors.StorageError` when the database fails (nothing is
    changed then)."""

    async def create(
        self,
        player_id: int,
        mode: GameMode,
        code: GameCode,
        status: Status,
        score: int,
        created_at: dt.datetime,
        *,
        daily_date: dt.date | None = None,
        pinned_today: dt.date | None = None,
    ) -> int | None:
        """Store a new game with no action yet (``seq``, ``moves`` and ``undos`` 0).

        Args:
            player_id: its player (an existing player's id).
            mode: free or daily (race games are made with their race, see
                :meth:`insert_race_games`).
            code: its deal.
            status, score: the engine's for the fresh game.
            created_at: when it was dealt (its elapsed time counts from there).
            daily_date: the UTC date of a daily game (given exactly for ``mode`` daily).
            pinned_today: the UTC date a simulated clock says it is, deciding in place of the
                database's clock whether ``daily_date`` is still open; None leaves it to the
                database's clock.

        Returns:
            The new game's id (1 and up); None for a daily game whose date is over by the
            database's clock (or ``pinned_today``): nothing was stored.

        Raises:
            StorageConflict: the player already has a game of that daily date
                (``uq_games_daily_player``); nothing was stored.
        """
        ...

    async def daily_game_id(self, player_id: int, date: dt.date) -> int | None:
        """The id of the player's daily game of the UTC ``date``, or None."""
        ...

    async def unfinished(
        self, player_id: int, today: dt.date, now: dt.datetime, limit: int
    ) -> list[GameHead]:
        """The player's games that can still be played, newest first (by ``created_at``, then
        id), at most ``limit``: playing, or blocked in free play; a daily only of ``today``
        (UTC) or later; a race game only of a running race that has started by ``now``."""
        ...

    async def record(self, game_id: int) -> GameRecord | None:
        """A game's row with its player's name and, for a race game, its race's status and
        invite; None when there is no such game."""
        ...

    async def actions(self, game_id: int) -> tuple[StoredAction, ...]:
        """A game's action log, in ``seq`` order (1, 2, …); empty for an unknown game."""
        ...

    async def load(self, game_id: int) -> StoredGame | None:
        """A game's row, its action log and its race's window, read as of one moment (a
        concurrent writer cannot split them); None when there is no such game."""
        ...

    async def head(self, game_id: int) -> GameHead | None:
        """How far the stored game is (its ``seq`` and ``status``); None when there is no
        such game."""
        ...

    async def resign(
        self,
        game_id: int,
        *,
        seq: int,
        status: Status,
        resigned: Status,
        finished_at: dt.datetime | None,
        elapsed_ms: int | None,
        pinned_today: dt.date | None,
        lock_timeout_ms: int,
        event: RaceProgress | None,
    ) -> bool:
        """Store a resignation: the row moves from ``status`` to ``resigned`` (with
        ``finished_at`` and ``elapsed_ms``) only if it is still at ``seq`` and ``status`` and,
        for a daily, its date is still open by the database's clock (or ``pinned_today``);
        ``event`` is published with it, in the same transaction.

        Args:
            lock_timeout_ms: how long the update may wait for a row locked elsewhere, in ms.

        Returns:
            Whether it was stored (False: no such game, the row had moved on, or the daily is
            over; nothing changed).

        Raises:
            StorageError: also when the row stayed locked past ``lock_timeout_ms``; nothing
                was stored.
        """
        ...

    async def mark_hinted(self, game_id: int) -> None:
        """Record that the game's player asked for a hint (``hinted`` stays true)."""
        ...

    async def ban_of(self, player_id: int) -> PlayerRecord | None:
        """The player's record (``banned_at`` UTC, ``ban_reason``) when they are banned from
        ranked play, else None (also for an unknown player)."""
        ...

    async def insert_race_games(
        self,
        tx: Transaction,
        race_id: int,
        code: GameCode,
        status: Status,
        score: int,
        player_ids: Sequence[int],
        starts_at: dt.datetime,
    ) -> dict[int, int]:
        """Insert one race game per player in the race's transaction ``tx`` (a
        :class:`~server.storage.races.RaceStore`'s; not committed here: rolled back with it);
        each is created at ``starts_at`` (its elapsed time counts from there).

        Returns:
            ``{player_id: game_id}``.
        """
        ...


#: A new game, sent through the driver itself (as the group commit's batch): $1 player, $2 code,
#: $3 rules, $4 deal version, $5 mode, $6 status, $7 score, $8 created_at (UTC).
INSERT_GAME_SQL = """
    INSERT INTO games (player_id, code, rules, deal_version, mode, status, score,
                       moves, undos, seq, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 0, 0, 0, $8)
    RETURNING id
"""
#: A daily game, inserted only while its date ($9) is open by the database's clock, or by the
#: pinned date ($10) when a simulated clock decides (as every action on it is stored, see
#: :mod:`server.storage.commits`); no row comes back otherwise.
INSERT_DAILY_GAME_SQL = f"""
    INSERT INTO games (player_id, code, rules, deal_version, mode, status, score,
                       moves, undos, seq, created_at, daily_date)
    SELECT $1, $2, $3, $4, $5, $6, $7, 0, 0, 0, $8, $9::date
     WHERE $9::date >= COALESCE($10::date, {DATABASE_TODAY_SQL})
    RETURNING id
"""


#: A game's row, its action log (kinds and positions in ``seq`` order) and its race's window,
#: in one statement ($1: the game's id).
LOAD_GAME_SQL = """
    SELECT g.id, g.player_id, g.mode, g.code, g.daily_date, g.status, g.score, g.seq,
           g.created_at, g.finished_at, g.elapsed_ms, g.hinted, g.race_id,
           r.starts_at, r.ends_at,
           COALESCE(a.kinds, '{}') AS kinds, COALESCE(a.positions, '{}') AS positions
      FROM games g
      LEFT JOIN races r ON r.id = g.race_id
      LEFT JOIN LATERAL (
            SELECT array_agg(ga.kind ORDER BY ga.seq) AS kinds,
                   array_agg(ga.pos ORDER BY ga.seq) AS positions
              FROM game_actions ga
             WHERE ga.game_id = g.id
           ) a ON true
     WHERE g.id = $1
"""

#: How far a stored game is ($1: its id).
GAME_HEAD_SQL = "SELECT seq, status FROM games WHERE id = $1"


class PostgresGameStore:
    """:class:`GameStore` in PostgreSQL: rows of ``games`` and ``game_actions``, races'
    windows from ``races``, bans from ``players``; a daily's date is closed by the database's
    clock (``statement_timestamp()``), as for every action the group commit stores.

    Args:
        sessions: the storage sessions (failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def create(
        self,
        player_id: int,
        mode: GameMode,
        code: GameCode,
        status: Status,
        score: int,
        created_at: dt.datetime,
        *,
        daily_date: dt.date | None = None,
        pinned_today: dt.date | None = None,
    ) -> int | None:
        """Store a new game with no action yet.

        Returns:
            The game's id; None for a daily game whose date is over by the database's clock
            (or ``pinned_today``): nothing was stored.

        Raises:
            StorageConflict: the player already has a game of that daily date.
            StorageOutcomeUnknown: the insert was sent and its commit not confirmed, or it
                came back committed on the primary alone and its replication could not be
                confirmed: the game may be stored (:mod:`server.storage.replication`).
            StorageError: the database failed; nothing was stored.
        """
        arguments: list[object] = [
            player_id,
            str(code),
            code.rules.value,
            code.version.value,
            mode.value,
            status.value,
            score,
            created_at,
        ]
        statement = INSERT_GAME_SQL
        if daily_date is not None:
            arguments += [daily_date, pinned_today]
            statement = INSERT_DAILY_GAME_SQL
        # One statement through the driver, its own implicit transaction (one round trip).
        game_id: int | None = await write_single(self._sessions.engine, statement, arguments)
        return game_id

    async def daily_game_id(self, player_id: int, date: dt.date) -> int | None:
        """The id of the player's game of one daily date, or None."""
        async with self._sessions() as session:
            return await session.scalar(
                select(GameRow.id).where(
                    GameRow.player_id == player_id,
                    GameRow.mode == GameMode.DAILY.value,
                    GameRow.daily_date == date,
                )
            )

    async def unfinished(
        self, player_id: int, today: dt.date, now: dt.datetime, limit: int
    ) -> list[GameHead]:
        """The player's games that can still be played, newest first: playing, or blocked in
        free play; a daily only of ``today`` or later; a race game only of a running race that
        has started by ``now``."""
        async with self._sessions() as session:
            rows = (
                await session.execute(
                    select(GameRow.id, GameRow.seq, GameRow.status)
                    .where(
                        GameRow.player_id == player_id,
                        (GameRow.status == Status.PLAYING.value)
                        | (
                            (GameRow.status == Status.BLOCKED.value)
                            & (GameRow.mode == GameMode.FREE.value)
                        ),
                        (GameRow.daily_date.is_(None)) | (GameRow.daily_date >= today),
                        GameRow.race_id.is_(None)
                        | GameRow.race_id.in_(
                            select(Race.id).where(Race.status == "running", Race.starts_at <= now)
                        ),
                    )
                    .order_by(GameRow.created_at.desc(), GameRow.id.desc())
                    .limit(limit)
                )
            ).all()
        return [GameHead(row.id, row.seq, Status(row.status)) for row in rows]

    async def record(self, game_id: int) -> GameRecord | None:
        """A game's row with its player's name and its race's status and invite, or None."""
        async with self._sessions() as session:
            found = (
                await session.execute(
                    select(GameRow, Player.name, Race.status, Race.invite)
                    .join(Player, Player.id == GameRow.player_id)
                    .outerjoin(Race, Race.id == GameRow.race_id)
                    .where(GameRow.id == game_id)
                )
            ).first()
        if found is None:
            return None
        row, name, race_status, race_invite = found
        return GameRecord(
            id=row.id,
            player_id=row.player_id,
            player_name=name,
            mode=GameMode(row.mode),
            code=GameCode.parse(row.code),
            daily_date=row.daily_date,
            status=Status(row.status),
            score=row.score,
            moves=row.moves,
            undos=row.undos,
            seq=row.seq,
            elapsed_ms=row.elapsed_ms,
            created_at=row.created_at,
            finished_at=row.finished_at,
            hinted=row.hinted,
            race_status=None if race_status is None else RaceStatus(race_status),
            race_invite=race_invite,
        )

    async def actions(self, game_id: int) -> tuple[StoredAction, ...]:
        """A game's action log, in ``seq`` order."""
        async with self._sessions() as session:
            rows = (
                await session.scalars(
                    select(GameAction).where(GameAction.game_id == game_id).order_by(GameAction.seq)
                )
            ).all()
        return tuple(
            StoredAction(r.seq, ActionKind(r.kind), r.pos, r.card, r.score_after, r.created_at)
            for r in rows
        )

    async def replay_rows(self, game_id: int) -> tuple[GameRecord, tuple[StoredAction, ...]] | None:
        """A game's :meth:`record` and then its :meth:`actions` (see :class:`ReplayStore`)."""
        record = await self.record(game_id)
        return None if record is None else (record, await self.actions(game_id))

    async def load(self, game_id: int) -> StoredGame | None:
        """A game's row, its action log and its race's window, read in one statement (one
        snapshot: a concurrent writer cannot split them), or None when there is no such
        game."""
        row = await read_single(self._sessions.engine, LOAD_GAME_SQL, [game_id])
        if row is None:
            return None
        race = None
        if row["race_id"] is not None:
            assert row["starts_at"] is not None and row["ends_at"] is not None
            race = RaceWindow(row["race_id"], row["starts_at"], row["ends_at"])
        return StoredGame(
            id=row["id"],
            player_id=row["player_id"],
            mode=GameMode(row["mode"]),
            code=GameCode.parse(row["code"]),
            daily_date=row["daily_date"],
            status=Status(row["status"]),
            score=row["score"],
            seq=row["seq"],
            created_at=row["created_at"],
            finished_at=row["finished_at"],
            elapsed_ms=row["elapsed_ms"],
            hinted=row["hinted"],
            actions=tuple(zip(row["kinds"], row["positions"], strict=True)),
            race=race,
        )

    async def head(self, game_id: int) -> GameHead | None:
        """How far the stored game is, or None when there is no such game (one statement
        through the driver, as :meth:`load`)."""
        row = await read_single(self._sessions.engine, GAME_HEAD_SQL, [game_id])
        return None if row is None else GameHead(game_id, row["seq"], Status(row["status"]))

    async def resign(
        self,
        game_id: int,
        *,
        seq: int,
        status: Status,
        resigned: Status,
        finished_at: dt.datetime | None,
        elapsed_ms: int | None,
        pinned_today: dt.date | None,
        lock_timeout_ms: int,
        event: RaceProgress | None,
    ) -> bool:
        """Store a resignation: the row moves from ``status`` to ``resigned`` if it is still at
        ``seq`` and ``status`` and, for a daily, its date is still open by the database's clock;
        ``event`` is published with it.

        Args:
            lock_timeout_ms: how long the update may wait for the row's lock, in ms.

        Returns:
            Whether it was stored (False: the row had moved on, or the daily is over).

        Raises:
            StorageError: the database failed, or the row stayed locked past the lock timeout;
                nothing was stored.
        """
        async with self._sessions() as session:
            # A row locked elsewhere delays only this resignation, and not for ever.
            await session.execute(text(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}"))
            moved = await session.execute(
                update(GameRow)
                .where(
                    GameRow.id == game_id,
                    GameRow.seq == seq,
                    GameRow.status == status.value,
                    # The database's clock decides a daily's end, as for actions.
                    GameRow.daily_date.is_(None) | (GameRow.daily_date >= today_sql(pinned_today)),
                )
                .values(status=resigned.value, finished_at=finished_at, elapsed_ms=elapsed_ms)
            )
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                return False
            if event is not None:
                publish(session, event)
            await session.commit()
        return True

    async def mark_hinted(self, game_id: int) -> None:
        """Record that the game's player asked for a hint."""
        async with self._sessions() as session:
            await session.execute(update(GameRow).where(GameRow.id == game_id).values(hinted=True))
            await session.commit()

    async def ban_of(self, player_id: int) -> PlayerRecord | None:
        """The player's record when they are banned (one short read), else None.

        Raises:
            StorageError: the database failed.
        """
        return await moderation.ban_of(self._sessions, player_id)

    async def insert_race_games(
        self,
        tx: Transaction,
        race_id: int,
        code: GameCode,
        status: Status,
        score: int,
        player_ids: Sequence[int],
        starts_at: dt.datetime,
    ) -> dict[int, int]:
        return await insert_race_games(
            session_of(tx), race_id, code, status, score, player_ids, starts_at
        )


async def insert_race_games(
    session: AsyncSession,
    race_id: int,
    code: GameCode,
    status: Status,
    score: int,
    player_ids: Sequence[int],
    starts_at: dt.datetime,
) -> dict[int, int]:
    """Insert one race game per player in the caller's transaction (not committed here); each
    is created at ``starts_at`` (its elapsed time counts from there).

    Returns:
        ``{player_id: game_id}``.
    """
    rows = (
        await session.execute(
            insert(GameRow)
            .values(
                [
                    {
                        "player_id": player_id,
                        "code": str(code),
                        "rules": code.rules.value,
                        "deal_version": code.version.value,
                        "mode": GameMode.RACE.value,
                        "race_id": race_id,
                        "status": status.value,
                        "score": score,
                        "moves": 0,
                        "undos": 0,
                        "seq": 0,
                        "created_at": starts_at,
                    }
                    for player_id in player_ids
                ]
            )
            .returning(GameRow.player_id, GameRow.id)
        )
    ).all()
    return {player_id: game_id for player_id, game_id in rows}
