"""Quick races under a steady arrival of players: waits, match sizes and rating gaps.

    python benchmarks/matchmaking.py --players 40 --rate 2 --duration 60

Runs two real servers on loopback (two app instances in this process, each with its own process
record, matcher loop and LISTEN connection, on one throw-away database on the PostgreSQL at
``TRIPEAKS_TEST_PG``). Players arrive at ``--rate`` a second, alternately on either server,
until ``--players`` have come; each asks for a quick race (Classic), takes its seat when matched,
plays its game out with a simple policy (removes a card when it can, else draws, for up to
``--moves`` actions, then resigns), waits for the results and asks again, until ``--duration``
seconds have passed since the first arrival; then it cancels if it is waiting (a wait cut short
there is not counted).

Prints: the queue waits (median, p95, max, s), the match sizes, the rating gap inside matches
(the shown ratings players had when they asked), and the checks: nobody was told of a match
while in a race, nobody sits in two races that overlap in time, nobody is left waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
from aiohttp.test_utils import TestServer

from server.bench import percentile, throwaway_database
from server.config import Settings
from server.web.app import create_app

SECRET = "bench-matchmaking-key-0123456789abcdefghij"


@dataclass
class Tally:
    """What the players saw."""

    waits_s: list[float] = field(default_factory=list)
    ratings: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(list))
    matched_in_race: int = 0
    races: int = 0


async def player(
    n: int, url: str, moves: int, deadline: float, tally: Tally, http: aiohttp.ClientSession
) -> None:
    async with http.post(f"{url}/api/v1/players", json={"name": f"Racer{n}"}) as resp:
        token = (await resp.json())["token"]
    async with http.ws_connect(f"{url.replace('http', 'ws')}/ws") as ws:
        await ws.send_json({"type": "hello", "token": token})
        await until(ws, "welcome")
        in_race = False
        while time.monotonic() < deadline:
            asked = time.monotonic()
            await ws.send_json({"type": "queue_join", "rules": "C", "id": "q"})
            waiting = await until(ws, "queue_waiting")
            assert waiting is not None, "no answer to queue_join"
            matched = await until(ws, "queue_matched", deadline=deadline)
            if matched is None:
                await ws.send_json({"type": "queue_cancel", "id": "c"})
                await until(ws, "queue_cancelled")
                return
            if in_race:
                tally.matched_in_race += 1
            tally.waits_s.append(time.monotonic() - asked)
            tally.ratings[matched["invite"]].append(waiting["rating"])
            in_race = True
            await ws.send_json({"type": "race_join", "invite": matched["invite"], "id": "j"})
            joined = await until(ws, "race")
            game = joined.get("game") if joined else None
            if game is None:
                go = await until(ws, "race_go")
                game = go["game"] if go else None
            if game is not None:
                await play(ws, game, moves)
            await until(ws, "race_results", deadline=time.monotonic() + 60)
            in_race = False
            tally.races += 1


RANKS = {
    r: i for i, r in enumerate(["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"])
}
RANKS["T"] = 9


def adjacent(card: str, waste: str | None) -> bool:
    """Whether ``card`` is one rank from the waste's top (Classic: no wrap from K to A)."""
    if waste is None:
        return False
    return abs(RANKS[card[:-1]] - RANKS[waste[:-1]]) == 1


async def play(ws: aiohttp.ClientWebSocketResponse, game: dict[str, Any], moves: int) -> None:
    """Remove a face-up card one rank from the waste when there is one, else draw, for up to
    ``moves`` actions; then resign a game still being played."""
    for _ in range(moves):
        if game["status"] != "playing":
            return
        removable = [
            pos
            for pos, card in enumerate(game["tableau"])
            if card not in (None, "down") and adjacent(card, game["waste"])
        ]
        message: dict[str, Any] = {"type": "action", "game_id": game["game_id"], "seq": game["seq"]}
        if removable:
            message |= {"action": "remove", "pos": removable[-1]}
        elif game["stock_count"] > 0:
            message["action"] = "draw"
        else:
            break
        await ws.send_json({**message, "id": "a"})
        reply = await until(ws, "accepted", "rejected")
        if reply is None or reply["type"] != "accepted":
            break
        game = reply["game"]
    if game["status"] == "playing":
        await ws.send_json({"type": "resign", "game_id": game["game_id"], "id": "r"})
        await until(ws, "game")


async def until(
    ws: aiohttp.ClientWebSocketResponse, *kinds: str, deadline: float | None = None
) -> dict[str, Any] | None:
    """The next message of one of ``kinds`` (others skipped), or None at ``deadline``."""
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        try:
            message = await ws.receive_json(timeout=left if left is not None else 60)
        except TimeoutError:
            return None
        if message["type"] in kinds:
            return message  # type: ignore[no-any-return]
        if message["type"] == "error" and message.get("id"):
            raise RuntimeError(f"refused: {message}")


async def run(args: argparse.Namespace, db: str) -> None:
    settings = Settings(
        database_url=db,
        daily_secret=SECRET,
        race_countdown_s=1.0,
        solver_workers=0,
        register_per_minute=10_000,  # every player registers from 127.0.0.1
    )
    servers = [TestServer(create_app(settings), host="127.0.0.1") for _ in range(2)]
    for server in servers:
        await server.start_server()
    tally = Tally()
    try:
        urls = [f"http://127.0.0.1:{s.port}" for s in servers]
        started = time.monotonic()
        deadline = started + args.duration
        async with aiohttp.ClientSession() as http:
            tasks = []
            for n in range(args.players):
                tasks.append(
                    asyncio.create_task(player(n, urls[n % 2], args.moves, deadline, tally, http))
                )
                await asyncio.sleep(1 / args.rate)
            await asyncio.gather(*tasks)
    finally:
        for server in servers:
            await server.close()
    conn = await asyncpg.connect(db)
    try:
        left = await conn.fetchval("SELECT count(*) FROM race_queue")
        sizes = [
            r["n"]
            for r in await conn.fetch(
                "SELECT count(*) AS n FROM race_players JOIN races ON races.id = race_id "
                "WHERE races.rated GROUP BY race_id"
            )
        ]
        overlaps = await conn.fetchval(
            "SELECT count(*) FROM race_players a JOIN races ra ON ra.id = a.race_id "
            "JOIN race_players b ON b.player_id = a.player_id AND b.race_id > a.race_id "
            "JOIN races rb ON rb.id = b.race_id "
            "WHERE rb.created_at < coalesce(ra.finished_at, 'infinity')"
        )
    finally:
        await conn.close()
    waits = sorted(tally.waits_s)
    gaps = [max(r) - min(r) for r in tally.ratings.values() if r]
    print(
        f"{args.players} players arriving at {args.rate}/s on 2 servers, {args.duration} s, "
        f"{len(sizes)} quick races, {len(waits)} matches of a player"
    )
    print(
        f"wait (s): median {statistics.median(waits):.2f}  p95 {percentile(waits, 0.95):.2f}  "
        f"max {waits[-1]:.2f}"
    )
    counts = collections.Counter(sizes)
    share = sum(c for s, c in counts.items() if s >= 4) / max(1, len(sizes))
    print(
        "match sizes: "
        + ", ".join(f"{s}: {counts[s]}" for s in sorted(counts))
        + f"  (4 or more: {share:.0%})"
    )
    print(
        f"rating gap inside matches: median {statistics.median(gaps):.0f}  max {max(gaps)}"
        if gaps
        else "rating gap: no match"
    )
    print(
        f"checks: matched while in a race {tally.matched_in_race}, players in overlapping "
        f"races {overlaps}, left waiting {left}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, default=40)
    parser.add_argument("--rate", type=float, default=2.0, help="arrivals per second")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of play")
    parser.add_argument("--moves", type=int, default=8, help="actions before resigning")
    args = parser.parse_args()
    async with throwaway_database() as db:
        await run(args, db)


if __name__ == "__main__":
    asyncio.run(main())
