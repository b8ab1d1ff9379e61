"""Leaderboard benchmark: one daily board of N entries (COPY-filled), and the boards of its
week and month with the same N players, endpoints timed over HTTP.

    python benchmarks/leaderboard.py --entries 1000000 --requests 200

Creates a throw-away database on the PostgreSQL at ``TRIPEAKS_TEST_PG`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``), fills it, runs a real server on loopback
and times: the first page, a page deep in the list (by cursor), "around me" for a player in the
middle, one player's rank (around with radius 0), and the date's daily info (its players and
ranked counts); then the same pages, window and rank on the board of the date's ISO week and of
its month, where every player also has results on 0 to ``--extra-days`` (3) other days of the
week (so both boards hold N entries, with totals of one to four days), and a profile (which
reads the player's week and month ranks). Prints p50 / p99 / max in ms, then drops the database.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import statistics
import time

import aiohttp
import asyncpg
from aiohttp.test_utils import TestServer

from server.bench import percentile, throwaway_database
from server.config import Settings
from server.names import name_key
from server.services.clock import FakeClock
from server.services.leaderboards import BoardKey
from server.services.period_boards import PeriodKey
from server.web.app import create_app

DATE = dt.date(2026, 3, 14)
NOW = dt.datetime(2026, 3, 15, 12, tzinfo=dt.UTC)
#: The other days of DATE's ISO week (2026-W11, Monday 9 to Sunday 15 March), all in March.
OTHER_DAYS = [dt.date(2026, 3, 9) + dt.timedelta(days=d) for d in range(7) if d != 5]
WEEK, MONTH = "2026-W11", "2026-03"


GAME_COLUMNS = [
    "id",
    "player_id",
    "code",
    "rules",
    "deal_version",
    "mode",
    "daily_date",
    "status",
    "score",
    "moves",
    "undos",
    "seq",
    "elapsed_ms",
    "created_at",
    "finished_at",
    "cards_left",
]


async def fill(url: str, entries: int, seed: int, extra_days: int) -> None:
    rng = random.Random(seed)
    conn = await asyncpg.connect(url)
    try:
        t0 = time.perf_counter()
        await conn.copy_records_to_table(
            "players",
            columns=["id", "name", "name_key", "created_at"],
            records=((i, f"p{i}", name_key(f"p{i}"), NOW) for i in range(1, entries + 1)),
        )
        start = dt.datetime.combine(DATE, dt.time(), tzinfo=dt.UTC)

        def game(i: int, player: int, date: dt.date) -> tuple[object, ...]:
            won = rng.random() < 0.6
            moves = rng.randint(28, 60)
            score = 500 - moves + 300 if won else rng.randint(400, 700)
            elapsed = rng.randint(30_000, 900_000)
            return (
                i,
                player,
                "TP1-E-AAAAAAA",
                "E",
                "TP1",
                "daily",
                date,
                "won" if won else "blocked",
                score,
                moves,
                rng.randint(0, 5),
                moves,
                elapsed,
                start,
                start + dt.timedelta(milliseconds=elapsed),
                0 if won else 5,
            )

        await conn.copy_records_to_table(
            "games",
            columns=GAME_COLUMNS,
            records=(game(i, i, DATE) for i in range(1, entries + 1)),
        )
        t1 = time.perf_counter()
        days = [
            (p, d)
            for p in range(1, entries + 1)
            for d in rng.sample(OTHER_DAYS, k=rng.randint(0, extra_days))
        ]
        await conn.copy_records_to_table(
            "games",
            columns=GAME_COLUMNS,
            records=(game(entries + n, p, d) for n, (p, d) in enumerate(days, 1)),
        )
        print(
            f"{len(days):,} results on other days of the week in {time.perf_counter() - t1:.1f} s"
        )
        await conn.execute(
            "INSERT INTO daily_challenges (date, code, rules, created_at) "
            "VALUES ($1, 'TP1-E-AAAAAAA', 'E', $2)",
            DATE,
            NOW,
        )
        # Settle the bulk load as a live database would be: visibility map set (index-only
        # scans), statistics current, dirty pages flushed; otherwise autovacuum and
        # checkpoints triggered by the fill run during the timings.
        await conn.execute("VACUUM (ANALYZE)")
        await conn.execute("CHECKPOINT")
        print(f"filled {entries:,} entries in {time.perf_counter() - t0:.1f} s")
    finally:
        await conn.close()


async def deep_cursor(url: str, position: int) -> str:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT score, moves, elapsed_ms, finished_at, player_id FROM games "
            "WHERE mode = 'daily' AND daily_date = $1 AND status IN ('won', 'blocked') "
            "ORDER BY score DESC, moves, elapsed_ms, finished_at, player_id OFFSET $2 LIMIT 1",
            DATE,
            position,
        )
    finally:
        await conn.close()
    assert row is not None
    return BoardKey(*row).encode()


async def deep_period_cursor(url: str, kind: str, position: int) -> str:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT total, days, elapsed_ms, player_id FROM period_totals "
            "WHERE kind = $1 AND starts_on = $2 AND days > 0 "
            "ORDER BY total DESC, days DESC, elapsed_ms, player_id OFFSET $3 LIMIT 1",
            kind,
            dt.date(2026, 3, 9) if kind == "week" else dt.date(2026, 3, 1),
            position,
        )
    finally:
        await conn.close()
    assert row is not None
    return PeriodKey(*row).encode()


async def timed(http: aiohttp.ClientSession, url: str, n: int) -> tuple[list[float], list[float]]:
    """``n`` requests one after the other: each one's time over HTTP and the server's own share
    of it (its ``Server-Timing``), in ms."""
    out, server = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        async with http.get(url) as resp:
            assert resp.status == 200, await resp.text()
            await resp.read()
            timing = resp.headers.get("Server-Timing", "")
        out.append((time.perf_counter() - t0) * 1000)
        server.append(
            float(timing.split("dur=", 1)[1].split(";", 1)[0]) if "dur=" in timing else 0.0
        )
    return out, server


def line(name: str, measured: tuple[list[float], list[float]]) -> None:
    ms, server = measured
    p99 = percentile(ms, 0.99)
    print(
        f"{name:<30} p50 {statistics.median(ms):7.2f}  p99 {p99:7.2f}  max {max(ms):7.2f} ms"
        f"   (server's share: p50 {statistics.median(server):6.2f}  "
        f"p99 {percentile(server, 0.99):6.2f} ms)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extra-days", type=int, default=3)
    args = parser.parse_args()
    async with throwaway_database() as url:
        await fill(url, args.entries, args.seed, args.extra_days)
        cursor = await deep_cursor(url, args.entries // 2)
        week_cursor = await deep_period_cursor(url, "week", args.entries // 2)
        month_cursor = await deep_period_cursor(url, "month", args.entries // 2)
        settings = Settings(
            database_url=url,
            daily_secret="bench-daily-key-0123456789abcdefghijklm",
            solver_workers=0,
        )
        server = TestServer(create_app(settings, clock=FakeClock(NOW)), host="127.0.0.1")
        await server.start_server()
        try:
            api = f"http://127.0.0.1:{server.port}/api/v1"
            base = f"{api}/daily/{DATE.isoformat()}/leaderboard"
            week, month = f"{api}/boards/week/{WEEK}", f"{api}/boards/month/{MONTH}"
            middle = args.entries // 2
            endpoints = [
                ("first page (50)", base),
                ("deep page (cursor, 50)", f"{base}?cursor={cursor}"),
                ("around me (radius 5)", f"{base}/around/{middle}"),
                ("one player's rank", f"{base}/around/{middle}?radius=0"),
                ("daily info (players, ranked)", base.removesuffix("/leaderboard")),
                ("week: first page (50)", week),
                ("week: deep page (cursor, 50)", f"{week}?cursor={week_cursor}"),
                ("week: around me (radius 5)", f"{week}/around/{middle}"),
                ("week: one player's rank", f"{week}/around/{middle}?radius=0"),
                ("month: first page (50)", month),
                ("month: deep page (cursor, 50)", f"{month}?cursor={month_cursor}"),
                ("month: around me (radius 5)", f"{month}/around/{middle}"),
                ("month: one player's rank", f"{month}/around/{middle}?radius=0"),
                ("profile (week, month ranks)", f"{api}/players/{middle}"),
            ]
            async with aiohttp.ClientSession() as http:
                # Warm every endpoint first: its first call in a process builds and prepares
                # its statements (tens of ms, once), which is not what players wait for.
                for _, url in endpoints:
                    await timed(http, url, 5)
                for endpoint, url in endpoints:
                    line(endpoint, await timed(http, url, args.requests))
        finally:
            await server.close()


if __name__ == "__main__":
    asyncio.run(main())
