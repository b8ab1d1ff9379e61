"""Undo: exact restoration, the 100-push history, blocked games, replay (docs/rules.md §2, §4,
§5)."""

from __future__ import annotations

import pytest

from server.engine import (
    UNDO_DEPTH,
    Action,
    ActionKind,
    Card,
    Game,
    IllegalActionError,
    Rejection,
    RuleSet,
    Status,
)
from tests.engine.support import (
    CHAIN_ORDER,
    blocking_deal,
    board,
    chain_game,
    draw_all,
    full_state,
    make_deal,
    play,
    status_of,
)

C = Card.parse


def test_undo_with_nothing_done_is_nothing_to_undo() -> None:
    game = chain_game()
    before = full_state(game)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.NOTHING_TO_UNDO
    assert full_state(game) == before


def test_undo_of_a_removal_puts_the_card_back_and_restores_waste_and_score() -> None:
    game = chain_game()
    start = board(game)
    game.remove(23)
    applied = game.undo()
    assert applied.kind is ActionKind.UNDO and applied.pos == 23 and applied.card == C("QD")
    assert applied.score_after == 500 and applied.status_after is Status.PLAYING
    assert game.tableau_card(23) == C("QD") and game.waste_top == C("KC")
    assert board(game) == start


def test_undo_of_a_draw_puts_the_card_back_on_top_of_the_stock() -> None:
    game = chain_game()
    game.draw()
    game.draw()
    applied = game.undo()
    assert applied.kind is ActionKind.UNDO and applied.pos is None and applied.card == C("2C")
    assert game.stock[0] == C("2C") and game.stock_count == 22
    assert game.waste_top == C("AC") and game.score == 499
    assert game.draw().card == C("2C")


def test_undo_re_covers_a_card_which_turns_face_down_again() -> None:
    game = chain_game()
    play(game, [18, 19])
    assert game.is_face_up(9)
    game.undo()
    assert not game.is_face_up(9) and not game.is_playable(9)
    assert game.view().tableau[9] == "down"
    assert 9 not in game.playable_positions()


def test_undo_reverts_the_most_recent_not_yet_undone_action_one_after_another() -> None:
    game = chain_game()
    game.remove(18)  # AD
    game.draw()  # AC
    game.remove(24)  # KD onto AC
    assert [game.undo().card for _ in range(3)] == [C("KD"), C("AC"), C("AD")]
    assert board(game) == board(chain_game())
    with pytest.raises(IllegalActionError):
        game.undo()


def test_undo_is_not_a_move_and_counts_as_an_undo() -> None:
    game = chain_game()
    game.remove(23)
    game.draw()
    game.undo()
    game.undo()
    assert game.moves == 2 and game.undos == 2 and game.seq == 4


def test_undo_is_not_itself_undoable_there_is_no_redo() -> None:
    game = chain_game()
    game.draw()
    game.undo()
    assert not game.can_undo
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.NOTHING_TO_UNDO
    assert game.stock_count == 23


@pytest.mark.parametrize(("peak", "step"), [(0, 9), (1, 18)], ids=["left", "middle"])
def test_undo_takes_back_a_peak_bonus_exactly(peak: int, step: int) -> None:
    game = chain_game()
    play(game, CHAIN_ORDER[:step])
    before = board(game)
    score = game.score
    game.remove(CHAIN_ORDER[step])
    assert game.score == score + 99 and game.cleared_peaks == peak + 1
    applied = game.undo()
    assert applied.score_after == game.score == score
    assert game.cleared_peaks == peak
    assert board(game) == before


def test_undo_takes_back_the_right_peak_bonus_exactly() -> None:
    # The right peak alone, as a rising chain AH..TH on KS (clearing it last in the chain deal
    # would win the game, and a won game cannot be undone).
    right_order = (24, 25, 26, 27, 15, 16, 17, 7, 8, 2)
    ranks = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "T"]
    tableau: list[str | None] = [None] * 28
    for pos, rank in zip(right_order, ranks, strict=True):
        tableau[pos] = rank + "H"
    game = Game(make_deal(tableau, "KS"), RuleSet.EASY)
    play(game, right_order[:9])
    before, score = board(game), game.score
    assert score == 491
    game.remove(2)
    assert game.score == 590 and game.cleared_peaks == 1 and game.status is Status.PLAYING
    assert game.undo().score_after == 491
    assert board(game) == before and game.cleared_peaks == 0


def test_undo_after_a_win_is_game_over() -> None:
    game = chain_game()
    play(game, CHAIN_ORDER)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.GAME_OVER
    assert game.status is Status.WON and game.undo_depth == 28


def test_a_whole_51_action_game_line_can_be_undone_back_to_the_deal() -> None:
    game = chain_game()
    fresh = board(game)
    play(game, CHAIN_ORDER[:27])
    draw_all(game)
    assert game.undo_depth == 50
    for _ in range(50):
        game.undo()
    assert board(game) == fresh
    assert game.undo_depth == 0 and not game.can_undo
    assert game.moves == 50 and game.undos == 50


def test_an_action_pushed_100_pushes_ago_can_still_be_undone() -> None:
    game = chain_game()
    game.remove(18)  # push 1
    for _ in range(UNDO_DEPTH - 1):  # pushes 2..100, each undone at once
        game.draw()
        game.undo()
    assert game.undo_depth == 1 and game.can_undo
    applied = game.undo()
    assert applied.pos == 18 and applied.card == C("AD")
    assert board(game) == board(chain_game())


def test_the_101st_push_drops_the_oldest_action_for_good() -> None:
    game = chain_game()
    game.remove(18)  # push 1
    for _ in range(UNDO_DEPTH):  # pushes 2..101
        game.draw()
        game.undo()
    assert game.undo_depth == 0 and not game.can_undo
    before = full_state(game)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.NOTHING_TO_UNDO
    assert full_state(game) == before
    assert game.tableau_card(18) is None


def test_only_the_actions_older_than_the_last_100_pushes_are_lost() -> None:
    game = chain_game()
    play(game, [18, 19])  # pushes 1 and 2
    for _ in range(UNDO_DEPTH - 1):  # pushes 3..101: push 1 falls out, push 2 stays
        game.draw()
        game.undo()
    assert game.undo_depth == 1
    assert game.undo().pos == 19
    with pytest.raises(IllegalActionError):
        game.undo()
    assert game.tableau_card(18) is None and game.tableau_card(19) == C("2D")


def test_undo_depth_is_at_most_100_in_a_long_game() -> None:
    game = chain_game()
    for _ in range(3 * UNDO_DEPTH):
        game.draw()
        game.undo()
        assert game.undo_depth == 0
    game.draw()
    assert game.undo_depth == 1 and game.moves == 3 * UNDO_DEPTH + 1


def test_undo_out_of_a_blocked_free_play_game_resumes_play() -> None:
    game = Game(blocking_deal(), RuleSet.EASY)
    draw_all(game)
    assert game.status is Status.BLOCKED
    applied = game.undo()
    assert applied.status_after is Status.PLAYING and status_of(game) is Status.PLAYING
    assert applied.card == C("7S") and game.stock == (C("7S"),)
    assert game.score == 478 and not game.is_over
    game.draw()
    assert status_of(game) is Status.BLOCKED


def test_undo_out_of_a_blocking_removal_restores_the_card_and_play() -> None:
    game = Game(blocking_deal("AC 2C 3C 4C JC QC KC AD 2D 8D"), RuleSet.EASY)
    draw_all(game)
    score = game.score
    game.remove(27)
    assert game.status is Status.BLOCKED
    applied = game.undo()
    assert applied.pos == 27 and applied.card == C("8D")
    assert status_of(game) is Status.PLAYING and game.score == score and game.waste_top == C("7S")


def test_ranked_blocked_game_refuses_undo_with_game_over() -> None:
    game = Game(blocking_deal(), RuleSet.EASY, ranked=True)
    draw_all(game)
    before = full_state(game)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.GAME_OVER
    assert full_state(game) == before


def test_ranked_game_refuses_undo_after_a_draw_and_changes_nothing() -> None:
    game = chain_game(ranked=True)
    game.draw()
    before = full_state(game)
    assert not game.can_undo and Action.undo() not in game.legal_actions()
    assert game.would_accept(Action.undo()) is Rejection.RANKED_NO_UNDO
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.RANKED_NO_UNDO
    assert full_state(game) == before and game.stock_count == 22 and game.undos == 0


def test_ranked_game_refuses_undo_after_a_removal_that_turned_cards_face_up() -> None:
    game = chain_game(ranked=True)
    play(game, [23, 22])  # 22 and 23 gone: 13 (covered by them) is face up now
    assert game.is_face_up(13)
    before = full_state(game)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.RANKED_NO_UNDO
    assert full_state(game) == before and game.is_face_up(13)


def test_ranked_game_with_nothing_done_is_ranked_no_undo_not_nothing_to_undo() -> None:
    game = chain_game(ranked=True)
    with pytest.raises(IllegalActionError) as raised:
        game.undo()
    assert raised.value.code is Rejection.RANKED_NO_UNDO


def test_free_game_still_undoes_what_a_ranked_one_refuses() -> None:
    game = chain_game()
    play(game, [23, 22])
    game.undo()
    assert game.tableau_card(22) == C("JD") and not game.is_face_up(13) and game.undos == 1


def test_stored_ranked_game_with_undos_still_rebuilds_then_refuses_undo() -> None:
    # A ranked game stored before ranked play refused undo: its log holds undos.
    free = chain_game()
    play(free, [23, 22])
    free.undo()
    free.draw()
    free.undo()
    rebuilt = Game.replay(free.deal, free.rules, free.actions, ranked=True)
    assert rebuilt.undos == 2 and rebuilt.seq == 5 and board(rebuilt) == board(free)
    assert (rebuilt.score, rebuilt.moves) == (free.score, free.moves)
    assert rebuilt.would_accept(Action.undo()) is Rejection.RANKED_NO_UNDO
    assert rebuilt.copy().would_accept(Action.undo()) is Rejection.RANKED_NO_UNDO
    rebuilt.remove(22)  # play goes on under today's rules
    assert rebuilt.would_accept(Action.undo()) is Rejection.RANKED_NO_UNDO


# ------------------------------------------------------------------ replay


def test_replay_rebuilds_an_identical_game_including_undo_depth() -> None:
    game = chain_game()
    play(game, [18, 19])  # pushes 1 and 2
    for _ in range(UNDO_DEPTH - 2):  # pushes 3..100
        game.draw()
        game.undo()
    game.remove(20)  # push 101: push 1 (18) is dropped
    rebuilt = Game.replay(game.deal, game.rules, game.actions)
    assert full_state(rebuilt) == full_state(game)
    assert rebuilt.undo_depth == game.undo_depth == 2


def test_replay_of_a_ranked_blocked_game_is_over_again() -> None:
    game = Game(blocking_deal(), RuleSet.EASY, ranked=True)
    draw_all(game)
    rebuilt = Game.replay(game.deal, game.rules, game.actions, ranked=True)
    assert rebuilt.status is Status.BLOCKED and rebuilt.is_over
    assert full_state(rebuilt) == full_state(game)


def test_replay_of_an_illegal_log_raises_illegal_action() -> None:
    game = chain_game()
    with pytest.raises(IllegalActionError) as raised:
        Game.replay(game.deal, RuleSet.EASY, [Action.remove(23), Action.remove(23)])
    assert raised.value.code is Rejection.NO_CARD
    with pytest.raises(IllegalActionError) as raised:
        Game.replay(game.deal, RuleSet.CLASSIC, [Action.remove(18)])
    assert raised.value.code is Rejection.NOT_ADJACENT
    with pytest.raises(IllegalActionError) as raised:
        Game.replay(game.deal, RuleSet.EASY, [Action.undo()])
    assert raised.value.code is Rejection.NOTHING_TO_UNDO


def test_replay_accepts_any_iterable_of_actions() -> None:
    game = Game.replay(chain_game().deal, RuleSet.EASY, iter([Action.draw(), Action.undo()]))
    assert game.seq == 2 and game.undos == 1
