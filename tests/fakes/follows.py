"""In-memory :class:`~server.storage.follows.FollowStore` and
:class:`~server.storage.online.OnlineStore`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence

from server.errors import StorageConflict
from server.storage.events import RaceInvited
from server.storage.follows import Followed, FollowedRow
from server.storage.online import OnlineConnection
from server.storage.players import PlayerRow
from tests.fakes.database import MemoryDatabase


class MemoryFollowStore:
    """Follows kept in a :class:`MemoryDatabase` (its pairs unique, nobody following
    themself, only players who exist).

    Args:
        database: the in-memory tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def player_named(self, name_key: str) -> PlayerRow | None:
        await self._db.query()
        player = next((p for p in self._db.players.values() if p.name_key == name_key), None)
        return None if player is None else PlayerRow(player.id, player.name)

    async def follow(
        self, follower_id: int, followed_id: int, at: dt.datetime, *, limit: int
    ) -> tuple[Followed, FollowedRow | None]:
        await self._db.query()
        if follower_id not in self._db.players or followed_id not in self._db.players:
            return Followed.NO_PLAYER, None
        if follower_id == followed_id:
            raise StorageConflict("ck_follows_not_self")
        name = self._db.players[followed_id].name
        since = self._db.follows.get((follower_id, followed_id))
        if since is not None:
            return Followed.ALREADY, FollowedRow(followed_id, name, since)
        if sum(f == follower_id for f, _ in self._db.follows) >= limit:
            return Followed.LIMIT, None
        self._db.follows[(follower_id, followed_id)] = at
        return Followed.NEW, FollowedRow(followed_id, name, at)

    async def unfollow(self, follower_id: int, followed_id: int) -> bool:
        await self._db.query()
        return self._db.follows.pop((follower_id, followed_id), None) is not None

    async def following(self, follower_id: int) -> list[FollowedRow]:
        await self._db.query()
        rows = [
            FollowedRow(t, self._db.players[t].name, at)
            for (f, t), at in self._db.follows.items()
            if f == follower_id and t in self._db.players
        ]
        return sorted(rows, key=lambda r: (r.since, r.id))

    async def follows(self, follower_id: int, followed_id: int) -> bool:
        await self._db.query()
        return (follower_id, followed_id) in self._db.follows

    async def banned(self, player_id: int) -> bool:
        await self._db.query()
        player = self._db.players.get(player_id)
        return player is not None and player.banned_at is not None


class MemoryOnlineStore:
    """Open connections kept in a :class:`MemoryDatabase` (every process counts as seen in
    time: there is no process record here); invitations are published to its ``events``.

    Args:
        database: the in-memory tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def record(
        self, instance: str, added: Sequence[OnlineConnection], removed: Collection[str]
    ) -> None:
        await self._db.query()
        for key in removed:
            self._db.player_connections.pop((instance, key), None)
        for c in added:
            if c.player_id in self._db.players:  # as the statement's join leaves them out
                self._db.player_connections.setdefault((instance, c.key), c.player_id)

    async def own_keys(self, instance: str) -> list[str]:
        await self._db.query()
        return [key for (i, key) in self._db.player_connections if i == instance]

    async def online_among(self, player_ids: Collection[int], timeout_s: float) -> set[int]:
        await self._db.query()
        return set(player_ids) & set(self._db.player_connections.values())

    async def announce_invite(self, event: RaceInvited) -> None:
        await self._db.query()
        self._db.events.append(event)
