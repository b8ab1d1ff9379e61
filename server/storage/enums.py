"""The enumerated values stored in columns, and the column type that stores them.

The database holds each as a plain ``VARCHAR`` with a check constraint naming the allowed
values (no PostgreSQL enum type), so adding a member takes a migration of the constraint only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import String, TypeDecorator


class RaceStatus(StrEnum):
    """Where a race room is in its life (docs/rules.md §4 "Races"); the value is the stored one."""

    LOBBY = "lobby"  # players join and leave; the host may start
    RUNNING = "running"  # from the host's start (the countdown to ``starts_at``) to the end
    FINISHED = "finished"  # over; ``results`` stored
    CLOSED = "closed"  # abandoned before its start (left empty, or never started)

    @property
    def is_open(self) -> bool:
        """Lobby or running: presence is kept, and a seat counts towards a player's rooms."""
        return self in OPEN_RACE_STATUSES


#: The statuses of an open room (see :attr:`RaceStatus.is_open`), as used in queries.
OPEN_RACE_STATUSES = (RaceStatus.LOBBY, RaceStatus.RUNNING)


class PresenceState(StrEnum):
    """Whether a racer or watcher is there (docs/rules.md §4 "Presence"); the stored value."""

    CONNECTED = "connected"  # at least one open connection follows the room
    RECONNECTING = "reconnecting"  # none since ``since``; the place is kept for the grace period
    GONE = "gone"  # left, or not back within the grace period


class PresenceRole(StrEnum):
    """How a player is in a room: seated (``racer``) or watching (``watcher``)."""

    RACER = "racer"
    WATCHER = "watcher"


E = TypeVar("E", bound=StrEnum)


class EnumText(TypeDecorator[E]):
    """A ``VARCHAR(length)`` column holding a :class:`StrEnum`'s values: written from a member
    or its value (checked: anything else fails the statement), read back as the member."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Any) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: str | None, dialect: Any) -> E | None:
        return None if value is None else self.enum(value)


def one_of(column: str, enum: type[StrEnum]) -> str:
    """The check constraint text ``column IN ('a', 'b', …)`` of an enum's values."""
    values = ", ".join(f"'{member.value}'" for member in enum)
    return f"{column} IN ({values})"


__all__ = [
    "OPEN_RACE_STATUSES",
    "EnumText",
    "PresenceRole",
    "PresenceState",
    "RaceStatus",
    "one_of",
]
