"""The difficulty measure: its two imperfect-information players, replayed through
:class:`Game` and against reference players written from docs/rules.md §4 "Difficulty" over the
engine's own game, and the level function.

The references below play with :class:`Game` (its playable cards, its legal actions) and read
the random stream as the rules describe it; the measure's compact simulator must agree with them
line for line.
"""

from __future__ import annotations

import doctest
import hashlib
import statistics
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.engine import (
    CODE_SPACE,
    TP2_CODE_SPACE,
    Action,
    ActionKind,
    Deal,
    DealVersion,
    Game,
    GameCode,
    RuleSet,
    Status,
    difficulty,
)
from server.engine.difficulty import (
    GREEDY_WEIGHT,
    PLAYOUTS,
    THRESHOLDS,
    Level,
    Playout,
    difficulty_index,
    greedy_game,
    level_of,
    measure,
    random_bytes,
    random_playouts,
)
from server.engine.rules import is_neighbour
from server.engine.solver import solve
from tests.engine.support import chain_deal, make_deal

RULES = (RuleSet.EASY, RuleSet.CLASSIC)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
codes = st.builds(
    GameCode,
    st.sampled_from(RULES),
    st.integers(0, TP2_CODE_SPACE - 1),
    st.just(DealVersion.TP2),
) | st.builds(GameCode, st.sampled_from(RULES), st.integers(0, CODE_SPACE - 1))


def _removals(game: Game) -> list[int]:
    return [
        a.pos for a in game.legal_actions() if a.kind is ActionKind.REMOVE and a.pos is not None
    ]


def reference_random(deal: Deal, rules: RuleSet, count: int) -> list[Playout]:
    """The random player of docs/rules.md §4 "Difficulty", on :class:`Game`: with ``k`` legal
    removals it reads the next byte of the stream, skips it while it is at least
    ``256 − 256 mod k``, and removes the ``(byte mod k)``-th by position; with none it draws."""
    stream = random_bytes(deal, 64 * count)
    at = 0
    games = []
    for _ in range(count):
        game = Game(deal, rules, ranked=True)
        while game.status is Status.PLAYING:
            legal = _removals(game)
            if len(legal) > 1:
                while stream[at] >= 256 - 256 % len(legal):
                    at += 1
                game.remove(legal[stream[at] % len(legal)])
                at += 1
            elif legal:
                game.remove(legal[0])
            else:
                game.draw()
        games.append(Playout(game.status, game.score, game.actions))
    return games


def reference_chain(game: Game) -> int | None:
    """The greedy player's removal, by enumerating every chain of the face-up cards: the first
    card of a longest chain, the lowest position among equals; None when nothing is legal."""
    face_up = {pos: game.tableau_card(pos) for pos in game.playable_positions()}
    best: tuple[int, int] | None = None  # (length, -first position)

    def extend(chain: list[int]) -> None:
        nonlocal best
        last = game.waste_top if not chain else face_up[chain[-1]]
        for pos, card in face_up.items():
            assert card is not None and last is not None
            if pos not in chain and is_neighbour(card, last, game.rules):
                chain.append(pos)
                key = (len(chain), -chain[0])
                best = key if best is None or key > best else best
                extend(chain)
                chain.pop()

    extend([])
    return None if best is None else -best[1]


def reference_greedy(deal: Deal, rules: RuleSet) -> Playout:
    game = Game(deal, rules, ranked=True)
    while game.status is Status.PLAYING:
        pos = reference_chain(game)
        if pos is None:
            game.draw()
        else:
            game.remove(pos)
    return Playout(game.status, game.score, game.actions)


def replayed(deal: Deal, rules: RuleSet, line: tuple[Action, ...]) -> Game:
    """The line played through :class:`Game` (every action must be accepted)."""
    return Game.replay(deal, rules, line, ranked=True)


@SETTINGS
@given(codes)
def test_random_playouts_follow_the_rules_and_the_documented_policy(code: GameCode) -> None:
    deal = code.deal()
    playouts = random_playouts(deal, code.rules, 25)
    assert playouts == reference_random(deal, code.rules, 25)
    for playout in playouts:
        game = replayed(deal, code.rules, playout.line)
        assert (game.status, game.score) == (playout.status, playout.score)
        assert playout.status in (Status.WON, Status.BLOCKED)


@SETTINGS
@given(codes)
def test_a_random_player_never_draws_while_it_can_remove(code: GameCode) -> None:
    deal = code.deal()
    for playout in random_playouts(deal, code.rules, 5):
        game = Game(deal, code.rules, ranked=True)
        for action in playout.line:
            if action.kind is ActionKind.DRAW:
                assert not _removals(game)
            game.apply(action)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codes)
def test_the_greedy_game_is_the_reference_greedy_players(code: GameCode) -> None:
    deal = code.deal()
    greedy = greedy_game(deal, code.rules)
    assert greedy == reference_greedy(deal, code.rules)
    game = replayed(deal, code.rules, greedy.line)
    assert (game.status, game.score) == (greedy.status, greedy.score)


def test_the_greedy_player_follows_the_longest_chain_not_the_first_card() -> None:
    # Waste 5C. Face up: 4D at 18 (a chain of one: nothing of 3 or 5 is face up) and 6D at 27,
    # 7D at 26, 8D at 25 (a chain of three): the greedy player starts the longer chain.
    tableau: list[str | None] = [None] * 28
    tableau[18], tableau[25], tableau[26], tableau[27] = "4D", "8D", "7D", "6D"
    for pos, text in zip(range(19, 25), ("JH", "JS", "JC", "QH", "QS", "QC"), strict=True):
        tableau[pos] = text
    deal = make_deal(tableau, "5C")
    line = greedy_game(deal, RuleSet.CLASSIC).line
    assert line[:3] == (Action.remove(27), Action.remove(26), Action.remove(25))
    # A random player starts with either.
    firsts = {p.line[0] for p in random_playouts(deal, RuleSet.CLASSIC, 200)}
    assert firsts == {Action.remove(18), Action.remove(27)}


def test_equal_chains_go_to_the_lowest_position() -> None:
    tableau: list[str | None] = [None] * 28
    tableau[20], tableau[23] = "6D", "6S"  # two chains of one from waste 5C
    for pos, text in zip(
        (18, 19, 21, 22, 24, 25, 26, 27),
        ("JH", "JS", "JC", "JD", "QH", "QS", "QC", "QD"),
        strict=True,
    ):
        tableau[pos] = text
    deal = make_deal(tableau, "5C")
    assert greedy_game(deal, RuleSet.CLASSIC).line[0] == Action.remove(20)


def test_the_random_choice_is_uniform_among_legal_removals() -> None:
    # A deal with four legal removals at the start: 5C on the waste, 4s and 6s below.
    tableau: list[str | None] = [None] * 28
    tableau[18], tableau[21], tableau[24], tableau[27] = "4D", "6D", "4S", "6S"
    for pos, text in zip(
        (19, 20, 22, 23, 25, 26), ("JH", "JS", "JC", "QH", "QS", "QC"), strict=True
    ):
        tableau[pos] = text
    four = make_deal(tableau, "5C")
    firsts = [p.line[0].pos for p in random_playouts(four, RuleSet.CLASSIC, 4000)]
    counts = [firsts.count(pos) for pos in (18, 21, 24, 27)]
    assert sum(counts) == 4000
    # Each is 1,000 expected; 4 standard deviations (about 27 each) either way.
    assert all(890 <= n <= 1110 for n in counts), counts


def test_the_measure_is_deterministic_and_agrees_with_its_playouts() -> None:
    code = GameCode.parse("TP2-C-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB")
    deal, par = code.deal(), solve(code.deal(), code.rules).par
    first = measure(deal, code.rules, par, playouts=301)
    assert measure(deal, code.rules, par, playouts=301) == first
    games = random_playouts(deal, code.rules, 301)
    scores = sorted(p.score for p in games)
    assert first.playouts == 301
    assert first.random_wins == sum(p.status is Status.WON for p in games)
    assert first.random_median_score == scores[150]
    assert first.random_mean_shortfall == pytest.approx(par - statistics.fmean(scores))
    greedy = greedy_game(deal, code.rules)
    assert (first.greedy_status, first.greedy_score) == (greedy.status, greedy.score)
    assert first.greedy_shortfall == par - greedy.score
    assert first.index == pytest.approx(
        first.random_mean_shortfall + GREEDY_WEIGHT * first.greedy_shortfall
    )
    assert first.level is level_of(first.index, code.rules)
    # The first n playouts are the same whatever the count.
    assert random_playouts(deal, code.rules, 40) == games[:40]


def test_the_random_stream_is_shake_256_of_the_cards_and_grows_by_extension() -> None:
    deal = GameCode.parse("TP1-E-AAAAAAA").deal()
    expected = hashlib.shake_256(
        b"TriPeaks-difficulty:" + bytes(card.index for card in deal.deck)
    ).digest(100)
    assert random_bytes(deal, 100) == expected
    assert random_bytes(deal, 1000)[:100] == expected
    other = GameCode.parse("TP1-E-AAAAAAB").deal()
    assert random_bytes(other, 100) != expected


def test_a_playout_reads_on_when_the_stream_it_was_given_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = GameCode.parse("TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB")
    deal = code.deal()
    expected = random_playouts(deal, code.rules, 60)
    monkeypatch.setattr(difficulty, "_BYTES_PER_PLAYOUT", 1)  # runs out, again and again
    assert random_playouts(deal, code.rules, 60) == expected


def test_a_deal_won_whatever_the_order_is_won_by_both_players_short_of_par() -> None:
    # The chain deal: every card neighbours the next one of CHAIN_ORDER, so no line blocks; but
    # neither player knows the order, so both draw on the way (the greedy player starts with
    # the longest chain it sees, QD KD AD 2D 3D 4D, and ends up drawing all 23).
    deal = chain_deal()
    figures = measure(deal, RuleSet.EASY, 772, playouts=50)
    assert figures.random_wins == 50 and 749 <= figures.random_median_score < 772
    assert (figures.greedy_status, figures.greedy_score) == (Status.WON, 749)
    assert greedy_game(deal, RuleSet.EASY).line[0] == Action.remove(23)  # QD
    assert figures.level is Level.EASY


def test_at_least_one_playout() -> None:
    with pytest.raises(ValueError):
        measure(chain_deal(), RuleSet.EASY, 772, playouts=0)


@pytest.mark.parametrize("rules", RULES)
def test_levels_cut_the_index_at_the_rule_sets_thresholds(rules: RuleSet) -> None:
    easy, medium, hard = THRESHOLDS[rules]
    assert 0 < easy < medium < hard
    assert level_of(0, rules) is Level.EASY
    assert level_of(easy, rules) is Level.EASY
    assert level_of(easy + 0.01, rules) is Level.MEDIUM
    assert level_of(medium, rules) is Level.MEDIUM
    assert level_of(hard, rules) is Level.HARD
    assert level_of(hard + 0.01, rules) is Level.EXPERT
    assert level_of(1000, rules) is Level.EXPERT
    assert level_of(5, rules, (1, 2, 3)) is Level.EXPERT
    assert level_of(2, rules, (1, 2, 3)) is Level.MEDIUM


def test_the_index_weighs_the_greedy_shortfall_by_a_tenth() -> None:
    assert difficulty_index(80.0, 200) == pytest.approx(100.0)
    assert difficulty_index(0.0, 0) == 0
    assert PLAYOUTS == 1000
    assert [level.value for level in Level] == ["easy", "medium", "hard", "expert"]


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(difficulty, verbose=False).failed == 0


def test_the_rules_state_the_thresholds_the_engine_holds() -> None:
    rules_md = (Path(__file__).parents[2] / "docs" / "rules.md").read_text(encoding="utf-8")
    easy, classic = THRESHOLDS[RuleSet.EASY], THRESHOLDS[RuleSet.CLASSIC]
    for number, level in enumerate(("easy", "medium", "hard")):
        row = f"| {level} | ≤ {easy[number]:.2f} | ≤ {classic[number]:.2f} |"
        assert row in rules_md, row
