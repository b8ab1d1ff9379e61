"""The review of a day's results (pure): each signal fires when, and only when, its rule says,
and says what it saw; client addresses are kept as keyed hashes of one address (IPv4) or one
/64 network (IPv6)."""

from __future__ import annotations

import datetime as dt

import pytest

from server.engine import GameCode
from server.services.addresses import (
    ADDRESS_LONGEST_KEPT,
    _kept_group,
    address_group,
    address_key,
    hash_address,
)
from server.services.review import Line, Thresholds, review, solve_line
from server.storage.review import DayResult

DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
LINE = Line(700, (("draw", None), ("remove", 20), ("remove", 11)))


def result(game_id: int, **values: object) -> DayResult:
    fields: dict[str, object] = {
        "game_id": game_id,
        "player_id": game_id,
        "player_name": f"P{game_id}",
        "status": "won",
        "score": 650,
        "moves": 40,
        "undos": 0,
        "seq": 40,
        "elapsed_ms": 600_000,
        "finished_at": T0,
        "hidden": False,
        "banned": False,
        "address_hash": bytes([game_id]) * 32,
    }
    fields.update(values)
    return DayResult(**fields)  # type: ignore[arg-type]


def signals(review_: object) -> dict[int, list[str]]:
    flagged = review_.flagged  # type: ignore[attr-defined]
    return {f.result.game_id: [s.name for s in f.signals] for f in flagged}


def test_a_normal_day_has_no_signal() -> None:
    results = [result(i, elapsed_ms=500_000 + 10_000 * i) for i in range(1, 9)]
    day = review(DATE, results, LINE, {}, Thresholds())
    assert day.flagged == []
    assert (day.ranked, day.won_on_board, day.median_won_ms) == (8, 8, 545_000.0)
    assert day.fast_under_ms == pytest.approx(0.25 * 545_000)


def test_fast_fires_under_a_fraction_of_the_median_of_the_won_results_on_the_board() -> None:
    normal = [result(i, elapsed_ms=600_000) for i in range(1, 7)]
    quick = result(20, elapsed_ms=149_999)  # 0.25 × 600 s = 150 s
    borderline = result(21, elapsed_ms=150_000)
    # Neither hidden results nor blocked ones move the median, nor are blocked ones "fast".
    hidden_fast = result(22, elapsed_ms=1_000_000, hidden=True)
    blocked = result(23, status="blocked", elapsed_ms=10_000)
    day = review(DATE, [*normal, quick, borderline, hidden_fast, blocked], LINE, {}, Thresholds())
    assert signals(day) == {20: ["fast"]}
    assert day.median_won_ms == 600_000
    explanation = day.flagged[0].signals[0].explanation
    assert "won in 150.0 s, under 25% of the median" in explanation
    assert "8 won results on the board (600.0 s)" in explanation
    assert "the threshold is 150.0 s" in explanation


def test_the_median_rule_needs_enough_won_results_but_the_floor_does_not() -> None:
    few = [result(1, elapsed_ms=600_000), result(2, elapsed_ms=100_000)]
    day = review(DATE, few, LINE, {}, Thresholds())
    assert day.fast_under_ms is None and signals(day) == {}
    bot = result(3, moves=40, elapsed_ms=9_999)  # 249.975 ms a move
    day = review(DATE, [*few, bot], LINE, {}, Thresholds())
    assert signals(day) == {3: ["fast"]}
    assert "over 40 moves, 250 ms a move: quicker than 250 ms a move" in (
        day.flagged[0].signals[0].explanation
    )
    assert signals(review(DATE, [*few, bot], LINE, {}, Thresholds(floor_ms_per_move=0))) == {}


def test_optimal_line_fires_only_for_the_whole_line_action_for_action() -> None:
    steps = list(LINE.steps)
    logs = {
        1: steps,
        2: steps[:-1],  # stopped short
        3: [*steps, ("draw", None)],  # went on
        4: [steps[1], steps[0], steps[2]],  # another order
    }
    results = [result(i, score=700, moves=3, seq=3) for i in range(1, 5)]
    day = review(DATE, results, LINE, logs, Thresholds(floor_ms_per_move=0))
    assert signals(day) == {1: ["optimal_line"]}
    assert day.flagged[0].signals[0].explanation == (
        "its 3 actions are the solver's optimal line, action for action, from the deal to the "
        "end (score 700; par 700)"
    )
    assert signals(review(DATE, results, None, logs, Thresholds(floor_ms_per_move=0))) == {}


def test_shared_address_fires_for_every_account_of_a_large_enough_group() -> None:
    shared = b"\xab" * 32
    group = [result(i, address_hash=shared) for i in (1, 2, 3)]
    pair = [result(i, address_hash=b"\xcd" * 32) for i in (4, 5)]
    unknown = [result(i, address_hash=None) for i in (6, 7, 8)]  # registered before hashes
    day = review(DATE, [*group, *pair, *unknown], LINE, {}, Thresholds())
    assert signals(day) == {1: ["shared_address"], 2: ["shared_address"], 3: ["shared_address"]}
    assert day.flagged[0].signals[0].explanation == (
        "one of 3 accounts ranked on 2026-03-14 that registered from one address (group "
        "abababab: players 1 P1, 2 P2, 3 P3)"
    )
    day = review(DATE, [*group, *pair], LINE, {}, Thresholds(shared_accounts=2))
    assert set(signals(day)) == {1, 2, 3, 4, 5}


def test_results_with_more_signals_come_first_then_board_order() -> None:
    shared = b"\xab" * 32
    normal = [result(i, elapsed_ms=600_000) for i in range(1, 7)]
    one = result(7, address_hash=shared)
    two = result(8, address_hash=shared, elapsed_ms=1_000)
    three = result(9, address_hash=shared, elapsed_ms=1_000, score=700, moves=3, seq=3)
    day = review(DATE, [*normal, one, two, three], LINE, {9: list(LINE.steps)}, Thresholds())
    assert list(signals(day).items()) == [
        (9, ["fast", "optimal_line", "shared_address"]),
        (8, ["fast", "shared_address"]),
        (7, ["shared_address"]),
    ]


def test_the_solvers_line_is_the_one_the_server_publishes() -> None:
    code = GameCode.parse("TP1-E-AAAAAAB")
    line = solve_line(code)
    from server.engine.solver import solve

    solution = solve(code.deal(), code.rules)
    assert line.par == solution.par
    assert line.steps == tuple((a.kind.value, a.pos) for a in solution.line)


@pytest.mark.parametrize(
    ("address", "group"),
    [
        ("203.0.113.7", "203.0.113.7"),
        (" 203.0.113.7 ", "203.0.113.7"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
        ("2001:db8:1:2::1%eth0", "2001:db8:1:2::/64"),
        ("unknown", None),
        ("", None),
    ],
)
def test_address_groups(address: str, group: str | None) -> None:
    assert address_group(address) == group
    assert address_group(address) == group  # remembered, the same


def test_a_long_address_text_is_grouped_each_time_not_kept() -> None:
    # A forwarded header's text is the client's to choose: only what an address can be is kept.
    kept = _kept_group.cache_info().currsize
    long_text = "203.0.113.7" + " " * ADDRESS_LONGEST_KEPT
    assert address_group(long_text) == "203.0.113.7"
    assert address_group("x" * 8000) is None
    assert _kept_group.cache_info().currsize == kept
    longest = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255%" + "e" * 15
    assert len(longest) <= ADDRESS_LONGEST_KEPT
    assert address_group(longest) == "ffff:ffff:ffff:ffff::/64"


def test_address_hashes_are_keyed_and_name_no_address() -> None:
    key = address_key(b"one-daily-secret-0123456789abcdefghij")
    other = address_key(b"another-daily-secret-0123456789abcdef")
    a = hash_address(key, "203.0.113.7")
    assert a is not None and len(a) == 32
    assert a == hash_address(key, "::ffff:203.0.113.7")
    assert a != hash_address(key, "203.0.113.8")
    assert a != hash_address(other, "203.0.113.7")
    assert b"203.0.113.7" not in a
    assert hash_address(key, "2001:db8::1") == hash_address(key, "2001:db8::ffff:1")
    assert hash_address(key, "2001:db8::1") != hash_address(key, "2001:db8:0:1::1")
    assert hash_address(key, "unknown") is None
