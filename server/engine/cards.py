"""Cards: suits, ranks and the 52-card deck (docs/rules.md §1, deck order from §3).

>>> card = Card.parse("10h")
>>> str(card), card.index
('TH', 35)
>>> Card.from_index(0)
Card(rank=<Rank.ACE: 1>, suit=<Suit.CLUBS: 'C'>)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

from server.engine.errors import InvalidCardError, shown

__all__ = ["FULL_DECK", "Card", "Rank", "Suit"]


class Suit(StrEnum):
    """The four suits; the value is the one-letter text form. Declaration order is deck order."""

    CLUBS = "C"
    DIAMONDS = "D"
    HEARTS = "H"
    SPADES = "S"


class Rank(IntEnum):
    """The thirteen ranks; the value is the rank's number (ace low, 1..13)."""

    ACE = 1
    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13

    @property
    def symbol(self) -> str:
        """The one-character text form: ``A 2 3 4 5 6 7 8 9 T J Q K`` (docs/rules.md §1)."""
        return _RANK_SYMBOLS[self.value - 1]


_RANK_SYMBOLS: Final = "A23456789TJQK"
_SUITS: Final = tuple(Suit)
_RANK_BY_TEXT: Final[dict[str, Rank]] = {
    **{symbol: Rank(i + 1) for i, symbol in enumerate(_RANK_SYMBOLS)},
    "10": Rank.TEN,
}
_SUIT_BY_TEXT: Final[dict[str, Suit]] = {suit.value: suit for suit in Suit}


@dataclass(frozen=True, slots=True, order=False)
class Card:
    """One playing card. Immutable and hashable; compare by ``index`` if you need an order.

    Attributes:
        rank: the card's :class:`Rank`.
        suit: the card's :class:`Suit`.
    """

    rank: Rank
    suit: Suit

    def __post_init__(self) -> None:
        if not isinstance(self.rank, Rank) or not isinstance(self.suit, Suit):
            raise InvalidCardError(f"invalid card: rank={self.rank!r}, suit={self.suit!r}")

    @classmethod
    def parse(cls, text: str) -> Card:
        """Read a card from its text form: rank then suit (docs/rules.md §1).

        Args:
            text: e.g. ``"TH"``, ``"th"``, ``"10H"``, ``"AS"``. Case does not matter; nothing
                (not even whitespace) is stripped.

        Returns:
            The :class:`Card`.

        Raises:
            InvalidCardError: ``text`` is not a card; the message names it.
        """
        if not isinstance(text, str):
            raise InvalidCardError(f"invalid card {shown(text)}: not a string")
        upper = text.upper()
        rank = _RANK_BY_TEXT.get(upper[:-1])
        suit = _SUIT_BY_TEXT.get(upper[-1:])
        if rank is None or suit is None:
            raise InvalidCardError(
                f"invalid card {shown(text)}: expected a rank (A 2-9 T/10 J Q K) then a suit "
                "(C D H S), e.g. 'TH'"
            )
        return _DECK_BY_KEY[rank, suit]

    @classmethod
    def from_index(cls, index: int) -> Card:
        """The card at ``index`` in the unshuffled deck (suit-major C, D, H, S; each A..K).

        Args:
            index: ``0`` (``AC``) … ``51`` (``KS``).

        Returns:
            The :class:`Card`.

        Raises:
            InvalidCardError: ``index`` is not an ``int`` in ``0..51``.
        """
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 52:
            raise InvalidCardError(f"invalid card index {shown(index)}: expected 0..51")
        return FULL_DECK[index]

    @property
    def index(self) -> int:
        """Position in the unshuffled deck (docs/rules.md §3): ``13 * suit + rank - 1``, 0 = AC,
        51 = KS."""
        return _SUITS.index(self.suit) * 13 + self.rank.value - 1

    def __str__(self) -> str:
        return self.rank.symbol + self.suit.value


FULL_DECK: Final[tuple[Card, ...]] = tuple(Card(rank, suit) for suit in Suit for rank in Rank)
"""The 52 cards in index order (docs/rules.md §3 "Deck before shuffling")."""

_DECK_BY_KEY: Final[dict[tuple[Rank, Suit], Card]] = {
    (card.rank, card.suit): card for card in FULL_DECK
}
