"""The primary's loss under play, on a :class:`~server.bench.autofailover.Cluster`: simulated
players act through real ``tripeaks serve`` processes, the primary is killed (``kill -9``) or
frozen (``SIGSTOP``), the monitor promotes the standby, and :func:`run_fault` tells how long
play stopped and whether anything acknowledged was lost or misreported.

A player plays free games, one request at a time, a little think time between actions. Told
"nothing was changed" about an action (``unavailable``, ``server_busy``), it asks ``resume`` for
the game (again until answered) and plays on from what it is told; a game resumed past the
action's ``seq`` means the action was stored though the player was told it was not. After the
run every acknowledged action is looked for in the new primary's action log (``game_actions``).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from server.bench.autofailover import DATABASE, DB_USER, Cluster, NodeState
from server.bench.crowd import choose_action, connect_player
from server.bench.process import ServeProcess, crowd_env

#: The daily secret of the server processes.
DAILY_SECRET = "failover-daily-key-0123456789abcdefghij"
#: A player's pause between an ack and its next action (s): 100 players make about 400
#: actions a second, which this small machine carries beside four PostgreSQL instances.
THINK_S = 0.25
#: Longest a player waits for one reply (s); past it the run notes the player as stuck.
REPLY_BOUND_S = 60.0
#: Longest the monitor gets to promote a standby after the fault (s).
PROMOTION_BOUND_S = 90.0
#: Longest the run waits after the promotion for every player to be acknowledged again (s).
RESUME_BOUND_S = 30.0
#: Longest the players get to finish their last request once told to stop (s).
STOP_BOUND_S = 10.0


class Fault(StrEnum):
    """What happens to the primary: every process of the node (``pg_autoctl`` and PostgreSQL)
    is killed with SIGKILL, or stopped with SIGSTOP and left stopped."""

    KILL = "kill"
    FREEZE = "freeze"


@contextmanager
def deployment(standbys: int = 2, servers: int = 2) -> Iterator[tuple[Cluster, list[ServeProcess]]]:
    """A started :class:`Cluster` and ``servers`` ready server processes over it (their
    ``DATABASE_URL`` lists every node, ``target_session_attrs=read-write``); every process
    killed and every folder deleted on exit, however it is left.

    Raises:
        ClusterError: the cluster did not come up.
        RuntimeError: a server did not become ready.
    """
    cluster = Cluster(standbys=standbys)
    folder = Path(tempfile.mkdtemp(prefix="tripeaks-ha-servers-"))
    started: list[ServeProcess] = []
    try:
        cluster.start()
        url = cluster.database_url()
        for i in range(servers):
            env = crowd_env(url, folder / f"data{i}", DAILY_SECRET)
            started.append(ServeProcess(env, folder / f"server{i}.log"))
            started[-1].start()

        async def ready() -> None:
            await asyncio.gather(*(server.ready() for server in started))

        asyncio.run(ready())
        yield cluster, started
    finally:
        for server in started:
            server.stop()
        cluster.close()
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Player:
    """One simulated player and what it was told.

    Attributes:
        acked: per game, ``{log entry: (kind, pos)}`` of every acknowledged action.
        ack_times: wall-clock times (epoch s) of its ``accepted`` replies.
        latencies_ms: action send → ack.
        told_unavailable_stored: ``(game, seq sent, seq resumed)`` of actions answered
            "nothing was changed" (``unavailable``, ``server_busy``) that were stored.
        behind: ``(game, seq acknowledged, seq resumed)`` where ``resume`` showed an older
            state than one acknowledged.
        problems: anything else unexpected (a closed socket, a reply not within
            :data:`REPLY_BOUND_S`, an unknown error).
    """

    seed: int
    acked: dict[int, dict[int, tuple[str, int | None]]] = field(default_factory=dict)
    ack_times: list[float] = field(default_factory=list)
    latencies_ms: list[tuple[float, float]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    told_unavailable_stored: list[tuple[int, int, int]] = field(default_factory=list)
    behind: list[tuple[int, int, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def _ask(
    ws: aiohttp.ClientWebSocketResponse, player: Player, message: dict[str, Any]
) -> dict[str, Any] | None:
    await ws.send_str(json.dumps(message))
    try:
        msg = await asyncio.wait_for(ws.receive(), REPLY_BOUND_S)
    except TimeoutError:
        player.problems.append(f"no reply to {message['type']} within {REPLY_BOUND_S} s")
        return None
    if msg.type is not aiohttp.WSMsgType.TEXT:
        player.problems.append(f"socket ended: {msg.type.name}")
        return None
    reply: dict[str, Any] = json.loads(msg.data)
    return reply


async def _resume(
    ws: aiohttp.ClientWebSocketResponse, player: Player, game_id: int, stop: asyncio.Event
) -> dict[str, Any] | None:
    """Ask ``resume`` until it answers a STATE (None when stopped or the socket failed)."""
    while not stop.is_set():
        reply = await _ask(ws, player, {"type": "resume", "game_id": game_id})
        if reply is None:
            return None
        if reply["type"] == "game":
            game: dict[str, Any] = reply["game"]
            return game
        player.errors[f"resume_{reply.get('code', reply['type'])}"] += 1
        await asyncio.sleep(0.05)  # a client's pause before it asks again
    return None


async def play(http: aiohttp.ClientSession, base: str, player: Player, stop: asyncio.Event) -> None:
    """Play free games through the server at ``base`` until ``stop`` is set."""
    rng = random.Random(player.seed)
    ws = await connect_player(http, base, "ha")
    async with ws:
        state: dict[str, Any] | None = None
        while not stop.is_set():
            if state is None or state["status"] != "playing":
                reply = await _ask(ws, player, {"type": "new_game"})
                if reply is None:
                    return
                if reply["type"] == "game":
                    state = reply["game"]
                else:
                    player.errors[f"new_game_{reply.get('code', reply['type'])}"] += 1
                    await asyncio.sleep(0.05)  # a client's pause before it asks again
                continue
            action = choose_action(state, rng, undo_share=0.05)
            game_id, seq = state["game_id"], state["seq"]
            sent = time.time()
            reply = await _ask(
                ws, player, {"type": "action", "game_id": game_id, "seq": seq, **action}
            )
            if reply is None:
                return
            if reply["type"] == "accepted":
                now = time.time()
                state = reply["game"]
                if state["seq"] == seq + 1:
                    player.acked.setdefault(game_id, {})[seq + 1] = (
                        action["action"],
                        action.get("pos"),
                    )
                player.ack_times.append(now)
                player.latencies_ms.append((sent, (now - sent) * 1000))
                await asyncio.sleep(THINK_S)  # the player's think time
            elif reply["type"] == "rejected":
                state = reply["game"]
            elif "nothing was changed" in reply.get("message", ""):
                player.errors[reply.get("code", "error")] += 1
                resumed = await _resume(ws, player, game_id, stop)
                if resumed is None:
                    return
                if resumed["seq"] > seq:
                    player.told_unavailable_stored.append((game_id, seq, resumed["seq"]))
                    player.acked.setdefault(game_id, {})[seq + 1] = (
                        action["action"],
                        action.get("pos"),
                    )
                if resumed["seq"] < seq:
                    player.behind.append((game_id, seq, resumed["seq"]))
                state = resumed
            else:
                player.errors[reply.get("code", reply["type"])] += 1
                await asyncio.sleep(reply.get("retry_after_ms", 50) / 1000)


@dataclass
class FaultRun:
    """What one run measured.

    Attributes:
        fault: what was done to the primary.
        old, new: the primary before and the node promoted.
        promoted_after_s: fault → the monitor recorded the new primary writable (s).
        resume_s: promotion → each player's first ack after it (s), one per player that got
            one; ``stuck`` players got none within :data:`RESUME_BOUND_S`.
        acked: acknowledged actions; ``lost``: those missing from the new primary's log.
        told_unavailable_stored: actions answered "nothing was changed" that were stored.
        behind: resumes that showed a state older than one acknowledged.
    """

    fault: Fault
    old: NodeState
    new: NodeState
    promoted_after_s: float
    resume_s: list[float]
    stuck: int
    acked: int
    lost: list[tuple[int, int]]
    told_unavailable_stored: list[tuple[int, int, int]]
    behind: list[tuple[int, int, int]]
    errors: Counter[str]
    problems: list[str]

    @property
    def resumed_all_s(self) -> float:
        """Promotion → the last player's first ack after it (s); inf when one got none."""
        return max(self.resume_s) if self.resume_s and not self.stuck else float("inf")

    @property
    def resumed_median_s(self) -> float:
        """Median of :attr:`resume_s` (NaN when none)."""
        return statistics.median(self.resume_s) if self.resume_s else float("nan")


async def _until(what: str, bound_s: float, check: Any) -> Any:
    """Poll ``check()`` (a coroutine function) until it returns something truthy."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            found = await check()
        except (OSError, asyncpg.PostgresError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {bound_s} s")
        await asyncio.sleep(0.1)


async def _lost(url: str, players: list[Player]) -> tuple[int, list[tuple[int, int]]]:
    """Acknowledged actions, and those (game, entry) not in the stored log as acknowledged."""
    conn = await asyncpg.connect(url, timeout=10)
    try:
        acked = 0
        lost = []
        for player in players:
            for game_id, entries in player.acked.items():
                rows = await conn.fetch(
                    "SELECT seq, kind, pos FROM game_actions WHERE game_id = $1", game_id
                )
                # An undo is stored with the position it took back; it is sent without one.
                stored = {
                    r["seq"]: (r["kind"], None if r["kind"] == "undo" else r["pos"]) for r in rows
                }
                for entry, action in entries.items():
                    acked += 1
                    if stored.get(entry) != action:
                        lost.append((game_id, entry))
        return acked, lost
    finally:
        await conn.close()


async def run_fault(
    cluster: Cluster, bases: list[str], fault: Fault, players: int = 100
) -> FaultRun:
    """Play through the servers at ``bases`` (players spread evenly), do ``fault`` to the
    primary once every player has been acknowledged twice, wait for the promotion and for
    every player to be acknowledged again (at most :data:`RESUME_BOUND_S`), stop, and check
    the new primary's log.

    Raises:
        TimeoutError: no promotion within :data:`PROMOTION_BOUND_S`, or play did not start.
        RuntimeError: no primary before the fault.
    """
    old = await cluster.primary()
    if old is None:
        raise RuntimeError(f"no primary before the fault: {await cluster.states()}")
    crowd = [Player(seed) for seed in range(players)]
    stop = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        tasks = [
            asyncio.create_task(play(http, bases[i % len(bases)], p, stop))
            for i, p in enumerate(crowd)
        ]
        try:

            async def warmed() -> bool:
                if any(t.done() for t in tasks):
                    raise RuntimeError(f"a player ended early: {_problems(crowd, tasks)}")
                return all(len(p.ack_times) >= 2 for p in crowd)

            await _until("every player acknowledged twice", 120, warmed)
            faulted = time.time()
            node = cluster.node(old.name)
            node.signal(signal.SIGKILL if fault is Fault.KILL else signal.SIGSTOP)

            async def promoted() -> NodeState | None:
                now = await cluster.primary()
                return now if now is not None and now.name != old.name else None

            new: NodeState = await _until("a promotion", PROMOTION_BOUND_S, promoted)
            moment = await cluster.writable_since(new.node_id, faulted)
            assert moment is not None, "the monitor logged no writable state of the new primary"

            async def resumed() -> bool:
                return all(any(t >= moment for t in p.ack_times) for p in crowd)

            with suppress(TimeoutError):
                await _until("every player acknowledged again", RESUME_BOUND_S, resumed)
        finally:
            stop.set()
            # A player still waiting for a reply now waits in vain (a frozen primary).
            _done, pending = await asyncio.wait(tasks, timeout=STOP_BOUND_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    resume_s = [
        min(t for t in p.ack_times if t >= moment) - moment
        for p in crowd
        if any(t >= moment for t in p.ack_times)
    ]
    acked, lost = await _lost(f"postgresql://{DB_USER}@127.0.0.1:{new.port}/{DATABASE}", crowd)
    errors: Counter[str] = Counter()
    for p in crowd:
        errors.update(p.errors)
    return FaultRun(
        fault=fault,
        old=old,
        new=new,
        promoted_after_s=moment - faulted,
        resume_s=resume_s,
        stuck=players - len(resume_s),
        acked=acked,
        lost=lost,
        told_unavailable_stored=[x for p in crowd for x in p.told_unavailable_stored],
        behind=[x for p in crowd for x in p.behind],
        errors=errors,
        problems=_problems(crowd, tasks),
    )


def _problems(crowd: list[Player], tasks: list[asyncio.Task[None]]) -> list[str]:
    found = [f"player {p.seed}: {problem}" for p in crowd for problem in p.problems]
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            found.append(repr(task.exception()))
    return found
