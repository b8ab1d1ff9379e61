"""The engine's error family, rejection codes and player-facing messages.

Every error the engine raises is an :class:`EngineError`, itself a :class:`ValueError`, so a caller
that only wants "bad input" can catch ``ValueError``. A refused game action is an
:class:`IllegalActionError` carrying a machine-readable :class:`Rejection` code (docs/rules.md
§2); the player-facing texts for those codes live here too, in English and Traditional Chinese.
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
    "Locale",
    "Rejection",
    "blocked_notice",
    "rejection_message",
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


class Locale(StrEnum):
    """The languages player messages exist in (docs/rules.md §2)."""

    EN = "en"
    ZH_HANT = "zh-Hant"

    @classmethod
    def parse(cls, text: str | None) -> Locale:
        """Read a locale tag leniently; anything unknown falls back to English.

        Args:
            text: a BCP 47 tag such as ``"en"``, ``"zh-Hant"``, ``"zh-TW"``, ``"zh-HK"`` (case and
                ``_``/``-`` do not matter; an Accept-Language list is read by its first tag), or
                ``None``.

        Returns:
            :attr:`ZH_HANT` for Traditional Chinese tags, :attr:`EN` otherwise. Never raises.

        >>> Locale.parse("zh-tw")
        <Locale.ZH_HANT: 'zh-Hant'>
        >>> Locale.parse(None)
        <Locale.EN: 'en'>
        """
        if not isinstance(text, str):
            return cls.EN
        tag = text.split(",", 1)[0].split(";", 1)[0].strip().lower().replace("_", "-")
        if tag == "zh-hant" or tag.startswith("zh-hant-") or tag in _HANT_REGIONS:
            return cls.ZH_HANT
        return cls.EN


_HANT_REGIONS: Final = frozenset({"zh-tw", "zh-hk", "zh-mo"})

_REJECTION_TEXT: Final[dict[Rejection, dict[Locale, str]]] = {
    Rejection.NOT_ADJACENT: {
        Locale.EN: "Must be one rank higher or lower",
        Locale.ZH_HANT: "點數必須大一級或小一級",
    },
    Rejection.BLOCKED: {
        Locale.EN: "This card is blocked.",
        Locale.ZH_HANT: "這張牌被擋住了",
    },
}

_BLOCKED_NOTICE: Final[dict[Locale, str]] = {
    Locale.EN: "No more moves available.",
    Locale.ZH_HANT: "已無可走的步驟",
}


def rejection_message(code: Rejection, locale: Locale) -> str | None:
    """The player-facing text for a rejection, shown while *error help* is on (docs/rules.md §2
    table).

    Args:
        code: the rejection code.
        locale: the player's language.

    Returns:
        The text for ``not_adjacent`` and ``blocked``; ``None`` for the codes that have none.

    >>> rejection_message(Rejection.BLOCKED, Locale.EN)
    'This card is blocked.'
    >>> rejection_message(Rejection.NO_CARD, Locale.EN) is None
    True
    """
    texts = _REJECTION_TEXT.get(Rejection(code))
    return None if texts is None else texts[Locale(locale)]


def blocked_notice(locale: Locale) -> str:
    """The notice shown when a game becomes blocked (docs/rules.md §2 "Blocked").

    Args:
        locale: the player's language.

    Returns:
        ``"No more moves available."`` or ``"已無可走的步驟"``.
    """
    return _BLOCKED_NOTICE[Locale(locale)]
