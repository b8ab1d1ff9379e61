"""What the game service stores its accepted actions through: the :class:`Committer` contract,
which the group commit (:class:`~server.storage.commits.GroupCommitter`) keeps in PostgreSQL
and ``tests/fakes/games.py`` in memory."""

from __future__ import annotations

from typing import Protocol

from server.storage.commits import ActionWrite, WriteOutcome


class Committer(Protocol):
    """Stores the game service's accepted actions, each as one :class:`ActionWrite`.

    A write is stored only while its game row still has ``expected_seq`` and
    ``expected_status`` and, for a daily game, its date is open by the database's clock (or
    ``pinned_today``); then, in one transaction, its action joins the log at ``seq``, the row
    takes the write's ``seq``, status, counters, ``finished_at``, ``elapsed_ms`` and
    ``cards_left``, and its event (a race's progress) is published.
    """

    @property
    def timeout_s(self) -> float:
        """How long a write waits for its game row when another transaction holds it, in
        seconds."""
        ...

    def submit(self, write: ActionWrite) -> WriteOutcome:
        """Queue one write; the outcome is done once it is committed (result None) or failed:
        :class:`~server.storage.commits.GameMovedOn` (the row had moved on),
        :class:`~server.storage.commits.DailyClosed` (the daily's date is over),
        :class:`~server.storage.commits.GameBusy` (the row stayed locked for ``timeout_s``),
        :class:`~server.errors.StorageOutcomeUnknown` (the write was sent, its commit not
        confirmed, and the database could not be asked since: it may be stored; reading the
        row again tells), another :class:`~server.errors.StorageError` (the database failed;
        nothing was stored). Nothing was stored but on success or an unknown outcome. A task
        awaiting the outcome that is cancelled still waits for it.

        Raises:
            EventTooLargeError: the event does not fit a notification (nothing is queued; see
                :func:`server.storage.events.encode_event`).
        """
        ...

    async def close(self) -> None:
        """Stop storing: writes not yet stored fail with CancelledError."""
        ...
