"""The player's view: never a face-down card, never the stock order (docs/rules.md §1 "Hidden
information")."""

from __future__ import annotations

import pytest

from server.engine import FACE_DOWN, Card, Game, GameCode, GameView, RuleSet, Status
from tests.engine.support import CHAIN_ORDER, blocking_deal, chain_game, draw_all, play

C = Card.parse


def visible_cards(view: GameView) -> set[Card]:
    return {entry for entry in (*view.tableau, view.waste) if isinstance(entry, Card)}


def hidden_cards(game: Game) -> set[Card]:
    face_down = {
        card
        for pos in range(28)
        if (card := game.tableau_card(pos)) is not None and not game.is_face_up(pos)
    }
    return face_down | set(game.stock)


def test_face_down_marker_is_the_string_down() -> None:
    assert FACE_DOWN == "down"


def test_start_view_shows_the_bottom_row_and_the_waste_only() -> None:
    game = chain_game()
    view = game.view()
    assert view.tableau[:18] == (FACE_DOWN,) * 18
    assert view.tableau[18:] == tuple(game.tableau_card(p) for p in range(18, 28))
    assert view.waste == C("KC")
    assert (view.stock_count, view.score, view.moves, view.undos) == (23, 500, 0, 0)
    assert view.status is Status.PLAYING and view.can_undo is False and view.cards_left == 28


def test_view_contains_no_face_down_or_stock_card() -> None:
    game = Game.new(GameCode.parse("TP1-E-AAAAAAA"))
    view = game.view()
    assert not visible_cards(view) & hidden_cards(game)
    assert len(visible_cards(view)) == 11
    for pos, entry in enumerate(view.tableau):
        assert entry == (game.tableau_card(pos) if game.is_face_up(pos) else FACE_DOWN)
    assert set(GameView.__slots__) == {  # no field could smuggle the stock or hidden cards out
        "tableau",
        "waste",
        "stock_count",
        "score",
        "moves",
        "undos",
        "status",
        "can_undo",
        "cards_left",
    }


def test_view_marks_removed_positions_none_and_reveals_uncovered_cards() -> None:
    game = chain_game()
    play(game, [18, 19])
    view = game.view()
    assert view.tableau[18] is None and view.tableau[19] is None
    assert view.tableau[9] == C("5D")
    assert view.tableau[10] == FACE_DOWN
    assert view.waste == C("2D") and view.cards_left == 26
    assert view.can_undo is True and view.moves == 2 and view.score == 498


def test_view_after_undo_hides_the_re_covered_card_again() -> None:
    game = chain_game()
    play(game, [18, 19])
    game.undo()
    view = game.view()
    assert view.tableau[9] == FACE_DOWN and view.tableau[19] == C("2D")
    assert view.undos == 1 and not visible_cards(view) & hidden_cards(game)


def test_view_of_a_won_game_is_all_removed() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER)
    view = game.view()
    assert view.tableau == (None,) * 28
    assert view.status is Status.WON and view.cards_left == 0 and view.score == 772
    assert view.stock_count == 23 and view.can_undo is False


@pytest.mark.parametrize("ranked", [False, True])
def test_view_of_a_blocked_game_says_whether_undo_is_possible(ranked: bool) -> None:
    game = Game(blocking_deal(), RuleSet.EASY, ranked=ranked)
    draw_all(game)
    view = game.view()
    assert view.status is Status.BLOCKED and view.stock_count == 0
    assert view.can_undo is (not ranked)


def test_view_is_an_immutable_value() -> None:
    view = chain_game().view()
    assert view == chain_game().view()
    with pytest.raises(AttributeError):
        view.score = 1  # type: ignore[misc]
