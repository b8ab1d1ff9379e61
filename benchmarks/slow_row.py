"""Bystanders' ack latency while one game's row is locked by another transaction.

    python benchmarks/slow_row.py --players 50 --seconds 10

Runs a real server on loopback over a throw-away database on the PostgreSQL at
``TRIPEAKS_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``). ``--players``
bystanders each play free games (draws, a new game when the stock runs out), one action at a
time at about one action per 100 ms, for ``--seconds`` twice: first with nothing locked, then
while a victim's game row is held by ``SELECT … FOR UPDATE`` in an open transaction and the
victim keeps sending actions on it. Prints the bystanders' ack p50 / p99 / max (ms) for both
phases and what the victim got, then drops the database.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import aiohttp
import asyncpg
from aiohttp.test_utils import TestServer

from server.bench import percentile, throwaway_database
from server.config import Settings
from server.web.app import create_app


class Player:
    def __init__(self, http: aiohttp.ClientSession, base: str, name: str) -> None:
        self.http, self.base, self.name = http, base, name
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.game: dict[str, Any] = {}
        self.next_id = 0

    async def start(self) -> None:
        async with self.http.post(f"{self.base}/api/v1/players", json={"name": self.name}) as r:
            token = (await r.json())["token"]
        self.ws = await self.http.ws_connect(f"{self.base}/ws")
        await self.request({"type": "hello", "token": token})
        self.game = (await self.request({"type": "new_game"}))["game"]

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.ws is not None
        self.next_id += 1
        await self.ws.send_json({**message, "id": self.next_id})
        while True:
            reply: dict[str, Any] = await self.ws.receive_json()
            if reply.get("id") == self.next_id:
                return reply

    async def act(self) -> dict[str, Any]:
        if self.game["stock_count"] == 0:
            self.game = (await self.request({"type": "new_game"}))["game"]
        reply = await self.request(
            {
                "type": "action",
                "game_id": self.game["game_id"],
                "seq": self.game["seq"],
                "action": "draw",
            }
        )
        if "game" in reply:
            self.game = reply["game"]
        return reply


async def bystanders(players: list[Player], seconds: float) -> list[float]:
    times: list[float] = []
    stop = time.monotonic() + seconds

    async def play(p: Player) -> None:
        while time.monotonic() < stop:
            started = time.perf_counter()
            reply = await p.act()
            assert reply["type"] == "accepted", reply
            times.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.1)

    await asyncio.gather(*(play(p) for p in players))
    return times


def line(label: str, ms: list[float]) -> None:
    print(
        f"{label:<34} {len(ms):6d} acks  p50 {statistics.median(ms):7.1f}  "
        f"p99 {percentile(ms, 0.99):7.1f}  max {max(ms):7.1f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    async with throwaway_database() as url:
        settings = Settings(
            database_url=url,
            daily_secret="bench-slow-row-key-0123456789abcdefghijk",
            solver_workers=0,
            ws_rate_per_second=1000,
            register_per_minute=100_000,
            max_connections_per_address=1_000_000,
            daily_prepare_every_s=0,
            db_write_timeout_s=args.seconds + 5,
        )
        server = TestServer(create_app(settings), host="127.0.0.1")
        await server.start_server()
        base = f"http://127.0.0.1:{server.port}"
        try:
            async with aiohttp.ClientSession() as http:
                players = [Player(http, base, f"by{i}") for i in range(args.players)]
                victim = Player(http, base, "victim")
                await asyncio.gather(*(p.start() for p in [*players, victim]))
                line("bystanders, nothing locked", await bystanders(players, args.seconds))
                holder = await asyncpg.connect(url)
                transaction = holder.transaction()
                await transaction.start()
                await holder.execute(
                    "SELECT 1 FROM games WHERE id = $1 FOR UPDATE", victim.game["game_id"]
                )

                async def release_later() -> None:  # the lock lasts --seconds, whatever waits
                    await asyncio.sleep(args.seconds)
                    await transaction.rollback()
                    await holder.close()

                releaser = asyncio.create_task(release_later())
                victim_started = time.perf_counter()
                victim_task = asyncio.create_task(victim.act())
                during = await bystanders(players, args.seconds)
                await releaser
                reply = await victim_task
                waited = (time.perf_counter() - victim_started) * 1000
                line(f"bystanders, a row locked {args.seconds:.0f} s", during)
                print(f"the locked game's own action: {reply['type']} after {waited:.0f} ms")
                for p in [*players, victim]:
                    assert p.ws is not None
                    await p.ws.close()
        finally:
            await server.close()


if __name__ == "__main__":
    asyncio.run(main())
