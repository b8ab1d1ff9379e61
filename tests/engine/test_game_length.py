"""The length of a game: at most MAX_ACTIONS actions, then only resignation (docs/rules.md §2
"Length of a game"); a longer log stored before the limit still rebuilds."""

from __future__ import annotations

import pytest

from server.engine import MAX_ACTIONS, Action, Game, IllegalActionError, Rejection, Status
from tests.engine.support import chain_game, full_state


def _draw_undo(count: int) -> list[Action]:
    """``count`` actions: draw, undo, draw, undo, …"""
    return [Action.draw() if i % 2 == 0 else Action.undo() for i in range(count)]


def test_a_game_takes_its_limit_of_actions_and_refuses_every_one_after() -> None:
    game = chain_game()
    for action in _draw_undo(MAX_ACTIONS):
        game.apply(action)
    assert game.seq == MAX_ACTIONS and game.status is Status.PLAYING
    before = full_state(game)
    assert game.legal_actions() == ()
    for action in (Action.draw(), Action.undo(), *(Action.remove(p) for p in range(28))):
        assert game.would_accept(action) is Rejection.ACTION_LIMIT
        with pytest.raises(IllegalActionError) as raised:
            game.apply(action)
        assert raised.value.code is Rejection.ACTION_LIMIT
    assert full_state(game) == before


def test_one_action_short_of_the_limit_the_rules_still_apply() -> None:
    game = chain_game()
    for action in _draw_undo(MAX_ACTIONS - 1):
        game.apply(action)
    assert game.would_accept(Action.undo()) is None
    assert Action.undo() in game.legal_actions()
    game.undo()
    assert game.would_accept(Action.undo()) is Rejection.ACTION_LIMIT


def test_a_copy_keeps_the_limit() -> None:
    game = chain_game()
    for action in _draw_undo(MAX_ACTIONS):
        game.apply(action)
    assert game.copy().would_accept(Action.draw()) is Rejection.ACTION_LIMIT


def test_a_longer_log_stored_before_the_limit_rebuilds_and_refuses_the_next_action() -> None:
    fresh = chain_game()
    log = _draw_undo(MAX_ACTIONS + 2)
    rebuilt = Game.replay(fresh.deal, fresh.rules, log)
    assert rebuilt.seq == MAX_ACTIONS + 2
    assert rebuilt.would_accept(Action.draw()) is Rejection.ACTION_LIMIT
    assert rebuilt.copy().would_accept(Action.draw()) is Rejection.ACTION_LIMIT
