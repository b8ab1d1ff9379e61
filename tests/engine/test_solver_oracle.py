"""An independent brute-force oracle for the solver, and checks that the oracle follows the engine.

The oracle searches every sequence of removals and draws from a position (memoised on the full
state: removed set, cards drawn, waste rank), with the rules written out again from docs/rules.md
§2. It knows nothing of the solver's configuration tables or bit fields. It is exponential in
general and meant for small positions: few cards left, a short stock, or few distinct ranks.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from server.engine import COVERED_BY, FULL_DECK, PEAKS, Action, Card, Deal, Game, RuleSet, Status
from server.engine.solver import Position

ALL = frozenset(range(28))


@dataclass(frozen=True)
class Outcome:
    """What the oracle found: whether a win is reachable and the best final score of any ending."""

    winnable: bool
    best: int


def _neighbours(a: int, b: int, wraps: bool) -> bool:
    gap = abs(a - b)
    return gap == 1 or (wraps and gap == 12)


def _playable(removed: frozenset[int]) -> list[int]:
    return [
        pos
        for pos in range(28)
        if pos not in removed and all(above in removed for above in COVERED_BY[pos])
    ]


def _cleared(removed: frozenset[int]) -> int:
    return sum(1 for peak in PEAKS if peak <= removed)


def brute_force(position: Position) -> Outcome:
    """Exhaustive search from ``position``: can it be won, and the best final score of any ending
    (won, or blocked: stock empty and no playable card next to the waste)."""
    ranks = [int(card.rank) for card in position.tableau]
    stock = [int(card.rank) for card in position.stock]
    wraps = position.rules.wraps

    @functools.cache
    def search(removed: frozenset[int], drawn: int, waste: int) -> tuple[bool, int]:
        # (win reachable, best score change until the game ends)
        if removed == ALL:
            return True, 0
        options: list[tuple[bool, int]] = []
        for pos in _playable(removed):
            if _neighbours(ranks[pos], waste, wraps):
                after = removed | {pos}
                bonus = 100 if _cleared(after) > _cleared(removed) else 0
                win, gain = search(after, drawn, ranks[pos])
                options.append((win, gain - 1 + bonus))
        if drawn < len(stock):
            win, gain = search(removed, drawn + 1, stock[drawn])
            options.append((win, gain - 1))
        if not options:
            return False, 0  # blocked
        return any(win for win, _ in options), max(gain for _, gain in options)

    win, gain = search(position.removed, 0, int(position.waste.rank))
    return Outcome(win, position.score + gain)


def play_out(position: Position, line: Sequence[Action]) -> tuple[str, int]:
    """Replay ``line`` from ``position`` by the rules (written out again here).

    Returns:
        ``(status, score)`` at the end: ``"won"``, ``"blocked"`` or ``"playing"``.

    Raises:
        AssertionError: an action of the line is illegal, or comes after the game ended.
    """
    removed = set(position.removed)
    stock = list(position.stock)
    waste = position.waste
    score = position.score
    wraps = position.rules.wraps

    def status() -> str:
        if len(removed) == 28:
            return "won"
        frozen = frozenset(removed)
        if not stock and not any(
            _neighbours(int(position.tableau[p].rank), int(waste.rank), wraps)
            for p in _playable(frozen)
        ):
            return "blocked"
        return "playing"

    for action in line:
        assert status() == "playing", f"{action} after the game ended"
        if action.pos is None:
            assert stock, "draw from an empty stock"
            waste = stock.pop(0)
            score -= 1
        else:
            assert action.pos in _playable(frozenset(removed)), f"{action}: not playable"
            card = position.tableau[action.pos]
            assert _neighbours(int(card.rank), int(waste.rank), wraps), f"{action}: not adjacent"
            before = _cleared(frozenset(removed))
            removed.add(action.pos)
            waste = card
            score += -1 + (100 if _cleared(frozenset(removed)) > before else 0)
    return status(), score


def random_closed_set(rng: random.Random, size: int) -> frozenset[int]:
    """A random removed set of ``size`` positions that play could produce (closed under cover)."""
    removed: set[int] = set()
    while len(removed) < size:
        removed.add(rng.choice(_playable(frozenset(removed))))
    return frozenset(removed)


def small_position(rng: random.Random, rules: RuleSet) -> Position:
    """A random hand-built position small enough for :func:`brute_force`: 4–13 cards left drawn
    from 3–6 distinct ranks, and 0–7 cards in the stock. Cards may repeat (only ranks matter)."""
    left = rng.randint(4, 13)
    removed = random_closed_set(rng, 28 - left)
    first = rng.randint(1, 13)
    spread = rng.randint(3, 6)
    pool = [((first - 1 + k) % 13) + 1 for k in range(spread)]

    def card() -> Card:
        rank = rng.choice(pool) if rng.random() < 0.85 else rng.randint(1, 13)
        return FULL_DECK[rng.randrange(4) * 13 + rank - 1]

    tableau = tuple(card() for _ in range(28))
    stock = tuple(card() for _ in range(rng.randint(0, 7)))
    return Position(tableau, removed, stock, card(), rules, 500 - 28 + left - 23 + len(stock))


def random_game(rng: random.Random, game: Game, *, max_left: int, max_stock: int) -> Game:
    """Play random legal removals and draws (removals preferred) until at most ``max_left`` cards
    and ``max_stock`` stock cards remain, or the game ends."""
    while game.status is Status.PLAYING and (
        game.cards_left > max_left or game.stock_count > max_stock
    ):
        actions = [a for a in game.legal_actions() if a.kind != "undo"]
        removals = [a for a in actions if a.pos is not None]
        game.apply(rng.choice(removals) if removals and rng.random() < 0.8 else actions[-1])
    return game


# ---------------------------------------------------------------- the oracle follows the engine


def test_oracle_replay_agrees_with_the_engine_on_random_games() -> None:
    rng = random.Random(11)
    for _ in range(30):
        rules = rng.choice([RuleSet.EASY, RuleSet.CLASSIC])
        deck = list(FULL_DECK)
        rng.shuffle(deck)
        deal = Deal.from_deck(deck)
        game = random_game(rng, Game(deal, rules), max_left=0, max_stock=0)
        start = Position.start(deal, rules)
        status, score = play_out(start, game.actions)
        assert (status, score) == (game.status.value, game.score)


def test_oracle_on_a_one_move_position() -> None:
    # Only position 2 (the right peak's top) is left, card 3C: on waste 2C one removal wins.
    tableau = [FULL_DECK[0]] * 2 + [Card.parse("3C")] + [FULL_DECK[0]] * 25
    position = Position(tuple(tableau), ALL - {2}, (), Card.parse("2C"), RuleSet.CLASSIC, 600)
    assert brute_force(position) == Outcome(True, 600 - 1 + 100)
    blocked = Position(tuple(tableau), ALL - {2}, (), Card.parse("5C"), RuleSet.CLASSIC, 600)
    assert brute_force(blocked) == Outcome(False, 600)


def layered_reference(position: Position) -> tuple[bool, int, int | None]:
    """A second, simpler exact search for whole deals: states by layers of draws.

    States are explicit ``(removed set, waste rank)`` pairs. Layer ``d`` holds the states first
    reached with ``d`` draws: its starts are the position itself (layer 0 of this search) or every
    removed set seen so far with the ``d``-th stock card on the waste, closed under removals. A
    state seen in an earlier layer is not visited again (it can do everything with fewer draws).
    When no layer reaches the empty tableau, the states reached with exactly all stock cards drawn
    are enumerated again without that shortcut, and the best blocked one is taken.

    Returns:
        ``(winnable, par, fewest draws or None)``.
    """
    ranks = [int(card.rank) for card in position.tableau]
    stock = [int(card.rank) for card in position.stock]
    wraps = position.rules.wraps
    start = (position.removed, int(position.waste.rank))
    base_cleared = _cleared(position.removed)

    def closure(starts: list[tuple[frozenset[int], int]], seen: set[Any]) -> list[Any]:
        found: list[tuple[frozenset[int], int]] = []
        todo = [s for s in starts if s not in seen]
        seen.update(todo)
        while todo:
            state = todo.pop()
            found.append(state)
            removed, waste = state
            for pos in _playable(removed):
                if _neighbours(ranks[pos], waste, wraps):
                    after = (removed | {pos}, ranks[pos])
                    if after not in seen:
                        seen.add(after)
                        todo.append(after)
        return found

    seen: set[Any] = set()
    sets_seen: list[frozenset[int]] = []
    known: set[frozenset[int]] = set()
    layer = [start]
    before_last: list[frozenset[int]] = []  # removed sets reachable before the last draw
    for drawn in range(len(stock) + 1):
        if drawn:
            layer = [(removed, stock[drawn - 1]) for removed in sets_seen]
        if drawn == len(stock):
            before_last = list(sets_seen)
        for removed, _ in closure(layer, seen):
            if removed == ALL:
                cards_left = 28 - len(position.removed)
                par = position.score - cards_left - drawn + 100 * (3 - base_cleared)
                return True, par, drawn
            if removed not in known:
                known.add(removed)
                sets_seen.append(removed)
    # Unwinnable: every state with the whole stock drawn, then the best blocked one.
    last = [(removed, stock[-1]) for removed in before_last] if stock else [start]
    best = None
    for removed, waste in closure(last, set()):
        if not any(_neighbours(ranks[p], waste, wraps) for p in _playable(removed)):
            value = -len(removed) + 100 * _cleared(removed)
            best = value if best is None else max(best, value)
    assert best is not None
    moves_made = len(position.removed)
    par = position.score - len(stock) + moves_made - 100 * base_cleared + best
    return False, par, None
