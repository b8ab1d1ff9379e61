"""The state of one TriPeaks game and its rules: removal, draw, undo, score, status
(docs/rules.md §2, §4).

A :class:`Game` is the only mutable type in the engine. It validates every action, applies it, and
keeps the bounded undo history and the applied action log, from which :meth:`Game.replay` rebuilds
an identical game. :meth:`Game.view` is what a player may see.

One module, over 400 lines, because it is one class: the checks, the moves, undo and the views
all read and write the same private state, kept consistent together. What needs no state has
its own module: cards, the layout, scoring and neighbours (``rules``), the action types
(``actions``), the deals and codes.

>>> from server.engine.codes import GameCode
>>> game = Game.new(GameCode.parse("TP1-E-AAAAAAA"))
>>> str(game.waste_top), game.playable_positions()
('4H', (18, 19, 20, 21, 22, 23, 24, 25, 26, 27))
>>> [str(action) for action in game.legal_actions()]
['remove 24', 'draw']
>>> applied = game.remove(24)
>>> str(applied.card), game.score, game.moves
('5H', 499, 1)
>>> game.undo().pos, game.score, game.moves, game.undos
(24, 500, 1, 1)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from server.engine.actions import (
    FACE_DOWN,
    Action,
    ActionKind,
    AppliedAction,
    GameView,
    Status,
    check_position,
)
from server.engine.cards import Card
from server.engine.codes import GameCode, RuleSet
from server.engine.deals import Deal
from server.engine.errors import IllegalActionError, Rejection
from server.engine.layout import COVERED_BY, COVERS, PEAK_OF, PEAKS, POSITION_COUNT
from server.engine.rules import (
    MAX_ACTIONS,
    PEAK_BONUS,
    START_SCORE,
    UNDO_DEPTH,
    is_neighbour,
    next_score,
)

__all__ = [
    "FACE_DOWN",
    "MAX_ACTIONS",
    "PEAK_BONUS",
    "START_SCORE",
    "UNDO_DEPTH",
    "Action",
    "ActionKind",
    "AppliedAction",
    "Game",
    "GameView",
    "Status",
    "is_neighbour",
    "next_score",
]


@dataclass(frozen=True, slots=True)
class _Undoable:
    """One undoable removal/draw: enough to put everything back. ``serial`` is its push number."""

    kind: ActionKind
    pos: int | None
    card: Card
    score_before: int
    serial: int


_REMOVES: Final = tuple(Action.remove(pos) for pos in range(POSITION_COUNT))
_DRAW: Final = Action.draw()
_UNDO: Final = Action.undo()


class Game:
    """One game in progress or finished: the rules of docs/rules.md §2 with the ranked play of §4.

    Args:
        deal: the cards.
        rules: Easy or Classic.
        ranked: ``True`` for the daily challenge and races: undo is refused
            (``ranked_no_undo``, docs/rules.md §4 "Ranked play") and a blocked game is over at
            once. ``False`` (free play): undo as §2 "Undo" says, out of a blocked game too.

    Every action is checked in the order of docs/rules.md §2 "Order of checks"; a refused action
    raises :class:`IllegalActionError` and changes nothing. Undo history: each removal/draw is
    pushed on a history that keeps only the last :data:`UNDO_DEPTH` pushes (undone ones still
    count towards the 100, so a push that is the 101st drops the oldest for good); undo reverts
    the most recent not-yet-undone one (docs/rules.md §2 "Undo").
    """

    __slots__ = (
        "_cards_left",
        "_deal",
        "_history",
        "_limit",
        "_log",
        "_moves",
        "_peak_left",
        "_pushes",
        "_ranked",
        "_rebuilding",
        "_rules",
        "_score",
        "_shown",
        "_status",
        "_stock",
        "_tableau",
        "_undos",
        "_waste",
    )

    def __init__(self, deal: Deal, rules: RuleSet, *, ranked: bool = False) -> None:
        self._deal = deal
        self._rules = RuleSet(rules)
        self._ranked = bool(ranked)
        self._tableau: list[Card | None] = list(deal.tableau)
        self._stock: list[Card] = list(reversed(deal.stock))  # top of the stock is the last item
        self._waste: list[Card] = [deal.waste]
        self._score = START_SCORE
        self._moves = 0
        self._undos = 0
        self._cards_left = POSITION_COUNT
        self._peak_left = [len(peak) for peak in PEAKS]
        self._history: list[_Undoable] = []  # still-undoable entries, oldest first
        self._pushes = 0  # removals/draws ever pushed on the history (its serial counter)
        self._log: list[Action] = []
        self._limit: int | None = MAX_ACTIONS  # None only while a stored log is rebuilt
        # True only while a stored log is rebuilt: a ranked game stored before ranked play
        # refused undo still rebuilds from its undos (docs/rules.md §4 "Ranked play").
        self._rebuilding = False
        # What a player sees at each position (the card, FACE_DOWN or None once removed), kept
        # up to date as actions apply so that a view costs no rule check.
        self._shown: list[Card | str | None] = [
            card if self._face_up(pos) else FACE_DOWN for pos, card in enumerate(self._tableau)
        ]
        self._status = self._current_status()

    @classmethod
    def new(cls, code: GameCode, *, ranked: bool = False) -> Game:
        """A fresh game for ``code``: its deal under its rule set (docs/rules.md §3).

        Args:
            code: the game code.
            ranked: see :class:`Game`.

        Returns:
            The new :class:`Game`.
        """
        return cls(code.deal(), code.rules, ranked=ranked)

    @classmethod
    def replay(
        cls, deal: Deal, rules: RuleSet, actions: Iterable[Action], *, ranked: bool = False
    ) -> Game:
        """Rebuild a game from its action log (docs/rules.md §5): identical state, undo depth
        included.

        Args:
            deal: the cards.
            rules: the rule set.
            actions: the applied actions in order (e.g. an earlier game's :attr:`actions`).
            ranked: see :class:`Game`.

        Returns:
            The rebuilt :class:`Game`.

        A log stored before a rule existed still rebuilds: one longer than the action limit
        (docs/rules.md §2 "Length of a game"), and a ranked game's undos (§4 "Ranked play"); the
        rebuilt game then follows today's rules for every further action.

        Raises:
            IllegalActionError: an action of the log is refused (the log is not a legal game).
        """
        game = cls(deal, rules, ranked=ranked)
        game._limit, game._rebuilding = None, True
        for action in actions:
            game.apply(action)
        game._limit, game._rebuilding = MAX_ACTIONS, False
        return game

    def copy(self) -> Game:
        """An independent copy (cards are immutable, so copying the lists is enough).

        Returns:
            A new :class:`Game` equal in every respect; changing one never changes the other.
        """
        twin = object.__new__(Game)
        twin._deal, twin._rules, twin._ranked = self._deal, self._rules, self._ranked
        twin._tableau, twin._stock = list(self._tableau), list(self._stock)
        twin._waste, twin._log = list(self._waste), list(self._log)
        twin._limit, twin._rebuilding = self._limit, self._rebuilding
        twin._score, twin._moves, twin._undos = self._score, self._moves, self._undos
        twin._cards_left, twin._peak_left = self._cards_left, list(self._peak_left)
        twin._history, twin._pushes = list(self._history), self._pushes
        twin._shown, twin._status = list(self._shown), self._status
        return twin

    # ----------------------------------------------------------------- actions

    def apply(self, action: Action) -> AppliedAction:
        """Apply any action (docs/rules.md §2).

        Args:
            action: the :class:`Action`.

        Returns:
            The :class:`AppliedAction` describing what happened.

        Raises:
            IllegalActionError: the rules refuse it (see :meth:`would_accept`); nothing changed.
        """
        rejection = self.would_accept(action)
        if rejection is not None:
            raise IllegalActionError(rejection, self._explain(action, rejection))
        if action.kind is ActionKind.REMOVE:
            assert action.pos is not None
            applied = self._remove(action.pos)
        elif action.kind is ActionKind.DRAW:
            applied = self._draw()
        else:
            applied = self._undo()
        self._log.append(action)
        return applied

    def remove(self, pos: int) -> AppliedAction:
        """Move the card at ``pos`` onto the waste (docs/rules.md §2 "Remove"); −1, +100 if it
        clears a peak.

        Args:
            pos: the layout position, ``0..27``.

        Returns:
            An :class:`AppliedAction` with the removed card, ``pos``, the new score and status.

        Raises:
            InvalidPositionError: ``pos`` is not in ``0..27``.
            IllegalActionError: ``game_over``, ``no_card``, ``blocked`` or ``not_adjacent``
                (checked in that order).
        """
        return self.apply(Action.remove(pos))

    def draw(self) -> AppliedAction:
        """Turn the top stock card onto the waste (docs/rules.md §2 "Draw"); −1. Allowed even when a
        removal is possible.

        Returns:
            An :class:`AppliedAction` with the drawn card (``pos`` ``None``), the new score, status.

        Raises:
            IllegalActionError: ``game_over``, or ``stock_empty``.
        """
        return self.apply(_DRAW)

    def undo(self) -> AppliedAction:
        """Revert the most recent not-yet-undone removal or draw (docs/rules.md §2 "Undo").

        Puts the card back (on the tableau, re-covering what it covered, or on top of the stock),
        restores the waste and the exact previous score; counts in :attr:`undos`, not :attr:`moves`.

        Returns:
            An :class:`AppliedAction` with the card moved back and its tableau ``pos`` (``None``
            when it went back onto the stock), the restored score and the new status.

        Raises:
            IllegalActionError: ``game_over`` (won, resigned, or blocked in ranked play),
                ``action_limit``, ``ranked_no_undo`` (a ranked game: docs/rules.md §4 "Ranked
                play"), or ``nothing_to_undo``, in that order.
        """
        return self.apply(_UNDO)

    def resign(self) -> None:
        """End the game as resigned (docs/rules.md §4 "Resigning"). Not an :class:`Action`: it is
        not in :attr:`actions`.

        Raises:
            IllegalActionError: ``game_over`` when the game is already over (:attr:`is_over`).
        """
        if self.is_over:
            raise IllegalActionError(Rejection.GAME_OVER, f"the game is already {self._status}")
        self._status = Status.RESIGNED

    def would_accept(self, action: Action) -> Rejection | None:
        """Check an action without applying it.

        Args:
            action: the :class:`Action`.

        Returns:
            ``None`` when :meth:`apply` would accept it, else the :class:`Rejection` it would raise.
        """
        if self._refuses(action.kind):
            return Rejection.GAME_OVER
        if self._at_limit():
            return Rejection.ACTION_LIMIT
        if action.kind is ActionKind.REMOVE:
            assert action.pos is not None
            card = self._tableau[action.pos]
            if card is None:
                return Rejection.NO_CARD
            if not self._face_up(action.pos):
                return Rejection.BLOCKED
            if not is_neighbour(card, self._waste[-1], self._rules):
                return Rejection.NOT_ADJACENT
        elif action.kind is ActionKind.DRAW:
            if not self._stock:
                return Rejection.STOCK_EMPTY
        elif self._ranked and not self._rebuilding:
            return Rejection.RANKED_NO_UNDO
        elif not self._history:
            return Rejection.NOTHING_TO_UNDO
        return None

    def legal_actions(self) -> tuple[Action, ...]:
        """Every action :meth:`apply` would accept now.

        Returns:
            Removals by ascending position, then ``draw``, then ``undo`` (each only if accepted).
        """
        actions: list[Action] = []
        if self._at_limit():
            return ()
        if not self._refuses(ActionKind.REMOVE):
            top, rules = self._waste[-1], self._rules
            actions += (
                _REMOVES[pos]
                for pos, card in enumerate(self._tableau)
                if card is not None and self._face_up(pos) and is_neighbour(card, top, rules)
            )
        actions += (action for action in (_DRAW, _UNDO) if self.would_accept(action) is None)
        return tuple(actions)

    # ------------------------------------------------------------ queries

    def tableau_card(self, pos: int) -> Card | None:
        """The card at ``pos``, face up or not; ``None`` once removed.

        Raises:
            InvalidPositionError: ``pos`` is not an int in ``0..27``.
        """
        return self._tableau[check_position(pos)]

    def is_face_up(self, pos: int) -> bool:
        """Whether every card covering ``pos`` is removed (docs/rules.md §1); a removed card stays
        face up.

        Raises:
            InvalidPositionError: ``pos`` is not an int in ``0..27``.
        """
        return self._face_up(check_position(pos))

    def is_playable(self, pos: int) -> bool:
        """Whether a card is present at ``pos`` and face up (docs/rules.md §1).

        Raises:
            InvalidPositionError: ``pos`` is not an int in ``0..27``.
        """
        return self.tableau_card(pos) is not None and self.is_face_up(pos)

    def playable_positions(self) -> tuple[int, ...]:
        """The positions of playable cards, ascending (whatever their rank)."""
        return tuple(pos for pos in range(POSITION_COUNT) if self.is_playable(pos))

    def view(self) -> GameView:
        """The state a player may see (docs/rules.md §1 "Hidden information", §6).

        Returns:
            A :class:`GameView`; face-down cards appear as :data:`FACE_DOWN`.
        """
        return GameView(
            tableau=tuple(self._shown),
            waste=self._waste[-1],
            stock_count=len(self._stock),
            score=self._score,
            moves=self._moves,
            undos=self._undos,
            status=self._status,
            can_undo=self.can_undo,
            cards_left=self._cards_left,
        )

    @property
    def deal(self) -> Deal:
        """The cards this game was dealt."""
        return self._deal

    @property
    def rules(self) -> RuleSet:
        """The rule set."""
        return self._rules

    @property
    def ranked(self) -> bool:
        """Whether this is a ranked game: no undo, and blocked means over (docs/rules.md §4
        "Ranked play")."""
        return self._ranked

    @property
    def status(self) -> Status:
        """The current :class:`Status`."""
        return self._status

    @property
    def is_over(self) -> bool:
        """Whether the game has ended for good: won, resigned, or blocked in ranked play.

        A blocked free-play game is not over: undo may bring it back (docs/rules.md §2 "Undo").
        """
        return self._status in (Status.WON, Status.RESIGNED) or (
            self._status is Status.BLOCKED and self._ranked
        )

    @property
    def score(self) -> int:
        """The current score (docs/rules.md §2 "Score")."""
        return self._score

    @property
    def moves(self) -> int:
        """Removals and draws applied, undone ones included (docs/rules.md §2 "Moves counter")."""
        return self._moves

    @property
    def undos(self) -> int:
        """Undos applied."""
        return self._undos

    @property
    def seq(self) -> int:
        """Number of applied actions, undos included (the next action's 0-based sequence number)."""
        return len(self._log)

    @property
    def actions(self) -> tuple[Action, ...]:
        """The applied actions in order, for :meth:`replay` (resignation is not an action)."""
        return tuple(self._log)

    @property
    def stock_count(self) -> int:
        """Cards left in the stock."""
        return len(self._stock)

    @property
    def stock(self) -> tuple[Card, ...]:
        """The stock in draw order (``stock[0]`` is drawn next). Hidden from players
        (docs/rules.md §1)."""
        return tuple(reversed(self._stock))

    @property
    def waste_top(self) -> Card:
        """The waste card: the one the next removal must neighbour."""
        return self._waste[-1]

    @property
    def waste(self) -> tuple[Card, ...]:
        """The whole waste pile, bottom (the dealt waste card) first, top last."""
        return tuple(self._waste)

    @property
    def cards_left(self) -> int:
        """Tableau cards still present (0 when won)."""
        return self._cards_left

    @property
    def cleared_peaks(self) -> int:
        """How many of the three peaks are fully removed."""
        return sum(1 for left in self._peak_left if left == 0)

    @property
    def undo_depth(self) -> int:
        """How many actions could be undone one after another from here, game status aside."""
        return len(self._history)

    @property
    def can_undo(self) -> bool:
        """Whether :meth:`undo` would be accepted now."""
        return self.would_accept(_UNDO) is None

    def __repr__(self) -> str:
        return (
            f"<Game {self._rules.name} {self._status.value} score={self._score} "
            f"moves={self._moves} cards_left={self._cards_left} stock={len(self._stock)}>"
        )

    # ----------------------------------------------------------- internals

    def _refuses(self, kind: ActionKind) -> bool:
        """Whether the status alone refuses ``kind`` with ``game_over`` (docs/rules.md §2, §4)."""
        if self._status is Status.PLAYING:
            return False
        if self._status is Status.BLOCKED:
            return self._ranked or kind is not ActionKind.UNDO
        return True

    def _at_limit(self) -> bool:
        """Whether the game has taken its :data:`MAX_ACTIONS` (docs/rules.md §2 "Length of a
        game")."""
        return self._limit is not None and len(self._log) >= self._limit

    def _face_up(self, pos: int) -> bool:
        """:meth:`is_face_up` for a position known to be valid."""
        tableau = self._tableau
        return all(tableau[above] is None for above in COVERED_BY[pos])

    def _current_status(self) -> Status:
        """WON when the tableau is empty, checked first; else BLOCKED or PLAYING
        (docs/rules.md §2)."""
        if self._cards_left == 0:
            return Status.WON
        if not self._stock and not any(
            is_neighbour(card, self._waste[-1], self._rules)
            for card in self._shown
            if isinstance(card, Card)
        ):
            return Status.BLOCKED
        return Status.PLAYING

    def _push(self, kind: ActionKind, pos: int | None, card: Card) -> None:
        self._pushes += 1
        self._history.append(_Undoable(kind, pos, card, self._score, self._pushes))
        oldest_kept = self._pushes - UNDO_DEPTH + 1
        while self._history[0].serial < oldest_kept:
            del self._history[0]

    def _remove(self, pos: int) -> AppliedAction:
        card = self._tableau[pos]
        assert card is not None
        self._push(ActionKind.REMOVE, pos, card)
        self._tableau[pos] = None
        shown, tableau = self._shown, self._tableau
        shown[pos] = None
        for below in COVERS[pos]:  # turned face up once nothing covers them (§1)
            if tableau[below] is not None and self._face_up(below):
                shown[below] = tableau[below]
        self._cards_left -= 1
        self._waste.append(card)
        peak = PEAK_OF[pos]
        self._peak_left[peak] -= 1
        self._score = next_score(self._score, clears_peak=self._peak_left[peak] == 0)
        self._moves += 1
        self._status = self._current_status()
        return AppliedAction(ActionKind.REMOVE, pos, card, self._score, self._status)

    def _draw(self) -> AppliedAction:
        card = self._stock.pop()
        self._push(ActionKind.DRAW, None, card)
        self._waste.append(card)
        self._score = next_score(self._score, clears_peak=False)
        self._moves += 1
        self._status = self._current_status()
        return AppliedAction(ActionKind.DRAW, None, card, self._score, self._status)

    def _undo(self) -> AppliedAction:
        entry = self._history.pop()
        card = self._waste.pop()
        assert card == entry.card
        if entry.pos is not None:
            self._tableau[entry.pos] = card
            shown = self._shown
            shown[entry.pos] = card
            for below in COVERS[entry.pos]:  # covered again
                if shown[below] is not None:
                    shown[below] = FACE_DOWN
            self._cards_left += 1
            self._peak_left[PEAK_OF[entry.pos]] += 1
        else:
            self._stock.append(card)
        self._score = entry.score_before
        self._undos += 1
        self._status = self._current_status()
        return AppliedAction(ActionKind.UNDO, entry.pos, card, self._score, self._status)

    def _explain(self, action: Action, rejection: Rejection) -> str:
        """A developer-oriented reason for a rejection (not a player message)."""
        if rejection is Rejection.GAME_OVER:
            mode = "ranked" if self._ranked else "free play"
            return f"{action} refused: the game is {self._status.value} ({mode})"
        if rejection is Rejection.NO_CARD:
            return f"position {action.pos} is already removed"
        if rejection is Rejection.BLOCKED:
            assert action.pos is not None
            covering = [p for p in COVERED_BY[action.pos] if self._tableau[p] is not None]
            return f"position {action.pos} is covered by {covering}"
        if rejection is Rejection.NOT_ADJACENT:
            assert action.pos is not None
            return (
                f"{self._tableau[action.pos]} is not a neighbour of {self._waste[-1]} "
                f"under {self._rules.name} rules"
            )
        if rejection is Rejection.STOCK_EMPTY:
            return "the stock is empty"
        if rejection is Rejection.RANKED_NO_UNDO:
            return "a ranked game takes no undo"
        return "no removal or draw left to undo"
