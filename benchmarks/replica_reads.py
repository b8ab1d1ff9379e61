"""Action acks on the primary under a leaderboard read load: no reads, reads on the primary,
reads on a streaming replica, side by side in one run.

    PYTHONPATH=. python benchmarks/replica_reads.py --entries 200000 --players 200 --readers 8 \\
        --seconds 20 --rounds 3

(``PYTHONPATH=.``: it starts its PostgreSQL servers with the tests' ``tests/pg.py``.)

Starts a primary and a hot standby of its own (``pg_basebackup -R``; PostgreSQL from the
``pgserver`` package, throw-away directories, free loopback ports), fills one date's board with
``--entries`` entries, then three server processes over the primary: one that serves the
players' actions, one that serves board reads from the primary, one that serves them from the
standby (``TRIPEAKS_DATABASE_READ_URLS``). Each round runs three phases of ``--seconds``, the
same ``--players`` acting at a human pace (once a second) on the first process in each:

- ``no reads``: the players alone;
- ``reads on primary``: ``--readers`` clients reading boards as fast as they are answered (a
  first page, around a random player, a random player's rank) from the second process;
- ``reads on replica``: the same readers on the third process.

The target is about the primary's database: whether reads on a replica leave the primary's
acks as they are. So nothing but the database a read goes to differs between the two read
phases, and the read load's own costs are kept off the players' side: the readers run in a
process of their own, and with ``--pin`` (the default when the machine has two CPUs or more) the
primary, the players' server process and the players run on one CPU, the standby, both reading
server processes and the readers on another. Reads on the primary then compete with the writes
for the primary's CPU, as they would on a primary's own machine; reads on the replica do not.

Prints each phase's ack p50 / p99 (ms, from the planned send) and reads per second, then the
medians over the rounds and each read phase's ack p99 against no reads. Every target is on
loopback; every step stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import random
import secrets
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from leaderboard import DATE, fill

from server.bench import percentile
from server.bench.paced import run_paced
from server.bench.process import server_process
from server.storage.db import migrate_url
from tests.freeze import children_of, postmaster_pid
from tests.pg import PrivatePostgres, primary_and_standby

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("no reads", "reads on primary", "reads on replica")


@dataclass
class Reads:
    """What the readers measured: each read's time in ms, and failures."""

    ms: list[float] = field(default_factory=list)
    failed: int = 0


def _pin(pids: list[int], cpus: set[int] | None) -> None:
    """Run ``pids`` on ``cpus`` only (None: leave them as they are)."""
    if cpus is None:
        return
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(pid, cpus)


def _cluster(server: PrivatePostgres) -> list[int]:
    """The processes of a PostgreSQL server (its backends started later are the postmaster's
    children and inherit its CPUs)."""
    postmaster = postmaster_pid(server)
    return [postmaster, *children_of(postmaster)]


def _read_load(
    base: str, entries: int, readers: int, cpus: set[int] | None, stop: Any, out: Any
) -> None:
    """The readers, in a process of their own: read until ``stop`` is set, then put each read's
    ms and the failures on ``out``."""
    _pin([os.getpid()], cpus)
    reads = Reads()

    async def load() -> None:
        done = asyncio.Event()

        async def watch() -> None:
            await asyncio.to_thread(stop.wait)
            done.set()

        watcher = asyncio.create_task(watch())
        await asyncio.gather(
            *(_reader(base, entries, seed, done, reads) for seed in range(readers))
        )
        await watcher

    asyncio.run(load())
    out.put((reads.ms, reads.failed))


async def _reader(base: str, entries: int, seed: int, stop: asyncio.Event, reads: Reads) -> None:
    rng = random.Random(seed)
    board = f"{base}/api/v1/daily/{DATE.isoformat()}/leaderboard"
    async with aiohttp.ClientSession() as http:
        while not stop.is_set():
            player = rng.randint(1, entries)
            url = rng.choice(
                (board, f"{board}/around/{player}", f"{board}/around/{player}?radius=0")
            )
            t0 = time.perf_counter()
            async with http.get(url) as resp:
                await resp.read()
                if resp.status != 200:
                    reads.failed += 1
            reads.ms.append((time.perf_counter() - t0) * 1000)


@contextlib.asynccontextmanager
async def _server(
    primary_url: str, read_url: str | None, cpus: set[int] | None
) -> AsyncIterator[str]:
    """A server process over ``primary_url`` (reading boards on ``read_url`` if given) on
    ``cpus``; its base URL."""
    env = {
        **os.environ,
        "DATABASE_URL": primary_url,
        "TRIPEAKS_DATABASE_READ_URLS": read_url or "",
        "TRIPEAKS_DAILY_SECRET": SECRET,
        "TRIPEAKS_WS_RATE_PER_SECOND": "10000",
        "TRIPEAKS_REGISTER_PER_MINUTE": "1000000",
        "TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS": "1000000",
        "TRIPEAKS_SOLVER_WORKERS": "0",
    }
    async with server_process(ROOT, env) as server:
        _pin([server.pid], cpus)
        yield server.base


SECRET = secrets.token_hex(32)


async def _caught_up(primary: PrivatePostgres, standby: PrivatePostgres) -> None:
    """Wait until the standby has replayed the primary's current position."""
    conn = await asyncpg.connect(primary.admin_url)
    try:
        target = await conn.fetchval("SELECT pg_current_wal_lsn()")
    finally:
        await conn.close()
    conn = await asyncpg.connect(standby.admin_url)
    try:
        for _ in range(6000):
            if await conn.fetchval("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", target):
                return
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
    raise RuntimeError("the standby did not catch up within 5 minutes")


async def _phase(
    args: argparse.Namespace, actions: str, reads_at: str | None, cpus: set[int] | None
) -> tuple[float, float, int, float, float]:
    """One phase: ack p50 and p99 (ms), acks, reads per second and read p99 (ms)."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    out = context.Queue()
    loader = None
    if reads_at is not None:
        loader = context.Process(
            target=_read_load, args=(reads_at, args.entries, args.readers, cpus, stop, out)
        )
        loader.start()
    t0 = time.monotonic()
    try:
        stats, _ = await run_paced(actions, args.players, args.seconds, 1.0, 0.5)
    finally:
        stop.set()
    spent = time.monotonic() - t0
    reads = Reads()
    if loader is not None:
        reads.ms, reads.failed = await asyncio.to_thread(out.get, True, 60)
        await asyncio.to_thread(loader.join, 60)
    lat = stats.latencies_ms
    if stats.errors or reads.failed:
        print(f"    errors: {dict(stats.errors)}, failed reads: {reads.failed}")
    return (
        statistics.median(lat),
        percentile(lat, 0.99),
        len(lat),
        len(reads.ms) / spent,
        percentile(reads.ms, 0.99) if reads.ms else 0.0,
    )


async def main(args: argparse.Namespace) -> None:
    with primary_and_standby() as (primary, standby):
        await migrate_url(primary.url)
        await fill(primary.url, args.entries, args.seed, extra_days=0)
        conn = await asyncpg.connect(primary.url)
        try:  # the filled rows took explicit ids: new players and games come after them
            for table in ("players", "games"):
                await conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))"
                )
        finally:
            await conn.close()
        await _caught_up(primary, standby)
        cpus = sorted(os.sched_getaffinity(0))
        writes_cpus = reads_cpus = None
        if args.pin and len(cpus) >= 2:
            writes_cpus, reads_cpus = {cpus[0]}, {cpus[1]}
            _pin(_cluster(primary), writes_cpus)
            _pin(_cluster(standby), reads_cpus)
            _pin([os.getpid()], writes_cpus)  # (the players)
        async with (
            _server(primary.url, None, writes_cpus) as actions,
            _server(primary.url, None, reads_cpus) as on_primary,
            _server(primary.url, standby.url, reads_cpus) as on_replica,
        ):
            targets = {"no reads": None, "reads on primary": on_primary}
            targets["reads on replica"] = on_replica
            results: dict[str, list[tuple[float, float, int, float, float]]] = {
                phase: [] for phase in PHASES
            }
            print(
                f"{args.entries:,} entries, {args.players} players at 1 action/s, "
                f"{args.readers} readers, {args.seconds:g} s per phase; "
                + (
                    f"primary, players and their server on CPU {cpus[0]}, standby, readers and "
                    f"their servers on CPU {cpus[1]}"
                    if writes_cpus is not None
                    else "no CPU pinning"
                )
            )
            print(
                f"{'round':>5} {'phase':<18} {'acks':>6} {'p50 ms':>8} {'p99 ms':>8} "
                f"{'reads/s':>8} {'read p99 ms':>12}"
            )
            for round_ in range(1, args.rounds + 1):
                for phase in PHASES:
                    row = await _phase(args, actions, targets[phase], reads_cpus)
                    results[phase].append(row)
                    p50, p99, acks, rate, read_p99 = row
                    print(
                        f"{round_:>5} {phase:<18} {acks:>6} {p50:>8.2f} {p99:>8.2f} "
                        f"{rate:>8.0f} {read_p99:>12.2f}"
                    )
            async with aiohttp.ClientSession() as http, http.get(f"{on_replica}/metrics") as resp:
                scraped = await resp.text()
            print("the replica's server, where its reads went:")
            for line in scraped.splitlines():
                if line.startswith(("tripeaks_db_reads_total", "tripeaks_db_read_fallbacks")):
                    print(f"      {line}")
            print("medians over the rounds:")
            for phase in PHASES:
                rows = results[phase]
                print(
                    f"      {phase:<18} ack p50 {statistics.median(r[0] for r in rows):7.2f}  "
                    f"ack p99 {statistics.median(r[1] for r in rows):7.2f} ms  "
                    f"reads/s {statistics.median(r[3] for r in rows):6.0f}"
                )
            print("ack p99 against no reads, round by round (median):")
            for phase in PHASES[1:]:
                ratios = [
                    row[1] / base[1]
                    for row, base in zip(results[phase], results["no reads"], strict=True)
                ]
                print(
                    f"      {phase:<18} x{statistics.median(ratios):.2f} "
                    f"({', '.join(f'x{r:.2f}' for r in ratios)})"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--players", type=int, default=200)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the primary's side on one CPU, the standby's and the readers' on another",
    )
    asyncio.run(main(parser.parse_args()))
