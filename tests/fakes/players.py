"""An in-memory :class:`~server.storage.players.PlayerStore`."""

from __future__ import annotations

import datetime as dt

from server.errors import StorageConflict
from server.storage.players import PlayerRow
from tests.fakes.database import MemoryDatabase


class MemoryPlayerStore:
    """Players kept in a :class:`MemoryDatabase`, whose unique name keys and token hashes
    decide between registrations as PostgreSQL's unique indexes do.

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
        address_hash: bytes | None = None,
    ) -> PlayerRow | None:
        await self._db.query()
        try:
            player = self._db.insert_player(name, name_key, token_hash, created_at, address_hash)
        except StorageConflict as exc:
            if exc.constraint == "uq_players_name_key":  # ON CONFLICT (name_key) DO NOTHING
                return None
            raise
        return PlayerRow(player.id, player.name)

    async def by_token_hash(self, token_hash: bytes) -> PlayerRow | None:
        await self._db.query()
        found = (p for p in self._db.players.values() if p.token_hash == token_hash)
        player = next(found, None)
        return None if player is None else PlayerRow(player.id, player.name)

    async def get(self, player_id: int) -> PlayerRow | None:
        await self._db.query()
        player = self._db.players.get(player_id)
        return None if player is None else PlayerRow(player.id, player.name)
