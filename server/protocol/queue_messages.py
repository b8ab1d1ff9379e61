"""The quick-race queue's messages (docs/protocol.md §11.11): the replies to ``queue_join``
(``queue_waiting``) and ``queue_cancel`` (``queue_cancelled``), and ``queue_matched``, pushed to
a waiting player's sockets when they are matched into a race. :mod:`server.protocol.server`
gathers every message.
"""

from __future__ import annotations

import datetime as dt

from server.protocol.messages import Message, iso_time


class QueueWaiting(Message, frozen=True, tag="queue_waiting"):
    """Reply to ``queue_join``: the player waits under ``rules`` (``E`` or ``C``) with their
    shown ``rating``, since ``since`` (UTC), and the rating ``gap`` accepted now (it widens
    with the wait; docs/rules.md §4 "Quick races")."""

    rules: str
    rating: int
    gap: int
    since: str
    id: int | str | None = None


class QueueCancelled(Message, frozen=True, tag="queue_cancelled"):
    """Reply to ``queue_cancel``: the player no longer waits; ``was_waiting`` says whether they
    did."""

    was_waiting: bool
    id: int | str | None = None


class QueueMatched(Message, frozen=True, tag="queue_matched"):
    """Pushed to every socket of a matched player: the race's ``invite`` (take the seat kept
    for them with ``race_join``) and its ``rules``."""

    invite: str
    rules: str


def queue_waiting(
    rules: str, rating: int, gap: int, since: dt.datetime, request_id: int | str | None
) -> QueueWaiting:
    """Reply to ``queue_join``."""
    shown = iso_time(since)
    assert shown is not None
    return QueueWaiting(rules, rating, gap, shown, request_id)


def queue_cancelled(was_waiting: bool, request_id: int | str | None) -> QueueCancelled:
    """Reply to ``queue_cancel``."""
    return QueueCancelled(was_waiting, request_id)


def queue_matched(invite: str, rules: str) -> QueueMatched:
    """Pushed to a matched player."""
    return QueueMatched(invite, rules)


__all__ = [
    "QueueCancelled",
    "QueueMatched",
    "QueueWaiting",
    "queue_cancelled",
    "queue_matched",
    "queue_waiting",
]
