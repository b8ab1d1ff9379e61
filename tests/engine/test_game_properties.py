"""Property tests: random codes and random legal play, checked against an independent model.

The model below re-derives the board, the score and the undo window from the list of actions in
effect, using only docs/rules.md §1–2 (it never calls the engine's scoring or status code).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from server.engine import (
    CODE_SPACE,
    COVERED_BY,
    FACE_DOWN,
    FULL_DECK,
    Action,
    ActionKind,
    Card,
    Game,
    GameCode,
    IllegalActionError,
    Rejection,
    RuleSet,
    Status,
)
from tests.engine.support import board, chain_deal, full_state

ALL_ACTIONS = (*(Action.remove(pos) for pos in range(28)), Action.draw(), Action.undo())
PEAK_SETS = (
    frozenset({0, 3, 4, 9, 10, 11, 18, 19, 20}),
    frozenset({1, 5, 6, 12, 13, 14, 21, 22, 23}),
    frozenset({2, 7, 8, 15, 16, 17, 24, 25, 26, 27}),
)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Model:
    """The removals/draws in effect (oldest first) with their push numbers, and counters."""

    game: Game
    in_effect: list[tuple[Action, Card, int]] = field(default_factory=list)
    pushes: int = 0
    undos: int = 0

    def push(self, action: Action, card: Card) -> None:
        self.pushes += 1
        self.in_effect.append((action, card, self.pushes))

    def pop(self) -> tuple[Action, Card, int]:
        self.undos += 1
        return self.in_effect.pop()

    def removed(self) -> set[int]:
        return {a.pos for a, _, _ in self.in_effect if a.pos is not None}

    def score(self) -> int:
        score, removed = 500, set()
        for action, _, _ in self.in_effect:
            bonus = 0
            if action.kind is ActionKind.REMOVE:
                removed.add(action.pos)
                bonus = 100 if any(action.pos in p and p <= removed for p in PEAK_SETS) else 0
            score = max(0, score - 1 + bonus)
        return score

    def undoable(self) -> int:
        return sum(1 for _, _, serial in self.in_effect if serial > self.pushes - 100)

    def status(self, resigned: bool) -> Status:
        deal, removed = self.game.deal, self.removed()
        if resigned:
            return Status.RESIGNED
        if len(removed) == 28:
            return Status.WON
        draws = sum(1 for a, _, _ in self.in_effect if a.kind is ActionKind.DRAW)
        waste = self.in_effect[-1][1] if self.in_effect else deal.waste
        wraps = self.game.rules is RuleSet.EASY
        for pos in set(range(28)) - removed:
            if all(above in removed for above in COVERED_BY[pos]):
                gap = abs(deal.tableau[pos].rank - waste.rank)
                if gap == 1 or (wraps and gap == 12):
                    return Status.PLAYING
        return Status.BLOCKED if draws == len(deal.stock) else Status.PLAYING


def check_against_model(game: Game, model: Model, resigned: bool = False) -> None:
    deal, removed = game.deal, model.removed()
    draws = sum(1 for a, _, _ in model.in_effect if a.kind is ActionKind.DRAW)
    # The board, independently.
    for pos in range(28):
        assert game.tableau_card(pos) == (None if pos in removed else deal.tableau[pos])
    assert game.waste == (deal.waste, *(card for _, card, _ in model.in_effect))
    assert game.stock == deal.stock[draws:]
    # 52 cards conserved.
    present = [card for pos in range(28) if (card := game.tableau_card(pos)) is not None]
    everything = [*present, *game.waste, *game.stock]
    assert len(everything) == 52 and set(everything) == set(FULL_DECK)
    assert game.cards_left == len(present) and game.stock_count == len(game.stock)
    # Score, counters, status, undo window.
    assert game.score == model.score()
    assert game.moves == model.pushes and game.undos == model.undos
    assert game.seq == model.pushes + model.undos == len(game.actions)
    assert game.status is model.status(resigned)
    assert game.undo_depth == model.undoable()
    # Undo is free play's alone (docs/rules.md §4 "Ranked play"), out of a blocked game too.
    undo_allowed = not game.ranked and game.status in (Status.PLAYING, Status.BLOCKED)
    assert game.can_undo is (undo_allowed and model.undoable() > 0)
    # The view hides every face-down and stock card.
    view = game.view()
    hidden = set(game.stock) | {
        card for pos in range(28) if (card := game.tableau_card(pos)) and not game.is_face_up(pos)
    }
    shown = {entry for entry in (*view.tableau, view.waste) if isinstance(entry, Card)}
    assert not shown & hidden
    assert sum(entry == FACE_DOWN for entry in view.tableau) == len(hidden - set(game.stock))
    # Position by position, from the model's removals alone (§1: face up once every card
    # covering it is removed).
    assert view.tableau == tuple(
        None
        if pos in removed
        else deal.tableau[pos]
        if all(above in removed for above in COVERED_BY[pos])
        else FACE_DOWN
        for pos in range(28)
    )
    assert (view.score, view.moves, view.stock_count) == (game.score, game.moves, len(game.stock))


def probe(game: Game, action: Action) -> None:
    """A refused action raises its would_accept code and changes nothing at all; an accepted one
    applied to a copy leaves the original untouched."""
    code = game.would_accept(action)
    assert (code is None) is (action in game.legal_actions())
    before = full_state(game)
    if code is None:
        game.copy().apply(action)
    else:
        with pytest.raises(IllegalActionError) as raised:
            game.apply(action)
        assert raised.value.code is code
    assert full_state(game) == before


def new_game(number: int | None, rules: RuleSet, ranked: bool) -> Game:
    """A game on code ``number``, or (``None``) on the chain deal, which random play can win."""
    deal = chain_deal() if number is None else GameCode(rules, number).deal()
    return Game(deal, rules, ranked=ranked)


def pick(data: st.DataObject, game: Game, undo_weight: int, greedy: bool) -> Action | None:
    """Draw one of the legal actions (``None`` when there is none).

    Undo is offered ``undo_weight`` times among the other choices (always, when it is the only
    legal action); ``greedy`` play only considers removals when there are some.
    """
    legal = game.legal_actions()
    others = [action for action in legal if action.kind is not ActionKind.UNDO]
    removals = [action for action in others if action.kind is ActionKind.REMOVE]
    if greedy and removals:
        others = removals
    undos = [Action.undo()] * (undo_weight or 1) if Action.undo() in legal else []
    choices = others + (undos if undo_weight or not others else [])
    return data.draw(st.sampled_from(choices), label="action") if choices else None


GAMES = {
    "number": st.one_of(st.integers(0, CODE_SPACE - 1), st.none()),
    "rules": st.sampled_from(RuleSet),
    "ranked": st.booleans(),
    "undo_weight": st.integers(0, 3),
    "greedy": st.booleans(),
    "steps": st.integers(0, 110),
}


@SETTINGS
@given(data=st.data(), **GAMES)
def test_random_legal_play_matches_the_independent_model(
    data: st.DataObject,
    number: int | None,
    rules: RuleSet,
    ranked: bool,
    undo_weight: int,
    greedy: bool,
    steps: int,
) -> None:
    game = new_game(number, rules, ranked)
    model = Model(game)
    boards_before: list[tuple[object, ...]] = []
    check_against_model(game, model)
    for _ in range(steps):
        action = pick(data, game, undo_weight, greedy)
        if action is None:
            break
        before = board(game)
        applied = game.apply(action)
        if action.kind is ActionKind.UNDO:
            reverted, card, _ = model.pop()
            assert board(game) == boards_before.pop()  # undo is the exact inverse
            assert applied.card == card and applied.pos == reverted.pos
        else:
            model.push(action, applied.card)
            boards_before.append(before)
            assert applied.pos == action.pos
        assert (applied.score_after, applied.status_after) == (game.score, game.status)
        check_against_model(game, model)
    event(f"ended {game.status.value}{' ranked' if ranked else ''}")
    event("history window overflowed" if model.pushes > 100 else "history within 100 pushes")

    if not game.is_over and data.draw(st.booleans(), label="resign"):
        game.resign()
        check_against_model(game, model, resigned=True)
        for action in ALL_ACTIONS:
            assert game.would_accept(action) is Rejection.GAME_OVER


@SETTINGS
@given(data=st.data(), **GAMES)
def test_after_random_play_rejections_change_nothing_and_replay_rebuilds_the_game(
    data: st.DataObject,
    number: int | None,
    rules: RuleSet,
    ranked: bool,
    undo_weight: int,
    greedy: bool,
    steps: int,
) -> None:
    game = new_game(number, rules, ranked)
    for _ in range(steps):
        action = pick(data, game, undo_weight, greedy)
        if action is None:
            break
        game.apply(action)
    for action in ALL_ACTIONS:
        probe(game, action)
    rebuilt = Game.replay(game.deal, game.rules, game.actions, ranked=game.ranked)
    assert full_state(rebuilt) == full_state(game)
    assert game.copy().actions == game.actions


@SETTINGS
@given(number=st.integers(0, CODE_SPACE - 1), rules=st.sampled_from(RuleSet))
def test_fresh_games_conserve_the_deck_and_show_only_the_bottom_row(
    number: int, rules: RuleSet
) -> None:
    game = Game.new(GameCode(rules, number))
    check_against_model(game, Model(game))
    assert game.view().tableau[:18] == (FACE_DOWN,) * 18
    assert game.status is Status.PLAYING and Action.draw() in game.legal_actions()
