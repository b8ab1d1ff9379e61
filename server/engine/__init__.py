"""Pure TriPeaks rules: cards, layout, TP1 and TP2 deals and game codes, game state and scoring.

No I/O, no clock, standard library only. See ``docs/rules.md`` §1–3 for the rules this
package implements; every public name below is importable from ``server.engine`` directly.

>>> from server.engine import Game, GameCode
>>> game = Game.new(GameCode.parse("TP1-E-AAAAAAA"))
>>> game.status, game.score, game.stock_count
(<Status.PLAYING: 'playing'>, 500, 23)
"""

from server.engine.actions import Action, ActionKind, AppliedAction, Status
from server.engine.cards import FULL_DECK, Card, Rank, Suit
from server.engine.codes import CODE_SPACE, DEAL_ALGORITHM, TP2_CODE_SPACE, GameCode, RuleSet
from server.engine.deals import Deal, DealVersion, deal_tp1, deal_tp2
from server.engine.errors import (
    EngineError,
    IllegalActionError,
    InvalidActionError,
    InvalidCardError,
    InvalidDealError,
    InvalidGameCodeError,
    InvalidPositionError,
    InvalidRuleSetError,
    Rejection,
)
from server.engine.game import (
    FACE_DOWN,
    MAX_ACTIONS,
    PEAK_BONUS,
    START_SCORE,
    UNDO_DEPTH,
    Game,
    GameView,
    is_neighbour,
    next_score,
)
from server.engine.layout import COVERED_BY, COVERS, PEAK_OF, PEAKS, POSITION_COUNT, ROWS

__all__ = [
    "CODE_SPACE",
    "COVERED_BY",
    "COVERS",
    "DEAL_ALGORITHM",
    "FACE_DOWN",
    "FULL_DECK",
    "MAX_ACTIONS",
    "PEAKS",
    "PEAK_BONUS",
    "PEAK_OF",
    "POSITION_COUNT",
    "ROWS",
    "START_SCORE",
    "TP2_CODE_SPACE",
    "UNDO_DEPTH",
    "Action",
    "ActionKind",
    "AppliedAction",
    "Card",
    "Deal",
    "DealVersion",
    "EngineError",
    "Game",
    "GameCode",
    "GameView",
    "IllegalActionError",
    "InvalidActionError",
    "InvalidCardError",
    "InvalidDealError",
    "InvalidGameCodeError",
    "InvalidPositionError",
    "InvalidRuleSetError",
    "Rank",
    "Rejection",
    "RuleSet",
    "Status",
    "Suit",
    "deal_tp1",
    "deal_tp2",
    "is_neighbour",
    "next_score",
]
