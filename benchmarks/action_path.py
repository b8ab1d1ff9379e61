"""The action path side by side: servers built from one or more source trees, one run.

    python benchmarks/action_path.py --tree before=/tmp/oldtree --tree after=. \\
        --closed 200 --seconds 10 --paced 300,1000,2000

For each tree (in turn, on the same machine, in one run) a real server process is started from
that tree (``PYTHONPATH``) over a throw-away database on the PostgreSQL at ``TRIPEAKS_TEST_PG``
(default ``postgresql://postgres@127.0.0.1:5432/postgres``), then measured by the load generator
of *this* tree:

- closed loop: ``--closed`` players acting as fast as their acks come; throughput, ack latency
  and the server's CPU time per reply, beside a bare aiohttp websocket echo server's, driven the
  same way in the same run (the yardstick);
- human pace (``--paced``): for each player count, every player acting about once a second (open
  loop), the ack latency from the planned send;
- idle (``--idle``): that many connected players doing nothing; the server's memory per
  connection and its CPU share meanwhile;
- a burst (``--burst``): that many registered players opening their websocket and saying hello
  at the same moment; the time to each ``welcome`` and connections per second;
- a storm (``--storm``): that many players with games in progress, every socket cut at once,
  each page reconnecting with the browser's backoff and resuming its game, while
  ``--storm-stayed`` players play on; the time until 50/99/100 % are back in play, the
  ``server_busy`` answers, the stayed players' ack p99 and the server's CPU per hello;
- a cut (``--cut``): that many players with games in progress, every socket cut at once and
  nobody coming back; the server's CPU per closed connection until it is quiet.

Every target is on loopback; every step stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path

from server.bench import throwaway_database
from server.bench.burst import burst
from server.bench.crowd import run_players
from server.bench.echo import run_echo
from server.bench.load import idle_connections
from server.bench.paced import paced_ladder
from server.bench.process import serve_tree
from server.bench.stats import report
from server.bench.storm import cut, storm


async def measure(
    name: str, tree: Path, args: argparse.Namespace, workers: int = 1, loop: str = ""
) -> None:
    """Start a server from ``tree`` (``workers`` processes, on the event loop ``loop``:
    ``TRIPEAKS_EVENT_LOOP``, unset when empty) and run the chosen measurements against it."""
    # Empty: each tree's server migrates it to its own newest schema as it starts.
    if loop:
        name = f"{name} on {loop}"
    env = {"TRIPEAKS_EVENT_LOOP": loop} if loop else {}
    async with (
        throwaway_database(migrated=False) as url,
        serve_tree(tree, url, workers, env, log=args.server_log) as server,
    ):
        base = server.base
        print(f"\n=== {name}: {tree}, {workers} worker(s)")
        if args.closed:
            stats, spent = await run_players(base, args.closed, args.seconds, "free", server.pid)
            report(f"{name}: closed loop, {args.closed} players", stats, spent)
            if args.echo and stats.request_bytes:
                req = int(statistics.median(stats.request_bytes))
                rep = int(statistics.median(stats.reply_bytes))
                echo = await run_echo(args.closed, args.seconds, req, rep)
                report(f"echo yardstick ({req} B -> {rep} B)", echo, args.seconds)
                ours = _cpu_per_reply(stats.server_cpu_s, sum(stats.outcomes.values()))
                theirs = _cpu_per_reply(echo.server_cpu_s, sum(echo.outcomes.values()))
                if ours and theirs:
                    print(
                        f"  server CPU per reply: {ours:,.0f} us vs echo {theirs:,.0f} us "
                        f"= {ours / theirs:.1f}x"
                    )
        if args.burst:
            await burst(base, args.burst, server.pid, args.burst_clients)
        if args.storm:
            await storm(
                base,
                args.storm,
                args.storm_stayed,
                server.pid,
                args.pace,
                clients=args.storm_clients,
            )
        if args.cut:
            await cut(base, args.cut, server.pid)
        if args.idle:
            await idle_connections(base, args.idle, server.pid)
        if args.paced:
            counts = [int(c) for c in args.paced.split(",")]
            await paced_ladder(
                base,
                counts,
                args.seconds,
                args.pace,
                args.jitter,
                server.pid,
                50.0,
                args.paced_clients,
            )


def _cpu_per_reply(cpu_s: float | None, replies: int) -> float | None:
    return None if cpu_s is None or not replies else cpu_s / replies * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="A source tree to measure (repeat; default: this one, as 'this').",
    )
    parser.add_argument("--closed", type=int, default=200, help="Closed-loop players (0: skip).")
    parser.add_argument("--echo", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--paced", default="", help="Human-pace player counts, e.g. 300,1000.")
    parser.add_argument(
        "--paced-clients",
        type=int,
        default=1,
        help="Load processes the human-pace players are spread over (each count together).",
    )
    parser.add_argument(
        "--burst", type=int, default=0, help="Connections opened at once (0: skip)."
    )
    parser.add_argument(
        "--burst-clients",
        type=int,
        default=1,
        help="Load processes the burst's connections are spread over (all opening together).",
    )
    parser.add_argument(
        "--storm", type=int, default=0, help="Players whose sockets are cut at once (0: skip)."
    )
    parser.add_argument(
        "--storm-stayed", type=int, default=100, help="Players left connected in the storm."
    )
    parser.add_argument(
        "--storm-clients",
        type=int,
        default=1,
        help="Load processes the storm's cut players are spread over (with their addresses).",
    )
    parser.add_argument(
        "--cut", type=int, default=0, help="Sockets cut at once, nobody back (0: skip)."
    )
    parser.add_argument("--idle", type=int, default=0, help="Idle connections to hold (0: skip).")
    parser.add_argument("--pace", type=float, default=1.0, help="Actions per second per player.")
    parser.add_argument("--jitter", type=float, default=0.5)
    parser.add_argument(
        "--seconds",
        type=float,
        default=10.0,
        help="Seconds per measurement (closed loop, echo, human pace; not the storm).",
    )
    parser.add_argument(
        "--loops",
        default="",
        help="Event loops to measure each tree on, comma-separated (asyncio,uvloop: "
        "TRIPEAKS_EVENT_LOOP); default: each tree's own.",
    )
    parser.add_argument("--rounds", type=int, default=1, help="Measure every tree this often.")
    parser.add_argument(
        "--workers",
        default="1",
        help="Server processes of each tree, comma-separated counts measured in turn (1,2).",
    )
    parser.add_argument(
        "--server-log",
        type=Path,
        default=None,
        help="Append every server's output (its log) to this file (default: discarded).",
    )
    args = parser.parse_args()
    named = [t.split("=", 1) for t in args.tree] or [["this", str(Path(__file__).parent.parent)]]
    trees = [(name, Path(path).resolve()) for name, path in named]
    asyncio.run(_rounds(trees, args))


async def _rounds(trees: list[tuple[str, Path]], args: argparse.Namespace) -> None:
    for round_ in range(args.rounds):
        if args.rounds > 1:
            print(f"\n##### round {round_ + 1} of {args.rounds}")
        for name, tree in trees:
            for workers in [int(w) for w in args.workers.split(",")]:
                for loop in args.loops.split(","):
                    await measure(name, tree, args, workers, loop)


if __name__ == "__main__":
    main()
