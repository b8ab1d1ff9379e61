"""The players' rows (table ``players``): registration and the look-ups of a token or an id.

:class:`PlayerStore` is the contract :class:`server.services.players.PlayerService` depends
on; :class:`PostgresPlayerStore` keeps it in PostgreSQL (an in-memory one for tests keeps it
in ``tests/fakes/players.py``). The rules of names (normalisation, look-alike keys, scripts)
are the service's: the store only keeps ``name_key`` unique.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from server.storage.models import Player
from server.storage.sessions import Sessions

#: Largest player id (``players.id`` is a BIGINT); larger ids name nobody.
MAX_PLAYER_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PlayerRow:
    """A stored player: its id (1 and up) and display name (as registered)."""

    id: int
    name: str


class PlayerStore(Protocol):
    """Where players are kept. Every method may raise :class:`~server.errors.StorageError`
    when the database fails (nothing is changed then)."""

    async def name_holding(self, name_key: str) -> str | None:
        """The display name of the player whose ``name_key`` is exactly ``name_key``, or None
        when nobody's is (committed rows only)."""
        ...

    async def add(
        self,
        name: str,
        name_key: str,
        token_hash: bytes,
        created_at: dt.datetime,
        *,
        address_hash: bytes | None = None,
    ) -> PlayerRow | None:
        """Store a new player, unless another player holds ``name_key``.

        Args:
            name: the display name, already normalised (at most 24 characters).
            name_key: the name's look-alike key, unique among players.
            token_hash: SHA-256 of the player's bearer token (32 bytes), unique.
            created_at: the registration time (aware, UTC).
            address_hash: the keyed hash of the address registered from (32 bytes), or None.

        Returns:
            The new player with its new id, or None when another player held ``name_key``
            (whether before this call or committed during it); nothing is stored then.

        Raises:
            StorageConflict: ``token_hash`` is another player's.
        """
        ...

    async def by_token_hash(self, token_hash: bytes) -> PlayerRow | None:
        """The player whose token has this SHA-256, or None."""
        ...

    async def get(self, player_id: int) -> PlayerRow | None:
        """The player with this id, or None (also for ids outside 1..2⁶³−1)."""
        ...


class PostgresPlayerStore:
    """:class:`PlayerStore` in PostgreSQL's ``players`` table; the unique index
    ``uq_players_name_key`` is the guard against look-alike names registered at the same
    moment.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def name_holding(self, name_key: str) -> str | None:
        """The display name of the player whose ``name_key`` is exactly ``name_key``, or None.

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            return await session.scalar(select(Player.name).where(Player.name_key == name_key))

    async def add(
        self,
        name: str,
        name_key: str,
        token_hash: bytes,
        created_at: dt.datetime,
        *,
        address_hash: bytes | None = None,
    ) -> PlayerRow | None:
        """Store a new player unless ``name_key`` is taken: one ``INSERT … ON CONFLICT
        (name_key) DO NOTHING``, which waits for a concurrent registration of the same key and
        then yields to it.

        Args:
            name: the normalised display name (at most 24 characters).
            name_key: the name's look-alike key.
            token_hash: SHA-256 of the bearer token (32 bytes).
            created_at: the registration time (aware, UTC).

        Returns:
            The new player (its id from the identity column), or None when another player
            holds ``name_key``.

        Raises:
            StorageConflict: ``token_hash`` is another player's.
            StorageError: the database failed otherwise.
        """
        statement = (
            insert(Player)
            .values(
                name=name,
                name_key=name_key,
                token_hash=token_hash,
                created_at=created_at,
                address_hash=address_hash,
            )
            .on_conflict_do_nothing(index_elements=[Player.name_key])
            .returning(Player.id, Player.name)
        )
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
            await session.commit()
        return None if row is None else PlayerRow(row.id, row.name)

    async def by_token_hash(self, token_hash: bytes) -> PlayerRow | None:
        """The player whose token has this SHA-256 (32 bytes), or None.

        Raises:
            StorageError: the database failed.
        """
        statement = select(Player.id, Player.name).where(Player.token_hash == token_hash)
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
        return None if row is None else PlayerRow(row.id, row.name)

    async def get(self, player_id: int) -> PlayerRow | None:
        """The player with this id, or None (ids outside 1..2⁶³−1 are nobody's and are not
        sent to the database).

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        statement = select(Player.id, Player.name).where(Player.id == player_id)
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
        return None if row is None else PlayerRow(row.id, row.name)


__all__ = ["MAX_PLAYER_ID", "PlayerRow", "PlayerStore", "PostgresPlayerStore"]
