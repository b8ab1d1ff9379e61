"""The queries of the server processes' records (``server_instances``): each running process
keeps its ``seen_at`` fresh by the database's clock, and one unseen for too long is taken for
dead by the others (docs/rules.md §4 "Presence").

:class:`InstanceStore` is their contract, as
:attr:`server.storage.presence.PresenceStore.instances`; :class:`PostgresInstanceStore` keeps it
in PostgreSQL. A method taking ``tx`` is a step of the caller's
:class:`~server.storage.transactions.Transaction`; one without is its own. A database failure
leaves the transaction's block as a :class:`~server.errors.StorageError`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy import Select, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert

from server.storage.models import ServerInstance
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of


class InstanceStore(Protocol):
    """The server processes' records, by the database's clock. Every method may raise
    :class:`~server.errors.StorageError`."""

    async def register(self, tx: Transaction, instance: str) -> dt.datetime:
        """Make the process's record if there is none (``seen_at`` now, by the database's
        clock).

        Returns:
            The record's ``started_at`` (UTC): a record dropped and made again has a new one.
        """
        ...

    async def beat(self, tx: Transaction, instance: str) -> dt.datetime | None:
        """Refresh the process's ``seen_at`` to the database's clock.

        Returns:
            The record's ``started_at`` (UTC), or None when there is no record (it was dropped:
            the process was taken for dead).
        """
        ...

    async def dead(self, instance: str, timeout_s: float) -> list[str]:
        """The other processes whose ``seen_at`` is more than ``timeout_s`` seconds old by the
        database's clock (ids). Its own transaction.

        Raises:
            StorageError: the database failed.
        """
        ...

    async def forget(self, tx: Transaction, instances: Sequence[str]) -> None:
        """Delete these processes' records (their connections' records go with them)."""
        ...


class PostgresInstanceStore:
    """:class:`InstanceStore` in PostgreSQL (``server_instances``).

    Args:
        sessions: the session factory (its failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def register(self, tx: Transaction, instance: str) -> dt.datetime:
        session = session_of(tx)
        await session.execute(insert(ServerInstance).values(id=instance).on_conflict_do_nothing())
        started = await session.scalar(
            select(ServerInstance.started_at).where(ServerInstance.id == instance)
        )
        assert started is not None
        return started

    async def beat(self, tx: Transaction, instance: str) -> dt.datetime | None:
        session = session_of(tx)
        return await session.scalar(
            update(ServerInstance)
            .where(ServerInstance.id == instance)
            .values(seen_at=func.statement_timestamp())
            .returning(ServerInstance.started_at)
        )

    async def dead(self, instance: str, timeout_s: float) -> list[str]:
        async with self._sessions() as session:
            return list((await session.scalars(unseen(instance, timeout_s))).all())

    async def forget(self, tx: Transaction, instances: Sequence[str]) -> None:
        session = session_of(tx)
        await session.execute(delete(ServerInstance).where(ServerInstance.id.in_(instances)))


def unseen(instance: str, timeout_s: float) -> Select[str]:
    """The query of the processes other than ``instance`` unseen for more than ``timeout_s``
    seconds by the database's clock (ids)."""
    return select(ServerInstance.id).where(
        ServerInstance.seen_at
        < func.statement_timestamp() - text(f"interval '{float(timeout_s)} seconds'"),
        ServerInstance.id != instance,
    )


__all__ = ["InstanceStore", "PostgresInstanceStore", "unseen"]
