"""PostgreSQL restarted under play: every request meanwhile gets a clear ``unavailable`` error,
nothing half-written remains, and the same server process and sockets play on once the
database is back (race events included)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from server.bench.crowd import choose_action
from server.bench.process import free_port
from tests.e2e.logs import agrees, checked_games
from tests.e2e.test_cli import _env, _start
from tests.helpers import WAIT_S, WsPlayer
from tests.pg import PrivatePostgres

PLAYERS = 6
#: Longest a reply may take, database down or not.
REPLY_BOUND_S = 5.0
#: ``unavailable`` replies each player must get to requests sent while the database is down.
OUTAGE_ERRORS = 3
#: Actions each player must get accepted once the database is back.
ACCEPTED_AFTER = 10
RACE_CODE = "TP1-E-AAAAAAB"


class Phase(StrEnum):
    """Where the database is, as the test last set it."""

    UP = "up"
    STOPPING = "stopping"
    DOWN = "down"
    STARTING = "starting"
    BACK = "back"


@dataclass
class World:
    """What the players share: the phase, and a signal to stop."""

    phase: Phase = Phase.UP
    stop: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Player:
    """One websocket player of free games, playing one request at a time."""

    seed: int
    ws: aiohttp.ClientWebSocketResponse
    state: dict[str, Any] | None = None
    acked: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: (phase when the request was sent, reply type or error code) → count
    replies: Counter[tuple[Phase, str]] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    resumed: dict[str, Any] | None = None
    _next_id: int = 0

    async def ask(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """Send a request and return its reply; None (and a problem noted) when the socket
        closed or no reply came within :data:`REPLY_BOUND_S`."""
        self._next_id += 1
        rid = f"p{self.seed}-{self._next_id}"
        started = time.monotonic()
        await self.ws.send_str(json.dumps({**message, "id": rid}))
        try:
            msg = await asyncio.wait_for(self.ws.receive(), REPLY_BOUND_S)
        except TimeoutError:
            self.problems.append(f"no reply to {message['type']} within {REPLY_BOUND_S} s")
            return None
        self.slowest_s = max(self.slowest_s, time.monotonic() - started)
        if msg.type is not aiohttp.WSMsgType.TEXT:
            self.problems.append(f"socket ended: {msg.type.name} {msg.data!r}")
            return None
        reply: dict[str, Any] = json.loads(msg.data)
        if reply.get("id") != rid:
            self.problems.append(f"unexpected message {reply}")
            return None
        return reply

    def accept(self, game: dict[str, Any]) -> None:
        """Take ``game`` as the last acknowledged state of the current game."""
        self.state = game
        self.acked[game["game_id"]] = game


async def _play(player: Player, world: World) -> None:
    """Play free games until told to stop; retry the same request after an error."""
    rng = random.Random(player.seed)
    pending: dict[str, Any] | None = None
    while not world.stop.is_set():
        if world.phase is Phase.BACK and player.resumed is None and player.state is not None:
            if not await _resume(player, world, pending):
                return
            pending = None
            continue
        if player.state is None or player.state["status"] != "playing":
            message: dict[str, Any] = {"type": "new_game"}
        else:
            if pending is None:
                state = player.state
                pending = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
                pending.update(choose_action(state, rng, undo_share=0.1))
            message = pending
        phase = world.phase
        reply = await player.ask(message)
        if reply is None:
            return
        kind = reply["code"] if reply["type"] == "error" else reply["type"]
        player.replies[phase, kind] += 1
        if reply["type"] == "error":
            # (outcome_unknown: an action in flight when the database went; the retry of the
            # same action resolves it, as an exact repeat if it was stored.)
            told = reply["code"] in ("unavailable", "outcome_unknown")
            if not told or "game database" not in reply["message"]:
                player.problems.append(f"{phase}: unexpected error {reply}")
            await asyncio.sleep(0.05)
            continue
        down_throughout = phase is Phase.DOWN and world.phase is Phase.DOWN
        if down_throughout and reply["type"] != "rejected":  # a refusal changes nothing
            player.problems.append(f"answered with the database down: {reply}")
        if reply["type"] in ("accepted", "rejected", "game"):
            player.accept(reply["game"])
            pending = None
        else:
            player.problems.append(f"unexpected reply {reply}")


async def _resume(player: Player, world: World, pending: dict[str, Any] | None) -> bool:
    """Once the database is back: resume the current game, which must be at the last
    acknowledged state (or one action on, when the action in flight at the shutdown was
    committed though its reply was an error)."""
    assert player.state is not None
    last = player.state
    reply = await player.ask({"type": "resume", "game_id": last["game_id"]})
    if reply is None:
        return False
    player.replies[world.phase, reply.get("code", reply["type"])] += 1
    if reply["type"] != "game":
        player.problems.append(f"resume after the restart failed: {reply}")
        return False
    game = reply["game"]
    player.resumed = game
    at_last = game["seq"] == last["seq"] and _same_position(game, last)
    committed_in_flight = pending is not None and game["seq"] == last["seq"] + 1
    if not (at_last or committed_in_flight):
        player.problems.append(f"resumed at {game['seq']}, last acknowledged {last['seq']}")
    player.accept(game)
    return True


def _same_position(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("tableau", "waste", "stock_count", "score", "moves", "undos", "status")
    return all(a[k] == b[k] for k in keys)


def outage_env(port: int, tmp_path: Path, url: str, **extra: str) -> dict[str, str]:
    """The environment of a server on ``port`` over the database at ``url`` for a test of an
    outage under play: fast requests allowed, no solver, no sweep of its own (``extra`` on
    top)."""
    return _env(
        TRIPEAKS_PORT=str(port),
        TRIPEAKS_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=url,
        TRIPEAKS_DAILY_SECRET="restart-daily-key-0123456789abcdefgh",
        TRIPEAKS_WS_RATE_PER_SECOND="10000",
        TRIPEAKS_SOLVER_WORKERS="0",
        TRIPEAKS_RACE_SWEEP_S="60",  # no database use of its own between the test's steps
        **extra,
    )


async def signed_in_players(
    http: aiohttp.ClientSession, base: str, count: int, name: str
) -> list[Player]:
    """``count`` new players (named ``name`` and their seed), each with a websocket said hello
    on."""
    players = []
    for seed in range(count):
        token = await _register(http, base, f"{name}{seed}")
        ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws")
        await ws.send_json({"type": "hello", "token": token})
        assert (await ws.receive_json(timeout=REPLY_BOUND_S))["type"] == "welcome"
        players.append(Player(seed, ws))
    return players


async def _health(
    http: aiohttp.ClientSession, base: str, path: str = "/readyz"
) -> tuple[int, dict[str, Any]]:
    async with http.get(f"{base}{path}", timeout=aiohttp.ClientTimeout(total=10)) as resp:
        body: dict[str, Any] = await resp.json()
        return resp.status, body


async def _until(predicate: Any, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _register(http: aiohttp.ClientSession, base: str, name: str) -> str:
    async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
        assert resp.status == 201, await resp.text()
        token: str = (await resp.json())["token"]
        return token


async def _connect(http: aiohttp.ClientSession, base: str, name: str) -> WsPlayer:
    token = await _register(http, base, name)
    ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws")
    player = WsPlayer(ws)
    welcome = await player.request({"type": "hello", "token": token})
    assert welcome["type"] == "welcome", welcome
    player.player_id = welcome["player"]["id"]
    return player


async def _race(host: WsPlayer, guest: WsPlayer) -> dict[str, Any]:
    """Open a race of the two and return the host's game once the deal is out."""
    created = await host.request({"type": "race_create", "code": RACE_CODE, "time_limit_s": 600})
    invite = created["race"]["invite"]
    joined = await guest.request({"type": "race_join", "invite": invite})
    assert joined["type"] == "race", joined
    started = await host.request({"type": "race_start", "invite": invite})
    assert started["type"] == "race", started
    game: dict[str, Any] = (await host.until("race_go"))["game"]
    await guest.until("race_go")
    return game


async def _host_step(host: WsPlayer, game: dict[str, Any]) -> dict[str, Any]:
    """One race action that never ends the game: a draw, or the undo of the last draw."""
    action = "undo" if game["can_undo"] else "draw"
    reply = await host.act(game, action)
    assert reply["type"] == "accepted", reply
    accepted: dict[str, Any] = reply["game"]
    return accepted


async def _progress_after(guest: WsPlayer, host_id: int, seq: int, within_s: float) -> bool:
    """Whether the guest is told of a host's race action with a seq above ``seq`` in time."""
    deadline = time.monotonic() + within_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            message = await asyncio.wait_for(guest.recv(), left)
        except TimeoutError:
            return False
        if (
            message["type"] == "race_progress"
            and message["player_id"] == host_id
            and message["seq"] > seq
        ):
            return True
    return False


async def test_database_restart_under_play_errors_clearly_and_play_resumes(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    port = free_port()
    env = outage_env(port, tmp_path, private_postgres.url, TRIPEAKS_RACE_COUNTDOWN_S="0.2")
    proc = _start(env, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    world = World()
    tasks: list[asyncio.Task[None]] = []
    try:
        async with aiohttp.ClientSession() as http:
            host = await _connect(http, base, "Host")
            guest = await _connect(http, base, "Guest")
            race_game = await _race(host, guest)
            race_game = await _host_step(host, race_game)
            assert await _progress_after(guest, host.player_id, 0, REPLY_BOUND_S)

            players = await signed_in_players(http, base, PLAYERS, "Restart")

            # A restart while nobody plays: the pooled connections are all dead afterwards,
            # and the first requests must not be the ones to find out.
            await asyncio.to_thread(private_postgres.stop, "fast")
            await asyncio.to_thread(private_postgres.start)
            tasks = [asyncio.create_task(_play(p, world)) for p in players]

            def accepted(phase: Phase) -> list[int]:
                return [p.replies[phase, "accepted"] for p in players]

            await _until(lambda: min(accepted(Phase.UP)) >= 10, WAIT_S, "play to get going")
            assert (await _health(http, base))[0] == 200

            # A real shutdown, while every player has an action on its way.
            world.phase = Phase.STOPPING
            await asyncio.to_thread(private_postgres.stop, "fast")
            world.phase = Phase.DOWN

            def outage_errors() -> list[int]:
                return [p.replies[Phase.DOWN, "unavailable"] for p in players]

            await _until(
                lambda: min(outage_errors()) >= OUTAGE_ERRORS or any(t.done() for t in tasks),
                WAIT_S,
                "every player to be told the database is unavailable",
            )
            status, body = await _health(http, base)
            assert (status, body["database"]) == (503, "unreachable")
            # Not ready, but alive: an orchestrator must not restart it for the outage.
            assert await _health(http, base, "/healthz") == (
                200,
                {"status": "ok", "database": "unreachable"},
            )
            assert proc.poll() is None, "the server died with its database"

            world.phase = Phase.STARTING
            await asyncio.to_thread(private_postgres.start)
            world.phase = Phase.BACK
            await _until(
                lambda: min(accepted(Phase.BACK)) >= ACCEPTED_AFTER or any(t.done() for t in tasks),
                WAIT_S,
                "play to resume",
            )
            assert (await _health(http, base))[0] == 200

            # Race events cross again once the event listener has reconnected.
            seq_before = race_game["seq"]
            crossed = False
            deadline = time.monotonic() + WAIT_S
            while not crossed and time.monotonic() < deadline:
                race_game = await _host_step(host, race_game)
                crossed = await _progress_after(guest, host.player_id, seq_before, 0.5)
            assert crossed, "race progress never crossed after the database restart"

            world.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 2 * REPLY_BOUND_S)
            for p in players:
                await p.ws.close()
            await host.close()
            await guest.close()
    finally:
        world.stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        alive = proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        try:
            code: int | None = proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            code = None
    log = (tmp_path / "server.log").read_text()
    assert alive, f"the server exited:\n{log[-3000:]}"
    assert code == 0, f"the server did not stop cleanly:\n{log[-3000:]}"

    for p in players:
        assert p.problems == [], (p.seed, p.problems[:5])
        assert p.replies[Phase.DOWN, "unavailable"] >= OUTAGE_ERRORS, p.replies
        assert p.replies[Phase.UP, "unavailable"] == 0, p.replies
        assert p.replies[Phase.BACK, "unavailable"] == 0, p.replies
        assert p.replies[Phase.BACK, "accepted"] >= ACCEPTED_AFTER, p.replies
        assert p.resumed is not None
        assert p.slowest_s < REPLY_BOUND_S

    conn = await asyncpg.connect(private_postgres.url)
    try:
        acked = {gid: s for p in players for gid, s in p.acked.items()}
        games = await checked_games(conn)  # no gap, no duplicate, each row agrees with its log
        assert set(acked) <= {g.row["id"] for g in games}
        for stored in games:
            # ... each player's game is where its last reply left it ...
            last = acked.get(stored.row["id"])
            if last is not None:
                assert stored.row["seq"] == last["seq"], (stored.row["id"], last["seq"])
                assert agrees(stored.replayed, last)
            # ... after resuming, once the database was back, from a state that was stored.
            for resumed in (p.resumed for p in players if p.resumed is not None):
                if resumed["game_id"] == stored.row["id"]:
                    assert agrees(stored.replay_to(resumed["seq"]), resumed)
        lingering = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"
        )
        assert lingering == 0
    finally:
        await conn.close()
