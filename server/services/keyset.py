"""What the boards' services (daily, weekly and monthly boards, ladder) share about their keyset
pages, windows "around me" and friends' views: the limits of a request, and the ranks of a
slice's entries (docs/rules.md §4: entries equal on the board's order share a rank, 1, 1, 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from server.errors import ErrorCode, InvalidInputError, NotFoundError

MAX_LIMIT = 100
"""The most entries a page holds."""
MAX_RADIUS = 50
"""The most entries a window holds on either side of its player."""

Row = TypeVar("Row")
Slice = TypeVar("Slice")


class _Cursor(Protocol):
    def encode(self) -> str: ...


class Keyed(Protocol):
    """An entry with a position in its board's order, the cursor naming it."""

    @property
    def key(self) -> _Cursor: ...


Entry = TypeVar("Entry", bound=Keyed)


@dataclass(frozen=True, slots=True)
class Page(Generic[Entry]):
    """A page of a board's entries and the cursor of the next page (None at the end)."""

    entries: list[Entry]
    next_cursor: str | None


def page_of(entries: list[Entry], limit: int) -> Page[Entry]:
    """The page of the first ``limit`` of ``entries``, read with one entry more than asked for:
    that one tells whether a next page exists (its cursor is the last shown entry's)."""
    shown = entries[:limit]
    return Page(shown, shown[-1].key.encode() if len(entries) > limit else None)


def check_limit(limit: int) -> None:
    """Refuse a page's ``limit`` outside 1..:data:`MAX_LIMIT`.

    Raises:
        InvalidInputError: ``bad_limit``.
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"limit must be 1..{MAX_LIMIT}", code=ErrorCode.BAD_LIMIT)


def check_radius(radius: int) -> None:
    """Refuse a window's ``radius`` outside 0..:data:`MAX_RADIUS`.

    Raises:
        InvalidInputError: ``bad_radius``.
    """
    if not 0 <= radius <= MAX_RADIUS:
        raise InvalidInputError(f"radius must be 0..{MAX_RADIUS}", code=ErrorCode.BAD_RADIUS)


def ranks(
    rows: Sequence[Row], better: int, before: int, tied: Callable[[Row, Row], bool]
) -> list[int]:
    """The ranks of a slice's rows, in board order: the first's is ``better + 1`` (``better``:
    the entries ranked strictly better than it); a row tied with the previous one shares its
    rank, any other row is ranked by its position (``before``: the entries before the slice).
    """
    found: list[int] = []
    for i, row in enumerate(rows):
        if i == 0:
            found.append(better + 1)
        elif tied(row, rows[i - 1]):
            found.append(found[-1])
        else:
            found.append(before + i + 1)
    return found


def window_found(window: Slice | None, unranked: str) -> Slice:
    """A window around a player as a board's store read it, or, when the player has no entry
    there (None), the error naming why.

    Raises:
        NotFoundError: ``not_ranked``, its message ``unranked``.
    """
    if window is None:
        raise NotFoundError(unranked, code=ErrorCode.NOT_RANKED)
    return window
