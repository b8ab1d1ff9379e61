"""Commits that may be on the primary alone, and making sure they are replicated before they
are acknowledged.

With a synchronous standby (``synchronous_standby_names``, docs: High availability) a commit
is acknowledged by PostgreSQL only once the standby has it. When that wait is cancelled — the
driver gives up at its deadline and sends a cancel, an administrator cancels the backend —
PostgreSQL ends it with a WARNING ("canceling wait for synchronous replication …: the
transaction has already committed locally, but might not have been replicated to the
standby") and reports the commit as done: it is on the primary alone and would be lost with
it in a failover. A backend ended in that wait (``pg_terminate_backend``, a shutdown) leaves
the transaction committed locally too, its connection closed.

So a commit is acknowledged only once it is known to be replicated: a connection whose
commit came back with a WARNING (:func:`watch` notes them; any warning of a COMMIT counts,
whatever the server's language) is asked to commit one more transaction that has a
transaction id and a WAL record (:data:`BARRIER_SQL`): its commit waits for the synchronous
standby up to its own, later, WAL position, which covers the earlier commit
(:func:`confirm_replicated`). The same is done before a write found stored after a lost
connection is acknowledged (``GroupCommitter._settle``). If that wait fails too, the outcome
stays unknown (:class:`~server.errors.StorageOutcomeUnknown`).

Every commit of the server's writes is made through :func:`acknowledged`, the one place of
that rule: the group commit's batches, the engine's ``COMMIT`` of its transactions (sessions,
``engine.begin()``: :func:`server.storage.db.create_engine`) and the writes of one statement
(:func:`server.storage.single.write_single`: a new game, the online connections). A commit
sent and never answered (:func:`~server.storage.driver_errors.commit_unconfirmed`) is outcome
unknown there too, unless its caller finds out itself what became of it (the group commit
reads its writes' rows).

What "replicated" means is the primary's: with no synchronous standby configured (one
database, or pg_auto_failover's ``wait_primary`` state, in which the monitor has turned
synchronous replication off because no standby is healthy), the barrier commits at once.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from server.errors import StorageOutcomeUnknown
from server.storage.driver_errors import commit_unconfirmed

log = logging.getLogger(__name__)

T = TypeVar("T")

#: One statement that is a transaction of its own (run outside any transaction) with a
#: transaction id and a record in the WAL — an empty transactional logical message, which any
#: role may write: its commit record follows every earlier commit of the server in the WAL, and
#: its commit waits for the synchronous standby to have it. (A transaction id alone is not
#: enough: PostgreSQL waits for the standby only for a transaction that wrote to the WAL
#: before its commit record.)
BARRIER_SQL = "SELECT pg_logical_emit_message(true, 'tripeaks.replicated', '')"

#: The driver connections that received a WARNING since :func:`expect_commit` was last called
#: for them.
_warned: weakref.WeakSet[Any] = weakref.WeakSet()


def _note(connection: Any, message: Any) -> None:
    """asyncpg's log listener: a WARNING (in the server's own words, or any language) marks
    ``connection``."""
    severity = getattr(message, "severity_en", None) or getattr(message, "severity", None)
    if severity == "WARNING":
        _warned.add(connection)


def watch(driver: Any) -> None:
    """Note the warnings of an asyncpg connection from now on (see :func:`warned`)."""
    driver.add_log_listener(_note)


def expect_commit(driver: Any) -> None:
    """Forget the warnings ``driver`` received so far: a commit is about to be sent."""
    _warned.discard(driver)


def warned(driver: Any) -> bool:
    """Whether ``driver`` received a WARNING since :func:`expect_commit`: its commit may be on
    the primary alone (its wait for the synchronous standby cancelled)."""
    return driver in _warned


async def confirm_replicated(driver: Any, timeout_s: float | None) -> None:
    """Make sure every commit the server of ``driver`` has made so far is on its synchronous
    standby: commit :data:`BARRIER_SQL` (outside any transaction) and wait for it.

    Args:
        driver: an asyncpg connection, not inside a transaction.
        timeout_s: how long the wait may take (s; None: the connection's own bound).

    Raises:
        StorageOutcomeUnknown: the barrier failed, did not end within ``timeout_s`` or came
            back with a warning itself (its wait cancelled): what was committed before may be
            on the primary alone. Its ``__cause__`` is the failure.
    """
    expect_commit(driver)
    try:
        await driver.fetchval(BARRIER_SQL, timeout=timeout_s)
    except Exception as exc:
        raise StorageOutcomeUnknown(
            f"a commit may be on the primary alone: its replication could not be confirmed "
            f"({type(exc).__name__})"
        ) from exc
    if warned(driver):
        raise StorageOutcomeUnknown(
            "a commit may be on the primary alone: the wait for its replication was cancelled"
        )


async def acknowledged(
    driver: Any,
    commit: Callable[[], Awaitable[T]],
    barrier_s: float | None,
    *,
    caller_settles: bool = False,
) -> T:
    """Run ``commit`` — what ends with a commit on ``driver``: a ``COMMIT``, or one statement
    that is its own transaction — and return what it returns once that commit is known to be
    replicated: one that came back with a warning (its wait for the synchronous standby
    cancelled: on the primary alone) is followed by :func:`confirm_replicated`.

    Args:
        driver: the asyncpg connection ``commit`` commits on.
        commit: what to run (called once, awaited).
        barrier_s: how long confirming the replication may take (s; None: the connection's own
            bound).
        caller_settles: the caller finds out itself what a commit sent and never answered left
            (the group commit reads its writes' rows): such a failure is raised as it is.

    Returns:
        What ``commit`` returned.

    Raises:
        StorageOutcomeUnknown: the commit was sent and its outcome never came back
            (:func:`~server.storage.driver_errors.commit_unconfirmed`; not with
            ``caller_settles``), or it came back committed on the primary alone and its
            replication could not be confirmed (:func:`confirm_replicated`): it may be stored.
            Its ``__cause__`` is the failure.
        Whatever else ``commit`` raises (a failure that surely changed nothing).
    """
    expect_commit(driver)
    try:
        result = await commit()
    except Exception as exc:
        if caller_settles or not commit_unconfirmed(exc):
            raise
        raise StorageOutcomeUnknown(f"a commit is unconfirmed: {type(exc).__name__}") from exc
    if warned(driver):
        log.warning("a commit came back with a warning: confirming its replication")
        await confirm_replicated(driver, barrier_s)
    return result


__all__ = [
    "BARRIER_SQL",
    "acknowledged",
    "confirm_replicated",
    "expect_commit",
    "warned",
    "watch",
]
