"""The first ``GET /api/v1/daily`` of a new date: deal chosen on demand vs prepared ahead.

    python benchmarks/daily_open.py --days 10

Runs two real servers on loopback, each on a throw-away database on the PostgreSQL at
``TRIPEAKS_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``), each with its
own solver process (warmed on the first date, as a server that has been up a while), and a
simulated clock that crosses ``--days`` midnights. "On demand": daily preparation off, so the
first request of each date chooses the date's winnable deal and solves its par. "Prepared": the
server's preparer stores (and solves) the next date's deal from an hour before midnight; the
clock waits at 23:30 until it has, then crosses midnight. Prints the first request's time per
date (p50 / max, ms) for both, then drops the databases.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import statistics
import time

import aiohttp
import asyncpg
from aiohttp.test_utils import TestServer

from server.bench import throwaway_database
from server.config import Settings
from server.services.clock import FakeClock
from server.web.app import create_app

FIRST = dt.date(2026, 3, 14)
SECRET = "bench-daily-open-key-0123456789abcdefghi"


async def first_request_ms(http: aiohttp.ClientSession, url: str, date: dt.date) -> float:
    started = time.perf_counter()
    async with http.get(url) as resp:
        body = await resp.json()
    elapsed = (time.perf_counter() - started) * 1000
    assert resp.status == 200 and body["date"] == date.isoformat(), body
    return elapsed


async def wait_stored(url: str, date: dt.date) -> None:
    conn = await asyncpg.connect(url)
    try:
        async with asyncio.timeout(120):
            while True:
                if await conn.fetchval("SELECT 1 FROM daily_challenges WHERE date = $1", date):
                    return
                await asyncio.sleep(0.02)
    finally:
        await conn.close()


async def run(url: str, days: int, prepared: bool) -> list[float]:
    clock = FakeClock(dt.datetime.combine(FIRST, dt.time(12), tzinfo=dt.UTC))
    settings = Settings(
        database_url=url,
        daily_secret=SECRET,
        solver_workers=1,
        daily_prepare_every_s=0.05 if prepared else 0,
        daily_prepare_ahead_s=3600,
    )
    server = TestServer(create_app(settings, clock=clock), host="127.0.0.1")
    await server.start_server()
    times = []
    try:
        daily = f"http://127.0.0.1:{server.port}/api/v1/daily"
        async with aiohttp.ClientSession() as http:
            await first_request_ms(http, daily, FIRST)  # warms the solver process
            for day in range(1, days + 1):
                date = FIRST + dt.timedelta(days=day)
                midnight = dt.datetime.combine(date, dt.time(), tzinfo=dt.UTC)
                if prepared:
                    clock.set(midnight - dt.timedelta(minutes=30))
                    await wait_stored(url, date)
                clock.set(midnight + dt.timedelta(seconds=1))
                times.append(await first_request_ms(http, daily, date))
    finally:
        await server.close()
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=10)
    args = parser.parse_args()
    results = {}
    for prepared in (False, True):
        async with throwaway_database() as url:
            results[prepared] = await run(url, args.days, prepared)
    for prepared, label in ((False, "chosen on demand"), (True, "prepared ahead")):
        ms = results[prepared]
        print(
            f"{label:<18} first GET /daily of {len(ms)} dates: "
            f"p50 {statistics.median(ms):8.1f}  max {max(ms):8.1f} ms"
        )
    ratio = statistics.median(results[False]) / statistics.median(results[True])
    print(f"median ratio (on demand / prepared): {ratio:.1f}x")


if __name__ == "__main__":
    asyncio.run(main())
