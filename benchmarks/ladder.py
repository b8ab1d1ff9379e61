"""Ladder benchmark: one rule set's ladder of N rated players (COPY-filled), a few of them
banned, endpoints timed over HTTP.

    python benchmarks/ladder.py --players 1000000 --requests 200

Creates a throw-away database on the PostgreSQL at ``TRIPEAKS_TEST_PG`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``), fills ``player_ratings`` with N Classic
ratings (mu around 25, sigma 1.5 to 8.3, 1 to 300 races: shown ratings from about −700 to
1,500, so hundreds of players share each rating at 1M) and ``--banned`` (100) banned players
among them, runs a real server on loopback and times: the first page, a page in the middle
(by cursor), "around me" for a player in the middle, one player's rank (around with radius 0)
at the top, in the middle and at the bottom, and the friends' view of a player following 100
others. Prints p50 / p99 / max in ms, then drops the database.
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
from server.services.ladder import LadderKey
from server.web.app import create_app

NOW = dt.datetime(2026, 3, 15, 12, tzinfo=dt.UTC)


async def timed(
    http: aiohttp.ClientSession, url: str, n: int, token: str | None
) -> tuple[list[float], list[float]]:
    """``n`` requests one after the other (with ``token`` as the bearer, when given): each
    one's time over HTTP and the server's own share of it (its ``Server-Timing``), in ms."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    out, server = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        async with http.get(url, headers=headers) as resp:
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
    print(
        f"{name:<26} p50 {statistics.median(ms):7.2f}  p99 {percentile(ms, 0.99):7.2f}  "
        f"max {max(ms):7.2f} ms   (server's share: p50 {statistics.median(server):6.2f}  "
        f"p99 {percentile(server, 0.99):6.2f} ms)"
    )


async def fill(url: str, players: int, banned: int, seed: int) -> None:
    rng = random.Random(seed)
    conn = await asyncpg.connect(url)
    try:
        t0 = time.perf_counter()
        await conn.copy_records_to_table(
            "players",
            columns=["id", "name", "name_key", "created_at"],
            records=((i, f"p{i}", name_key(f"p{i}"), NOW) for i in range(1, players + 1)),
        )
        await conn.execute("SELECT setval(pg_get_serial_sequence('players', 'id'), $1)", players)

        def rating(player: int) -> tuple[object, ...]:
            races = rng.randint(1, 300)
            sigma = max(1.5, 25 / 3 * (0.97**races))
            mu = rng.gauss(25.0, 4.0)
            wins = rng.randint(0, races)
            return (player, "C", mu, sigma, races, wins, NOW)

        # COPY without the row triggers, then the counts in one statement (as migration 0016
        # makes them): a million trigger calls would only slow the fill.
        await conn.execute("ALTER TABLE player_ratings DISABLE TRIGGER USER")
        await conn.copy_records_to_table(
            "player_ratings",
            columns=["player_id", "rules", "mu", "sigma", "races", "wins", "rated_at"],
            records=(rating(i) for i in range(1, players + 1)),
        )
        await conn.execute("ALTER TABLE player_ratings ENABLE TRIGGER USER")
        await conn.execute(
            "INSERT INTO ladder_counts (rules, rating, entries) "
            "SELECT rules, rating, count(*) FROM player_ratings GROUP BY rules, rating"
        )
        for player in rng.sample(range(1, players + 1), k=banned):
            action = await conn.fetchval(
                "INSERT INTO moderation_actions (moderator, action, player_id, reason) "
                "VALUES ('bench', 'ban', $1, 'bench') RETURNING id",
                player,
            )
            await conn.execute(
                "UPDATE players SET banned_at = $2, ban_reason = 'bench', ban_action_id = $3 "
                "WHERE id = $1",
                player,
                NOW,
                action,
            )
        await conn.execute("VACUUM (ANALYZE)")
        await conn.execute("CHECKPOINT")
        print(f"filled {players:,} ratings ({banned} banned) in {time.perf_counter() - t0:.1f} s")
    finally:
        await conn.close()


async def ladder_position(url: str, position: int) -> tuple[int, str]:
    """The player at ``position`` (0 first) of the ladder, and the cursor after them."""
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(
            "SELECT r.rating, r.races, r.player_id FROM player_ratings r "
            "JOIN players p ON p.id = r.player_id "
            "WHERE r.rules = 'C' AND p.banned_at IS NULL "
            "ORDER BY r.rating DESC, r.races DESC, r.player_id OFFSET $1 LIMIT 1",
            position,
        )
    finally:
        await conn.close()
    assert row is not None
    return int(row["player_id"]), LadderKey(*row).encode()


async def friend(url: str, api: str, http: aiohttp.ClientSession, follows: int) -> str:
    """A player registered over HTTP, rated, following ``follows`` rated players: their
    token."""
    async with http.post(f"{api}/players", json={"name": "bench-friend"}) as resp:
        assert resp.status == 201, await resp.text()
        body = await resp.json()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO player_ratings (player_id, rules, mu, sigma, races, wins, rated_at) "
            "VALUES ($1, 'C', 25, 3, 40, 10, $2)",
            body["id"],
            NOW,
        )
        followed = await conn.fetch(
            "SELECT player_id FROM player_ratings WHERE rules = 'C' ORDER BY random() LIMIT $1",
            follows,
        )
        await conn.executemany(
            "INSERT INTO follows (follower_id, followed_id, created_at) VALUES ($1, $2, $3)",
            [
                (body["id"], row["player_id"], NOW)
                for row in followed
                if row["player_id"] != body["id"]
            ],
        )
    finally:
        await conn.close()
    return str(body["token"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=1_000_000)
    parser.add_argument("--banned", type=int, default=100)
    parser.add_argument("--follows", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    async with throwaway_database() as url:
        await fill(url, args.players, args.banned, args.seed)
        on_ladder = args.players - args.banned
        top, _ = await ladder_position(url, 0)
        middle, cursor = await ladder_position(url, on_ladder // 2)
        bottom, _ = await ladder_position(url, on_ladder - 1)
        settings = Settings(
            database_url=url,
            daily_secret="bench-daily-key-0123456789abcdefghijklm",
            solver_workers=0,
        )
        server = TestServer(create_app(settings, clock=FakeClock(NOW)), host="127.0.0.1")
        await server.start_server()
        try:
            api = f"http://127.0.0.1:{server.port}/api/v1"
            base = f"{api}/ladder/C"
            async with aiohttp.ClientSession() as http:
                token = await friend(url, api, http, args.follows)
                endpoints = [
                    ("first page (50)", base, None),
                    ("middle page (cursor, 50)", f"{base}?cursor={cursor}", None),
                    ("around me (radius 5)", f"{base}/around/{middle}", None),
                    ("rank: the top player", f"{base}/around/{top}?radius=0", None),
                    ("rank: the middle player", f"{base}/around/{middle}?radius=0", None),
                    ("rank: the bottom player", f"{base}/around/{bottom}?radius=0", None),
                    (f"friends' view ({args.follows})", f"{base}/friends", token),
                ]
                # Warm every endpoint first: its first call in a process prepares its
                # statements (tens of ms, once), which is not what players wait for.
                for _, url_, auth in endpoints:
                    await timed(http, url_, 5, auth)
                for endpoint, url_, auth in endpoints:
                    line(endpoint, await timed(http, url_, args.requests, auth))
        finally:
            await server.close()


if __name__ == "__main__":
    asyncio.run(main())
