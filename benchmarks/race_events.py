"""Race traffic with and without its events, on 1, 2 and 4 server processes, side by side.

    python benchmarks/race_events.py --processes 1,2,4 --tables 16 --racers 4 --seconds 10 \\
        [--tree before=/tmp/oldtree --tree after=.]

For each source tree (``--tree``, default this one) and process count a real server
(``tripeaks serve --workers N``: N processes sharing one port, so a room's racers land on
different processes) is started over a throw-away database on
the PostgreSQL at ``TRIPEAKS_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``)
and driven over websockets in two rounds, one after the other in the same run:

- **race**: ``--tables`` tables of ``--racers`` players; before the clock starts, at each table
  one player opens ``--games`` rooms, the others join, the host starts them (no countdown) and
  every racer is dealt their games; then every racer plays them one after the other, as fast as
  the acks come (a removal when one fits, else a draw, else a resignation). Every accepted
  action is published as ``race_progress`` to every process following the room; a race whose
  racers are all done finishes (``race_results``).
- **free**: the same number of players, each dealt ``--games`` free games before the clock and
  playing them the same way: the same commits, with no event.

Printed per round: actions stored per second (acks of actions and resignations), the
database's transactions committed per second (``pg_stat_database.xact_commit``, every
statement of the server's), ack latency, and for the race round the progress messages received;
the CPU the server's processes and the players' process (this one) used, in cores and in ms
per action stored (on a machine whose cores they share, a saturated players' process bounds
the rate whatever the server does); then the race/free ratio of actions stored per second.
Every target is on loopback; every round stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import secrets
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from server.bench import percentile, throwaway_database
from server.bench.process import cpu_s, cpu_since, serve_tree
from server.engine.cards import Card, Rank
from server.storage.events import Outgoing, PgPublisher, room_channel

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Round:
    """What one round measured."""

    stored: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    progress: int = 0
    races: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    #: CPU seconds the server's processes (None: unknown) and the players' process used.
    server_cpu_s: float | None = None
    client_cpu_s: float = 0.0


class Client:
    """One player's websocket: requests matched to their replies by ``id``; pushed messages
    (``race_go``, ``race_results``) queued, ``race_progress`` counted."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, player_id: int, stats: Round) -> None:
        self.ws = ws
        self.player_id = player_id
        self.stats = stats
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.pushed: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            if raw.type is not aiohttp.WSMsgType.TEXT:
                break
            message = json.loads(raw.data)
            future = self._waiting.pop(message.get("id", -1), None)
            if future is not None:
                if not future.done():
                    future.set_result(message)
            elif message.get("type") == "race_progress":
                self.stats.progress += 1
            elif message.get("type") in ("race_go", "race_results"):
                self.pushed.put_nowait(message)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("the websocket closed"))

    async def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        await self.ws.send_str(json.dumps({**request, "id": request_id}))
        return await asyncio.wait_for(future, 60)

    async def wait_push(self, kind: str, deadline: float) -> dict[str, Any] | None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                message = await asyncio.wait_for(self.pushed.get(), left)
            except TimeoutError:
                return None
            if message["type"] == kind:
                return message

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader


async def connect(http: aiohttp.ClientSession, base: str, stats: Round) -> Client:
    name = f"race{secrets.token_hex(5)}"
    async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
        body = await resp.json()
        if resp.status != 201:
            raise RuntimeError(f"registration refused: {resp.status} {body}")
    ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws", max_msg_size=1 << 20)
    client = Client(ws, body["id"], stats)
    welcome = await client.ask({"type": "hello", "token": body["token"]})
    if welcome.get("type") != "welcome":
        raise RuntimeError(f"hello refused: {welcome}")
    return client


def _rank(card: str) -> int:
    return int(Card.parse(card).rank)


def next_action(state: dict[str, Any]) -> dict[str, Any]:
    """A removal when one fits (the first), else a draw, else a resignation."""
    waste = _rank(state["waste"])
    wrap = state["rules"] == "E"
    for pos, card in enumerate(state["tableau"]):
        if card is None or card == "down":
            continue
        diff = abs(_rank(card) - waste)
        if diff == 1 or (wrap and diff == int(Rank.KING) - int(Rank.ACE)):
            return {"type": "action", "action": "remove", "pos": pos}
    if state["stock_count"]:
        return {"type": "action", "action": "draw"}
    return {"type": "resign"}


async def play(client: Client, state: dict[str, Any], deadline: float, stats: Round) -> None:
    """Play ``state``'s game as fast as the acks come until it ends or ``deadline``."""
    while state["status"] == "playing" and time.monotonic() < deadline:
        request = {"game_id": state["game_id"], **next_action(state)}
        if request["type"] == "action":
            request["seq"] = state["seq"]
        started = time.perf_counter()
        reply = await client.ask(request)
        stats.latencies_ms.append((time.perf_counter() - started) * 1000)
        if reply["type"] == "accepted" or (reply["type"] == "game" and request["type"] == "resign"):
            stats.stored += 1
            state = reply["game"]
        elif reply["type"] == "rejected":
            state = reply["game"]
        else:
            stats.errors[reply.get("code", reply["type"])] += 1
            return


async def race_games(clients: list[Client], games: int, stats: Round) -> list[list[dict[str, Any]]]:
    """Open ``games`` rooms at one table, seat every client, start them (no countdown) and
    return each client's race games, dealt (``race_go``)."""
    host, *others = clients
    for _ in range(games):
        room = await host.ask({"type": "race_create", "time_limit_s": 600})
        if room["type"] != "race":
            raise RuntimeError(f"race_create refused: {room}")
        invite = room["race"]["invite"]
        for other in others:
            joined = await other.ask({"type": "race_join", "invite": invite})
            if joined["type"] != "race":
                raise RuntimeError(f"race_join refused: {joined}")
        started = await host.ask({"type": "race_start", "invite": invite})
        if started["type"] != "race":
            raise RuntimeError(f"race_start refused: {started}")
        stats.races += 1
    dealt: list[list[dict[str, Any]]] = []
    for client in clients:
        mine = []
        for _ in range(games):
            go = await client.wait_push("race_go", time.monotonic() + 120)
            if go is None:
                raise RuntimeError("a race's deal was not released within 120 s")
            mine.append(go["game"])
        dealt.append(mine)
    return dealt


async def free_games(client: Client, games: int) -> list[dict[str, Any]]:
    """``games`` new free games of one client."""
    dealt = []
    for _ in range(games):
        reply = await client.ask({"type": "new_game"})
        if reply["type"] != "game":
            raise RuntimeError(f"new_game refused: {reply}")
        dealt.append(reply["game"])
    return dealt


async def player(
    client: Client, games: list[dict[str, Any]], go: asyncio.Event, until: list[float]
) -> None:
    """Play the games dealt, one after the other, until the round's deadline."""
    await go.wait()
    for game in games:
        if time.monotonic() >= until[0]:
            return
        await play(client, game, until[0], client.stats)
    client.stats.errors["out_of_games"] += 1


async def xact_commit(admin: asyncpg.Connection, database: str) -> int:
    value = await admin.fetchval(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database
    )
    return int(value)


async def run_round(
    kind: str,
    base: str,
    admin: asyncpg.Connection,
    database: str,
    args: argparse.Namespace,
    server_pid: int,
) -> tuple[Round, float, float]:
    """One round: connect every player, then play for ``args.seconds``; returns its stats
    (with the CPU seconds the server's processes and this one, the players', used meanwhile),
    the seconds played and the database's transactions committed per second."""
    stats = Round()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        players = args.tables * args.racers
        clients: list[Client] = []
        for _ in range(0, players, 50):
            clients += await asyncio.gather(
                *(connect(http, base, stats) for _ in range(min(50, players - len(clients))))
            )
        # Every game is dealt before the clock starts: the round measures play alone.
        if kind == "race":
            tables = [clients[i : i + args.racers] for i in range(0, players, args.racers)]
            dealt = [
                g
                for table in await asyncio.gather(
                    *(race_games(t, args.games, stats) for t in tables)
                )
                for g in table
            ]
        else:
            dealt = await asyncio.gather(*(free_games(c, args.games) for c in clients))
        await asyncio.sleep(1)  # the deals' own room reads and sweeps settle
        go = asyncio.Event()
        until = [0.0]
        tasks = [
            asyncio.create_task(player(c, games, go, until))
            for c, games in zip(clients, dealt, strict=True)
        ]
        commits_before = await xact_commit(admin, database)
        server_before, client_before = cpu_s(server_pid), time.process_time()
        began = time.monotonic()
        until[0] = began + args.seconds
        go.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        spent = time.monotonic() - began
        stats.client_cpu_s = time.process_time() - client_before
        stats.server_cpu_s = cpu_since(server_pid, server_before)
        commits = (await xact_commit(admin, database) - commits_before) / spent
        for result in results:
            if isinstance(result, BaseException):
                stats.errors[type(result).__name__] += 1
        await asyncio.gather(*(c.close() for c in clients))
    return stats, spent, commits


def show(title: str, stats: Round, spent: float, commits: float) -> float:
    rate = stats.stored / spent
    lat = stats.latencies_ms
    median = statistics.median(lat) if lat else float("nan")
    print(
        f"  {title:5} {rate:8,.0f} actions stored/s  {commits:8,.0f} db commits/s  "
        f"ack p50 {median:6.1f} ms  p99 {percentile(lat, 0.99):6.1f} ms"
        + (f"  progress received {stats.progress:,}" if stats.races else "")
        + (f"  errors {dict(stats.errors)}" if stats.errors else "")
    )
    server = stats.server_cpu_s
    if server is not None and stats.stored:
        print(
            f"        CPU: server {server / spent:4.2f} cores, "
            f"{server / stats.stored * 1000:5.2f} ms per action stored; "
            f"players {stats.client_cpu_s / spent:4.2f} cores, "
            f"{stats.client_cpu_s / stats.stored * 1000:5.2f} ms per action"
        )
    return rate


async def measure(
    name: str, tree: Path, processes: int, args: argparse.Namespace
) -> tuple[float, float]:
    """Both rounds on ``processes`` server processes of ``tree``; returns (race, free) actions
    stored/s."""
    async with throwaway_database(migrated=False) as url:
        database = url.rsplit("/", 1)[1].split("?", 1)[0]
        env = {
            "TRIPEAKS_RACE_COUNTDOWN_S": "0",
            "TRIPEAKS_RACE_MAX_ROOMS": str(args.games + 1),
            **dict(kv.split("=", 1) for kv in args.env),
        }
        async with serve_tree(tree, url, processes, env, args.server_log) as server:
            base = server.base
            admin = await asyncpg.connect(url)
            try:
                players = args.tables * args.racers
                print(f"\n=== {name}: {processes} process(es), {players} players", end="")
                print(f" ({args.tables} x {args.racers})")
                rates: dict[str, float] = {}
                for kind in args.order.split(","):
                    stats, spent, commits = await run_round(
                        kind, base, admin, database, args, server.pid
                    )
                    rates[kind] = show(kind, stats, spent, commits)
                print(f"  race / free: {rates['race'] / rates['free']:.2f}x")
                return rates["race"], rates["free"]
            finally:
                await admin.close()


#: The commit-path rounds (``--commits``): a NOTIFY inside each committing transaction (as the
#: group commit did), the events handed to a per-process publisher after the commit (as now),
#: and no event at all.
COMMIT_MODES = ("inside", "after", "none")


async def commit_round(
    url: str, mode: str, processes: int, writers: int, seconds: float
) -> tuple[float, int, int]:
    """``writers`` connections committing one game-row update each, in a loop, for ``seconds``,
    spread over ``processes`` simulated processes (each with its own LISTENing connection on
    its writers' room channels and, in ``after`` mode, its own :class:`PgPublisher`); returns
    commits per second, the notifications the listeners received and the events the
    publishers dropped."""
    conns = [await asyncpg.connect(url) for _ in range(writers)]
    listeners = [await asyncpg.connect(url) for _ in range(processes)]
    publishers = [PgPublisher(url) for _ in range(processes)]
    heard = [0]

    def hear(*_: object) -> None:
        heard[0] += 1

    for i in range(writers):
        await listeners[i % processes].add_listener(room_channel(i + 1), hear)
    for publisher in publishers:
        await publisher.start()
    # Each payload its own (as a racer's progress is, by its seq): PostgreSQL sends one
    # notification for equal ones in one transaction.
    payload = '{{"kind":"race_progress","race_id":{},"player_id":1,"game_id":1,"seq":{}}}'
    inside = (
        "WITH u AS (UPDATE bench_games SET seq = seq + 1 WHERE id = $1 RETURNING id) "
        "SELECT pg_notify($2, $3) FROM u"
    )
    alone = "UPDATE bench_games SET seq = seq + 1 WHERE id = $1"
    commits = [0]
    deadline = time.monotonic() + seconds

    async def writer(i: int) -> None:
        conn, channel = conns[i], room_channel(i + 1)
        seq = 0
        while time.monotonic() < deadline:
            seq += 1
            if mode == "inside":
                await conn.execute(inside, i + 1, channel, payload.format(i + 1, seq))
            else:
                await conn.execute(alone, i + 1)
                if mode == "after":
                    publishers[i % processes].send(Outgoing(channel, payload.format(i + 1, seq)))
            commits[0] += 1

    began = time.monotonic()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    spent = time.monotonic() - began
    for publisher in publishers:
        await publisher.stop()
    while True:  # the listeners read what is still on their way (until it stops coming)
        before = heard[0]
        await asyncio.sleep(1.0)
        if heard[0] == before:
            break
    for conn in conns + listeners:
        await conn.close()
    return commits[0] / spent, heard[0], sum(p.dropped for p in publishers)


async def commits_main(args: argparse.Namespace) -> None:
    """The commit path alone, on the PostgreSQL the benchmarks use: every mode of
    :data:`COMMIT_MODES` for each process count, side by side."""
    print(f"commit path: {args.writers} writers, {args.seconds:g} s a round")
    print("processes  mode    commits/s  notifications  dropped  vs none")
    async with throwaway_database(migrated=False) as url:
        admin = await asyncpg.connect(url)
        try:
            await admin.execute("CREATE TABLE bench_games (id int PRIMARY KEY, seq int NOT NULL)")
            await admin.execute(
                "INSERT INTO bench_games SELECT i, 0 FROM generate_series(1, $1) AS i",
                args.writers,
            )
        finally:
            await admin.close()
        for processes in (int(n) for n in args.processes.split(",")):
            rates = {}
            for mode in COMMIT_MODES:
                rate, heard, dropped = await commit_round(
                    url, mode, processes, args.writers, args.seconds
                )
                rates[mode] = rate
                print(f"{processes:9}  {mode:6}  {rate:9,.0f}  {heard:13,}  {dropped:7,}", end="")
                print(f"  {rate / rates['none']:.2f}x" if "none" in rates else "")
            for mode in ("inside", "after"):
                print(f"{processes:9}  {mode} / none: {rates[mode] / rates['none']:.2f}x")


async def main_async(args: argparse.Namespace) -> None:
    if args.commits:
        await commits_main(args)
        return
    trees = [(name, Path(tree)) for name, tree in (t.split("=", 1) for t in args.tree)]
    summary = []
    for processes in (int(n) for n in args.processes.split(",")):
        for name, tree in trees:
            race, free = await measure(name, tree, processes, args)
            summary.append((name, processes, race, free))
    print("\ntree      processes  race actions/s  free actions/s  race/free")
    for name, processes, race, free in summary:
        print(f"{name:8}  {processes:9}  {race:14,.0f}  {free:14,.0f}  {race / free:8.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", default="1,2,4", help="server process counts, in turn")
    parser.add_argument(
        "--commits", action="store_true", help="measure the commit path alone (no server)"
    )
    parser.add_argument("--writers", type=int, default=32, help="--commits: writing connections")
    parser.add_argument("--tables", type=int, default=16, help="race tables (rooms at once)")
    parser.add_argument("--racers", type=int, default=4, help="racers per table")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each round")
    parser.add_argument("--games", type=int, default=8, help="games dealt to each player")
    parser.add_argument("--order", default="race,free", help="the rounds, in this order")
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=PATH: a source tree (repeatable)"
    )
    parser.add_argument("--server-log", type=Path, help="append the servers' output to this file")
    parser.add_argument(
        "--env", action="append", default=[], help="NAME=VALUE for the server (repeatable)"
    )
    args = parser.parse_args()
    args.tree = [
        f"{name}={Path(tree).resolve()}" for name, tree in (t.split("=", 1) for t in args.tree)
    ]
    args.tree = args.tree or [f"this={ROOT}"]
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
