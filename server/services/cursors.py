"""The opaque keyset cursors of the boards (daily, weekly and monthly boards, ladder).

A cursor names one position in a board's order: the URL-safe base64 (no padding) of a compact
JSON list of that position's values, e.g. ``[120,3,1]``. :func:`decode` checks the number of
values, that each is of its slot's kind, and that every integer is in its column's range (a
value outside it could not be bound to the query); every failure is the one ``bad_cursor``
error, naming nothing of the cursor's content.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass

from server.errors import ErrorCode, InvalidInputError

MAX_LENGTH = 200
"""The longest cursor accepted, in characters."""


@dataclass(frozen=True, slots=True)
class Range:
    """The integers ``low`` to ``high`` (both included) one slot of a cursor may hold."""

    low: int
    high: int


INT32 = Range(-(2**31), 2**31 - 1)
"""An INTEGER column."""
NAT32 = Range(0, 2**31 - 1)
"""An INTEGER column holding no negative values."""
NAT64 = Range(0, 2**63 - 1)
"""A BIGINT column holding no negative values."""
TEXT = None
"""A slot holding a string (e.g. an ISO 8601 time) instead of an integer."""

Slot = Range | None


def bad_cursor() -> InvalidInputError:
    """The error for every cursor that is not valid: ``bad_cursor``."""
    return InvalidInputError("the cursor is not valid", code=ErrorCode.BAD_CURSOR)


def encode(values: Sequence[int | str]) -> str:
    """``values`` as an opaque URL-safe cursor."""
    raw = json.dumps(list(values), separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str, slots: Sequence[Slot]) -> list[int | str]:
    """The values of a cursor made by :func:`encode`, one per slot of ``slots``: an integer
    in the slot's :class:`Range`, or a string for a :data:`TEXT` slot.

    Raises:
        InvalidInputError: ``bad_cursor``.
    """
    try:
        if len(cursor) > MAX_LENGTH:
            raise ValueError("too long")
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise bad_cursor() from None
    if not isinstance(values, list) or len(values) != len(slots):
        raise bad_cursor()
    if not all(_fits(value, slot) for value, slot in zip(values, slots, strict=True)):
        raise bad_cursor()
    return values


def _fits(value: object, slot: Slot) -> bool:
    """Whether ``value`` is of ``slot``'s kind and, for an integer, in its range."""
    if slot is None:
        return isinstance(value, str)
    return isinstance(value, int) and not isinstance(value, bool) and slot.low <= value <= slot.high


def decode_ints(cursor: str, slots: Sequence[Range]) -> list[int]:
    """The integers of a cursor made by :func:`encode` from integers only, one per slot.

    Raises:
        InvalidInputError: ``bad_cursor``.
    """
    return [int(v) for v in decode(cursor, slots)]
