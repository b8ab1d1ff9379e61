"""An in-memory :class:`~server.storage.players.PlayerStore`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection

from server.errors import StorageConflict
from server.storage.events import TokensRevoked
from server.storage.players import LAST_USED_EVERY, PlayerRow, RecoveryRow, TokenRow
from tests.fakes.database import MemoryDatabase, PlayerRecord


class MemoryPlayerStore:
    """Players and their tokens kept in a :class:`MemoryDatabase`, whose unique name keys and
    token hashes decide between registrations as PostgreSQL's unique indexes do; revocations
    are published to the database's ``events``.

    Args:
        database: the in-memory tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def name_holding(self, name_key: str) -> str | None:
        await self._db.query()
        return next((p.name for p in self._db.players.values() if p.name_key == name_key), None)

    async def add(
        self,
        name: str,
        name_key: str,
        token_hash: bytes,
        created_at: dt.datetime,
        *,
        recovery_hash: bytes | None = None,
        address_hash: bytes | None = None,
    ) -> TokenRow | None:
        await self._db.query()
        try:
            player, token = self._db.insert_player(
                name, name_key, token_hash, created_at, address_hash, recovery_hash
            )
        except StorageConflict as exc:
            if exc.constraint == "uq_players_name_key":  # ON CONFLICT (name_key) DO NOTHING
                return None
            raise
        return TokenRow(token.id, _row(player))

    async def by_token_hash(self, token_hash: bytes) -> TokenRow | None:
        await self._db.query()
        token = next((t for t in self._db.tokens.values() if t.token_hash == token_hash), None)
        if token is None:
            return None
        now = self._db.now()
        if token.last_used_at is None or token.last_used_at < now - LAST_USED_EVERY:
            token.last_used_at = now
        return TokenRow(token.id, _row(self._db.players[token.player_id]))

    async def get(self, player_id: int) -> PlayerRow | None:
        await self._db.query()
        player = self._db.players.get(player_id)
        return None if player is None else _row(player)

    async def recovery_of(self, name_key: str) -> RecoveryRow | None:
        await self._db.query()
        player = next((p for p in self._db.players.values() if p.name_key == name_key), None)
        return None if player is None else RecoveryRow(_row(player), player.recovery_hash)

    async def add_token(
        self, player_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        await self._db.query()
        if player_id not in self._db.players:
            return None
        return self._db.insert_token(player_id, token_hash, created_at).id

    async def replace_token(
        self, token_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        await self._db.query()
        old = self._db.tokens.get(token_id)
        if old is None:
            return None
        del self._db.tokens[token_id]
        try:
            new = self._db.insert_token(old.player_id, token_hash, created_at)
        except StorageConflict:
            self._db.tokens[token_id] = old  # the transaction rolls back
            raise
        self._db.events.append(TokensRevoked(old.player_id))
        return new.id

    async def set_recovery_hash(self, token_id: int, recovery_hash: bytes) -> bool:
        await self._db.query()
        token = self._db.tokens.get(token_id)
        player = None if token is None else self._db.players.get(token.player_id)
        if player is None:
            return False
        player.recovery_hash = recovery_hash
        return True

    async def delete_tokens(self, player_id: int, *, keep: int | None) -> int | None:
        await self._db.query()
        kept = None if keep is None else self._db.tokens.get(keep)
        if keep is not None and (kept is None or kept.player_id != player_id):
            return None
        gone = [t.id for t in self._db.tokens.values() if t.player_id == player_id and t.id != keep]
        for token_id in gone:
            del self._db.tokens[token_id]
        if gone:
            self._db.events.append(TokensRevoked(player_id))
        return len(gone)

    async def live_tokens(self, token_ids: Collection[int]) -> set[int]:
        await self._db.query()
        return {token_id for token_id in token_ids if token_id in self._db.tokens}


def _row(player: PlayerRecord) -> PlayerRow:
    return PlayerRow(player.id, player.name)
