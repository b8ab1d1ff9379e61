"""The transaction a room operation holds across the steps of several stores (races, seats,
presence, the racers' games): opaque to the services, which only pass it from step to step and
commit it.

:class:`Transaction` is what the store Protocols of :mod:`server.storage.races`,
:mod:`server.storage.seats`, :mod:`server.storage.presence` and :mod:`server.storage.instances`
hand out and take; the PostgreSQL stores hand out an ``AsyncSession`` (which is one) and take
it back through :func:`session_of`. Like a SQLAlchemy session, a transaction goes on after
:meth:`Transaction.commit` (its next step begins a new one), and whatever it has not committed
when its block ends is rolled back.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession


class Transaction(Protocol):
    """One transaction of the stores, as the services see it."""

    async def commit(self) -> None:
        """Keep what the transaction wrote, deliver the events it published and release the
        rows it locked; the transaction goes on as a new one.

        Raises:
            StorageError: the database failed (nothing is kept).
        """
        ...


def session_of(tx: Transaction) -> AsyncSession:
    """The PostgreSQL session a PostgreSQL store handed out as ``tx``.

    Raises:
        TypeError: ``tx`` is another store's transaction.
    """
    if not isinstance(tx, AsyncSession):
        raise TypeError(f"a PostgreSQL store was given a {type(tx).__name__}, not its session")
    return tx


__all__ = ["Transaction", "session_of"]
