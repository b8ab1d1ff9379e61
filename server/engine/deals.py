"""The ``TP1`` and ``TP2`` deal algorithms (docs/rules.md §3 "Random words", "Shuffle",
"Deal", "TP2"): the random words of a deal number, the shuffle, and the :class:`Deal` they make.

Both algorithms shuffle and deal the same way; only their random words differ. A game code
(:mod:`server.engine.codes`) names a deal by its algorithm (:class:`DealVersion`) and number.

>>> str(deal_tp1(0).tableau[0]), str(deal_tp1(0).waste), str(deal_tp1(0).stock[0])
('3H', '4H', 'KH')
>>> str(deal_tp2(0).waste)
'QD'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from server.engine.cards import FULL_DECK, Card
from server.engine.errors import InvalidDealError, InvalidGameCodeError, shown
from server.engine.layout import POSITION_COUNT

__all__ = [
    "STOCK_SIZE",
    "Deal",
    "DealVersion",
    "check_number",
    "deal_tp1",
    "deal_tp2",
    "deal_words",
    "tp1_shuffle",
    "tp1_words",
]


class DealVersion(StrEnum):
    """A deal algorithm: the first part of a code, stored with every game (docs/rules.md §3).

    ``TP1``: 7 letters, a number below 26⁷ hashed as 8 bytes; ``TP2``: 28 letters, a number
    below 26²⁸ hashed as 17 bytes (sealed deals). The value is the code's prefix.
    """

    TP1 = "TP1"
    TP2 = "TP2"

    @property
    def letters(self) -> int:
        """Letters in a code's number part: 7 (TP1) or 28 (TP2)."""
        return 7 if self is DealVersion.TP1 else 28

    @property
    def space(self) -> int:
        """Distinct deals the version can name: ``0 <= number < space`` (26 ** letters)."""
        return int(26**self.letters)

    @property
    def number_bytes(self) -> int:
        """Bytes of the number in each hashed block: 8 (TP1) or 17 (TP2)."""
        return 8 if self is DealVersion.TP1 else 17


STOCK_SIZE: Final = 23
"""Cards in the stock at the start (docs/rules.md §2 "Start")."""

_TWO_64: Final = 1 << 64


@dataclass(frozen=True, slots=True)
class Deal:
    """The dealt cards of one game (docs/rules.md §2 "Start", §3 "Deal").

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


def deal_words(version: DealVersion, number: int) -> Iterator[int]:
    """The endless stream of 64-bit random words for deal ``number`` of ``version``
    (docs/rules.md §3 "Random words").

    Block ``k`` is ``SHA-256(version + number big-endian + k as 4 bytes big-endian)``, the number
    taking 8 bytes under ``TP1`` and 17 under ``TP2``; each block yields its four 64-bit
    big-endian words in order.

    Args:
        version: the deal algorithm.
        number: the code's number, ``0 <= number < version.space``.

    Returns:
        An iterator of ints in ``0 .. 2**64 - 1``.
    """
    prefix = version.value.encode("ascii") + number.to_bytes(version.number_bytes, "big")
    block = 0
    while True:
        digest = hashlib.sha256(prefix + block.to_bytes(4, "big")).digest()
        for offset in range(0, 32, 8):
            yield int.from_bytes(digest[offset : offset + 8], "big")
        block += 1


def tp1_words(number: int) -> Iterator[int]:
    """The random words of TP1 deal ``number`` (see :func:`deal_words`)."""
    return deal_words(DealVersion.TP1, number)


def tp1_shuffle(words: Iterable[int]) -> tuple[Card, ...]:
    """Shuffle the ordered deck with Fisher–Yates and rejection sampling (docs/rules.md §3
    "Shuffle"); TP2 shuffles the same way.

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
    """Deal game ``number`` with the ``TP1`` algorithm (docs/rules.md §3).

    Args:
        number: ``0 <= number < CODE_SPACE`` (the base-26 value of the code's letters).

    Returns:
        The :class:`Deal`: shuffled ``deck[0:28]`` → positions, ``deck[28]`` → waste,
        ``deck[29:52]`` → stock in draw order.

    Raises:
        InvalidGameCodeError: ``number`` is out of range.
    """
    check_number(number, DealVersion.TP1)
    return Deal.from_deck(tp1_shuffle(deal_words(DealVersion.TP1, number)))


def deal_tp2(number: int) -> Deal:
    """Deal game ``number`` with the ``TP2`` algorithm (docs/rules.md §3 "TP2"): TP1's shuffle and
    deal over TP2's random words.

    Args:
        number: ``0 <= number < TP2_CODE_SPACE`` (the base-26 value of the code's 28 letters).

    Returns:
        The :class:`Deal`.

    Raises:
        InvalidGameCodeError: ``number`` is out of range.
    """
    check_number(number, DealVersion.TP2)
    return Deal.from_deck(tp1_shuffle(deal_words(DealVersion.TP2, number)))


def check_number(number: object, version: DealVersion) -> None:
    """Refuse a deal number outside ``0 <= number < version.space`` (or not an int).

    Raises:
        InvalidGameCodeError: naming the number and the range.
    """
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < version.space:
        raise InvalidGameCodeError(
            f"invalid {version.value} game number {shown(number)}: "
            f"expected an int in 0..26**{version.letters} - 1"
        )
