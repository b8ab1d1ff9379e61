"""Scoring constants and the rule formulas: the neighbour relation and the score step
(docs/rules.md §2).

Re-exported by :mod:`server.engine.game`.
"""

from __future__ import annotations

from typing import Final

from server.engine.cards import Card
from server.engine.codes import RuleSet

__all__ = ["MAX_ACTIONS", "PEAK_BONUS", "START_SCORE", "UNDO_DEPTH", "is_neighbour", "next_score"]

START_SCORE: Final = 500
"""Score at the start of every game (docs/rules.md §2 "Score")."""

PEAK_BONUS: Final = 100
"""Extra points for a removal that clears a peak (docs/rules.md §2 "Score")."""

UNDO_DEPTH: Final = 100
"""How many of the most recent removals/draws stay undoable (docs/rules.md §2 "Undo")."""

MAX_ACTIONS: Final = 2_000
"""The most actions (removals, draws and undos together) one game takes (docs/rules.md §2
"Length of a game")."""

_MOVE_COST: Final = 1


def next_score(previous: int, *, clears_peak: bool) -> int:
    """The score after a removal or draw (docs/rules.md §2 "Score"): −1, +100 more when a peak is
    cleared, never below 0.

    Args:
        previous: the score before the action.
        clears_peak: whether the action is a removal that emptied a peak.

    Returns:
        ``max(0, previous - 1 + (100 if clears_peak else 0))``.

    >>> next_score(500, clears_peak=True), next_score(0, clears_peak=False)
    (599, 0)
    """
    return max(0, previous - _MOVE_COST + (PEAK_BONUS if clears_peak else 0))


def is_neighbour(card: Card, waste: Card, rules: RuleSet) -> bool:
    """Whether ``card`` may go onto ``waste``: one rank apart, suit ignored (docs/rules.md §2
    "Remove").

    Args:
        card: the tableau card.
        waste: the waste card.
        rules: Easy also treats King and Ace as neighbours (both ways); Classic does not.

    Returns:
        ``True`` when the ranks are neighbours under ``rules``.
    """
    gap = abs(card.rank - waste.rank)
    return gap == 1 or (gap == 12 and rules.wraps)
