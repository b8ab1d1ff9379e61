"""``tripeaks admin suspicious``: a day's ranked results with the signals that fired (a win much
faster than the day's, the solver's optimal line throughout, many accounts from one address),
printed for people or as one JSON object (docs/rules.md §4 "Moderation")."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict
from typing import Any

import click

from server.cli.admin import run
from server.errors import ServiceError


def _date(_ctx: click.Context, _param: click.Parameter, value: str) -> dt.date:
    from server.services.daily import parse_date

    try:
        return parse_date(value)
    except ServiceError as exc:
        raise click.BadParameter(exc.message) from None


def _review_json(review: Any) -> dict[str, Any]:
    return {
        "date": review.date.isoformat(),
        "ranked": review.ranked,
        "hidden": review.hidden,
        "won_on_board": review.won_on_board,
        "median_won_ms": review.median_won_ms,
        "fast_under_ms": review.fast_under_ms,
        "par": review.par,
        "line_length": review.line_length,
        "thresholds": asdict(review.thresholds),
        "results": [
            {
                "game_id": f.result.game_id,
                "player_id": f.result.player_id,
                "player_name": f.result.player_name,
                "status": f.result.status,
                "score": f.result.score,
                "moves": f.result.moves,
                "undos": f.result.undos,
                "elapsed_ms": f.result.elapsed_ms,
                "finished_at": f.result.finished_at.astimezone(dt.UTC).isoformat(),
                "hidden": f.result.hidden,
                "banned": f.result.banned,
                "signals": [{"signal": s.name, "explanation": s.explanation} for s in f.signals],
            }
            for f in review.flagged
        ],
    }


def _print_review(review: Any) -> None:
    limits = review.thresholds
    median = (
        f", median {review.median_won_ms / 1000:.1f} s" if review.median_won_ms is not None else ""
    )
    line = f"; par {review.par} in {review.line_length} actions" if review.par is not None else ""
    click.echo(
        f"daily {review.date.isoformat()}: {review.ranked} ranked results ({review.hidden} "
        f"hidden); {review.won_on_board} won on the board{median}{line}"
    )
    if review.fast_under_ms is not None:
        fast = (
            f"won under {limits.fast_fraction:.0%} of that median "
            f"({review.fast_under_ms / 1000:.1f} s) or under {limits.floor_ms_per_move} ms a move"
        )
    else:
        fast = (
            f"won under {limits.floor_ms_per_move} ms a move (the median rule needs "
            f"{limits.min_sample} won results on the board)"
        )
    click.echo(
        f"signals: fast = {fast}; optimal_line = the solver's optimal line throughout; "
        f"shared_address = {limits.shared_accounts} or more ranked accounts from one address"
    )
    if not review.flagged:
        click.echo("no result has a signal")
        return
    count = len(review.flagged)
    click.echo(f"{count} result{'s' * (count != 1)} with signals:")
    for flagged in review.flagged:
        r = flagged.result
        marks = "".join(
            f"  [{mark}]" for mark, on in (("hidden", r.hidden), ("banned", r.banned)) if on
        )
        click.echo(
            f"\ngame {r.game_id}  player {r.player_id} ({r.player_name})  {r.status}  "
            f"score {r.score}  {r.moves} moves  {r.undos} undos  "
            f"{r.elapsed_ms / 1000:.1f} s{marks}"
        )
        for signal in flagged.signals:
            click.echo(f"  - {signal.name}: {signal.explanation}")


@click.command()
@click.option("--date", "day", required=True, callback=_date, help="The UTC date (YYYY-MM-DD).")
@click.option(
    "--fast-fraction",
    type=click.FloatRange(0, 1),
    default=0.25,
    show_default=True,
    help="fast: a win under this fraction of the median of the day's won results …",
)
@click.option(
    "--min-sample",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="… when at least this many won results are on the board.",
)
@click.option(
    "--floor-ms-per-move",
    type=click.IntRange(0),
    default=250,
    show_default=True,
    help="fast too: a win under this many milliseconds a move.",
)
@click.option(
    "--shared-accounts",
    type=click.IntRange(2),
    default=3,
    show_default=True,
    help="shared_address: this many accounts ranked that day from one address.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object, for machines.")
@click.pass_context
def suspicious(
    ctx: click.Context,
    day: dt.date,
    fast_fraction: float,
    min_sample: int,
    floor_ms_per_move: int,
    shared_accounts: int,
    as_json: bool,
) -> None:
    """A day's ranked results with the signals that fired, each explained."""
    from server.services.review import Thresholds

    limits = Thresholds(fast_fraction, min_sample, floor_ms_per_move, shared_accounts)
    review = run(ctx, lambda t: t.review.suspicious(day, limits), changes=False)
    if as_json:
        click.echo(json.dumps(_review_json(review), ensure_ascii=False))
    else:
        _print_review(review)
