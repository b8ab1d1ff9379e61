"""The primary's loss under play, and what synchronous replication costs an ack.

Each run starts a pg_auto_failover cluster of its own on loopback ports (a monitor, a primary
and ``--standbys`` synchronous standbys; Debian's PostgreSQL 15 and pg_autoctl), two
``tripeaks serve`` processes over it and ``--players`` simulated players, then kills
(``kill -9``) or freezes (``SIGSTOP``) every process of the primary and prints, per run: the
time from the fault to the monitor's promotion, from the promotion to play resuming (the median
player's first ack and the last player's), the players not acknowledged again within 30 s,
acknowledged actions lost (must be 0), ``unavailable`` answers about actions that were stored
(must be 0) and resumes older than an ack.

Then, on one more cluster, ``--latency-players`` players (few, so that the machine's load does
not drown the difference) play in alternating rounds with the standbys synchronous
(``replication-quorum`` true, what the deployment runs) and not (false: the primary acknowledges
without waiting), and it prints the median and p99 ack latency of each, side by side, and the
difference of the medians.

    python benchmarks/failover.py --runs 3

Everything runs on this machine's loopback and stops by itself; every process it starts is
killed at the end of its run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp
import asyncpg

from server.bench import percentile
from server.bench.autofailover import DATABASE, DB_USER, Cluster, NodeState
from server.bench.failover import Fault, FaultRun, Player, deployment, play, run_fault

#: Seconds of each round of the latency comparison.
ROUND_S = 6.0
#: Seconds after a switch whose acks are left out (commits in flight under the old setting).
SETTLE_S = 1.0


def report(run: FaultRun, index: int) -> None:
    """Print one fault run's line."""
    print(
        f"{run.fault.value:6} run {index}: promoted {run.promoted_after_s:5.1f} s after the fault;"
        f" play resumed after {run.resumed_median_s:4.2f} s (median player),"
        f" {run.resumed_all_s:5.2f} s (last); stuck {run.stuck:3d};"
        f" acked {run.acked:5d}, lost {len(run.lost)};"
        f" told unavailable about a stored write {len(run.told_unavailable_stored)};"
        f" resumed behind an ack {len(run.behind)}",
        flush=True,
    )
    if run.problems:
        print(f"    problems: {len(run.problems)}, first: {run.problems[0]}", flush=True)


async def _primary(cluster: Cluster) -> NodeState:
    """The primary, once the monitor has one settled (none while it applies new settings)."""
    deadline = time.monotonic() + 60
    while (primary := await cluster.primary()) is None:
        assert time.monotonic() < deadline, f"no primary: {await cluster.states()}"
        await asyncio.sleep(0.1)
    return primary


async def _synchronous_names(cluster: Cluster) -> str:
    primary = await _primary(cluster)
    conn = await asyncpg.connect(f"postgresql://{DB_USER}@127.0.0.1:{primary.port}/{DATABASE}")
    try:
        names: str = await conn.fetchval("SHOW synchronous_standby_names")
        return names
    finally:
        await conn.close()


async def _set_quorum(cluster: Cluster, quorum: bool) -> None:
    """Make every standby synchronous or not, and wait until the primary runs so."""
    primary = await _primary(cluster)
    for node in cluster.nodes:
        if node.name != primary.name:
            await asyncio.to_thread(
                node.run,
                "set", "node", "replication-quorum", "--pgdata", str(node.pgdata),
                "true" if quorum else "false",
            )  # fmt: skip
    deadline = time.monotonic() + 60
    while (await _synchronous_names(cluster) != "") == (not quorum):
        assert time.monotonic() < deadline, "synchronous_standby_names did not change"
        await asyncio.sleep(0.1)


async def latency(cluster: Cluster, bases: list[str], players: int, rounds: int) -> None:
    """Alternate rounds with and without synchronous standbys under the same players and
    print each mode's ack latency."""
    if len(cluster.nodes) > 2:  # no standby may leave the quorum while one is required
        node = cluster.nodes[0]
        await asyncio.to_thread(
            node.run, "set", "formation", "number-sync-standbys", "--pgdata", str(node.pgdata), "0"
        )
    crowd = [Player(seed) for seed in range(players)]
    stop = asyncio.Event()
    windows: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    names: dict[bool, str] = {}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        tasks = [
            asyncio.create_task(play(http, bases[i % len(bases)], p, stop))
            for i, p in enumerate(crowd)
        ]
        try:
            for index in range(2 * rounds):
                quorum = index % 2 == 0
                await _set_quorum(cluster, quorum)
                names[quorum] = await _synchronous_names(cluster)
                begin = time.time() + SETTLE_S
                await asyncio.sleep(ROUND_S)  # the round's length: play goes on meanwhile
                windows[quorum].append((begin, time.time()))
        finally:
            stop.set()
            await asyncio.wait(tasks, timeout=30)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    samples = {
        mode: [
            ms
            for p in crowd
            for sent, ms in p.latencies_ms
            if any(begin <= sent < end for begin, end in spans)
        ]
        for mode, spans in windows.items()
    }
    print(f"\nack latency, {players} players, {rounds} rounds of {ROUND_S:.0f} s each way:")
    for mode in (True, False):
        values = samples[mode]
        label = "synchronous" if mode else "asynchronous"
        print(
            f"  {label:12} (synchronous_standby_names={names[mode]!r}): {len(values):6d} acks,"
            f" median {statistics.median(values):6.2f} ms, p99 {percentile(values, 0.99):7.2f} ms"
        )
    extra = statistics.median(samples[True]) - statistics.median(samples[False])
    print(f"  synchronous replication adds {extra:+.2f} ms to the median ack")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each fault (3; 0: none)")
    parser.add_argument("--players", type=int, default=100, help="simulated players (100)")
    parser.add_argument("--standbys", type=int, default=2, choices=(1, 2), help="standbys (2)")
    parser.add_argument("--faults", default="kill,freeze", help="kill,freeze (both)")
    parser.add_argument("--rounds", type=int, default=4, help="latency rounds each way (4)")
    parser.add_argument(
        "--latency-players", type=int, default=10, help="players of the latency rounds (10)"
    )
    args = parser.parse_args()
    faults = [Fault(name) for name in args.faults.split(",") if name]
    print(f"{args.players} players on 2 server processes, {args.standbys} standbys", flush=True)
    runs: list[FaultRun] = []
    for fault in faults:
        for index in range(1, args.runs + 1):
            with deployment(args.standbys) as (cluster, servers):
                bases = [s.base for s in servers]
                run = asyncio.run(run_fault(cluster, bases, fault, args.players))
            report(run, index)
            runs.append(run)
    for fault in faults:
        mine = [r for r in runs if r.fault is fault]
        if mine:
            print(
                f"{fault.value}: {len(mine)} runs; lost {sum(len(r.lost) for r in mine)};"
                f" told unavailable about stored writes"
                f" {sum(len(r.told_unavailable_stored) for r in mine)};"
                f" play resumed (last player) median"
                f" {statistics.median(r.resumed_all_s for r in mine):.2f} s,"
                f" worst {max(r.resumed_all_s for r in mine):.2f} s",
                flush=True,
            )
    if args.rounds:
        with deployment(args.standbys) as (cluster, servers):
            bases = [s.base for s in servers]
            asyncio.run(latency(cluster, bases, args.latency_players, args.rounds))


if __name__ == "__main__":
    main()
