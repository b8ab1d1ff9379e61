"""Helpers shared by the engine tests: hand-built deals, scripted games and state snapshots."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from server.engine import FULL_DECK, Card, Deal, Game, RuleSet, Status

POSITIONS = range(28)


def cards(text: str) -> tuple[Card, ...]:
    """Parse space-separated card texts, e.g. ``cards("AH 2D")``."""
    return tuple(Card.parse(word) for word in text.split())


def expected_deal(tableau: str, waste: str, stock: str) -> Deal:
    """The deal with these cards: 28 tableau cards, the waste card, 23 stock cards (texts)."""
    return Deal(tableau=cards(tableau), waste=cards(waste)[0], stock=cards(stock))


def make_deal(
    tableau: Sequence[str | None],
    waste: str,
    stock_head: Sequence[str] = (),
    stock_tail: Sequence[str] = (),
) -> Deal:
    """Build a deal by hand.

    ``tableau`` has 28 entries (``None`` = any unused card); the stock starts with ``stock_head``,
    ends with ``stock_tail`` (the last card drawn) and is filled in between with the unused cards
    in deck order. Unused cards fill ``None`` tableau slots first, in deck order.
    """
    assert len(tableau) == 28
    named = [Card.parse(t) for t in tableau if t is not None]
    named += [Card.parse(waste), *map(Card.parse, stock_head), *map(Card.parse, stock_tail)]
    assert len(set(named)) == len(named), "a card is named twice"
    spare = iter(card for card in FULL_DECK if card not in named)
    laid = tuple(Card.parse(t) if t is not None else next(spare) for t in tableau)
    middle = tuple(spare)
    stock = (*map(Card.parse, stock_head), *middle, *map(Card.parse, stock_tail))
    return Deal(tableau=laid, waste=Card.parse(waste), stock=stock)


# A deal that is won by removing the 28 cards in CHAIN_ORDER without drawing, each card one rank
# above the previous one (waste KC, then AD 2D … KD AH … KH AS 2S: wraps K→A twice, so Easy only).
# The left peak is cleared by the 10th removal (pos 0), the middle by the 19th (pos 1), the right
# by the 28th (pos 2). The stock is AC..QC, 4S..KS, then 3S (drawn last; a neighbour of 2S).
CHAIN_ORDER = (18, 19, 20, 21, 9, 10, 11, 3, 4, 0,
               22, 23, 24, 12, 13, 14, 5, 6, 1,
               25, 26, 27, 15, 16, 17, 7, 8, 2)  # fmt: skip
CHAIN_CARDS = "AD 2D 3D 4D 5D 6D 7D 8D 9D TD JD QD KD AH 2H 3H 4H 5H 6H 7H 8H 9H TH JH QH KH AS 2S"
CHAIN_STOCK = "AC 2C 3C 4C 5C 6C 7C 8C 9C TC JC QC 4S 5S 6S 7S 8S 9S TS JS QS KS 3S"


def chain_deal() -> Deal:
    """The deal described above CHAIN_ORDER."""
    tableau: list[str | None] = [None] * 28
    for pos, text in zip(CHAIN_ORDER, CHAIN_CARDS.split(), strict=True):
        tableau[pos] = text
    return make_deal(tableau, "KC", stock_head=CHAIN_STOCK.split())


def blocking_deal(bottom: str = "AC 2C 3C 4C JC QC KC AD 2D 3D") -> Deal:
    """A deal whose bottom row (18..27) is ``bottom``, waste 7H, and whose last stock card is 7S.

    With the default bottom row no removal is ever possible, so drawing the 23 cards blocks it.
    """
    tableau: list[str | None] = [None] * 18 + bottom.split()
    return make_deal(tableau, "7H", stock_tail=["7S"])


def play(game: Game, positions: Sequence[int]) -> None:
    """Remove the cards at ``positions`` in order."""
    for pos in positions:
        game.remove(pos)


def draw_all(game: Game) -> None:
    """Draw until the stock is empty."""
    while game.stock_count:
        game.draw()


def board(game: Game) -> tuple[Any, ...]:
    """Everything that defines the cards' places, the score and the status (not the counters)."""
    return (
        tuple(game.tableau_card(pos) for pos in POSITIONS),
        tuple(game.is_face_up(pos) for pos in POSITIONS),
        game.waste,
        game.stock,
        game.score,
        game.status,
        game.cards_left,
        game.cleared_peaks,
    )


def full_state(game: Game) -> tuple[Any, ...]:
    """:func:`board` plus counters, history depth, the action log and what is legal now."""
    return (
        board(game),
        game.moves,
        game.undos,
        game.seq,
        game.actions,
        game.undo_depth,
        game.can_undo,
        game.is_over,
        game.legal_actions(),
        game.view(),
        game.rules,
        game.ranked,
        game.deal,
    )


def status_of(game: Game) -> Status:
    """``game.status``, read through a call so mypy does not carry narrowing across moves."""
    return game.status


def chain_game(rules: RuleSet = RuleSet.EASY, *, ranked: bool = False) -> Game:
    """A fresh game on :func:`chain_deal`."""
    return Game(chain_deal(), rules, ranked=ranked)
