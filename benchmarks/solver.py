"""Solver benchmark: time per deal for winnability and for par over a fixed set of codes.

Usage (from the repository root, in the project's virtual environment)::

    python benchmarks/solver.py                      # 1,000 codes per rule set, seed 2026
    python benchmarks/solver.py --deals 200 --baseline 50
    python benchmarks/solver.py --profile 30         # cProfile of 30 par solves

For each rule set (E, C) the same codes are timed with:

* ``winnable``: :func:`server.engine.solver.is_winnable` (quick depth-first search, then the sweep);
* ``winnable-sweep``: the sweep alone (``exact_end=False``), i.e. winnability without the quick
  search;
* ``par``: :func:`server.engine.solver.solve` (sweep, par, line);
* ``baseline-par`` (with ``--baseline N``, on the first N codes): the fewest draws by a plain
  breadth-first search over explicit states (configuration, waste rank) layer by layer of draws,
  the method the sweep replaced. It stops at the first win and does not rank blocked endings, so
  it does less than ``par`` on unwinnable deals.

Wall time (``perf_counter``) and CPU time (``process_time``) are reported in milliseconds: mean,
median, 95th percentile (nearest rank) and maximum. The configuration tables are built before timing
(their one-off cost is printed separately).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from server.bench import percentile
from server.engine.codes import CODE_SPACE, Deal, GameCode, RuleSet
from server.engine.solver import Position, is_winnable, problem_of, solve
from server.engine.solver_search import fewest_draws, sweep
from server.engine.solver_tables import config_tables

Task = Callable[[Deal, RuleSet], object]


def winnable_by_sweep(deal: Deal, rules: RuleSet) -> bool:
    """Winnability by the sweep alone."""
    tables = config_tables()
    result = sweep(problem_of(Position.start(deal, rules)), tables, exact_end=False)
    return fewest_draws(tables, result) is not None


def baseline_fewest_draws(deal: Deal, rules: RuleSet) -> int | None:
    """The fewest draws of a win by layered breadth-first search over explicit states.

    Layer ``d`` starts from every configuration seen so far with the ``d``-th stock card on the
    waste and closes under removals; a (configuration, waste rank) state already seen is skipped.
    """
    tables = config_tables()
    succ, playable, full = tables.succ, tables.playable, tables.full
    problem = problem_of(Position.start(deal, rules))
    adjacent = problem.adjacent_positions()
    ranks = problem.ranks
    seen: set[int] = set()
    configs: list[int] = []
    known: set[int] = set()
    starts = [(0, problem.waste)]
    for drawn in range(24):
        if drawn:
            rank = problem.stock[drawn - 1]
            starts = [(config, rank) for config in configs]
        stack = []
        for config, rank in starts:
            key = config << 4 | rank
            if key not in seen:
                seen.add(key)
                stack.append((config, rank))
        while stack:
            config, waste = stack.pop()
            if config == full:
                return drawn
            if config not in known:
                known.add(config)
                configs.append(config)
            legal = playable[config] & adjacent[waste]
            for pos, after in succ[config]:
                if legal >> pos & 1:
                    key = after << 4 | ranks[pos]
                    if key not in seen:
                        seen.add(key)
                        stack.append((after, ranks[pos]))
    return None


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "p95": percentile(ordered, 0.95),
        "max": ordered[-1],
    }


def time_tasks(
    tasks: list[tuple[str, Task, int]], deals: list[Deal], rules: RuleSet
) -> dict[str, dict[str, Any]]:
    """Time every task on every deal (a task with limit ``n`` only on the first ``n``), the tasks
    interleaved deal by deal so that a change in machine load affects them alike."""
    wall: dict[str, list[float]] = {name: [] for name, _, _ in tasks}
    cpu: dict[str, list[float]] = {name: [] for name, _, _ in tasks}
    for number, deal in enumerate(deals):
        for name, task, limit in tasks:
            if number >= limit:
                continue
            started, started_cpu = time.perf_counter(), time.process_time()
            task(deal, rules)
            wall[name].append((time.perf_counter() - started) * 1000)
            cpu[name].append((time.process_time() - started_cpu) * 1000)
    return {
        name: {
            "deals": len(wall[name]),
            "wall_ms": summary(wall[name]),
            "cpu_ms": summary(cpu[name]),
        }
        for name, _, _ in tasks
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deals", type=int, default=1000, help="codes per rule set")
    parser.add_argument("--seed", type=int, default=2026, help="seed of the codes")
    parser.add_argument("--rules", nargs="+", default=["E", "C"], help="rule sets")
    parser.add_argument("--baseline", type=int, default=0, help="also time the baseline on N codes")
    parser.add_argument("--profile", type=int, default=0, help="profile N par solves and stop")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()

    started = time.perf_counter()
    config_tables()
    build_ms = (time.perf_counter() - started) * 1000

    rng = random.Random(args.seed)
    numbers = [rng.randrange(CODE_SPACE) for _ in range(args.deals)]
    deals = [GameCode(RuleSet.EASY, number).deal() for number in numbers]

    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for deal in deals[: args.profile]:
            solve(deal, RuleSet.EASY)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
        return

    tasks: list[tuple[str, Task, int]] = [
        ("winnable", is_winnable, len(deals)),
        ("winnable-sweep", winnable_by_sweep, len(deals)),
        ("par", solve, len(deals)),
    ]
    if args.baseline:
        tasks.append(("baseline-par", baseline_fewest_draws, args.baseline))
    results: dict[str, Any] = {"seed": args.seed, "tables_ms": build_ms, "runs": []}
    for letter in args.rules:
        rules = RuleSet.parse(letter)
        for name, figures in time_tasks(tasks, deals, rules).items():
            results["runs"].append({"rules": rules.value, "task": name, **figures})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"seed {args.seed}, {args.deals} codes per rule set; "
        f"configuration tables built in {build_ms:.0f} ms"
    )
    header = (
        "| rules | task | deals | mean | median | p95 | max | CPU mean | CPU median | CPU p95 |"
    )
    print(header)
    print("|---" * 10 + "|")
    for row in results["runs"]:
        wall, cpu = row["wall_ms"], row["cpu_ms"]
        print(
            f"| {row['rules']} | {row['task']} | {row['deals']} | {wall['mean']:.1f} | "
            f"{wall['median']:.1f} | {wall['p95']:.1f} | {wall['max']:.1f} | {cpu['mean']:.1f} | "
            f"{cpu['median']:.1f} | {cpu['p95']:.1f} |"
        )
    print("(milliseconds per deal)")


if __name__ == "__main__":
    main()
