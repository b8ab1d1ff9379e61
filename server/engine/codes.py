"""Rule sets, game codes and the ``TP1`` deal algorithm (SPEC §3).

>>> code = GameCode.parse(" tp1-n-aaaaaab ")
>>> str(code), code.rules, code.number
('TP1-E-AAAAAAB', <RuleSet.EASY: 'E'>, 1)
>>> deal = GameCode.parse("TP1-E-AAAAAAA").deal()
>>> str(deal.tableau[0]), str(deal.waste), str(deal.stock[0])
('3H', '4H', 'KH')
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from server.engine.cards import FULL_DECK, Card
from server.engine.errors import (
    InvalidDealError,
    InvalidGameCodeError,
    InvalidRuleSetError,
    shown,
)
from server.engine.layout import POSITION_COUNT

__all__ = [
    "CODE_LENGTH",
    "CODE_SPACE",
    "DEAL_ALGORITHM",
    "STOCK_SIZE",
    "Deal",
    "GameCode",
    "RuleSet",
    "deal_tp1",
    "tp1_shuffle",
    "tp1_words",
]

DEAL_ALGORITHM: Final = "TP1"
"""The deal algorithm version every code and stored game names (SPEC §3)."""

CODE_LENGTH: Final = 7
"""Letters in a game code's number part."""

CODE_SPACE: Final = 26**CODE_LENGTH
"""Number of distinct deals a code can name: ``0 <= number < CODE_SPACE``."""

STOCK_SIZE: Final = 23
"""Cards in the stock at the start (SPEC §2 "Start")."""

_LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_TWO_64: Final = 1 << 64


class RuleSet(StrEnum):
    """The two rule sets; the value is the letter shown in codes (SPEC §2, §3)."""

    EASY = "E"
    CLASSIC = "C"

    @classmethod
    def parse(cls, text: str) -> RuleSet:
        """Read a rule-set letter.

        Args:
            text: ``"E"``, ``"C"`` or the legacy ``"N"`` (read as Easy); case-insensitive,
                surrounding whitespace ignored.

        Returns:
            The :class:`RuleSet`.

        Raises:
            InvalidRuleSetError: (an :class:`InvalidGameCodeError`) for anything else, naming it.
        """
        letter = text.strip().upper() if isinstance(text, str) else None
        if letter == "N":
            return cls.EASY
        for rules in cls:
            if rules.value == letter:
                return rules
        raise InvalidRuleSetError(
            f"invalid rule set {shown(text)}: expected E (Easy), C (Classic) or legacy N"
        )

    @property
    def wraps(self) -> bool:
        """``True`` when King and Ace are neighbours both ways (Easy), ``False`` for Classic."""
        return self is RuleSet.EASY


@dataclass(frozen=True, slots=True)
class Deal:
    """The dealt cards of one game (SPEC §2 "Start", §3 "Deal").

    Attributes:
        tableau: 28 cards in position order (position 0 first).
        waste: the card face up on the waste at the start.
        stock: 23 cards in draw order: ``stock[0]`` is drawn first.

    Raises:
        InvalidDealError: on construction, unless the counts are 28/1/23 and all 52 cards differ.
    """

    tableau: tuple[Card, ...]
    waste: Card
    stock: tuple[Card, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "tableau", tuple(self.tableau))
        object.__setattr__(self, "stock", tuple(self.stock))
        if len(self.tableau) != POSITION_COUNT or len(self.stock) != STOCK_SIZE:
            raise InvalidDealError(
                f"a deal has {POSITION_COUNT} tableau and {STOCK_SIZE} stock cards, "
                f"got {len(self.tableau)} and {len(self.stock)}"
            )
        cards = self.deck
        if not all(isinstance(card, Card) for card in cards) or len(set(cards)) != len(cards):
            raise InvalidDealError("a deal must hold 52 distinct Card values")

    @classmethod
    def from_deck(cls, deck: Sequence[Card]) -> Deal:
        """Split a 52-card sequence like TP1 does: 28 tableau, 1 waste, 23 stock in draw order.

        Args:
            deck: 52 distinct cards.

        Returns:
            The :class:`Deal`.

        Raises:
            InvalidDealError: ``deck`` is not 52 distinct cards.
        """
        if len(deck) != len(FULL_DECK):
            raise InvalidDealError(f"a deck has 52 cards, got {len(deck)}")
        return cls(
            tableau=tuple(deck[:POSITION_COUNT]),
            waste=deck[POSITION_COUNT],
            stock=tuple(deck[POSITION_COUNT + 1 :]),
        )

    @property
    def deck(self) -> tuple[Card, ...]:
        """All 52 cards in one sequence: tableau, waste, stock (inverse of :meth:`from_deck`)."""
        return (*self.tableau, self.waste, *self.stock)


def tp1_words(number: int) -> Iterator[int]:
    """The endless stream of 64-bit random words for deal ``number`` (SPEC §3 "Random words").

    Block ``k`` is ``SHA-256(b"TP1" + number as 8 bytes big-endian + k as 4 bytes big-endian)``;
    each block yields its four 64-bit big-endian words in order.

    Args:
        number: the code's number, ``0 <= number < CODE_SPACE``.

    Returns:
        An iterator of ints in ``0 .. 2**64 - 1``.
    """
    prefix = DEAL_ALGORITHM.encode("ascii") + number.to_bytes(8, "big")
    block = 0
    while True:
        digest = hashlib.sha256(prefix + block.to_bytes(4, "big")).digest()
        for offset in range(0, 32, 8):
            yield int.from_bytes(digest[offset : offset + 8], "big")
        block += 1


def tp1_shuffle(words: Iterable[int]) -> tuple[Card, ...]:
    """Shuffle the ordered deck with Fisher–Yates and rejection sampling (SPEC §3 "Shuffle").

    For ``i`` from 51 down to 1: ``bound = i + 1``, ``limit = 2**64 - 2**64 % bound``; take the next
    word, skipping words ``>= limit``; swap ``deck[i]`` with ``deck[word % bound]``.

    Args:
        words: the random words, used in order (only as many as needed are read).

    Returns:
        The 52 shuffled cards.

    Raises:
        ValueError: ``words`` ran out.
    """
    deck = list(FULL_DECK)
    source = iter(words)
    for i in range(len(deck) - 1, 0, -1):
        bound = i + 1
        limit = _TWO_64 - _TWO_64 % bound
        word = next(source, None)
        while word is not None and word >= limit:
            word = next(source, None)
        if word is None:
            raise ValueError("tp1_shuffle: ran out of random words")
        j = word % bound
        deck[i], deck[j] = deck[j], deck[i]
    return tuple(deck)


def deal_tp1(number: int) -> Deal:
    """Deal game ``number`` with the ``TP1`` algorithm (SPEC §3).

    Args:
        number: ``0 <= number < CODE_SPACE`` (the base-26 value of the code's letters).

    Returns:
        The :class:`Deal`: shuffled ``deck[0:28]`` → positions, ``deck[28]`` → waste,
        ``deck[29:52]`` → stock in draw order.

    Raises:
        InvalidGameCodeError: ``number`` is out of range.
    """
    _check_number(number)
    return Deal.from_deck(tp1_shuffle(tp1_words(number)))


def _check_number(number: object) -> None:
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < CODE_SPACE:
        raise InvalidGameCodeError(
            f"invalid game number {shown(number)}: expected an int in 0..{CODE_SPACE - 1}"
        )


def _letters_to_number(letters: str) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + _LETTERS.index(letter)
    return number


def _is_code_letters(text: str) -> bool:
    return len(text) == CODE_LENGTH and all(letter in _LETTERS for letter in text)


@dataclass(frozen=True, slots=True)
class GameCode:
    """A game code ``TP1-<R>-<7 letters>``: a rule set and a deal number (SPEC §3).

    Attributes:
        rules: the :class:`RuleSet`.
        number: ``0 <= number < CODE_SPACE``; the same number deals the same cards under any rules.

    Raises:
        InvalidGameCodeError: on construction, when ``number`` is out of range or ``rules`` is not
            a :class:`RuleSet`.
    """

    rules: RuleSet
    number: int

    def __post_init__(self) -> None:
        if not isinstance(self.rules, RuleSet):
            raise InvalidGameCodeError(f"invalid rule set {shown(self.rules)}: expected a RuleSet")
        _check_number(self.number)

    @classmethod
    def parse(cls, text: str) -> GameCode:
        """Read a game code (SPEC §3 "Grammar").

        Args:
            text: e.g. ``"TP1-E-HELLOAB"``; case-insensitive, surrounding whitespace stripped;
                the legacy rule letter ``N`` is read as ``E``.

        Returns:
            The :class:`GameCode`.

        Raises:
            InvalidGameCodeError: the text is not a code; the message names it and what is wrong.
        """
        if not isinstance(text, str):
            raise InvalidGameCodeError(f"invalid game code {shown(text)}: not a string")
        parts = text.strip().upper().split("-")
        problem: str | None = None
        if not text.isascii():  # "ı".upper() is "I": only the letters A-Z themselves count
            problem = "only ASCII may appear: the deal part must be exactly 7 letters A-Z"
        elif len(parts) != 3:
            problem = "expected the form TP1-<E|C>-<7 letters A-Z>, e.g. TP1-E-HELLOAB"
        elif parts[0] != DEAL_ALGORITHM:
            problem = f"unknown deal algorithm {shown(parts[0])}, expected {DEAL_ALGORITHM}"
        elif parts[1] not in ("E", "C", "N"):
            problem = f"unknown rule set {shown(parts[1])}, expected E, C or N"
        elif not _is_code_letters(parts[2]):
            problem = f"the deal part {shown(parts[2])} must be exactly 7 letters A-Z"
        if problem is not None:
            raise InvalidGameCodeError(f"invalid game code {shown(text)}: {problem}")
        return cls(RuleSet.parse(parts[1]), _letters_to_number(parts[2]))

    @classmethod
    def from_letters(cls, letters: str, rules: RuleSet = RuleSet.EASY) -> GameCode:
        """Build a code from its 7 letters.

        Args:
            letters: 7 letters A–Z (case-insensitive), the base-26 number, most significant first.
            rules: the rule set.

        Returns:
            The :class:`GameCode`.

        Raises:
            InvalidGameCodeError: ``letters`` is not 7 letters A–Z.
        """
        upper = letters.upper() if isinstance(letters, str) else ""
        if not _is_code_letters(upper):
            raise InvalidGameCodeError(
                f"invalid game code letters {shown(letters)}: expected exactly 7 letters A-Z"
            )
        return cls(rules, _letters_to_number(upper))

    @classmethod
    def random(cls, rules: RuleSet = RuleSet.EASY) -> GameCode:
        """A code with a uniformly random number from a cryptographic source (SPEC §3).

        Args:
            rules: the rule set.

        Returns:
            A new :class:`GameCode`.
        """
        return cls(rules, secrets.randbelow(CODE_SPACE))

    @property
    def letters(self) -> str:
        """The 7 upper-case letters naming :attr:`number` in base 26 (A = 0), e.g. ``"AAAAAAB"``."""
        digits = []
        number = self.number
        for _ in range(CODE_LENGTH):
            number, digit = divmod(number, 26)
            digits.append(_LETTERS[digit])
        return "".join(reversed(digits))

    def deal(self) -> Deal:
        """The cards of this code, by ``TP1`` (depends on :attr:`number` only).

        Returns:
            The :class:`Deal`.
        """
        return deal_tp1(self.number)

    def __str__(self) -> str:
        return f"{DEAL_ALGORITHM}-{self.rules.value}-{self.letters}"
