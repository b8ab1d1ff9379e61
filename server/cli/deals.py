"""``tripeaks deal``, ``solve`` and ``stats``: a game code's deal, its optimal line, and the
winnability of many deals (no server or database needed)."""

from __future__ import annotations

import json

import click

from server.bench import percentile
from server.engine.codes import GameCode
from server.engine.errors import EngineError
from server.engine.layout import ROWS


@click.command()
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="Print the deal as JSON.")
def deal(code: str, as_json: bool) -> None:
    """Print a deal: the rows, waste and stock of game CODE, e.g. TP1-E-AAAAAAA."""
    try:
        parsed = GameCode.parse(code)
    except EngineError as exc:
        raise click.BadParameter(str(exc), param_hint="CODE") from None
    dealt = parsed.deal()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "code": str(parsed),
                    "rules": parsed.rules.value,
                    "tableau": [str(c) for c in dealt.tableau],
                    "waste": str(dealt.waste),
                    "stock": [str(c) for c in dealt.stock],
                }
            )
        )
        return
    width = 3 * (len(ROWS[-1]) - 1) + 2
    click.echo(f"{parsed}  ({'Easy' if parsed.rules.value == 'E' else 'Classic'})")
    for row in ROWS:
        cards = "  ".join(str(dealt.tableau[p]) for p in row) if len(row) != 3 else None
        if cards is None:
            cards = "        ".join(str(dealt.tableau[p]) for p in row)
        click.echo(cards.center(width).rstrip())
    click.echo(f"waste: {dealt.waste}")
    click.echo(f"stock: {' '.join(str(c) for c in dealt.stock)}  (drawn left to right)")


@click.command()
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def solve(code: str, as_json: bool) -> None:
    """Solve game CODE with every card known: winnable, par and a line of play reaching par.

    Par is the best final score without undo (772 minus the fewest draws for a winnable deal).
    """
    import time

    from server.engine.game import Game
    from server.engine.solver import solve as solve_deal
    from server.engine.solver_tables import config_tables

    try:
        parsed = GameCode.parse(code)
    except EngineError as exc:
        raise click.BadParameter(str(exc), param_hint="CODE") from None
    config_tables()  # built once per process; not part of the solve time
    started = time.perf_counter()
    solution = solve_deal(parsed.deal(), parsed.rules)
    ms = (time.perf_counter() - started) * 1000
    game = Game.new(parsed)
    moves = [(action, game.apply(action).card) for action in solution.line]
    if as_json:
        line = [{"action": a.kind.value, "pos": a.pos, "card": str(card)} for a, card in moves]
        payload = {
            "code": str(parsed),
            "rules": parsed.rules.value,
            "winnable": solution.winnable,
            "par": solution.par,
            "line": line,
            "ms": round(ms, 3),
        }
        click.echo(json.dumps(payload))
        return
    name = "Easy" if parsed.rules.value == "E" else "Classic"
    if solution.winnable:
        summary = f"winnable, par {solution.par} ({solution.draws} draws)"
    else:
        summary = (
            f"not winnable, par {solution.par} (blocked with {game.cards_left} cards left, "
            f"{game.cleared_peaks} peaks cleared)"
        )
    click.echo(f"{parsed}  ({name}): {summary}")
    width = len(str(len(moves)))
    for number, (action, card) in enumerate(moves, start=1):
        what = "draw" if action.pos is None else f"remove {action.pos}"
        click.echo(f"{number:>{width}}. {what} ({card})")
    click.echo(f"solved in {ms:.1f} ms")


def _wilson(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval for a binomial share (95% for the default ``z``)."""
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * ((share * (1 - share) / trials + z * z / (4 * trials * trials)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@click.command()
@click.option(
    "--deals",
    "count",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="How many random deals to solve.",
)
@click.option(
    "--rules",
    "rules_letter",
    type=click.Choice(["E", "C"], case_sensitive=False),
    default="E",
    show_default=True,
    help="Rule set: E (Easy, K–A wrap) or C (Classic).",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the random codes.")
@click.option(
    "--winnable-only", is_flag=True, help="Time the winnability test instead of the full solve."
)
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def stats(count: int, rules_letter: str, seed: int, winnable_only: bool, as_json: bool) -> None:
    """Solve random deals: the winnable share (95% Wilson interval) and the solve times.

    The codes come from random.Random(SEED), so a run can be repeated exactly. Times are per deal,
    wall clock and CPU (they differ when the machine is busy).
    """
    import random
    import statistics
    import time

    from server.engine.codes import CODE_SPACE, RuleSet
    from server.engine.solver import is_winnable
    from server.engine.solver import solve as solve_deal
    from server.engine.solver_tables import config_tables

    rules = RuleSet.parse(rules_letter)
    rng = random.Random(seed)
    codes = [GameCode(rules, rng.randrange(CODE_SPACE)) for _ in range(count)]
    config_tables()
    won = 0
    times: list[float] = []
    cpu: list[float] = []
    pars: list[int] = []
    for parsed in codes:
        dealt = parsed.deal()
        started, started_cpu = time.perf_counter(), time.process_time()
        if winnable_only:
            winnable = is_winnable(dealt, rules)
        else:
            solution = solve_deal(dealt, rules)
            winnable = solution.winnable
            pars.append(solution.par)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        won += winnable
    low, high = _wilson(won, count)
    ordered = sorted(times)
    figures = {
        "deals": count,
        "rules": rules.value,
        "seed": seed,
        "mode": "winnable" if winnable_only else "par",
        "winnable": won,
        "share": won / count,
        "ci95": [low, high],
        "ms": {
            "mean": statistics.fmean(times),
            "median": statistics.median(times),
            "p95": percentile(ordered, 0.95),
            "max": ordered[-1],
        },
        "cpu_ms": {
            "mean": statistics.fmean(cpu),
            "median": statistics.median(cpu),
            "p95": percentile(sorted(cpu), 0.95),
            "max": max(cpu),
        },
    }
    if pars:
        figures["mean_par"] = statistics.fmean(pars)
    if as_json:
        click.echo(json.dumps(figures))
        return
    name = "Easy" if rules is RuleSet.EASY else "Classic"
    task = "winnability only" if winnable_only else "par and line"
    click.echo(f"{count} deals, rules {rules.value} ({name}), seed {seed}, solved for {task}")
    click.echo(
        f"winnable: {won} / {count} = {100 * won / count:.2f}%  "
        f"(95% Wilson interval {100 * low:.2f}% – {100 * high:.2f}%)"
    )
    if pars:
        click.echo(f"mean par: {statistics.fmean(pars):.1f}")
    click.echo(
        f"solve time: median {statistics.median(times):.1f} ms, "
        f"p95 {percentile(ordered, 0.95):.1f} ms, max {ordered[-1]:.1f} ms "
        f"(mean {statistics.fmean(times):.1f} ms)"
    )
    click.echo(
        f"CPU time:   median {statistics.median(cpu):.1f} ms, "
        f"p95 {percentile(sorted(cpu), 0.95):.1f} ms, max {max(cpu):.1f} ms "
        f"(mean {statistics.fmean(cpu):.1f} ms)"
    )
