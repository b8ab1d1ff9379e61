"""Who follows whom (table ``follows``, docs/rules.md §4 "Following"): following a player,
unfollowing, the list of the players one follows, and the look-up of a player by name key.

:class:`FollowStore` is the contract :class:`server.services.friends.FriendService` depends
on; :class:`PostgresFollowStore` keeps it in PostgreSQL (an in-memory one for tests keeps it in
``tests/fakes/follows.py``). The rules (who may follow whom, how many) are the service's: the
store keeps the pair unique, refuses a row past the limit it is given (counted under a lock of
the follower's row, so that two follows at once cannot both pass it) and makes nothing for a
player who does not exist.

Times are aware UTC datetimes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from sqlalchemy import Exists, delete, exists, func, select
from sqlalchemy.dialects.postgresql import insert

from server.storage.models import Follow, Player
from server.storage.players import MAX_PLAYER_ID, PlayerRow
from server.storage.sessions import Sessions


@dataclass(frozen=True, slots=True)
class FollowedRow:
    """A player one follows: their id, display name, and since when (aware UTC)."""

    id: int
    name: str
    since: dt.datetime


class Followed(StrEnum):
    """What a follow did."""

    #: The row was made.
    NEW = "new"
    #: The player was followed already (nothing changed; ``since`` stays the first time).
    ALREADY = "already"
    #: The player to follow (or the follower) does not exist (nothing made).
    NO_PLAYER = "no_player"
    #: The follower already follows as many players as the limit allows (nothing made).
    LIMIT = "limit"


class FollowStore(Protocol):
    """Where the follows are kept. Every method may raise
    :class:`~server.errors.StorageError` when the database fails (nothing is changed then)."""

    async def player_named(self, name_key: str) -> PlayerRow | None:
        """The player whose ``name_key`` is exactly ``name_key``, or None."""
        ...

    async def follow(
        self, follower_id: int, followed_id: int, at: dt.datetime, *, limit: int
    ) -> tuple[Followed, FollowedRow | None]:
        """Make ``follower_id`` follow ``followed_id`` from ``at`` (aware UTC), unless they do
        already, either player does not exist, or the follower already follows ``limit``
        players (checked in that order, so a follow repeated at the limit is
        :attr:`Followed.ALREADY`). Returns what it did and, for ``NEW`` and ``ALREADY``, the
        follow as it stands in the same transaction (else None).

        Raises:
            StorageConflict: ``ck_follows_not_self``: the two ids are the same.
        """
        ...

    async def unfollow(self, follower_id: int, followed_id: int) -> bool:
        """Stop ``follower_id`` following ``followed_id``; whether they did."""
        ...

    async def following(self, follower_id: int) -> list[FollowedRow]:
        """The players ``follower_id`` follows, the earliest followed first (then by id)."""
        ...

    async def follows(self, follower_id: int, followed_id: int) -> bool:
        """Whether ``follower_id`` follows ``followed_id``."""
        ...

    async def banned(self, player_id: int) -> bool:
        """Whether the player is banned from ranked play (docs/rules.md §4 "Moderation")."""
        ...


def _in_range(player_id: int) -> bool:
    return 0 < player_id <= MAX_PLAYER_ID


class PostgresFollowStore:
    """:class:`FollowStore` in PostgreSQL's ``follows`` table (its primary key the pair, a
    check against following oneself, both players' rows deleting theirs).

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def player_named(self, name_key: str) -> PlayerRow | None:
        """See :meth:`FollowStore.player_named` (the unique index on ``name_key``).

        Raises:
            StorageError: the database failed.
        """
        statement = select(Player.id, Player.name).where(Player.name_key == name_key)
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
        return None if row is None else PlayerRow(row.id, row.name)

    async def follow(
        self, follower_id: int, followed_id: int, at: dt.datetime, *, limit: int
    ) -> tuple[Followed, FollowedRow | None]:
        """See :meth:`FollowStore.follow`: the follower's row locked (``FOR NO KEY UPDATE``:
        concurrent follows of one follower take turns, nobody else waits), then the checks
        and ``INSERT … ON CONFLICT DO NOTHING``, in one transaction.

        Raises:
            StorageConflict: ``ck_follows_not_self``.
            StorageError: the database failed otherwise.
        """
        if not (_in_range(follower_id) and _in_range(followed_id)):
            return Followed.NO_PLAYER, None
        async with self._sessions() as session:
            locked = await session.scalar(
                select(Player.id).where(Player.id == follower_id).with_for_update(key_share=True)
            )
            name = await session.scalar(select(Player.name).where(Player.id == followed_id))
            if locked is None or name is None:
                return Followed.NO_PLAYER, None
            since = await session.scalar(
                select(Follow.created_at).where(
                    Follow.follower_id == follower_id, Follow.followed_id == followed_id
                )
            )
            if since is not None:
                return Followed.ALREADY, FollowedRow(followed_id, name, since)
            count = await session.scalar(
                select(func.count()).select_from(Follow).where(Follow.follower_id == follower_id)
            )
            if (count or 0) >= limit:
                return Followed.LIMIT, None
            await session.execute(
                insert(Follow)
                .values(follower_id=follower_id, followed_id=followed_id, created_at=at)
                .on_conflict_do_nothing()
            )
            await session.commit()
        return Followed.NEW, FollowedRow(followed_id, name, at)

    async def unfollow(self, follower_id: int, followed_id: int) -> bool:
        """See :meth:`FollowStore.unfollow` (one ``DELETE`` by the primary key).

        Raises:
            StorageError: the database failed.
        """
        if not (_in_range(follower_id) and _in_range(followed_id)):
            return False
        statement = (
            delete(Follow)
            .where(Follow.follower_id == follower_id, Follow.followed_id == followed_id)
            .returning(Follow.followed_id)
        )
        async with self._sessions() as session:
            gone = await session.scalar(statement)
            await session.commit()
        return gone is not None

    async def following(self, follower_id: int) -> list[FollowedRow]:
        """See :meth:`FollowStore.following` (the primary key's range of the follower).

        Raises:
            StorageError: the database failed.
        """
        if not _in_range(follower_id):
            return []
        statement = (
            select(Player.id, Player.name, Follow.created_at)
            .join(Player, Player.id == Follow.followed_id)
            .where(Follow.follower_id == follower_id)
            .order_by(Follow.created_at, Player.id)
        )
        async with self._sessions() as session:
            rows = (await session.execute(statement)).all()
        return [FollowedRow(row.id, row.name, row.created_at) for row in rows]

    async def follows(self, follower_id: int, followed_id: int) -> bool:
        """See :meth:`FollowStore.follows`.

        Raises:
            StorageError: the database failed.
        """
        if not (_in_range(follower_id) and _in_range(followed_id)):
            return False
        async with self._sessions() as session:
            return bool(await session.scalar(select(_pair(follower_id, followed_id))))

    async def banned(self, player_id: int) -> bool:
        """See :meth:`FollowStore.banned` (the player's row).

        Raises:
            StorageError: the database failed.
        """
        if not _in_range(player_id):
            return False
        async with self._sessions() as session:
            since = await session.scalar(select(Player.banned_at).where(Player.id == player_id))
            return since is not None


def _pair(follower_id: int, followed_id: int) -> Exists:
    """Whether the row of the pair exists."""
    return exists().where(Follow.follower_id == follower_id, Follow.followed_id == followed_id)


__all__ = ["FollowStore", "Followed", "FollowedRow", "PostgresFollowStore"]
