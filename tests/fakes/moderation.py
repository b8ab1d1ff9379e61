"""An in-memory :class:`~server.storage.moderation.ModerationStore`: bans, hidden results and
the audit trail over a :class:`MemoryDatabase`'s players, games and ``moderation_actions``.

A command is one :class:`~tests.fakes.database.MemoryTransaction`: what it writes is undone
unless it commits, and a row it reads with ``lock=True`` stays locked until it ends, so two
commands on one player take turns as PostgreSQL's ``FOR UPDATE`` makes them. Hiding and
restoring take a game off and back onto the leaderboard fake's board and the daily fake's
counts, which count only games that are not hidden (as the triggers of migration 0009 keep
PostgreSQL's counters).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from server.errors import StorageConflict
from server.storage.moderation import (
    MAX_ID,
    ActionRecord,
    ActionStamp,
    GameRecord,
    PlayerRecord,
    game_record,
    player_record,
)
from tests.fakes.database import (
    GameRecord as GameRow,
)
from tests.fakes.database import (
    MemoryDatabase,
    MemoryTransaction,
    ModerationActionRecord,
)


def _date_order(row: GameRow) -> tuple[bool, dt.date, int]:
    """``ORDER BY daily_date, id`` (NULLs last, as PostgreSQL sorts them ascending)."""
    return (row.daily_date is None, row.daily_date or dt.date.min, row.id)


class MemoryModerationTransaction:
    """:class:`~server.storage.moderation.ModerationTransaction` over a
    :class:`MemoryDatabase`, in one :class:`MemoryTransaction`.

    Args:
        database: the tables.
        tx: the transaction its writes and locks belong to.
    """

    def __init__(self, database: MemoryDatabase, tx: MemoryTransaction) -> None:
        self._db = database
        self._tx = tx

    async def player_by_id(self, player_id: int, *, lock: bool = False) -> PlayerRecord | None:
        await self._db.query()
        if not 0 < player_id <= MAX_ID:
            return None
        if lock and player_id in self._db.players:
            await self._tx.lock("players", player_id)
        row = self._db.players.get(player_id)
        return None if row is None else player_record(row)

    async def player_by_name_key(self, key: str) -> PlayerRecord | None:
        await self._db.query()
        row = next((p for p in self._db.players.values() if p.name_key == key), None)
        return None if row is None else player_record(row)

    async def game_by_id(self, game_id: int, *, lock: bool = False) -> GameRecord | None:
        await self._db.query()
        if not 0 < game_id <= MAX_ID:
            return None
        if lock and game_id in self._db.games:
            await self._tx.lock("games", game_id)
        row = self._db.games.get(game_id)
        return None if row is None else game_record(row)

    async def action_by_id(self, action_id: int) -> ActionRecord | None:
        await self._db.query()
        row = self._db.moderation_actions.get(action_id)
        return None if row is None else self._action(row)

    async def actions(self, *, player_id: int | None = None, limit: int = 50) -> list[ActionRecord]:
        await self._db.query()
        rows = sorted(self._db.moderation_actions.values(), key=lambda a: a.id, reverse=True)
        if player_id is not None:
            rows = [a for a in rows if a.player_id == player_id]
        return [self._action(a) for a in rows[:limit]]

    def _action(self, row: ModerationActionRecord) -> ActionRecord:
        """An audit row with the name of the player it names, while that player is there."""
        player = None if row.player_id is None else self._db.players.get(row.player_id)
        return ActionRecord(
            row.id,
            row.at,
            row.moderator,
            row.action,
            row.player_id,
            None if player is None else player.name,
            row.game_id,
            row.daily_date,
            row.reason,
            row.details,
        )

    async def record_action(
        self,
        *,
        moderator: str,
        action: str,
        player_id: int,
        game_id: int | None = None,
        daily_date: dt.date | None = None,
        reason: str | None = None,
        details: Any | None = None,
    ) -> ActionStamp:
        await self._db.query()
        row = self._db.insert_moderation_action(
            moderator=moderator,
            action=action,
            player_id=player_id,
            game_id=game_id,
            daily_date=daily_date,
            reason=reason,
            details=details,
        )
        self._tx.undo(lambda: self._db.moderation_actions.pop(row.id))
        return ActionStamp(row.id, row.at)

    async def visible_daily_games(self, player_id: int) -> list[GameRecord]:
        await self._db.query()
        return self._games(
            lambda g: g.player_id == player_id and g.mode == "daily" and g.hidden_at is None
        )

    async def games_hidden_by(self, player_id: int, action_id: int) -> list[GameRecord]:
        await self._db.query()
        return self._games(lambda g: g.player_id == player_id and g.hidden_by == action_id)

    def _games(self, where: Any) -> list[GameRecord]:
        """The games matching ``where``, in date order."""
        rows = sorted((g for g in self._db.games.values() if where(g)), key=_date_order)
        return [game_record(g) for g in rows]

    async def set_hidden(
        self, games: Sequence[GameRecord], action_id: int | None, at: dt.datetime | None
    ) -> None:
        for game in games:
            await self._db.query()
            old = self._db.games.get(game.id)
            if old is None:
                continue
            self._db.update_game(dataclasses.replace(old, hidden_at=at, hidden_by=action_id))
            self._tx.undo(functools.partial(self._db.update_game, old))

    async def set_ban(
        self, player_id: int, action_id: int | None, at: dt.datetime | None, reason: str | None
    ) -> None:
        await self._db.query()
        player = self._db.players.get(player_id)
        if player is None:
            return
        if action_id is not None and action_id not in self._db.moderation_actions:
            raise StorageConflict("fk_players_ban_action_id_moderation_actions")
        before = (player.banned_at, player.ban_reason, player.ban_action_id)
        player.banned_at, player.ban_reason, player.ban_action_id = at, reason, action_id

        def undo() -> None:
            player.banned_at, player.ban_reason, player.ban_action_id = before

        self._tx.undo(undo)

    async def commit(self) -> None:
        await self._tx.commit()


class MemoryModerationStore:
    """:class:`~server.storage.moderation.ModerationStore` over a :class:`MemoryDatabase`.

    Args:
        database: the tables (shared with the other in-memory stores).
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[MemoryModerationTransaction]:
        tx = self._db.transaction()
        try:
            yield MemoryModerationTransaction(self._db, tx)
        finally:
            tx.end()
