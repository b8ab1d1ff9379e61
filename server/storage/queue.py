"""The quick-race queue (table ``race_queue``, docs/rules.md §4 "Quick races"): who waits,
under which rule set, with which rating, since when, and from which websocket.

:class:`QueueStore` is the contract :class:`server.services.matchmaking.Matchmaker` depends on;
:class:`PostgresQueueStore` keeps it in PostgreSQL. Matching is the service's; storage reads
and writes. A matcher takes the waiting rows of a rule set under a transaction-level advisory
lock of that rule set, with ``FOR UPDATE SKIP LOCKED`` (:meth:`QueueStore.take`), in the
transaction that opens their races (the race service's
:class:`~server.storage.transactions.Transaction`) and removes those it matched in it, so two
matchers, in one process or two, never take the same player: while one holds the rule set's
lock, another's pass finds nobody (rather than half the queue each, which would make smaller
races); a row being rewritten (a player asking again) is skipped for one pass.

Times are aware UTC datetimes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import case, delete, func, select, text
from sqlalchemy.dialects.postgresql import insert

from server.engine.codes import RuleSet
from server.storage.enums import OPEN_RACE_STATUSES, RaceStatus
from server.storage.events import QueueMatched, publish
from server.storage.instances import unseen
from server.storage.models import Player, QueuedPlayer, Race, RacePlayer
from server.storage.presence import Connection
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of

#: The first key of the matchers' advisory locks (the second is the rule set's letter's code).
MATCHER_LOCK = 0x51_55_45  # "QUE"
#: How long a matcher's transaction may sit idle (its process stopped between two statements)
#: before the database ends its session, letting go of the rule set's lock and the rows it
#: holds (ms); a pass's own statements follow one another at once.
MATCHER_IDLE_LIMIT_MS = 5000


@dataclass(frozen=True, slots=True)
class QueueRow:
    """A waiting player: their id, rule set, shown rating when they asked, since when (UTC),
    and the websocket that asked."""

    player_id: int
    rules: RuleSet
    rating: int
    joined_at: dt.datetime
    connection: Connection


class QueueStore(Protocol):
    """Where waiting players are kept. Every method may raise
    :class:`~server.errors.StorageError` when the database fails (nothing is changed then)."""

    async def join(
        self, player_id: int, rules: RuleSet, rating: int, connection: Connection, at: dt.datetime
    ) -> QueueRow:
        """Make the player wait under ``rules`` from ``connection``; a player already waiting
        keeps their place (``joined_at``) under the same rule set, or starts again under
        another. Returns the row as it stands."""
        ...

    async def cancel(self, player_id: int) -> bool:
        """Stop the player waiting; whether they were."""
        ...

    async def drop_connection(self, connection: Connection) -> list[int]:
        """Stop whoever waits from ``connection`` waiting (it closed); their player ids."""
        ...

    async def waiting(self, player_id: int) -> QueueRow | None:
        """The player's row while they wait, else None."""
        ...

    async def take(
        self, tx: Transaction, rules: RuleSet, instance: str, fresh_s: float
    ) -> list[QueueRow]:
        """The rows waiting under ``rules`` that no other transaction holds, locked until
        ``tx`` ends, the longest waiting first; none when another transaction holds the rule
        set's matcher lock (:data:`MATCHER_LOCK`), which ``tx`` takes until it ends. Left out:
        banned players, and the players of a process (other than ``instance``) unseen for more
        than ``fresh_s`` seconds (late, perhaps dead)."""
        ...

    async def matched(
        self, tx: Transaction, race_id: int, invite: str, rules: RuleSet, player_ids: Sequence[int]
    ) -> None:
        """Remove these players' rows in ``tx`` (they were matched into race ``race_id``) and
        announce it (:class:`~server.storage.events.QueueMatched`, delivered when ``tx``
        commits)."""
        ...

    async def forget(self, tx: Transaction, player_ids: Sequence[int]) -> None:
        """Remove these players' rows in ``tx``: they waited from connections that closed
        (their own process says so) before the close was recorded."""
        ...

    async def rooms_held(self, tx: Transaction, player_ids: Sequence[int]) -> dict[int, int]:
        """How many open rooms (lobby or running) each of these players sits in, counted in
        ``tx`` after locking their player rows as a race's create or join does
        (``FOR NO KEY UPDATE``), so that neither counts before the other's seat is in. A
        player whose row another transaction holds (a create or join under way) is skipped
        (``SKIP LOCKED``) and missing from the answer: left for the next pass."""
        ...

    async def counts(self) -> dict[RuleSet, int]:
        """How many players wait under each rule set (those with none left out)."""
        ...


def _row(row: QueuedPlayer) -> QueueRow:
    return QueueRow(
        row.player_id,
        RuleSet(row.rules),
        row.rating,
        row.joined_at,
        Connection(row.instance_id, row.connection),
    )


class PostgresQueueStore:
    """:class:`QueueStore` in PostgreSQL.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def join(
        self, player_id: int, rules: RuleSet, rating: int, connection: Connection, at: dt.datetime
    ) -> QueueRow:
        """See :meth:`QueueStore.join` (an upsert on the player's key)."""
        values = insert(QueuedPlayer).values(
            player_id=player_id,
            rules=rules.value,
            rating=rating,
            instance_id=connection.instance,
            connection=connection.key,
            joined_at=at,
        )
        excluded = values.excluded
        statement = values.on_conflict_do_update(
            index_elements=[QueuedPlayer.player_id],
            set_={
                "rating": excluded.rating,
                "instance_id": excluded.instance_id,
                "connection": excluded.connection,
                "joined_at": case(
                    (QueuedPlayer.rules == excluded.rules, QueuedPlayer.joined_at),
                    else_=excluded.joined_at,
                ),
                "rules": excluded.rules,
            },
        ).returning(QueuedPlayer)
        async with self._sessions() as session:
            row = (await session.scalars(statement)).one()
            await session.commit()
            return _row(row)

    async def cancel(self, player_id: int) -> bool:
        """See :meth:`QueueStore.cancel`."""
        async with self._sessions() as session:
            gone = await session.scalars(
                delete(QueuedPlayer)
                .where(QueuedPlayer.player_id == player_id)
                .returning(QueuedPlayer.player_id)
            )
            found = gone.first() is not None
            await session.commit()
            return found

    async def drop_connection(self, connection: Connection) -> list[int]:
        """See :meth:`QueueStore.drop_connection`."""
        async with self._sessions() as session:
            gone = await session.scalars(
                delete(QueuedPlayer)
                .where(
                    QueuedPlayer.instance_id == connection.instance,
                    QueuedPlayer.connection == connection.key,
                )
                .returning(QueuedPlayer.player_id)
            )
            ids = list(gone)
            await session.commit()
            return ids

    async def waiting(self, player_id: int) -> QueueRow | None:
        """See :meth:`QueueStore.waiting`."""
        async with self._sessions() as session:
            row = await session.get(QueuedPlayer, player_id)
            return None if row is None else _row(row)

    async def take(
        self, tx: Transaction, rules: RuleSet, instance: str, fresh_s: float
    ) -> list[QueueRow]:
        """See :meth:`QueueStore.take` (``pg_try_advisory_xact_lock``, then ``FOR UPDATE OF
        race_queue SKIP LOCKED``)."""
        session = session_of(tx)
        # A matcher whose process stops mid-pass (frozen, paused) must not hold the rule set's
        # lock and the rows it locked for longer than this: the database ends its session.
        await session.execute(
            text(f"SET LOCAL idle_in_transaction_session_timeout = {MATCHER_IDLE_LIMIT_MS}")
        )
        locked = await session.scalar(
            select(func.pg_try_advisory_xact_lock(MATCHER_LOCK, ord(rules.value)))
        )
        if not locked:
            return []
        # A player seated in a rated race not over (matched by an earlier pass, whose commit
        # an upsert of theirs waited for and then followed with a row of its own) waits no more.
        racing = (
            select(RacePlayer.player_id)
            .join(Race, Race.id == RacePlayer.race_id)
            .where(Race.rated, Race.status.in_([RaceStatus.LOBBY, RaceStatus.RUNNING]))
        )
        await session.execute(
            delete(QueuedPlayer).where(
                QueuedPlayer.rules == rules.value, QueuedPlayer.player_id.in_(racing)
            )
        )
        rows = await session.scalars(
            select(QueuedPlayer)
            .join(Player, Player.id == QueuedPlayer.player_id)
            .where(
                QueuedPlayer.rules == rules.value,
                Player.banned_at.is_(None),
                QueuedPlayer.instance_id.not_in(unseen(instance, fresh_s)),
            )
            .order_by(QueuedPlayer.joined_at, QueuedPlayer.player_id)
            .with_for_update(of=QueuedPlayer, skip_locked=True)
        )
        return [_row(row) for row in rows]

    async def matched(
        self, tx: Transaction, race_id: int, invite: str, rules: RuleSet, player_ids: Sequence[int]
    ) -> None:
        """See :meth:`QueueStore.matched`."""
        session = session_of(tx)
        await session.execute(delete(QueuedPlayer).where(QueuedPlayer.player_id.in_(player_ids)))
        publish(session, QueueMatched(race_id, invite, rules.value, list(player_ids)))

    async def forget(self, tx: Transaction, player_ids: Sequence[int]) -> None:
        """See :meth:`QueueStore.forget`."""
        if player_ids:
            await session_of(tx).execute(
                delete(QueuedPlayer).where(QueuedPlayer.player_id.in_(player_ids))
            )

    async def rooms_held(self, tx: Transaction, player_ids: Sequence[int]) -> dict[int, int]:
        """See :meth:`QueueStore.rooms_held`."""
        session = session_of(tx)
        locked = list(
            await session.scalars(
                select(Player.id)
                .where(Player.id.in_(player_ids))
                .order_by(Player.id)
                .with_for_update(key_share=True, skip_locked=True)
            )
        )
        held = dict.fromkeys(locked, 0)
        if locked:
            rows = await session.execute(
                select(RacePlayer.player_id, func.count())
                .join(Race, Race.id == RacePlayer.race_id)
                .where(RacePlayer.player_id.in_(locked), Race.status.in_(OPEN_RACE_STATUSES))
                .group_by(RacePlayer.player_id)
            )
            held.update({player_id: count for player_id, count in rows})
        return held

    async def counts(self) -> dict[RuleSet, int]:
        """See :meth:`QueueStore.counts`."""
        async with self._sessions() as session:
            rows = await session.execute(
                select(QueuedPlayer.rules, func.count()).group_by(QueuedPlayer.rules)
            )
            return {RuleSet(rules): count for rules, count in rows}


__all__ = ["MATCHER_LOCK", "PostgresQueueStore", "QueueRow", "QueueStore"]
