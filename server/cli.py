"""The ``tripeaks`` command: ``serve``, ``migrate`` and ``deal``."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click
from pydantic import ValidationError

from server.bench import percentile
from server.config import Settings
from server.engine.codes import GameCode
from server.engine.errors import EngineError
from server.engine.layout import ROWS

log = logging.getLogger("server")


def _variable(field: str) -> str:
    """The environment variable of a settings field."""
    return "DATABASE_URL" if field == "database_url" else f"TRIPEAKS_{field.upper()}"


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        # A check across settings (no single variable) says itself which variables it needs.
        problems = "; ".join(
            f"{_variable(str(e['loc'][0]))}: {e['msg']}"
            if e["loc"]
            else str(e.get("ctx", {}).get("error", e["msg"]))
            for e in exc.errors()
        )
        raise click.UsageError(f"invalid configuration: {problems}") from None


def _with_database(settings: Settings) -> Settings:
    if settings.database_url:
        return settings
    from server.storage.db import start_embedded_postgres

    click.echo(f"No DATABASE_URL: starting the embedded PostgreSQL in {settings.data_dir / 'pg'}")
    with _SIGTERM.held_back():
        url = start_embedded_postgres(settings.data_dir)
    return settings.model_copy(update={"database_url": url})


def _configure_logging(settings: Settings, worker: int | None = None) -> None:
    from server.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format, worker=worker)


@click.group()
@click.version_option(package_name="tripeaks-server")
def main() -> None:
    """Competitive TriPeaks server: shared deals, daily challenge, leaderboards."""


@main.command()
@click.option("--host", help="Address to listen on (env TRIPEAKS_HOST, default 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (env TRIPEAKS_PORT, default 8080).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder for the embedded database and the daily secret (default ./.tripeaks).",
)
@click.option(
    "--workers",
    type=int,
    help="Server processes sharing the port, e.g. one per core (env TRIPEAKS_WORKERS, default 1).",
)
def serve(host: str | None, port: int | None, data_dir: Path | None, workers: int | None) -> None:
    """Run the server (migrates the database first)."""
    from server.config import SecretError, load_or_create_daily_secret

    settings = _settings(host=host, port=port, data_dir=data_dir, workers=workers)
    _configure_logging(settings)
    _interrupt_on_sigterm()
    try:  # before the embedded database is started; generated only beside it
        daily_secret = load_or_create_daily_secret(settings, generate=not settings.database_url)
    except SecretError as exc:
        raise click.UsageError(f"invalid configuration: {exc}") from None
    if settings.workers == 1:
        _serve(_with_database(settings), daily_secret)
        return
    from server.workers import PortTaken, check_port, run_workers

    try:
        check_port(settings.host, settings.port)
    except PortTaken as exc:
        raise click.ClickException(f"{exc}; choose another with --port or TRIPEAKS_PORT") from None
    status = run_workers(settings.workers, _with_database(settings), daily_secret, _worker_main)
    log.info("stopped")
    if status:
        sys.exit(status)


class _Sigterm:
    """SIGTERM before the server (or the workers' supervisor) takes it over: it stops the
    process as Ctrl-C does, unwinding it, so that what was started meanwhile (the embedded
    database) is stopped too, where the signal's default action would end the process on the
    spot. While the embedded database starts it is held back until the start is over (and its
    stop is arranged)."""

    def __init__(self) -> None:
        self.holding = False
        self.held = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self.holding:
            self.held = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held_back(self) -> Iterator[None]:
        """Within the block a SIGTERM waits; it takes effect when the block ends."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.held:
            raise KeyboardInterrupt


_SIGTERM = _Sigterm()


def _interrupt_on_sigterm() -> None:
    """See :class:`_Sigterm`."""
    signal.signal(signal.SIGTERM, _SIGTERM)


def _serve(settings: Settings, daily_secret: bytes, *, worker: int | None = None) -> None:
    """Run one server process until SIGINT or SIGTERM (a worker shares its port with others)."""
    from aiohttp import web

    from server.web.app import create_app

    app = create_app(settings, daily_secret=daily_secret, freeze_startup=True)
    try:
        web.run_app(
            app,
            host=settings.host,
            port=settings.port,
            reuse_port=worker is not None,
            shutdown_timeout=8.0,
            print=lambda _banner: log.info(
                "serving on http://%s:%s (Ctrl-C to stop)", settings.host, settings.port
            ),
            access_log=None,
        )
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise click.ClickException(
                f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}; "
                "choose another with --port or TRIPEAKS_PORT"
            ) from None
        raise
    if worker is None:
        log.info("stopped")


def _worker_main(number: int, dumped: dict[str, Any], daily_secret: bytes) -> None:
    """A worker process of ``serve --workers`` (started by :mod:`server.workers`)."""
    from server.workers import detach_from_terminal_signals, stop_with_parent

    detach_from_terminal_signals()
    stop_with_parent()
    settings = Settings(**dumped)
    _configure_logging(settings, number)
    _serve(settings, daily_secret, worker=number)


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder of the embedded database (used when DATABASE_URL is not set).",
)
def migrate(data_dir: Path | None) -> None:
    """Bring the database schema to the newest migration and exit."""
    from server.storage.db import create_engine
    from server.storage.db import migrate as run_migrations

    settings = _settings(data_dir=data_dir)
    _configure_logging(settings)
    settings = _with_database(settings)
    assert settings.database_url

    async def go() -> None:
        # The migrations hold a session-level advisory lock: never through a transaction pooler.
        engine = create_engine(
            settings.direct_database_url or settings.database_url or "", pool_size=1
        )
        try:
            await run_migrations(engine)
        finally:
            await engine.dispose()

    asyncio.run(go())
    click.echo("database schema is up to date")


@main.command()
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


@main.command()
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


@main.command()
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


@main.command()
@click.option(
    "--url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The server to load (loopback addresses only).",
)
@click.option("--players", default=200, show_default=True, help="Simulated players.")
@click.option("--seconds", default=20.0, show_default=True, help="How long to play.")
@click.option("--mode", type=click.Choice(["free", "daily"]), default="free", show_default=True)
@click.option(
    "--echo/--no-echo",
    default=True,
    show_default=True,
    help="Also measure a bare aiohttp echo server's ceiling in the same run.",
)
@click.option("--server-pid", type=int, help="The server's pid, to report its memory.")
@click.option(
    "--idle",
    type=int,
    default=0,
    help="Instead: open this many idle connections and report memory per connection.",
)
@click.option(
    "--paced",
    help="Instead: players at a human rate (open loop), for each of these comma-separated "
    "player counts in turn, e.g. 300,1000,2000; prints ack p50/p95/p99 for each.",
)
@click.option(
    "--pace",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="With --paced: actions per second per player.",
)
@click.option(
    "--jitter",
    type=click.FloatRange(min=0, max=0.99),
    default=0.5,
    show_default=True,
    help="With --paced: each gap is drawn uniformly within this share of the mean gap.",
)
@click.option(
    "--target-p99-ms",
    type=click.FloatRange(min=0, min_open=True),
    default=50.0,
    show_default=True,
    help="With --paced: report the largest player count whose ack p99 is under this.",
)
def loadtest(
    url: str,
    players: int,
    seconds: float,
    mode: str,
    echo: bool,
    server_pid: int | None,
    idle: int,
    paced: str | None,
    pace: float,
    jitter: float,
    target_p99_ms: float,
) -> None:
    """Load a running server with simulated players over websockets; print throughput,
    latency percentiles, errors, server memory and the ratio to an echo server's ceiling.

    The server must allow the rate: start it with e.g. TRIPEAKS_WS_RATE_PER_SECOND=10000 and
    TRIPEAKS_REGISTER_PER_MINUTE=100000 (every simulated player registers).
    """
    from server.bench.load import main_async, require_loopback

    try:
        require_loopback(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--url") from None
    counts: list[int] | None = None
    if paced is not None:
        try:
            counts = [int(part) for part in paced.split(",")]
        except ValueError:
            counts = []
        if not counts or any(c < 1 for c in counts):
            raise click.BadParameter(
                f"{paced!r} is not a comma-separated list of player counts", param_hint="--paced"
            )
    failed = asyncio.run(
        main_async(
            url, players, seconds, mode, echo, server_pid, idle, counts, pace, jitter, target_p99_ms
        )
    )
    if failed:
        raise click.ClickException(f"{failed} requests failed (see the errors above)")


if __name__ == "__main__":  # pragma: no cover
    main()
