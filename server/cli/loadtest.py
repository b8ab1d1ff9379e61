"""``tripeaks loadtest``: simulated players over real websockets against a running server on
a loopback address."""

from __future__ import annotations

import asyncio

import click


@click.command()
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

    The server must allow the rate: start it with e.g. TRIPEAKS_WS_RATE_PER_SECOND=10000,
    TRIPEAKS_REGISTER_PER_MINUTE=100000 (every simulated player registers) and
    TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS=100000 (every one connects from 127.0.0.1).
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
