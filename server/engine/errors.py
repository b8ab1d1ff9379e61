"""The engine's error family and rejection codes.

Every error the engine raises is an :class:`EngineError`, itself a :class:`ValueError`, so a caller
that only wants "bad input" can catch ``ValueError``. A refused game action is an
:class:`IllegalActionError` carrying a machine-readable :class:`Rejection` code (docs/rules.md
§2). The engine holds no text for players: the layers above turn a code into one, in the
player's language, from the message catalogue (``server/catalogue/``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = [
    "EngineError",
    "IllegalActionError",
    "InvalidActionError",
    "InvalidCardError",
    "InvalidDealError",
    "InvalidGameCodeError",
    "InvalidPositionError",
    "InvalidRuleSetError",
    "Rejection",
    "shown",
]

_SHOWN_MAX: Final = 40


def shown(text: object, limit: int = _SHOWN_MAX) -> str:
    """Quote untrusted input for an error message, cut to a sane length.

    Args:
        text: whatever the caller received (usually a ``str``).
        limit: the longest quote, in characters (40 unless given).

    Returns:
        ``repr(text)``, truncated to ``limit`` characters with ``...`` when longer.

    >>> shown("TP1-X")
    "'TP1-X'"
    """
    quoted = repr(text)
    if len(quoted) > limit:
        return quoted[: limit - 3] + "..."
    return quoted


class EngineError(ValueError):
    """Base class of every error raised by :mod:`server.engine`."""


class InvalidCardError(EngineError):
    """A card text (or card index) is not one of the 52 cards (docs/rules.md §1)."""


class InvalidGameCodeError(EngineError):
    """A game code does not follow ``TP1-<R>-<7 letters>`` or ``TP2-<R>-<28 letters>``, or its
    number is out of range (docs/rules.md §3).

    The message names the offending text and says what is wrong with it.
    """


class InvalidRuleSetError(InvalidGameCodeError):
    """A rule-set letter (the ``<R>`` of a game code) is not ``E``, ``C`` or legacy ``N``
    (docs/rules.md §3).

    A subclass of :class:`InvalidGameCodeError` because the letter is part of the code grammar.
    """


class InvalidDealError(EngineError):
    """A hand-built deal is not 28 + 1 + 23 distinct cards (docs/rules.md §2 "Start")."""


class InvalidActionError(EngineError):
    """An :class:`~server.engine.game.Action` is malformed (wrong kind, or ``pos`` where none fits).

    This is about the *shape* of an action; a well-formed action the rules refuse raises
    :class:`IllegalActionError` instead.
    """


class InvalidPositionError(InvalidActionError):
    """A layout position is not an ``int`` in ``0..27`` (docs/rules.md §1)."""


class Rejection(StrEnum):
    """Why a well-formed action was refused (docs/rules.md §2 rejection table).

    The value is the wire code.
    """

    NOT_ADJACENT = "not_adjacent"
    BLOCKED = "blocked"
    NO_CARD = "no_card"
    STOCK_EMPTY = "stock_empty"
    NOTHING_TO_UNDO = "nothing_to_undo"
    GAME_OVER = "game_over"
    ACTION_LIMIT = "action_limit"
    RANKED_NO_UNDO = "ranked_no_undo"


class IllegalActionError(EngineError):
    """The rules refuse an action; nothing in the game changed (docs/rules.md §2).

    Attributes:
        code: the :class:`Rejection` to send to the client.
        detail: a developer-oriented explanation (English, never shown to players as-is).
    """

    code: Rejection
    detail: str

    def __init__(self, code: Rejection, detail: str = "") -> None:
        self.code = Rejection(code)
        self.detail = detail
        super().__init__(f"{self.code.value}: {detail}" if detail else self.code.value)
