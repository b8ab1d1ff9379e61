"""Players at a human rate (open loop) and the ladder of player counts that finds how many one
process carries with its ack p99 under a target."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.connection
import os
import random
import statistics
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from server.bench import percentile
from server.bench.crowd import Refused, Start, connect_player, crowd, send_action, start_game
from server.bench.process import cpu_s, cpu_since, rss_kb, shares, spawned_each
from server.bench.stats import Stats

#: A paced send this much later than planned counts as late (ms).
LATE_MS = 1.0


async def _paced_player(
    http: aiohttp.ClientSession,
    base: str,
    start: Start,
    pace: float,
    jitter: float,
    seed: int,
    stats: Stats,
) -> None:
    """A player at a human rate (open loop): one action every ``1 / pace`` s on average, each
    gap drawn uniformly within ``± jitter`` of it, on a schedule fixed in advance. An ack that
    comes after the next planned send delays it (a late send, counted); latency is measured
    from the planned send, so a slow server is not hidden by players who wait for it."""
    rng = random.Random(seed)
    state: dict[str, Any] | None = None
    try:
        ws = await connect_player(http, base, "pace", stats)
        # Seated before the clock starts: the figures are those of steady play, not of the
        # crowd sitting down (the arrival is measured apart, with its server_busy returns).
        state = await start_game(ws, "new_game", stats)
        if state is None:
            await ws.close()
            return
    except Refused as refused:
        stats.errors[str(refused)] += 1
        return
    finally:
        start.ready()
    async with ws:
        await start.go.wait()
        mean_gap = 1.0 / pace
        planned = time.monotonic() + rng.uniform(0, mean_gap)  # players spread over a gap
        while planned < start.deadline:
            now = time.monotonic()
            if now < planned:
                await asyncio.sleep(planned - now)
            elif (now - planned) * 1000 > LATE_MS:
                stats.late += 1
                stats.late_ms.append((now - planned) * 1000)
            if state is None or state["status"] != "playing":
                state = await start_game(ws, "new_game", stats)
                if state is None:
                    return
            else:
                await send_action(ws, state, rng)
                raw = await ws.receive()
                if raw.type is not aiohttp.WSMsgType.TEXT:
                    stats.errors[f"ws_{raw.type.name.lower()}"] += 1
                    return
                stats.latencies_ms.append((time.monotonic() - planned) * 1000)
                reply = json.loads(raw.data)
                stats.outcomes[reply["type"]] += 1
                if reply["type"] in ("accepted", "rejected"):
                    state = reply["game"]
                else:
                    stats.errors[reply.get("code", "bad_reply")] += 1
                    state = None
            planned += mean_gap * rng.uniform(1 - jitter, 1 + jitter)


async def run_paced(
    base: str,
    players: int,
    seconds: float,
    pace: float,
    jitter: float,
    pid: int | None = None,
    first_seed: int = 0,
    barrier: Any = None,
) -> tuple[Stats, float]:
    """Run ``players`` players at a human rate for ``seconds`` (after all are connected, in
    every load process given a ``barrier``); returns their stats (with the server's CPU time
    when ``pid`` is given) and the time spent.

    Raises:
        ValueError: ``pace`` not positive or ``jitter`` outside 0..1.
    """
    if pace <= 0 or not 0 <= jitter < 1:
        raise ValueError(f"pace must be > 0 and jitter in 0..1, not {pace}, {jitter}")

    def player(http: aiohttp.ClientSession, start: Start, seed: int, stats: Stats) -> Any:
        return _paced_player(http, base, start, pace, jitter, seed, stats)

    return await crowd(players, seconds, pid, player, first_seed, barrier)


def _paced_process(
    base: str,
    players: int,
    seconds: float,
    pace: float,
    jitter: float,
    first_seed: int,
    barrier: Any,
    pipe: multiprocessing.connection.Connection,
) -> None:
    """One load process of :func:`run_paced_split`: its players' stats sent back."""
    stats, _ = asyncio.run(
        run_paced(base, players, seconds, pace, jitter, None, first_seed, barrier)
    )
    pipe.send(stats)


async def run_paced_split(
    base: str,
    players: int,
    seconds: float,
    pace: float,
    jitter: float,
    pid: int | None,
    clients: int,
) -> tuple[Stats, float]:
    """:func:`run_paced` with the players spread over ``clients`` load processes (so that
    the load generator keeps its own pace), all starting their clock together once every
    player is connected; their merged stats (with the server's CPU time while they played)
    and the time spent playing (s)."""
    barrier = multiprocessing.get_context("spawn").Barrier(clients + 1)
    stats = Stats()
    arguments: list[tuple[object, ...]] = [
        (base, share, seconds, pace, jitter, i * players, barrier)
        for i, share in enumerate(shares(players, clients))
    ]
    async with spawned_each(_paced_process, arguments) as pipes:
        await asyncio.to_thread(barrier.wait)
        began = time.monotonic()
        server_before = cpu_s(pid) if pid else None
        for pipe in pipes:
            stats.merge(await asyncio.to_thread(pipe.recv))
        spent = time.monotonic() - began
        if server_before is not None and pid:
            stats.server_cpu_s = cpu_since(pid, server_before)
    return stats, spent


@dataclass(frozen=True)
class PacedRow:
    """One player count of a paced ladder: ack latency from the planned send (ms)."""

    players: int
    acks: int
    p50: float
    p95: float
    p99: float
    late_share: float
    errors: int
    server_cpu_share: float | None
    client_cpu_share: float | None
    #: The server's resident memory after the step (MiB; every worker's), None if unread.
    server_rss_mib: float | None = None


async def paced_ladder(
    base: str,
    counts: list[int],
    seconds: float,
    pace: float,
    jitter: float,
    pid: int | None,
    target_p99_ms: float,
    clients: int = 1,
) -> list[PacedRow]:
    """Run :func:`run_paced` for each player count (its players spread over ``clients`` load
    processes when more than one: :func:`run_paced_split`; the client CPU is then not
    shown), print a table row for each, and the largest count whose ack p99 stays under
    ``target_p99_ms`` with no errors."""
    rows: list[PacedRow] = []
    print(
        f"human pace: {pace:g} action/s per player, gaps ±{jitter:.0%}, {seconds:g} s per step; "
        "ack latency from the planned send"
    )
    print(
        " players    acks    p50 ms    p95 ms    p99 ms   late  errors  server CPU  client CPU"
        "  server RSS"
    )
    for count in counts:
        client_before = cpu_s(os.getpid(), descendants=False)
        if clients > 1:
            stats, spent = await run_paced_split(base, count, seconds, pace, jitter, pid, clients)
        else:
            stats, spent = await run_paced(base, count, seconds, pace, jitter, pid)
        client_after = cpu_s(os.getpid(), descendants=False)
        client_cpu = (
            None
            if client_before is None or client_after is None or clients > 1
            else client_after - client_before
        )
        rss = rss_kb(pid) if pid else None
        lat = stats.latencies_ms
        acks = len(lat)
        row = PacedRow(
            players=count,
            acks=acks,
            p50=statistics.median(lat) if lat else float("nan"),
            p95=percentile(lat, 0.95),
            p99=percentile(lat, 0.99),
            late_share=stats.late / max(1, acks + stats.games),
            errors=sum(stats.errors.values()),
            server_cpu_share=None if stats.server_cpu_s is None else stats.server_cpu_s / spent,
            client_cpu_share=None if client_cpu is None else client_cpu / spent,
            server_rss_mib=None if rss is None else rss / 1024,
        )
        rows.append(row)
        server = "-" if row.server_cpu_share is None else f"{row.server_cpu_share:.0%}"
        client = "-" if row.client_cpu_share is None else f"{row.client_cpu_share:.0%}"
        memory = "-" if row.server_rss_mib is None else f"{row.server_rss_mib:.0f} MiB"
        print(
            f"{count:8d} {acks:7d} {row.p50:9.2f} {row.p95:9.2f} {row.p99:9.2f} "
            f"{row.late_share:6.1%} {row.errors:7d} {server:>11} {client:>11} {memory:>11}"
        )
        if stats.errors:
            print(f"          errors: {dict(stats.errors)}")
        if stats.busy_retries:
            print(f"          told server_busy while getting in, came back: {stats.busy_retries}")
    within = [r.players for r in rows if r.p99 < target_p99_ms and not r.errors]
    best = max(within) if within else None
    print(
        f"largest count with ack p99 under {target_p99_ms:g} ms: "
        + (f"{best} players" if best is not None else "none of those tried")
    )
    return rows
