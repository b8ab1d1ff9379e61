"""Game rules: removal, draw, rejections and their order, score, moves, status (docs/rules.md §2,
§4)."""

from __future__ import annotations

import pytest

from server.engine import (
    PEAK_BONUS,
    START_SCORE,
    Action,
    ActionKind,
    Card,
    Game,
    GameCode,
    IllegalActionError,
    Rejection,
    RuleSet,
    Status,
    is_neighbour,
    next_score,
)
from server.engine.cards import Rank
from tests.engine.support import (
    CHAIN_CARDS,
    CHAIN_ORDER,
    blocking_deal,
    chain_game,
    draw_all,
    full_state,
    play,
    status_of,
)

C = Card.parse


def rejected(game: Game, action: Action) -> Rejection:
    """Apply ``action`` expecting a refusal that changes nothing; return its code."""
    before = full_state(game)
    with pytest.raises(IllegalActionError) as raised:
        game.apply(action)
    assert full_state(game) == before
    assert game.would_accept(action) is raised.value.code
    return raised.value.code


# ------------------------------------------------------------------ start


def test_new_game_starts_with_500_points_28_cards_one_waste_and_23_in_stock() -> None:
    game = Game.new(GameCode.parse("TP1-E-AAAAAAA"))
    assert game.score == START_SCORE == 500
    assert game.cards_left == 28
    assert game.stock_count == 23
    assert game.waste == (C("4H"),) and game.waste_top == C("4H")
    assert game.status is Status.PLAYING
    assert (game.moves, game.undos, game.seq, game.actions) == (0, 0, 0, ())
    assert game.rules is RuleSet.EASY and game.ranked is False
    assert not game.is_over and not game.can_undo and game.undo_depth == 0


def test_new_takes_the_rules_and_deal_from_the_code() -> None:
    game = Game.new(GameCode.parse("TP1-C-AAAAAAA"), ranked=True)
    assert game.rules is RuleSet.CLASSIC and game.ranked is True
    assert game.deal == GameCode.parse("TP1-E-AAAAAAA").deal()


def test_only_the_bottom_row_is_face_up_at_the_start() -> None:
    game = chain_game()
    assert [game.is_face_up(p) for p in range(28)] == [False] * 18 + [True] * 10
    assert game.playable_positions() == tuple(range(18, 28))


# ------------------------------------------------------------------ remove


def test_remove_moves_a_neighbouring_playable_card_onto_the_waste() -> None:
    game = chain_game()  # waste KC, QD at 23
    applied = game.remove(23)
    assert applied.kind is ActionKind.REMOVE and applied.pos == 23 and applied.card == C("QD")
    assert game.tableau_card(23) is None
    assert game.waste_top == C("QD") and game.waste == (C("KC"), C("QD"))
    assert game.cards_left == 27
    assert applied.score_after == game.score == 499
    assert applied.status_after is Status.PLAYING


def test_one_rank_below_and_above_are_both_accepted_suit_ignored() -> None:
    game = chain_game()
    game.remove(23)  # QD onto KC: one below
    game.draw()  # AC
    game.draw()  # 2C
    game.remove(18)  # AD onto 2C: one below
    game.remove(19)  # 2D onto AD: one above
    assert game.waste_top == C("2D")


def test_removing_both_covers_turns_the_card_below_face_up() -> None:
    game = chain_game()
    game.remove(18)  # AD
    assert not game.is_face_up(9) and not game.is_playable(9)
    game.remove(19)  # 2D
    assert game.is_face_up(9) and game.is_playable(9)
    assert game.tableau_card(9) == C("5D")
    assert 9 in game.playable_positions()


def test_tableau_card_is_known_even_when_face_down_and_none_once_removed() -> None:
    game = chain_game()
    assert game.tableau_card(0) == C("TD")
    game.remove(18)
    assert game.tableau_card(18) is None
    assert game.is_face_up(18) and not game.is_playable(18)


def test_remove_of_a_removed_position_is_no_card() -> None:
    game = chain_game()
    game.remove(18)
    assert rejected(game, Action.remove(18)) is Rejection.NO_CARD


def test_remove_of_a_face_down_card_is_blocked_even_when_its_rank_fits() -> None:
    game = chain_game()  # waste KC; AH (a neighbour under Easy) lies face down at 12
    assert game.tableau_card(12) == C("AH")
    assert rejected(game, Action.remove(12)) is Rejection.BLOCKED


def test_remove_of_a_half_uncovered_card_is_blocked() -> None:
    game = chain_game()
    game.remove(18)  # 9 is still covered by 19
    assert rejected(game, Action.remove(9)) is Rejection.BLOCKED


def test_remove_of_a_covered_card_with_a_wrong_rank_is_blocked_not_not_adjacent() -> None:
    game = chain_game()  # TD at 0 is neither face up nor a neighbour of KC
    assert rejected(game, Action.remove(0)) is Rejection.BLOCKED


def test_remove_of_a_playable_card_with_the_wrong_rank_is_not_adjacent() -> None:
    game = chain_game()  # 2D at 19 on KC
    assert rejected(game, Action.remove(19)) is Rejection.NOT_ADJACENT


def test_same_rank_is_not_adjacent() -> None:
    game = chain_game()  # KD at 24 on KC
    assert rejected(game, Action.remove(24)) is Rejection.NOT_ADJACENT


def test_easy_accepts_ace_onto_king() -> None:
    game = chain_game(RuleSet.EASY)
    game.remove(18)  # AD onto KC
    assert game.waste_top == C("AD")


def test_easy_accepts_king_onto_ace() -> None:
    game = chain_game(RuleSet.EASY)
    game.draw()  # AC
    game.remove(24)  # KD onto AC
    assert game.waste_top == C("KD")


def test_classic_refuses_ace_onto_king() -> None:
    game = chain_game(RuleSet.CLASSIC)
    assert rejected(game, Action.remove(18)) is Rejection.NOT_ADJACENT


def test_classic_refuses_king_onto_ace() -> None:
    game = chain_game(RuleSet.CLASSIC)
    game.draw()  # AC
    assert rejected(game, Action.remove(24)) is Rejection.NOT_ADJACENT


def test_classic_still_accepts_queen_onto_king_and_two_onto_ace() -> None:
    game = chain_game(RuleSet.CLASSIC)
    game.remove(23)  # QD onto KC
    game.draw()  # AC
    game.remove(19)  # 2D onto AC
    assert game.waste_top == C("2D")


@pytest.mark.parametrize("rules", list(RuleSet))
def test_neighbour_relation_for_every_pair_of_ranks(rules: RuleSet) -> None:
    for a in Rank:
        for b in Rank:
            expected = abs(a - b) == 1 or (rules is RuleSet.EASY and {a, b} == {1, 13})
            card, waste = Card(a, C("AS").suit), Card(b, C("AH").suit)
            assert is_neighbour(card, waste, rules) is expected, (a, b)


# ------------------------------------------------------------------ draw


def test_draw_turns_the_top_stock_card_onto_the_waste_in_deal_order() -> None:
    game = chain_game()
    stock = game.deal.stock
    for i in range(3):
        applied = game.draw()
        assert applied.kind is ActionKind.DRAW and applied.pos is None
        assert applied.card == stock[i] == game.waste_top
        assert game.stock == stock[i + 1 :]
    assert game.stock_count == 20
    assert game.waste == (C("KC"), *stock[:3])


def test_draw_is_allowed_while_a_removal_is_possible() -> None:
    game = chain_game()
    assert Action.remove(23) in game.legal_actions()
    game.draw()
    assert game.stock_count == 22


def test_draw_with_an_empty_stock_is_stock_empty() -> None:
    game = chain_game()
    draw_all(game)  # ends on 3S: 2D and 4D are playable neighbours, so still playing
    assert game.status is Status.PLAYING
    assert rejected(game, Action.draw()) is Rejection.STOCK_EMPTY


def test_the_stock_is_never_recycled() -> None:
    game = chain_game()
    draw_all(game)
    assert game.stock_count == 0 and game.stock == ()
    assert len(game.waste) == 24
    assert Action.draw() not in game.legal_actions()


# ------------------------------------------------------------------ score


def test_removal_and_draw_each_cost_one_point() -> None:
    game = chain_game()
    game.remove(23)
    assert game.score == 499
    game.draw()
    assert game.score == 498


@pytest.mark.parametrize(("peak", "step"), [(0, 9), (1, 18), (2, 27)], ids=["left", "mid", "right"])
def test_clearing_each_peak_scores_100_on_top_of_the_move(peak: int, step: int) -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:step])
    assert game.cleared_peaks == peak
    before = game.score
    applied = game.remove(CHAIN_ORDER[step])
    assert applied.score_after == game.score == before - 1 + PEAK_BONUS
    assert game.cleared_peaks == peak + 1


def test_perfect_game_scores_772() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER)
    assert game.status is Status.WON
    assert game.score == 500 - 28 + 300 == 772
    assert game.moves == 28 and game.cards_left == 0 and game.cleared_peaks == 3


def test_win_after_drawing_the_whole_stock_scores_749() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:27])
    draw_all(game)
    game.remove(CHAIN_ORDER[27])
    assert game.status is Status.WON and game.score == 749 and game.moves == 51


def test_score_after_a_move_is_floored_at_zero() -> None:
    assert next_score(500, clears_peak=False) == 499
    assert next_score(500, clears_peak=True) == 599
    assert next_score(1, clears_peak=False) == 0
    assert next_score(0, clears_peak=False) == 0
    assert next_score(0, clears_peak=True) == 99


def test_blocked_game_gets_no_penalty_or_bonus() -> None:
    game = Game(blocking_deal(), RuleSet.EASY)
    draw_all(game)
    assert game.status is Status.BLOCKED
    assert game.score == 500 - 23


# ------------------------------------------------------------------ moves


def test_moves_count_every_removal_and_draw_and_seq_counts_every_action() -> None:
    game = chain_game()
    game.remove(23)
    game.draw()
    assert (game.moves, game.undos, game.seq) == (2, 0, 2)
    game.undo()
    assert (game.moves, game.undos, game.seq) == (2, 1, 3)
    game.draw()
    assert (game.moves, game.undos, game.seq) == (3, 1, 4)
    assert game.actions == (Action.remove(23), Action.draw(), Action.undo(), Action.draw())


def test_a_rejected_action_is_not_a_move() -> None:
    game = chain_game()
    for action in (Action.remove(0), Action.remove(19), Action.undo()):
        with pytest.raises(IllegalActionError):
            game.apply(action)
    assert (game.moves, game.seq, game.score) == (0, 0, 500)


# ------------------------------------------------------------------ status


def test_won_as_soon_as_all_28_cards_are_removed_with_cards_left_in_stock() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:27])
    assert game.status is Status.PLAYING
    applied = game.remove(CHAIN_ORDER[27])
    assert applied.status_after is Status.WON and status_of(game) is Status.WON
    assert game.stock_count == 23 and game.is_over


def test_win_is_checked_before_blocked_when_the_last_card_empties_the_tableau() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:27])
    draw_all(game)
    assert game.status is Status.PLAYING  # 3S on the waste, 2S playable
    game.remove(CHAIN_ORDER[27])
    assert game.stock_count == 0 and status_of(game) is Status.WON


def test_blocked_when_the_stock_is_empty_and_no_playable_card_is_a_neighbour() -> None:
    game = Game(blocking_deal(), RuleSet.EASY)
    for _ in range(22):
        assert game.draw().status_after is Status.PLAYING
    applied = game.draw()
    assert game.waste_top == C("7S")
    assert applied.status_after is Status.BLOCKED and game.status is Status.BLOCKED


def test_a_removal_that_leaves_no_neighbour_with_an_empty_stock_blocks() -> None:
    game = Game(blocking_deal("AC 2C 3C 4C JC QC KC AD 2D 8D"), RuleSet.EASY)
    draw_all(game)  # 7S on the waste; 8D at 27 is the only neighbour
    assert game.status is Status.PLAYING
    assert game.remove(27).status_after is Status.BLOCKED


def test_not_blocked_while_the_stock_has_cards() -> None:
    game = Game(blocking_deal(), RuleSet.EASY)
    assert not any(a.kind is ActionKind.REMOVE for a in game.legal_actions())  # 7H: no neighbour
    assert game.status is Status.PLAYING
    for _ in range(22):
        game.draw()
    assert game.stock_count == 1 and game.status is Status.PLAYING


def test_won_game_refuses_every_action_with_game_over() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER)
    for action in (Action.remove(0), Action.remove(5), Action.draw(), Action.undo()):
        assert rejected(game, action) is Rejection.GAME_OVER
    assert game.legal_actions() == ()
    assert not game.can_undo


def test_game_over_is_checked_before_any_other_rejection() -> None:
    game = chain_game()
    game.resign()
    assert rejected(game, Action.remove(0)) is Rejection.GAME_OVER  # else BLOCKED
    assert rejected(game, Action.remove(19)) is Rejection.GAME_OVER  # else NOT_ADJACENT
    assert rejected(game, Action.undo()) is Rejection.GAME_OVER  # else NOTHING_TO_UNDO
    won = chain_game()
    play(won, CHAIN_ORDER[:27])
    draw_all(won)
    won.remove(CHAIN_ORDER[27])
    assert rejected(won, Action.remove(2)) is Rejection.GAME_OVER  # else NO_CARD
    assert rejected(won, Action.draw()) is Rejection.GAME_OVER  # else STOCK_EMPTY


def test_no_card_is_checked_before_blocked_and_not_adjacent() -> None:
    game = chain_game()
    game.remove(18)
    assert rejected(game, Action.remove(18)) is Rejection.NO_CARD


# ------------------------------------------------------------------ ranked / free blocked


def test_ranked_blocked_game_is_over_and_refuses_undo_with_game_over() -> None:
    game = Game(blocking_deal(), RuleSet.EASY, ranked=True)
    draw_all(game)
    assert game.status is Status.BLOCKED and game.is_over
    assert game.undo_depth == 23 and not game.can_undo
    for action in (Action.undo(), Action.draw(), Action.remove(18), Action.remove(0)):
        assert rejected(game, action) is Rejection.GAME_OVER
    assert game.legal_actions() == ()


def test_free_play_blocked_game_accepts_only_undo() -> None:
    game = Game(blocking_deal(), RuleSet.EASY)
    draw_all(game)
    assert game.status is Status.BLOCKED and not game.is_over and game.can_undo
    assert game.legal_actions() == (Action.undo(),)
    assert rejected(game, Action.draw()) is Rejection.GAME_OVER
    assert rejected(game, Action.remove(18)) is Rejection.GAME_OVER


# ------------------------------------------------------------------ resign


def test_resign_ends_the_game_without_touching_score_or_log() -> None:
    game = chain_game()
    game.remove(23)
    game.resign()
    assert game.status is Status.RESIGNED and game.is_over
    assert (game.score, game.moves, game.seq) == (499, 1, 1)
    assert game.actions == (Action.remove(23),)


def test_resign_twice_or_after_a_win_is_game_over() -> None:
    game = chain_game()
    game.resign()
    with pytest.raises(IllegalActionError) as raised:
        game.resign()
    assert raised.value.code is Rejection.GAME_OVER
    won = chain_game()
    play(won, CHAIN_ORDER)
    with pytest.raises(IllegalActionError):
        won.resign()
    assert won.status is Status.WON


def test_resign_a_ranked_blocked_game_is_game_over_but_free_play_may_stop() -> None:
    ranked = Game(blocking_deal(), RuleSet.EASY, ranked=True)
    draw_all(ranked)
    with pytest.raises(IllegalActionError):
        ranked.resign()
    assert ranked.status is Status.BLOCKED
    free = Game(blocking_deal(), RuleSet.EASY)
    draw_all(free)
    free.resign()
    assert free.status is Status.RESIGNED and free.legal_actions() == ()


# ------------------------------------------------------------------ misc API


def test_apply_dispatches_like_the_named_methods() -> None:
    a, b = chain_game(), chain_game()
    assert a.apply(Action.remove(23)) == b.remove(23)
    assert a.apply(Action.draw()) == b.draw()
    assert a.apply(Action.undo()) == b.undo()
    assert full_state(a) == full_state(b)


def test_legal_actions_are_removals_by_position_then_draw_then_undo() -> None:
    game = chain_game()
    assert game.legal_actions() == (Action.remove(18), Action.remove(23), Action.draw())
    game.draw()  # AC on the waste: AD? no; 2D at 19 and KD at 24 (Easy) are neighbours
    assert game.legal_actions() == (
        Action.remove(19),
        Action.remove(24),
        Action.draw(),
        Action.undo(),
    )


def test_would_accept_matches_legal_actions_for_every_action() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:5])
    everything = [*(Action.remove(p) for p in range(28)), Action.draw(), Action.undo()]
    legal = set(game.legal_actions())
    for action in everything:
        assert (game.would_accept(action) is None) is (action in legal)


def test_copy_is_independent_of_the_original() -> None:
    game = chain_game()
    game.remove(23)
    twin = game.copy()
    assert full_state(twin) == full_state(game)
    twin.draw()
    twin.undo()
    twin.undo()
    assert game.tableau_card(23) is None and game.score == 499 and game.seq == 1
    assert twin.tableau_card(23) == C("QD") and twin.seq == 4
    game.draw()
    assert twin.stock_count == 23


def test_position_queries_reject_positions_outside_0_to_27() -> None:
    game = chain_game()
    for bad in (-1, 28, True):
        with pytest.raises(ValueError):
            game.tableau_card(bad)
        with pytest.raises(ValueError):
            game.is_face_up(bad)
        with pytest.raises(ValueError):
            game.remove(bad)


def test_chain_cards_are_laid_out_as_the_helper_says() -> None:
    game = chain_game()
    for pos, text in zip(CHAIN_ORDER, CHAIN_CARDS.split(), strict=True):
        assert game.tableau_card(pos) == C(text)
