"""An in-memory :class:`~server.storage.games.GameStore` and the
:class:`~server.services.committer.Committer` that stores actions beside it.

Both keep their rows in one :class:`MemoryDatabase`, whose clock stands in for the database's:
a daily game is created, acted on and resigned only while that clock (or the write's
``pinned_today``) is still on its date, as PostgreSQL's statements decide by
``statement_timestamp()``. Each query or commit is one step with no await inside, so it is
atomic as one statement (or one batch's transaction) is.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
from collections.abc import Sequence

from server.engine.codes import GameCode
from server.engine.game import ActionKind, Status
from server.storage.commits import (
    ActionWrite,
    DailyClosed,
    GameMovedOn,
    SignedOut,
    WriteOutcome,
)
from server.storage.enums import RaceStatus
from server.storage.events import RaceProgress, encode_event
from server.storage.games import (
    GameHead,
    GameMode,
    GameRecord,
    RaceWindow,
    StoredAction,
    StoredGame,
)
from server.storage.moderation import PlayerRecord
from server.storage.transactions import Transaction
from tests.fakes.database import ActionRecord, MemoryDatabase, memory_transaction
from tests.fakes.database import GameRecord as GameRow


class MemoryGameStore:
    """Games kept in a :class:`MemoryDatabase` (its tables are the leaderboard and daily
    fakes' too).

    Args:
        database: the in-memory tables and the database's clock.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

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
        await self._db.query()
        if daily_date is not None and daily_date < self._db.today(pinned_today):
            return None
        game = self._db.insert_game(
            player_id,
            mode=mode.value,
            daily_date=daily_date,
            status=status.value,
            score=score,
            moves=0,
            code=str(code),
            created_at=created_at,
        )
        return game.id

    async def daily_game_id(self, player_id: int, date: dt.date) -> int | None:
        await self._db.query()
        return next(
            (
                g.id
                for g in self._db.games.values()
                if g.player_id == player_id and g.mode == GameMode.DAILY and g.daily_date == date
            ),
            None,
        )

    async def unfinished(
        self, player_id: int, today: dt.date, now: dt.datetime, limit: int
    ) -> list[GameHead]:
        await self._db.query()
        races = self._db.races
        playable = [
            g
            for g in self._db.games.values()
            if g.player_id == player_id
            and (
                g.status == Status.PLAYING
                or (g.status == Status.BLOCKED and g.mode == GameMode.FREE)
            )
            and (g.daily_date is None or g.daily_date >= today)
            and (
                g.race_id is None
                or (
                    races[g.race_id].status == "running"
                    and (starts_at := races[g.race_id].starts_at) is not None
                    and starts_at <= now
                )
            )
        ]
        playable.sort(key=lambda g: (g.created_at, g.id), reverse=True)
        return [GameHead(g.id, g.seq, Status(g.status)) for g in playable[:limit]]

    async def record(self, game_id: int) -> GameRecord | None:
        await self._db.query()
        row = self._db.games.get(game_id)
        if row is None:
            return None
        race = None if row.race_id is None else self._db.races[row.race_id]
        return GameRecord(
            id=row.id,
            player_id=row.player_id,
            player_name=self._db.players[row.player_id].name,
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
            race_status=None if race is None else RaceStatus(race.status),
        )

    async def actions(self, game_id: int) -> tuple[StoredAction, ...]:
        await self._db.query()
        return tuple(
            StoredAction(a.seq, ActionKind(a.kind), a.pos, a.card, a.score_after, a.created_at)
            for a in self._db.game_actions(game_id)
        )

    async def replay_rows(self, game_id: int) -> tuple[GameRecord, tuple[StoredAction, ...]] | None:
        record = await self.record(game_id)
        return None if record is None else (record, await self.actions(game_id))

    async def load(self, game_id: int) -> StoredGame | None:
        await self._db.query()
        row = self._db.games.get(game_id)
        if row is None:
            return None
        window = None
        if row.race_id is not None:
            race = self._db.races[row.race_id]
            assert race.starts_at is not None and race.ends_at is not None
            window = RaceWindow(race.id, race.starts_at, race.ends_at)
        return StoredGame(
            id=row.id,
            player_id=row.player_id,
            mode=GameMode(row.mode),
            code=GameCode.parse(row.code),
            daily_date=row.daily_date,
            status=Status(row.status),
            score=row.score,
            seq=row.seq,
            created_at=row.created_at,
            finished_at=row.finished_at,
            elapsed_ms=row.elapsed_ms,
            hinted=row.hinted,
            actions=tuple((a.kind, a.pos) for a in self._db.game_actions(game_id)),
            race=window,
        )

    async def head(self, game_id: int) -> GameHead | None:
        await self._db.query()
        row = self._db.games.get(game_id)
        return None if row is None else GameHead(game_id, row.seq, Status(row.status))

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
        await self._db.query()
        if event is not None:
            encode_event(event)  # too large: refused before anything changes, as by pg_notify
        row = self._db.games.get(game_id)
        if (
            row is None
            or (row.seq, row.status) != (seq, status.value)
            or (row.daily_date is not None and row.daily_date < self._db.today(pinned_today))
        ):
            return False
        self._db.update_game(
            dataclasses.replace(
                row, status=resigned.value, finished_at=finished_at, elapsed_ms=elapsed_ms
            )
        )
        if event is not None:
            self._db.events.append(event)
        return True

    async def mark_hinted(self, game_id: int) -> None:
        await self._db.query()
        row = self._db.games.get(game_id)
        if row is not None:
            row.hinted = True

    async def ban_of(self, player_id: int) -> PlayerRecord | None:
        await self._db.query()
        player = self._db.players.get(player_id)
        if player is None or player.banned_at is None:
            return None
        return PlayerRecord(
            player.id, player.name, player.banned_at, player.ban_reason, player.ban_action_id
        )

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
        """The games join the race's :class:`MemoryTransaction`: rolled back with it."""
        memory = memory_transaction(tx)
        await self._db.query()
        games: dict[int, int] = {}
        for player_id in player_ids:
            game = self._db.insert_game(
                player_id,
                mode=GameMode.RACE.value,
                daily_date=None,
                status=status.value,
                score=score,
                moves=0,
                code=str(code),
                created_at=starts_at,
                race_id=race_id,
            )
            memory.undo(functools.partial(self._db.games.pop, game.id))
            games[player_id] = game.id
        return games


class MemoryCommitter:
    """Stores actions in a :class:`MemoryDatabase` as the group commit stores them in
    PostgreSQL: each write in a task of its own (the caller gets a future), applied only while
    its game row still has the expected ``seq`` and status and a daily's date is open; then the
    action joins the log, the row takes the write's values and its event is published, all at
    once. No row is ever locked here, so no write is ever
    :class:`~server.storage.commits.GameBusy`.

    Args:
        database: the in-memory tables and the database's clock.
        timeout_s: what :attr:`timeout_s` says (the service gives it to resignations as
            their lock timeout).
    """

    def __init__(self, database: MemoryDatabase, timeout_s: float = 5.0) -> None:
        self._db = database
        self._timeout_s = timeout_s
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def timeout_s(self) -> float:
        """How long a write would wait for a locked game row, in seconds."""
        return self._timeout_s

    def submit(self, write: ActionWrite) -> WriteOutcome:
        if write.event is not None:
            encode_event(write.event)  # EventTooLargeError: nothing is queued
        future = WriteOutcome(loop=asyncio.get_running_loop())
        task = asyncio.create_task(self._store(write, future), name="memory-commit")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    async def close(self) -> None:
        """Stop: writes not yet stored fail with CancelledError."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _store(self, write: ActionWrite, future: WriteOutcome) -> None:
        try:
            await self._db.query()
        except asyncio.CancelledError:
            future.withdraw()
            raise
        except Exception as exc:  # the database is down: nothing was stored
            if not future.done():
                future.set_exception(exc)
            return
        try:
            self._commit(write)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(None)

    def _commit(self, write: ActionWrite) -> None:
        """Apply one write as the batch statement does, or change nothing.

        Raises:
            DailyClosed: the game is a daily whose date is over.
            SignedOut: the write's token no longer exists.
            GameMovedOn: there is no such game, or its row has moved on.
            StorageConflict: a constraint refused the row or the action.
        """
        row = self._db.games.get(write.game_id)
        if row is None:
            raise GameMovedOn(write.game_id)
        if row.daily_date is not None and row.daily_date < self._db.today(write.pinned_today):
            raise DailyClosed(write.game_id)
        if write.token_id is not None and write.token_id not in self._db.tokens:
            raise SignedOut(write.game_id)
        if (row.seq, row.status) != (write.expected_seq, write.expected_status):
            raise GameMovedOn(write.game_id)
        action = ActionRecord(
            write.game_id, write.seq, write.kind, write.pos, write.card, write.score_after, write.at
        )
        self._db.check_action(action)
        moved: GameRow = dataclasses.replace(
            row,
            status=write.status,
            score=write.score,
            moves=write.moves,
            undos=write.undos,
            seq=write.seq,
            finished_at=write.finished_at,
            elapsed_ms=write.elapsed_ms,
            cards_left=write.cards_left,
        )
        self._db.update_game(moved)
        self._db.actions[(action.game_id, action.seq)] = action
        if write.event is not None:
            self._db.events.append(write.event)
