"""Exact perfect-information solver: can a deal be cleared, its par, and a line reaching it.

The solver sees every card (the stock order included) and plays by docs/rules.md §2 without undo.

**Par** is the highest final score reachable from a position:

* If all 28 cards can be cleared, the game is best *won* with the fewest draws: a win scores
  ``500 − moves + 300`` with ``moves = 28 + draws``, so from the start ``par = 772 − fewest draws``
  (749 at worst). No blocked ending comes close (it clears at most two peaks: 677 − removals).
* Otherwise every game ends *blocked*, which happens exactly in a state where the stock is empty
  and no playable card is a neighbour of the waste card (docs/rules.md §2 "Blocked"; a state with
  an empty stock and a possible removal is not an ending: play goes on). Such an ending scores
  ``500 − removals − 23 + 100 × peaks cleared``, and par is the maximum of that over the blocked
  states reachable from the position.

From a position in progress (:func:`solve_game`, :func:`solve_position`) the same holds with the
current score as the starting point: par is the best *final* score, i.e. the current score minus
one per further removal or draw plus 100 per further peak cleared. Already cleared peaks are kept.
The score never reaches the 0 floor in a real game (it stays above 448), so none is applied.

**Method**: see :mod:`server.engine.solver_search`. All configurations of the tableau (22,932
removed sets closed under the cover relation) are indexed once; one pass over them, in order of
size, computes for every configuration and waste rank the fewest draws reaching it, packed as bit
fields in one integer per configuration. This is exact, not heuristic.

>>> from server.engine.codes import GameCode
>>> code = GameCode.parse("TP1-E-AAAAAAA")
>>> solution = solve(code.deal(), code.rules)
>>> solution.winnable, solution.par == 772 - solution.draws
(True, True)
>>> game = Game(code.deal(), code.rules)
>>> for action in solution.line:
...     _ = game.apply(action)
>>> game.status.value, game.score == solution.par
('won', True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from server.engine.actions import Action, ActionKind, Status
from server.engine.cards import Card
from server.engine.codes import RuleSet
from server.engine.deals import STOCK_SIZE, Deal
from server.engine.errors import EngineError
from server.engine.game import Game
from server.engine.layout import COVERED_BY, POSITION_COUNT
from server.engine.rules import PEAK_BONUS, START_SCORE, is_neighbour
from server.engine.solver_search import (
    EXACT,
    FIELD_BITS,
    Problem,
    Step,
    best_blocked,
    fewest_draws,
    quick_win,
    sweep,
    trace,
)
from server.engine.solver_tables import config_tables, peaks_cleared

__all__ = [
    "ImpossiblePositionError",
    "Position",
    "Solution",
    "best_action",
    "is_winnable",
    "is_winnable_position",
    "replay_cards",
    "solve",
    "solve_game",
    "solve_position",
]

QUICK_BUDGET: Final = 3000
"""States the depth-first search of :func:`is_winnable` may visit before the full sweep."""

_DRAW: Final = Action.draw()


class ImpossiblePositionError(EngineError):
    """A :class:`Position` no game can reach: wrong card counts, a removed card still covered by a
    present one, a stock longer than 23 cards, or a score too low for the scoring to stay exact."""


@dataclass(frozen=True, slots=True)
class Position:
    """Everything the solver needs about a position (all cards known).

    Attributes:
        tableau: the 28 cards dealt to the layout, by position (removed ones included).
        removed: the removed positions; with each position it must hold the ones covering it.
        stock: the cards left in the stock, in draw order (``stock[0]`` is drawn next).
        waste: the waste card.
        rules: the rule set.
        score: the current score (default 500, the start).

    Only the ranks matter to the solver, so a hand-built position may repeat cards.

    Raises:
        ImpossiblePositionError: on construction, when no game can be in this position.
    """

    tableau: tuple[Card, ...]
    removed: frozenset[int]
    stock: tuple[Card, ...]
    waste: Card
    rules: RuleSet
    score: int = START_SCORE

    def __post_init__(self) -> None:
        object.__setattr__(self, "tableau", tuple(self.tableau))
        object.__setattr__(self, "removed", frozenset(self.removed))
        object.__setattr__(self, "stock", tuple(self.stock))
        object.__setattr__(self, "rules", RuleSet(self.rules))
        if len(self.tableau) != POSITION_COUNT or len(self.stock) > STOCK_SIZE:
            raise ImpossiblePositionError(
                f"a position has {POSITION_COUNT} tableau cards and at most {STOCK_SIZE} in the "
                f"stock, got {len(self.tableau)} and {len(self.stock)}"
            )
        cards = (*self.tableau, self.waste, *self.stock)
        if not all(isinstance(card, Card) for card in cards):
            raise ImpossiblePositionError("a position holds Card values only")
        if not all(isinstance(pos, int) and 0 <= pos < POSITION_COUNT for pos in self.removed):
            raise ImpossiblePositionError(f"removed positions must be in 0..{POSITION_COUNT - 1}")
        for pos in self.removed:
            covering = [above for above in COVERED_BY[pos] if above not in self.removed]
            if covering:
                raise ImpossiblePositionError(
                    f"position {pos} is removed but still covered by {covering}"
                )
        most_moves = POSITION_COUNT - len(self.removed) + len(self.stock)
        if isinstance(self.score, bool) or not isinstance(self.score, int):
            raise ImpossiblePositionError(f"the score must be an int, got {self.score!r}")
        if self.score < most_moves:
            raise ImpossiblePositionError(
                f"score {self.score} could reach the 0 floor in {most_moves} moves"
            )

    @classmethod
    def start(cls, deal: Deal, rules: RuleSet) -> Position:
        """The position at the start of a game on ``deal``."""
        return cls(deal.tableau, frozenset(), deal.stock, deal.waste, rules, START_SCORE)

    @classmethod
    def of_game(cls, game: Game) -> Position:
        """The current position of ``game`` (whatever its status)."""
        removed = frozenset(pos for pos in range(POSITION_COUNT) if game.tableau_card(pos) is None)
        return cls(game.deal.tableau, removed, game.stock, game.waste_top, game.rules, game.score)

    @property
    def drawn(self) -> int:
        """Cards drawn so far: ``23 − len(stock)``."""
        return STOCK_SIZE - len(self.stock)

    @property
    def is_won(self) -> bool:
        """Whether all 28 cards are removed."""
        return len(self.removed) == POSITION_COUNT

    @property
    def is_blocked(self) -> bool:
        """Whether the game ended blocked here: not won, stock empty, and no playable card next to
        the waste card (docs/rules.md §2)."""
        if self.is_won or self.stock:
            return False
        return not any(
            is_neighbour(self.tableau[pos], self.waste, self.rules)
            for pos in range(POSITION_COUNT)
            if pos not in self.removed and all(a in self.removed for a in COVERED_BY[pos])
        )


@dataclass(frozen=True, slots=True)
class Solution:
    """What perfect play achieves from a position.

    Attributes:
        winnable: whether all 28 cards can still be removed.
        par: the best final score reachable (see the module documentation).
        line: removals and draws, from the position, that end the game with exactly ``par``
            (won when ``winnable``, else blocked); empty when the game is already over.
        nodes: search effort: the configurations the sweep expanded (0 when nothing was searched).
    """

    winnable: bool
    par: int
    line: tuple[Action, ...]
    nodes: int

    @property
    def draws(self) -> int:
        """How many draws :attr:`line` makes."""
        return sum(1 for action in self.line if action.kind is ActionKind.DRAW)


def solve(deal: Deal, rules: RuleSet) -> Solution:
    """Solve a deal from its start.

    Args:
        deal: the cards.
        rules: Easy or Classic.

    Returns:
        The :class:`Solution`; for a winnable deal ``par == 772 − solution.draws``.
    """
    return solve_position(Position.start(deal, rules))


def solve_game(game: Game) -> Solution:
    """Solve a game from where it stands (for hints).

    A won, blocked or resigned game is over as far as the solver is concerned (it never undoes):
    its solution is its current score with an empty line, ``winnable`` true only when won.

    Args:
        game: the game; not changed.

    Returns:
        The :class:`Solution` from the game's current position and score.
    """
    if game.status is Status.RESIGNED:
        return Solution(False, game.score, (), 0)
    return solve_position(Position.of_game(game))


def best_action(game: Game) -> Action | None:
    """The hint: the first action of an optimal line from the game's position.

    An optimal line aims at the best win when there is one, else at the best blocked ending. When
    :func:`solve_game`'s line starts with a draw but a removal is just as good (the par after it
    is the same), the removal is suggested instead (the first such by position), since players
    expect to play before drawing; this costs one more solve per removal tried.

    Returns:
        An action after which the par is unchanged, or ``None`` when the game is over or blocked.
    """
    solution = solve_game(game)
    if not solution.line:
        return None
    first = solution.line[0]
    if first.kind is ActionKind.DRAW:
        for action in game.legal_actions():
            if action.kind is ActionKind.REMOVE:
                after = game.copy()
                after.apply(action)
                if solve_game(after).par == solution.par:
                    return action
    return first


def solve_position(position: Position) -> Solution:
    """Solve from an explicit position.

    Args:
        position: the :class:`Position`.

    Returns:
        The :class:`Solution`: par counts from ``position.score``, the line starts here.
    """
    if position.is_won:
        return Solution(True, position.score, (), 0)
    if position.is_blocked:
        return Solution(False, position.score, (), 0)
    tables = config_tables()
    problem = problem_of(position)
    result = sweep(problem, tables, exact_end=True)
    removed = tables.masks[problem.start]
    draws = fewest_draws(tables, result)
    if draws is not None:
        goal_fields = result.fields[tables.full] >> (draws * FIELD_BITS)
        rank = (goal_fields & -goal_fields).bit_length() - 1
        steps = trace(problem, tables, result, (tables.full, rank, draws))
        moves = POSITION_COUNT - removed.bit_count() + draws - problem.drawn
        bonus = PEAK_BONUS * (3 - peaks_cleared(removed))
        par = position.score - moves + bonus
        return Solution(True, par, _actions(steps, problem.drawn), result.expanded)
    ending = best_blocked(problem, tables, result)
    if ending is None:  # pragma: no cover - an unwinnable game always ends blocked somewhere
        raise AssertionError("no blocked ending found")
    config, rank = ending
    steps = trace(problem, tables, result, (config, rank, EXACT))
    final = tables.masks[config]
    moves = final.bit_count() - removed.bit_count() + STOCK_SIZE - problem.drawn
    bonus = PEAK_BONUS * (peaks_cleared(final) - peaks_cleared(removed))
    par = position.score - moves + bonus
    return Solution(False, par, _actions(steps, problem.drawn), result.expanded)


def is_winnable(deal: Deal, rules: RuleSet) -> bool:
    """Whether all 28 cards of ``deal`` can be removed (faster than :func:`solve` on easy deals).

    Args:
        deal: the cards.
        rules: Easy or Classic.

    Returns:
        ``True`` when some line of play wins.
    """
    return is_winnable_position(Position.start(deal, rules))


def is_winnable_position(position: Position) -> bool:
    """Whether all 28 cards can still be removed from ``position``.

    A budgeted depth-first search answers most winnable positions at once; the full sweep settles
    the rest.
    """
    if position.is_won:
        return True
    if position.is_blocked:
        return False
    tables = config_tables()
    problem = problem_of(position)
    found, _ = quick_win(problem, tables, QUICK_BUDGET)
    if found is not None:
        return found
    return fewest_draws(tables, sweep(problem, tables, exact_end=False)) is not None


def problem_of(position: Position) -> Problem:
    """The search's view of ``position``: ranks, absolute stock order, configuration number."""
    tables = config_tables()
    removed = sum(1 << pos for pos in position.removed)
    drawn = position.drawn
    stock = (0,) * drawn + tuple(int(card.rank) for card in position.stock)
    return Problem(
        ranks=tuple(int(card.rank) for card in position.tableau),
        stock=stock,
        drawn=drawn,
        waste=int(position.waste.rank),
        start=tables.index[removed],
        wraps=position.rules.wraps,
    )


def _actions(steps: Iterable[Step], drawn: int) -> tuple[Action, ...]:
    actions: list[Action] = []
    for step in steps:
        if step.pos is None:
            actions += [_DRAW] * (step.drawn - drawn)
            drawn = step.drawn
        else:
            actions.append(Action.remove(step.pos))
    return tuple(actions)


def replay_cards(position: Position, line: Sequence[Action]) -> list[Card]:
    """The card each action of ``line`` moves onto the waste, played from ``position``.

    Args:
        position: where the line starts.
        line: removals and draws (as in :attr:`Solution.line`).

    Returns:
        One card per action: the removed card, or the drawn one.
    """
    stock = iter(position.stock)
    return [
        position.tableau[action.pos] if action.pos is not None else next(stock) for action in line
    ]
