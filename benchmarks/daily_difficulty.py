"""Daily difficulty benchmark: calibrates the levels of ``server/engine/difficulty.py`` and times
choosing a daily.

Usage (from the repository root, in the project's virtual environment)::

    python benchmarks/daily_difficulty.py                      # 10,000 winnable deals per rule set
    python benchmarks/daily_difficulty.py --deals 1000 --dates 70
    python benchmarks/daily_difficulty.py --json
    python benchmarks/daily_difficulty.py --validate 1000   # the index's weight, held out

**Calibration.** For each rule set (E, C), random TP2 numbers drawn from ``--seed`` are solved in
turn (the same numbers for both rule sets) until ``--deals`` winnable deals are found; each of
those is measured (:func:`server.engine.difficulty.measure`: the random playouts and the greedy
game, against the solver's par). The thresholds it would choose are the quartiles of the
difficulty index over those deals (``statistics.quantiles``, exclusive method, rounded to 0.01);
per level, it prints the measures behind it (the random playouts' mean win rate, the median of
the deals' random median shortfall and of their greedy shortfall, the greedy game's win share),
the level's share under those thresholds and under the ones in the engine, and the cost per deal
of solving and of measuring.

**Choosing a daily.** For ``--dates`` consecutive dates from Monday 2027-01-04, with a fixed
secret, the date's daily is chosen as the server chooses it (``server/services/daily.py``: the
first candidate that is winnable and of the level its weekday asks for, each candidate solved
and measured by :func:`server.services.analysis.grade_code`, the task a solver process runs),
the level cut at the thresholds just chosen. Times per date (the whole search, in one process),
median and 95th percentile (nearest rank), per weekday level.

**Validation** (``--validate N``, instead of the above): the index weighs the greedy game's
shortfall by :data:`~server.engine.difficulty.GREEDY_WEIGHT`. To choose it, a third player who
sees no face-down card either and is in neither measure — it removes a card that turns a card up
when it can, then one starting the longest chain, ties broken at random, else draws; 200 games
per deal — plays the first N winnable deals of each rule set; for several weights it prints the
Spearman correlation between the index and that player's mean shortfall and win rate, and how
often the index's quartile is that player's.

The work runs in a pool of ``--workers`` processes (2), each having built the solver's tables
before any timing; times are wall-clock milliseconds in the worker.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import multiprocessing
import random
import statistics
import time
from typing import Any

from server.bench import percentile
from server.engine.actions import Status
from server.engine.codes import TP2_CODE_SPACE, DealVersion, GameCode, RuleSet
from server.engine.difficulty import PLAYOUTS, THRESHOLDS, Level, level_of, measure
from server.engine.game import Game
from server.engine.layout import COVERED_BY, COVERS
from server.engine.rules import is_neighbour
from server.engine.solver import solve
from server.engine.solver_tables import config_tables
from server.services.analysis import grade_code
from server.services.daily import MAX_CANDIDATES, derive_daily_code, level_for

SECRET = b"benchmark-daily-secret-0123456789abcdef"
FIRST_DATE = dt.date(2027, 1, 4)  # a Monday
LEVELS = tuple(Level)


def _warm() -> None:
    config_tables()


def grade_deal(job: tuple[str, int]) -> dict[str, Any]:
    """Solve one deal and, when winnable, measure it (timed apart)."""
    letter, number = job
    rules = RuleSet(letter)
    deal = GameCode(rules, number, DealVersion.TP2).deal()
    started = time.perf_counter()
    solution = solve(deal, rules)
    solved = time.perf_counter()
    row: dict[str, Any] = {
        "number": number,
        "winnable": solution.winnable,
        "par": solution.par,
        "solve_ms": (solved - started) * 1000,
    }
    if solution.winnable:
        figures = measure(deal, rules, solution.par)
        row.update(
            measure_ms=(time.perf_counter() - solved) * 1000,
            win_rate=figures.random_win_rate,
            median_shortfall=solution.par - figures.random_median_score,
            mean_shortfall=figures.random_mean_shortfall,
            greedy_won=figures.greedy_status.value == "won",
            greedy_shortfall=figures.greedy_shortfall,
            index=figures.index,
        )
    return row


HELD_OUT_GAMES = 200
WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def _chain(game: Game, face_up: dict[int, Any], chain: list[int]) -> int:
    """The most cards a chain starting with ``chain`` reaches among ``face_up``."""
    last = face_up[chain[-1]]
    best = len(chain)
    for pos, card in face_up.items():
        if pos not in chain and is_neighbour(card, last, game.rules):
            best = max(best, _chain(game, face_up, [*chain, pos]))
    return best


def held_out_game(deal: Any, rules: RuleSet, rng: random.Random) -> tuple[bool, int]:
    """The validation's player: a removal that turns a card up first, then the longest chain
    (ties at random), else a draw."""
    game = Game(deal, rules, ranked=True)
    while game.status is Status.PLAYING:
        face_up = {pos: game.tableau_card(pos) for pos in game.playable_positions()}
        legal = [p for p, c in face_up.items() if is_neighbour(c, game.waste_top, rules)]  # type: ignore[arg-type]
        if not legal:
            game.draw()
            continue
        scored = []
        for pos in legal:
            turns_up = any(
                all(a == pos or game.tableau_card(a) is None for a in COVERED_BY[below])
                for below in COVERS[pos]
            )
            scored.append(((turns_up, _chain(game, face_up, [pos])), pos))
        best = max(key for key, _ in scored)
        game.remove(rng.choice([pos for key, pos in scored if key == best]))
    return game.status is Status.WON, game.score


def validate_deal(job: tuple[str, int]) -> dict[str, Any] | None:
    """One deal's measures and the held-out player's mean shortfall and win rate (None when
    the deal is not winnable)."""
    letter, number = job
    rules = RuleSet(letter)
    deal = GameCode(rules, number, DealVersion.TP2).deal()
    solution = solve(deal, rules)
    if not solution.winnable:
        return None
    figures = measure(deal, rules, solution.par)
    rng = random.Random(number)
    games = [held_out_game(deal, rules, rng) for _ in range(HELD_OUT_GAMES)]
    return {
        "mean_shortfall": figures.random_mean_shortfall,
        "greedy_shortfall": figures.greedy_shortfall,
        "held_out_shortfall": solution.par - statistics.fmean(score for _, score in games),
        "held_out_win_rate": sum(won for won, _ in games) / HELD_OUT_GAMES,
    }


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2
        start = end + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    return statistics.correlation(_ranks(a), _ranks(b))


def _quartile(values: list[float]) -> list[int]:
    cuts = statistics.quantiles(values, n=4)
    return [sum(v > c for c in cuts) for v in values]


def validate(pool: Any, letter: str, numbers: list[int], wanted: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    done = 0
    while len(rows) < wanted:
        batch = numbers[done : done + max(16, math.ceil((wanted - len(rows)) / 0.7))]
        if not batch:
            raise SystemExit("--seed gave too few numbers")
        for row in pool.map(validate_deal, [(letter, n) for n in batch], chunksize=4):
            done += 1
            if row is not None and len(rows) < wanted:
                rows.append(row)
    held = [r["held_out_shortfall"] for r in rows]
    losses = [-r["held_out_win_rate"] for r in rows]
    out: dict[str, Any] = {"rules": letter, "deals": len(rows), "weights": {}}
    for weight in WEIGHTS:
        index = [r["mean_shortfall"] + weight * r["greedy_shortfall"] for r in rows]
        same = sum(x == y for x, y in zip(_quartile(index), _quartile(held), strict=True))
        out["weights"][weight] = {
            "spearman_shortfall": spearman(index, held),
            "spearman_win_rate": spearman(index, losses),
            "same_quartile": same / len(rows),
        }
    return out


def choose(job: tuple[str, str, tuple[float, float, float]]) -> dict[str, Any]:
    """Choose one date's daily as the server does; the search's time and candidates."""
    letter, date_text, thresholds = job
    rules, date = RuleSet(letter), dt.date.fromisoformat(date_text)
    wanted = level_for(date)
    started = time.perf_counter()
    for candidate in range(MAX_CANDIDATES):
        code = derive_daily_code(SECRET, date, rules, candidate)
        _, _, _, difficulty = grade_code(str(code))
        if difficulty is not None and level_of(difficulty.index, rules, thresholds) is wanted:
            break
    else:
        candidate = MAX_CANDIDATES
    ms = (time.perf_counter() - started) * 1000
    return {"date": date_text, "level": wanted.value, "candidates": candidate + 1, "ms": ms}


def winnable_deals(
    pool: Any, letter: str, numbers: list[int], wanted: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``wanted`` winnable deals of ``numbers`` (in order), and how many were solved."""
    rows: list[dict[str, Any]] = []
    done = 0
    while len(rows) < wanted:
        short = wanted - len(rows)
        batch = numbers[done : done + max(64, math.ceil(short / 0.7))]
        if not batch:
            raise SystemExit("--seed gave too few numbers")
        for row in pool.map(grade_deal, [(letter, n) for n in batch], chunksize=16):
            done += 1
            if row["winnable"]:
                rows.append(row)
                if len(rows) == wanted:
                    break
    return rows, done


def ms_summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p95": percentile(ordered, 0.95),
        "max": ordered[-1],
    }


def calibrate(rows: list[dict[str, Any]], rules: RuleSet, solved: int) -> dict[str, Any]:
    indexes = [row["index"] for row in rows]
    chosen = tuple(round(q, 2) for q in statistics.quantiles(indexes, n=4))
    assert len(chosen) == 3
    levels: dict[str, Any] = {}
    for level in LEVELS:
        mine = [r for r in rows if level_of(r["index"], rules, chosen) is level]
        engine = sum(1 for r in rows if level_of(r["index"], rules) is level)
        levels[level.value] = {
            "deals": len(mine),
            "share": len(mine) / len(rows),
            "share_engine_thresholds": engine / len(rows),
            "index_min": min(r["index"] for r in mine),
            "index_max": max(r["index"] for r in mine),
            "random_win_rate": statistics.fmean(r["win_rate"] for r in mine),
            "median_random_median_shortfall": statistics.median(
                r["median_shortfall"] for r in mine
            ),
            "median_random_mean_shortfall": statistics.median(r["mean_shortfall"] for r in mine),
            "greedy_win_share": sum(r["greedy_won"] for r in mine) / len(mine),
            "median_greedy_shortfall": statistics.median(r["greedy_shortfall"] for r in mine),
        }
    return {
        "rules": rules.value,
        "deals": len(rows),
        "solved": solved,
        "winnable_share": len(rows) / solved,
        "thresholds": chosen,
        "engine_thresholds": THRESHOLDS[rules],
        "solve_ms": ms_summary([r["solve_ms"] for r in rows]),
        "measure_ms": ms_summary([r["measure_ms"] for r in rows]),
        "levels": levels,
    }


def choosing(pool: Any, rules: RuleSet, dates: int, thresholds: tuple[float, ...]) -> Any:
    jobs = [
        (rules.value, (FIRST_DATE + dt.timedelta(days=i)).isoformat(), thresholds)
        for i in range(dates)
    ]
    rows = pool.map(choose, jobs, chunksize=4)
    out: dict[str, Any] = {}
    for level in LEVELS:
        mine = [r for r in rows if r["level"] == level.value]
        if not mine:
            continue
        out[level.value] = {
            "dates": len(mine),
            "ms": ms_summary([r["ms"] for r in mine]),
            "mean_candidates": statistics.fmean(r["candidates"] for r in mine),
            "max_candidates": max(r["candidates"] for r in mine),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deals", type=int, default=10_000, help="winnable deals per rule set")
    parser.add_argument("--seed", type=int, default=2027, help="seed of the deal numbers")
    parser.add_argument("--dates", type=int, default=364, help="dates to choose a daily for")
    parser.add_argument("--rules", nargs="+", default=["E", "C"], help="rule sets")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--validate", type=int, default=0, help="only compare the index's weights on N deals"
    )
    args = parser.parse_args()

    started = time.perf_counter()
    rng = random.Random(args.seed)
    numbers = [rng.randrange(TP2_CODE_SPACE) for _ in range(args.deals * 2 + 1000)]
    results: dict[str, Any] = {
        "seed": args.seed,
        "deals": args.deals,
        "playouts": PLAYOUTS,
        "dates": args.dates,
        "runs": [],
    }
    context = multiprocessing.get_context("spawn")
    if args.validate:
        with context.Pool(args.workers, initializer=_warm) as pool:
            checks = [validate(pool, letter, numbers, args.validate) for letter in args.rules]
        if args.json:
            print(json.dumps(checks, indent=2))
            return
        print(
            f"seed {args.seed}: the index's weight against a held-out player "
            f"({HELD_OUT_GAMES} games per deal); {(time.perf_counter() - started) / 60:.1f} min"
        )
        print("| rules | deals | weight | Spearman, shortfall | Spearman, losses | same quartile |")
        print("|---" * 6 + "|")
        for check in checks:
            for weight, row in check["weights"].items():
                print(
                    f"| {check['rules']} | {check['deals']} | {weight} | "
                    f"{row['spearman_shortfall']:.3f} | {row['spearman_win_rate']:.3f} | "
                    f"{100 * row['same_quartile']:.1f}% |"
                )
        return
    with context.Pool(args.workers, initializer=_warm) as pool:
        for letter in args.rules:
            rules = RuleSet.parse(letter)
            rows, solved = winnable_deals(pool, rules.value, numbers, args.deals)
            run = calibrate(rows, rules, solved)
            run["choosing"] = choosing(pool, rules, args.dates, run["thresholds"])
            results["runs"].append(run)
    results["minutes"] = (time.perf_counter() - started) / 60
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"seed {args.seed}: {args.deals} winnable TP2 deals per rule set, {PLAYOUTS} random "
        f"playouts each; {args.dates} dates from {FIRST_DATE} (Monday); "
        f"{args.workers} workers; {results['minutes']:.1f} min"
    )
    for run in results["runs"]:
        solve_ms, measure_ms = run["solve_ms"], run["measure_ms"]
        print(
            f"\n{run['rules']}: {run['deals']} winnable of {run['solved']} solved "
            f"({100 * run['winnable_share']:.1f}%); thresholds (quartiles of the index): "
            f"{', '.join(f'{t:.2f}' for t in run['thresholds'])} "
            f"(engine: {', '.join(f'{t:.2f}' for t in run['engine_thresholds'])})"
        )
        print(
            f"per deal, ms: solve median {solve_ms['median']:.1f} p95 {solve_ms['p95']:.1f}; "
            f"measure median {measure_ms['median']:.1f} p95 {measure_ms['p95']:.1f} "
            f"max {measure_ms['max']:.1f}"
        )
        print(
            "| level | share | engine's share | index | random win rate | random median "
            "shortfall | random mean shortfall | greedy wins | greedy shortfall |"
        )
        print("|---" * 9 + "|")
        for name, lv in run["levels"].items():
            print(
                f"| {name} | {100 * lv['share']:.1f}% | {100 * lv['share_engine_thresholds']:.1f}%"
                f" | {lv['index_min']:.1f}–{lv['index_max']:.1f} | "
                f"{100 * lv['random_win_rate']:.1f}% | {lv['median_random_median_shortfall']:.0f}"
                f" | {lv['median_random_mean_shortfall']:.1f} | "
                f"{100 * lv['greedy_win_share']:.1f}% | {lv['median_greedy_shortfall']:.0f} |"
            )
        print("(shortfalls: medians over the level's deals, in points below par)")
        print("choosing a daily (solve + measure of each candidate until one fits), per date:")
        print("| weekday level | dates | median ms | p95 ms | max ms | candidates mean | max |")
        print("|---" * 7 + "|")
        for name, ch in run["choosing"].items():
            print(
                f"| {name} | {ch['dates']} | {ch['ms']['median']:.0f} | {ch['ms']['p95']:.0f} | "
                f"{ch['ms']['max']:.0f} | {ch['mean_candidates']:.2f} | {ch['max_candidates']} |"
            )


if __name__ == "__main__":
    main()
