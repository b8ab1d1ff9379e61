"""Simulated players over real websockets: each registers, says hello and plays legal actions
(removals, draws, some undos). :func:`crowd` runs many at once, the clock starting when the
last one is connected; :func:`run_players` plays as fast as the acks arrive."""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from server.bench.process import cpu_s, cpu_since
from server.bench.stats import Stats
from server.engine.cards import Card, Rank


def _rank(card: str) -> int:
    return int(Card.parse(card).rank)


def choose_action(state: dict[str, Any], rng: random.Random, undo_share: float) -> dict[str, Any]:
    """A legal action for a STATE: a removal when one fits (random among them), else a draw;
    now and then an undo."""
    if state["can_undo"] and rng.random() < undo_share:
        return {"action": "undo"}
    waste = _rank(state["waste"])
    wrap = state["rules"] == "E"
    options = []
    for pos, card in enumerate(state["tableau"]):
        if card is None or card == "down":
            continue
        diff = abs(_rank(card) - waste)
        if diff == 1 or (wrap and diff == int(Rank.KING) - int(Rank.ACE)):
            options.append(pos)
    if options:
        return {"action": "remove", "pos": rng.choice(options)}
    if state["stock_count"]:
        return {"action": "draw"}
    return {"action": "undo"}


async def send_action(
    ws: aiohttp.ClientWebSocketResponse, state: dict[str, Any], rng: random.Random
) -> None:
    """Send a legal action (:func:`choose_action`, an undo now and then) for a game's STATE."""
    message = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
    message.update(choose_action(state, rng, undo_share=0.05))
    await ws.send_str(json.dumps(message))


@dataclass
class Start:
    """The moment every simulated player is connected: play (and the clock) starts then."""

    waiting: int
    go: asyncio.Event = field(default_factory=asyncio.Event)
    deadline: float = 0.0
    seconds: float = 0.0
    pid: int | None = None
    cpu_at_go: float | None = None
    #: Load generators in other processes to start with (a :class:`multiprocessing.Barrier`
    #: they all wait at once their players are connected), or None.
    barrier: Any = None

    def ready(self) -> None:
        """One player is connected (or gave up); the last one starts the clock (once every
        other process's players are connected too, given a barrier)."""
        self.waiting -= 1
        if self.waiting == 0:
            if self.barrier is None:
                self._go()
            else:
                self._all_ready = asyncio.get_running_loop().create_task(self._go_together())

    async def _go_together(self) -> None:
        await asyncio.to_thread(self.barrier.wait)
        self._go()

    def _go(self) -> None:
        self.deadline = time.monotonic() + self.seconds
        self.cpu_at_go = cpu_s(self.pid) if self.pid else None
        self.go.set()


class Refused(Exception):
    """The server refused a simulated player (registration or hello); the message says why."""


#: Longest a simulated player keeps coming back when told ``server_busy`` (s).
PATIENCE_S = 120.0


async def connect_player(
    http: aiohttp.ClientSession, base: str, prefix: str, stats: Stats | None = None
) -> aiohttp.ClientWebSocketResponse:
    """Register a new player, open a websocket and say hello; returns the open socket. Told
    ``server_busy`` (a crowd arriving), it comes back when told to, as a real client does, for
    up to :data:`PATIENCE_S`; each such return is counted in ``stats.busy_retries``.

    Raises:
        Refused: ``register_<status>`` or the hello's error code.
    """
    deadline = time.monotonic() + PATIENCE_S
    name = f"{prefix}{secrets.token_hex(5)}"
    while True:
        async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
            if resp.status == 201:
                token = (await resp.json())["token"]
                break
            busy = resp.status == 503 and "Retry-After" in resp.headers
            if not busy or time.monotonic() > deadline:
                raise Refused(f"register_{resp.status}")
            wait_s = float(resp.headers["Retry-After"])
        if stats is not None:
            stats.busy_retries += 1
        await asyncio.sleep(wait_s)
    ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws", max_msg_size=1 << 20)
    try:
        reply = await ask(ws, {"type": "hello", "token": token}, stats, deadline)
        if reply.get("type") != "welcome":
            raise Refused(reply.get("code", "hello_refused"))
    except BaseException:
        await ws.close()
        raise
    return ws


async def ask(
    ws: aiohttp.ClientWebSocketResponse,
    request: dict[str, Any],
    stats: Stats | None,
    deadline: float | None = None,
) -> dict[str, Any]:
    """Send a request and return its reply, coming back when told ``server_busy`` (after the
    ``retry_after_ms`` it says; each return counted in ``stats.busy_retries``) until
    ``deadline`` (monotonic s; by default :data:`PATIENCE_S` from now)."""
    if deadline is None:
        deadline = time.monotonic() + PATIENCE_S
    while True:
        await ws.send_json(request)
        reply: dict[str, Any] = await ws.receive_json()
        if reply.get("code") != "server_busy" or time.monotonic() > deadline:
            return reply
        if stats is not None:
            stats.busy_retries += 1
        await asyncio.sleep(reply.get("retry_after_ms", 1000) / 1000)


async def start_game(
    ws: aiohttp.ClientWebSocketResponse, kind: str, stats: Stats
) -> dict[str, Any] | None:
    """Ask for a game (``kind``: ``new_game`` or ``join_daily``) and return its STATE, counted
    in ``stats.games``; None when refused (the code counted in ``stats.errors``)."""
    reply = await ask(ws, {"type": kind}, stats)
    if reply.get("type") != "game":
        stats.errors[reply.get("code", "bad_reply")] += 1
        return None
    stats.games += 1
    game: dict[str, Any] = reply["game"]
    return game


async def _player(
    http: aiohttp.ClientSession, base: str, start: Start, mode: str, seed: int, stats: Stats
) -> None:
    rng = random.Random(seed)
    try:
        ws = await connect_player(http, base, "load", stats)
    except Refused as refused:
        stats.errors[str(refused)] += 1
        return
    finally:
        start.ready()
    async with ws:
        await start.go.wait()
        state: dict[str, Any] | None = None
        while time.monotonic() < start.deadline:
            if state is None or state["status"] != "playing":
                kind = "join_daily" if mode == "daily" and stats.games == 0 else "new_game"
                state = await start_game(ws, kind, stats)
                if state is None:
                    return
                if state["status"] != "playing":
                    state = None
                    continue
            message = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
            message.update(choose_action(state, rng, undo_share=0.05))
            text = json.dumps(message)
            started = time.perf_counter()
            await ws.send_str(text)
            raw = await ws.receive()
            elapsed = (time.perf_counter() - started) * 1000
            if raw.type is not aiohttp.WSMsgType.TEXT:
                stats.errors[f"ws_{raw.type.name.lower()}"] += 1
                return
            reply = json.loads(raw.data)
            stats.latencies_ms.append(elapsed)
            stats.request_bytes.append(len(text))
            stats.reply_bytes.append(len(raw.data))
            stats.outcomes[reply["type"]] += 1
            if reply["type"] in ("accepted", "rejected"):
                state = reply["game"]
            else:
                stats.errors[reply.get("code", "bad_reply")] += 1
                state = None


PlayerLoop = Callable[[aiohttp.ClientSession, Start, int, Stats], Awaitable[None]]


async def crowd(
    players: int,
    seconds: float,
    pid: int | None,
    player: PlayerLoop,
    first_seed: int = 0,
    barrier: Any = None,
) -> tuple[Stats, float]:
    """Run ``players`` copies of ``player`` (each with its seed, from ``first_seed``, and its
    stats), the clock starting when the last one is connected (and, given a ``barrier``, when
    every other load process's are too); their merged stats (with the server's CPU time while
    they played, given its ``pid``) and the time spent playing (s)."""
    stats = Stats()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        start = Start(waiting=players, seconds=seconds, pid=pid, barrier=barrier)
        per_player = [Stats() for _ in range(players)]
        results = await asyncio.gather(
            *(player(http, start, first_seed + seed, s) for seed, s in enumerate(per_player)),
            return_exceptions=True,
        )
        spent = time.monotonic() - (start.deadline - seconds)
        if pid:
            stats.server_cpu_s = cpu_since(pid, start.cpu_at_go)
    for result in results:
        if isinstance(result, BaseException):
            stats.errors[type(result).__name__] += 1
    for s in per_player:
        stats.merge(s)
    return stats, spent


async def run_players(
    base: str, players: int, seconds: float, mode: str, pid: int | None = None
) -> tuple[Stats, float]:
    """Run ``players`` simulated players for ``seconds``; returns their stats and the time
    actually spent playing (s).

    Every player registers and connects first; the clock starts when the last one is
    connected, so the figures are those of steady play, not of the ramp-up. With the server's
    ``pid``, the CPU time it used while they played is recorded too."""

    def player(http: aiohttp.ClientSession, start: Start, seed: int, stats: Stats) -> Any:
        return _player(http, base, start, mode, seed, stats)

    return await crowd(players, seconds, pid, player)
