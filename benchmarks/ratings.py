"""Rating libraries compared on this game's race results: OpenSkill (Weng–Lin Plackett–Luce and
Thurstone–Mosteller full pairing) and TrueSkill.

Usage (from the repository root, in the project's virtual environment, with ``pip install
trueskill``, which the server does not depend on)::

    python benchmarks/ratings.py      # 12 players, skills 0.7..1, 1,000 races, seeds 1..5
    python benchmarks/ratings.py --players 8 --lowest 0 --races 3000 --seeds 2

Players of known strength are engine policies: at each step a player of skill ``s`` (evenly
spaced from ``--lowest`` to 1) plays the best-looking move (a removal that leaves the most
removals playable, else a draw) with probability ``s`` and a random legal move otherwise. Each
race takes 2 to 6 random players on a fresh random deal (Easy), plays every game to its end and
orders the results as a race does (:func:`server.services.rooms.rank_results`: cleared first by
time, then cards removed, score, last removal; equal results share a rank), with one move a
second. Every library rates the same races.

Printed, averaged over the seeds: after 50, 100, 250, 500, 1000, … races, Kendall's tau
between each library's order (by its conservative estimate: OpenSkill's ordinal, TrueSkill's
expose, both mu − 3 sigma) and the skill order (1.0 = the same order), and the share of
(stronger half, weaker half) pairs ordered right; then the median time to rate one 4-racer
race (µs) per library, measured side by side.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import trueskill  # type: ignore[import-untyped,import-not-found,unused-ignore]
from openskill.models import PlackettLuce, ThurstoneMostellerFull

from server.engine.actions import Action, ActionKind
from server.engine.codes import DealVersion, GameCode, RuleSet
from server.engine.game import Game
from server.services.rooms import rank_results

Rater = Callable[[Sequence[Any], Sequence[int]], list[Any]]


def play(code: GameCode, skill: float, rng: random.Random) -> dict[str, Any]:
    """One game of ``code`` by a policy of ``skill``: its result as a race stores it."""
    game = Game.new(code, ranked=True)
    last_removal: int | None = None
    while not game.is_over:
        actions = [a for a in game.legal_actions() if a.kind is not ActionKind.UNDO]
        if not actions:
            break
        action = best_move(game, actions) if rng.random() < skill else rng.choice(actions)
        game.apply(action)
        if action.kind is ActionKind.REMOVE:
            last_removal = game.moves * 1000
    if not game.is_over:
        game.resign()
    return {
        "status": game.status.value,
        "score": game.score,
        "cards_left": game.cards_left,
        "moves": game.moves,
        "elapsed_ms": game.moves * 1000,
        "last_removal_ms": last_removal,
    }


def best_move(game: Game, actions: Sequence[Action]) -> Action:
    """The removal that leaves the most removals playable (a draw when there is none)."""
    removals = [a for a in actions if a.kind is ActionKind.REMOVE]
    if not removals:
        return actions[-1]

    def after(action: Action) -> int:
        trial = game.copy()
        trial.apply(action)
        return sum(1 for a in trial.legal_actions() if a.kind is ActionKind.REMOVE)

    return max(removals, key=after)


def kendall_tau(order: Sequence[int], truth: Sequence[int]) -> float:
    """Kendall's tau between two orders of the same items (1.0: the same order)."""
    where = {item: i for i, item in enumerate(order)}
    pairs = list(itertools.combinations(truth, 2))
    agree = sum(1 if where[a] < where[b] else -1 for a, b in pairs)
    return agree / len(pairs)


def openskill_rater(model: Any) -> tuple[Callable[[], Any], Rater, Callable[[Any], float]]:
    def rate(ratings: Sequence[Any], ranks: Sequence[int]) -> list[Any]:
        out = model.rate([[r] for r in ratings], ranks=[float(r) for r in ranks])
        return [team[0] for team in out]

    return model.rating, rate, lambda r: float(r.ordinal())


def trueskill_rater() -> tuple[Callable[[], Any], Rater, Callable[[Any], float]]:
    env = trueskill.TrueSkill()

    def rate(ratings: Sequence[Any], ranks: Sequence[int]) -> list[Any]:
        out = env.rate([(r,) for r in ratings], ranks=list(ranks))
        return [team[0] for team in out]

    def conservative(rating: Any) -> float:
        return float(env.expose(rating))

    return env.create_rating, rate, conservative


def simulate(
    players: int, races: int, lowest: float, seed: int
) -> tuple[dict[int, dict[str, tuple[float, float]]], dict[str, list[float]]]:
    """One run: per checkpoint and library, (Kendall's tau, share of halves ordered right);
    per library, the µs each 4-racer race took to rate."""
    rng = random.Random(seed)
    step = (1.0 - lowest) / (players - 1)
    skills = {i: lowest + i * step for i in range(players)}
    truth = sorted(skills, key=lambda i: -skills[i])
    raters: dict[str, tuple[Callable[[], Any], Rater, Callable[[Any], float]]] = {
        "openskill-PL": openskill_rater(PlackettLuce()),
        "openskill-TMF": openskill_rater(ThurstoneMostellerFull()),
        "trueskill": trueskill_rater(),
    }
    ratings = {name: {i: new() for i in skills} for name, (new, _, _) in raters.items()}
    spent: dict[str, list[float]] = {name: [] for name in raters}
    found: dict[int, dict[str, tuple[float, float]]] = {}
    half = players // 2
    for race in range(1, races + 1):
        group = rng.sample(sorted(skills), rng.randint(2, 6))
        code = GameCode(RuleSet.EASY, rng.randrange(DealVersion.TP2.space), DealVersion.TP2)
        rows = [{"player_id": i, "name": str(i), **play(code, skills[i], rng)} for i in group]
        ranked = rank_results(rows)
        ids = [r["player_id"] for r in ranked]
        ranks = [r["rank"] for r in ranked]
        for name, (_, rate, _) in raters.items():
            before = [ratings[name][i] for i in ids]
            started = time.perf_counter()
            after = rate(before, ranks)
            if len(ids) == 4:
                spent[name].append((time.perf_counter() - started) * 1e6)
            ratings[name] |= dict(zip(ids, after, strict=True))
        if race in CHECKPOINTS or race == races:
            found[race] = {}
            for name, (_, _, conservative) in raters.items():
                order = sorted(skills, key=lambda i: -conservative(ratings[name][i]))
                where = {item: n for n, item in enumerate(order)}
                right = sum(where[a] < where[b] for a in truth[:half] for b in truth[half:])
                found[race][name] = (
                    kendall_tau(order, truth),
                    right / (half * (players - half)),
                )
    return found, spent


CHECKPOINTS = (50, 100, 250, 500, 1000, 2000, 4000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=12)
    parser.add_argument("--races", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=5, help="runs (seeds 1..N), averaged")
    parser.add_argument("--lowest", type=float, default=0.7, help="the weakest player's skill")
    args = parser.parse_args()
    runs = [simulate(args.players, args.races, args.lowest, s) for s in range(1, args.seeds + 1)]
    names = list(runs[0][1])
    print(
        f"{args.players} players, skills {args.lowest}..1.0, {args.races} races, "
        f"mean of {args.seeds} seeds: Kendall tau / stronger half above weaker half"
    )
    print("races  " + "  ".join(f"{name:>18}" for name in names))
    for race in sorted(runs[0][0]):
        cells = []
        for name in names:
            tau = statistics.mean(run[0][race][name][0] for run in runs)
            right = statistics.mean(run[0][race][name][1] for run in runs)
            cells.append(f"{tau:5.2f} / {right:4.0%}")
        print(f"{race:5d}  " + "  ".join(f"{c:>18}" for c in cells))
    print(
        "median µs to rate a 4-racer race: "
        + ", ".join(
            f"{name} {statistics.median(t for run in runs for t in run[1][name]):.0f}"
            for name in names
        )
    )


if __name__ == "__main__":
    main()
