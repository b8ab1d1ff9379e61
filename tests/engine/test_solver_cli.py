"""The ``tripeaks solve`` and ``tripeaks stats`` commands."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from server.cli import main
from server.cli.deals import _wilson
from server.engine import Action, Card, Game, GameCode, Status


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_solve_prints_the_line_with_its_cards() -> None:
    code, output = run("solve", "tp1-e-aaaaaaa")
    assert code == 0
    lines = output.splitlines()
    assert lines[0] == "TP1-E-AAAAAAA  (Easy): winnable, par 759 (13 draws)"
    assert lines[-1].startswith("solved in ") and lines[-1].endswith(" ms")
    moves = lines[1:-1]
    assert len(moves) == 28 + 13
    assert moves[0].split(".")[0].strip() == "1"
    assert any(" draw (" in move for move in moves)
    assert any(" remove " in move for move in moves)


def test_solve_json_replays_to_par() -> None:
    code, output = run("solve", "TP1-C-AAAAAAC", "--json")
    assert code == 0
    payload = json.loads(output)
    assert set(payload) == {"code", "rules", "winnable", "par", "line", "ms"}
    assert (payload["code"], payload["rules"]) == ("TP1-C-AAAAAAC", "C")
    assert (payload["winnable"], payload["par"]) == (False, 658)
    game = Game.new(GameCode.parse(payload["code"]))
    for step in payload["line"]:
        action = Action.draw() if step["action"] == "draw" else Action.remove(step["pos"])
        assert game.apply(action).card == Card.parse(step["card"])
    assert game.status is Status.BLOCKED and game.score == payload["par"]


def test_solve_rejects_a_bad_code() -> None:
    code, output = run("solve", "TP1-X-AAAAAAA")
    assert code == 2
    assert "unknown rule set 'X'" in output


def test_stats_reports_the_share_and_times() -> None:
    code, output = run("stats", "--deals", "6", "--rules", "C", "--seed", "3", "--json")
    assert code == 0
    figures = json.loads(output)
    assert (figures["deals"], figures["rules"], figures["seed"]) == (6, "C", 3)
    low, high = figures["ci95"]
    assert low <= figures["share"] <= high
    assert figures["share"] == figures["winnable"] / 6
    assert figures["ms"]["median"] <= figures["ms"]["p95"] <= figures["ms"]["max"]
    # The same seed gives the same deals, hence the same figures.
    again = json.loads(run("stats", "--deals", "6", "--rules", "c", "--seed", "3", "--json")[1])
    assert (again["winnable"], again["mean_par"]) == (figures["winnable"], figures["mean_par"])


def test_stats_text_output() -> None:
    code, output = run("stats", "--deals", "3", "--winnable-only")
    assert code == 0
    assert "3 deals, rules E (Easy), seed 1, solved for winnability only" in output
    assert "95% Wilson interval" in output


@pytest.mark.parametrize(
    ("successes", "trials", "expected"),
    [(5, 10, (0.2366, 0.7634)), (0, 10, (0.0, 0.2775)), (97, 100, (0.9155, 0.9897))],
)
def test_wilson_interval(successes: int, trials: int, expected: tuple[float, float]) -> None:
    low, high = _wilson(successes, trials)
    assert (round(low, 4), round(high, 4)) == expected
