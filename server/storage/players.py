"""The players' rows (tables ``players`` and ``player_tokens``): registration, the bearer tokens
of each device, the recovery code's hash, and the look-ups of a token, a name or an id.

:class:`PlayerStore` is the contract :class:`server.services.players.PlayerService` depends
on; :class:`PostgresPlayerStore` keeps it in PostgreSQL (an in-memory one for tests keeps it
in ``tests/fakes/players.py``). The rules of names (normalisation, look-alike keys, scripts)
and of credentials (what a token or a recovery code is, who may sign in) are the service's:
the store keeps ``name_key`` and each token's hash unique, and announces every revocation of
tokens to every server process (:class:`~server.storage.events.TokensRevoked`, in the
transaction that deletes them).

Hashes are SHA-256 digests (32 bytes); times are aware UTC datetimes. Past 400 lines because
the contract and its PostgreSQL keeping sit side by side, as in every store here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import DateTime, LargeBinary, delete, insert, literal, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from server.storage.events import TokensRevoked, publish
from server.storage.models import Player, PlayerToken
from server.storage.sessions import Sessions

#: Largest player id (``players.id`` is a BIGINT); larger ids name nobody.
MAX_PLAYER_ID = 2**63 - 1
#: How stale ``player_tokens.last_used_at`` may grow before an authentication refreshes it:
#: the column tells when a device was last seen, to the hour, without a write per request.
LAST_USED_EVERY = dt.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class PlayerRow:
    """A stored player: its id (1 and up) and display name (as registered)."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class TokenRow:
    """A bearer token found by its hash: the token's row id (``player_tokens.id``, which names
    the device's sign-in; a rotation makes a new one) and its player."""

    token_id: int
    player: PlayerRow


@dataclass(frozen=True, slots=True)
class RecoveryRow:
    """A player found by name key, with the SHA-256 of their recovery code (None: they have
    none yet)."""

    player: PlayerRow
    recovery_hash: bytes | None


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
        recovery_hash: bytes | None = None,
        address_hash: bytes | None = None,
    ) -> TokenRow | None:
        """Store a new player and their first token, unless another player holds
        ``name_key``.

        Args:
            name: the display name, already normalised (at most 24 characters).
            name_key: the name's look-alike key, unique among players.
            token_hash: SHA-256 of the player's first bearer token (32 bytes), unique.
            created_at: the registration time (aware, UTC), also the token's.
            recovery_hash: SHA-256 of the player's recovery code (32 bytes), or None.
            address_hash: the keyed hash of the address registered from (32 bytes), or None.

        Returns:
            The new token with the new player, or None when another player held ``name_key``
            (whether before this call or committed during it); nothing is stored then.

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash``: ``token_hash`` is another
                token's (nobody is stored).
        """
        ...

    async def by_token_hash(self, token_hash: bytes) -> TokenRow | None:
        """The token whose SHA-256 is ``token_hash``, with its player, or None. Refreshes the
        token's ``last_used_at`` (the database's clock) when it is older than
        :data:`LAST_USED_EVERY` or unset."""
        ...

    async def get(self, player_id: int) -> PlayerRow | None:
        """The player with this id, or None (also for ids outside 1..2⁶³−1)."""
        ...

    async def recovery_of(self, name_key: str) -> RecoveryRow | None:
        """The player whose ``name_key`` is exactly ``name_key``, with their recovery code's
        hash, or None when nobody's is."""
        ...

    async def add_token(
        self, player_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        """Give the player one more bearer token (a device signing in).

        Returns:
            The new token's id, or None when the player does not exist (nothing stored).

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash``: the hash is another token's.
        """
        ...

    async def replace_token(
        self, token_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        """Replace a token by a new one of the same player, in one transaction: the old row
        is deleted (that token stops working at once; :class:`TokensRevoked` is published)
        and the new one stored.

        Returns:
            The new token's id, or None when ``token_id`` no longer exists (revoked
            meanwhile; nothing stored).

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash``: the hash is another token's
                (nothing changed).
        """
        ...

    async def set_recovery_hash(self, token_id: int, recovery_hash: bytes) -> bool:
        """Replace the recovery code's hash of the player whose token ``token_id`` is (the old
        code stops working at once), if that token still exists when the player's row is
        locked: a device signed out meanwhile changes nothing.

        Returns:
            Whether it was stored (False: the token is gone; nothing changed).
        """
        ...

    async def delete_tokens(self, player_id: int, *, keep: int | None) -> int | None:
        """Delete every token of the player but ``keep`` (a token id; None: every one), and,
        when any was deleted, publish :class:`TokensRevoked` in the same transaction. The
        player's row is locked first, so two devices signing each other out take turns: the
        second finds its own token gone.

        Returns:
            How many tokens were deleted; None when ``keep`` is no longer the player's token
            (nothing changed).
        """
        ...

    async def live_tokens(self, token_ids: Collection[int]) -> set[int]:
        """Which of ``token_ids`` still exist (one look-up of them all by primary key)."""
        ...


def _player_id_in_range(player_id: int) -> bool:
    return 0 < player_id <= MAX_PLAYER_ID


class PostgresPlayerStore:
    """:class:`PlayerStore` in PostgreSQL's ``players`` and ``player_tokens`` tables; the unique
    index ``uq_players_name_key`` is the guard against look-alike names registered at the same
    moment, ``uq_player_tokens_token_hash`` the one against two tokens with one hash.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def name_holding(self, name_key: str) -> str | None:
        """See :meth:`PlayerStore.name_holding`.

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
        recovery_hash: bytes | None = None,
        address_hash: bytes | None = None,
    ) -> TokenRow | None:
        """Store a new player unless ``name_key`` is taken (``INSERT … ON CONFLICT (name_key)
        DO NOTHING``, which waits for a concurrent registration of the same key and then yields
        to it), and their first token, in one transaction.

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash`` (nothing is stored).
            StorageError: the database failed otherwise.
        """
        statement = (
            pg_insert(Player)
            .values(
                name=name,
                name_key=name_key,
                created_at=created_at,
                recovery_hash=recovery_hash,
                address_hash=address_hash,
            )
            .on_conflict_do_nothing(index_elements=[Player.name_key])
            .returning(Player.id, Player.name)
        )
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
            if row is None:
                return None
            token_id = await session.scalar(
                insert(PlayerToken)
                .values(player_id=row.id, token_hash=token_hash, created_at=created_at)
                .returning(PlayerToken.id)
            )
            await session.commit()
        assert token_id is not None
        return TokenRow(token_id, PlayerRow(row.id, row.name))

    async def by_token_hash(self, token_hash: bytes) -> TokenRow | None:
        """See :meth:`PlayerStore.by_token_hash`: one statement, one look-up of the unique
        index on ``token_hash`` (and the player's primary key), whose ``last_used_at`` refresh
        writes only when the column is an hour stale.

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            row = (await session.execute(_BY_TOKEN_HASH, {"token_hash": token_hash})).first()
            await session.commit()
        return None if row is None else TokenRow(row.token_id, PlayerRow(row.id, row.name))

    async def get(self, player_id: int) -> PlayerRow | None:
        """See :meth:`PlayerStore.get` (ids out of range are not sent to the database).

        Raises:
            StorageError: the database failed.
        """
        if not _player_id_in_range(player_id):
            return None
        statement = select(Player.id, Player.name).where(Player.id == player_id)
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
        return None if row is None else PlayerRow(row.id, row.name)

    async def recovery_of(self, name_key: str) -> RecoveryRow | None:
        """See :meth:`PlayerStore.recovery_of`.

        Raises:
            StorageError: the database failed.
        """
        statement = select(Player.id, Player.name, Player.recovery_hash).where(
            Player.name_key == name_key
        )
        async with self._sessions() as session:
            row = (await session.execute(statement)).first()
        if row is None:
            return None
        recovery = None if row.recovery_hash is None else bytes(row.recovery_hash)
        return RecoveryRow(PlayerRow(row.id, row.name), recovery)

    async def add_token(
        self, player_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        """See :meth:`PlayerStore.add_token` (an ``INSERT … SELECT`` from the player's row).

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash``.
            StorageError: the database failed otherwise.
        """
        if not _player_id_in_range(player_id):
            return None
        statement = (
            insert(PlayerToken)
            .from_select(
                ["player_id", "token_hash", "created_at"],
                select(
                    Player.id,
                    literal(token_hash, LargeBinary()),
                    literal(created_at, DateTime(timezone=True)),
                ).where(Player.id == player_id),
            )
            .returning(PlayerToken.id)
        )
        async with self._sessions() as session:
            token_id = await session.scalar(statement)
            await session.commit()
        return token_id

    async def replace_token(
        self, token_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> int | None:
        """See :meth:`PlayerStore.replace_token`.

        Raises:
            StorageConflict: ``uq_player_tokens_token_hash`` (nothing changed).
            StorageError: the database failed otherwise.
        """
        async with self._sessions() as session:
            if await self._lock_owner(session, token_id) is None:
                return None
            player_id = await session.scalar(
                delete(PlayerToken)
                .where(PlayerToken.id == token_id)
                .returning(PlayerToken.player_id)
            )
            if player_id is None:
                return None
            new_id = await session.scalar(
                insert(PlayerToken)
                .values(player_id=player_id, token_hash=token_hash, created_at=created_at)
                .returning(PlayerToken.id)
            )
            publish(session, TokensRevoked(player_id))
            await session.commit()
        return new_id

    async def set_recovery_hash(self, token_id: int, recovery_hash: bytes) -> bool:
        """See :meth:`PlayerStore.set_recovery_hash` (the token's player locked, the token
        looked up again under that lock, then the update).

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            player_id = await self._lock_owner(session, token_id)
            if player_id is None:
                return False
            await session.execute(
                update(Player).where(Player.id == player_id).values(recovery_hash=recovery_hash)
            )
            await session.commit()
        return True

    async def delete_tokens(self, player_id: int, *, keep: int | None) -> int | None:
        """See :meth:`PlayerStore.delete_tokens` (the player's row locked, the kept token
        looked up under that lock, one ``DELETE`` over the ``player_id`` index, and the event
        when it deleted anything).

        Raises:
            StorageError: the database failed.
        """
        if not _player_id_in_range(player_id):
            return None if keep is not None else 0
        statement = delete(PlayerToken).where(PlayerToken.player_id == player_id)
        if keep is not None:
            statement = statement.where(PlayerToken.id != keep)
        async with self._sessions() as session:
            locked = await session.scalar(
                select(Player.id).where(Player.id == player_id).with_for_update()
            )
            if locked is None:
                return None if keep is not None else 0
            if keep is not None and await self._owner(session, keep) != player_id:
                return None
            deleted = len((await session.execute(statement.returning(PlayerToken.id))).all())
            if deleted:
                publish(session, TokensRevoked(player_id))
            await session.commit()
        return deleted

    @staticmethod
    async def _owner(session: AsyncSession, token_id: int) -> int | None:
        """The player whose token ``token_id`` is, or None when it does not exist."""
        if not _player_id_in_range(token_id):  # (token ids are BIGINTs too)
            return None
        return await session.scalar(select(PlayerToken.player_id).where(PlayerToken.id == token_id))

    async def _lock_owner(self, session: AsyncSession, token_id: int) -> int | None:
        """Lock the row of the player whose token ``token_id`` is, and return their id when
        the token still exists under that lock (a statement after the lock sees what a
        sign-out that held it committed); None otherwise."""
        player_id = await self._owner(session, token_id)
        if player_id is None:
            return None
        await session.execute(select(Player.id).where(Player.id == player_id).with_for_update())
        return player_id if await self._owner(session, token_id) == player_id else None

    async def live_tokens(self, token_ids: Collection[int]) -> set[int]:
        """See :meth:`PlayerStore.live_tokens`.

        Raises:
            StorageError: the database failed.
        """
        if not token_ids:
            return set()
        statement = select(PlayerToken.id).where(PlayerToken.id.in_(list(token_ids)))
        async with self._sessions() as session:
            return set((await session.scalars(statement)).all())


#: The token and its player by the token's hash, refreshing ``last_used_at`` when an hour
#: stale: a data-modifying CTE (run whether or not it is read) over the row the first one found.
#: A common table expression ``touched`` refreshing the ``last_used_at`` of the tokens of a
#: ``found`` one (its columns ``token_id`` and ``last_used_at``) when it is
#: :data:`LAST_USED_EVERY` stale or unset; it returns nothing.
TOKENS_TOUCHED_SQL = f"""touched AS (
        UPDATE player_tokens SET last_used_at = statement_timestamp()
        FROM found
        WHERE player_tokens.id = found.token_id
          AND (found.last_used_at IS NULL
               OR found.last_used_at < statement_timestamp()
                  - interval '{int(LAST_USED_EVERY.total_seconds())} seconds')
    )"""

_BY_TOKEN_HASH = text(
    f"""
    WITH found AS (
        SELECT t.id AS token_id, t.last_used_at, p.id, p.name
        FROM player_tokens AS t JOIN players AS p ON p.id = t.player_id
        WHERE t.token_hash = :token_hash
    ), {TOKENS_TOUCHED_SQL}
    SELECT token_id, id, name FROM found
    """
)


__all__ = [
    "LAST_USED_EVERY",
    "MAX_PLAYER_ID",
    "TOKENS_TOUCHED_SQL",
    "PlayerRow",
    "PlayerStore",
    "PostgresPlayerStore",
    "RecoveryRow",
    "TokenRow",
]
