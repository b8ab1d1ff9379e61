"""Clients vanishing mid-request (their handler cancelled in the middle of a transaction) leave
no pooled connection checked out, no session idle in transaction, no game lock held and no
half-written game; players who stay are not disturbed."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from server.bench.crowd import choose_action
from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.storage.commits import GroupCommitter
from server.web.app import create_app
from server.web.keys import SERVICES
from tests.e2e.logs import agrees, checked_games
from tests.helpers import RawWs, WsPlayer, eventually, register

VANISHING_PLAYERS = 6
STEADY_PLAYERS = 3
WAVES = 8
#: Clients of one player vanishing at once, all on the same game.
CLIENTS_PER_PLAYER = 2
#: Longest any reply or clean-up may take.
BOUND_S = 10.0
#: How a vanishing client goes (see :func:`_vanisher`).
WAYS = ("reset", "cancel_client", "cancel_handler")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Handlers:
    """The server's websocket handler tasks, by the client's port (a test-only middleware)."""

    def __init__(self) -> None:
        self.tasks: dict[int, asyncio.Task[Any]] = {}
        self.cancelled = 0

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Note the task serving each websocket request while it runs."""
        task = asyncio.current_task()
        peer = request.transport.get_extra_info("peername") if request.transport else None
        if request.path != "/ws" or task is None or peer is None:
            return await handler(request)
        self.tasks[peer[1]] = task
        try:
            return await handler(request)
        finally:
            self.tasks.pop(peer[1], None)

    def cancel(self, port: int) -> None:
        """Cancel the handler serving the client whose local port is ``port``."""
        task = self.tasks.get(port)
        if task is not None and not task.done():
            task.cancel()
            self.cancelled += 1


@pytest.fixture
async def tracked(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> AsyncIterator[tuple[TestServer, Handlers]]:
    """A real server (the test's own app, handlers cancelled when their client goes, as
    aiohttp's test server does) whose websocket handler tasks the test can reach."""
    handlers = Handlers()
    app = create_app(
        settings.model_copy(update={"max_sockets_per_player": 100}), clock=clock, analyzer=analyzer
    )
    app.middlewares.append(handlers.middleware)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server, handlers
    finally:
        await server.close()


async def _vanisher(
    port: int,
    token: str,
    how: str,
    rng: random.Random,
    handlers: Handlers,
    seen: Counter[str],
    sent: asyncio.Event,
) -> None:
    """Say hello, send a few requests and disappear: by a reset (``reset``), by having this
    task cancelled from outside (``cancel_client``: the socket is then closed without a
    websocket close), or by the server cancelling its handler meanwhile (``cancel_handler``).

    A ``cancel_client`` vanisher sets ``sent`` once its requests are out and then waits to be
    cancelled (it never leaves by itself), so that the case happens however slow the machine."""
    client = await RawWs.connect("127.0.0.1", port)
    try:
        await client.send({"type": "hello", "token": token, "id": "h"})
        if how == "reset" and rng.random() < 0.2:  # gone during the hello itself
            await asyncio.sleep(rng.random() * 0.005)
            seen["reset_in_hello"] += 1
            return
        welcome = await asyncio.wait_for(client.recv(), BOUND_S)
        if welcome.get("type") != "welcome":
            seen[f"no_welcome_{welcome.get('code')}"] += 1
            return
        games = [g for g in welcome["games"] if g["status"] == "playing"]
        for n in range(rng.randint(1, 3)):
            request = _request(rng, games, n)
            await client.send(request)
            seen[f"sent_{request['type']}"] += 1
        if how == "cancel_client":
            sent.set()
            await asyncio.Event().wait()  # until cancelled, mid-request
        await asyncio.sleep(rng.random() * 0.02)
        if how == "cancel_handler":
            handlers.cancel(client.local_port)
        seen[how] += 1
    except asyncio.CancelledError:
        seen["cancel_client"] += 1
        raise
    finally:
        if how == "reset":
            client.abort()
        else:
            client.close()


async def _wave(
    port: int, tokens: list[str], rng: random.Random, handlers: Handlers, seen: Counter[str]
) -> None:
    """Two clients per player at once (acting on the same game), each vanishing its own way;
    every way is taken by a third of the clients of each wave, in a random order."""
    clients = len(tokens) * CLIENTS_PER_PLAYER
    ways = [WAYS[i % len(WAYS)] for i in range(clients)]
    rng.shuffle(ways)
    tasks, cancellers = [], []
    for n, token in enumerate(t for t in tokens for _ in range(CLIENTS_PER_PLAYER)):
        how, sent = ways[n], asyncio.Event()
        task = asyncio.create_task(
            _vanisher(port, token, how, random.Random(rng.random()), handlers, seen, sent)
        )
        if how == "cancel_client":
            cancellers.append(asyncio.create_task(_cancel_after(task, sent, rng.random() * 0.03)))
        tasks.append(task)
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), BOUND_S)
    await asyncio.gather(*cancellers)
    for result in results:
        if isinstance(result, BaseException) and not isinstance(
            result, asyncio.CancelledError | ConnectionError | asyncio.IncompleteReadError
        ):
            raise result


async def _cancel_after(task: asyncio.Task[None], sent: asyncio.Event, delay_s: float) -> None:
    """Cancel a ``cancel_client`` vanisher ``delay_s`` after its requests went out (or as soon
    as it ended otherwise, having found no welcome or lost its connection)."""
    sent_or_done = asyncio.ensure_future(sent.wait())
    try:
        await asyncio.wait([sent_or_done, task], return_when=asyncio.FIRST_COMPLETED)
    finally:
        sent_or_done.cancel()
    if sent.is_set():
        await asyncio.sleep(delay_s)
    task.cancel()


def _request(rng: random.Random, games: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """A database-touching request: mostly an action on the player's game."""
    roll = rng.random()
    if games and roll < 0.6:
        game = games[0]
        message = {"type": "action", "game_id": game["game_id"], "seq": game["seq"]}
        message.update(choose_action(game, rng, undo_share=0.1))
        return {**message, "id": f"a{n}"}
    if games and roll < 0.7:
        return {"type": "resume", "game_id": games[0]["game_id"], "id": f"r{n}"}
    if games and roll < 0.75:
        return {"type": "resign", "game_id": games[0]["game_id"], "id": f"x{n}"}
    if roll < 0.8:
        return {"type": "join_daily", "id": f"d{n}"}
    return {"type": "new_game", "id": f"n{n}"}


async def _steady(
    ws: WsPlayer, seed: int, stop: asyncio.Event, problems: list[str]
) -> dict[int, Any]:
    """Play free games, one request at a time, until told to stop; return the last
    acknowledged state of each game."""
    rng = random.Random(seed)
    acked: dict[int, Any] = {}
    state: dict[str, Any] | None = None
    while not stop.is_set():
        if state is None or state["status"] != "playing":
            reply = await ws.request({"type": "new_game"})
        else:
            action = choose_action(state, rng, undo_share=0.1)
            reply = await ws.request(
                {"type": "action", "game_id": state["game_id"], "seq": state["seq"], **action}
            )
        if reply["type"] not in ("game", "accepted", "rejected") or reply.get("code") in (
            "stale_seq",
            "internal_error",
            "unavailable",
        ):
            problems.append(f"steady player {seed}: {reply}")
            return acked
        state = reply["game"]
        acked[state["game_id"]] = state
    return acked


async def _lingering(conn: asyncpg.Connection, database: str) -> int:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = $1 AND state LIKE 'idle in transaction%'",
        database,
    )
    return count


async def _settled_and_consistent(
    server: TestServer,
    handlers: Handlers,
    database_url: str,
    acked: dict[int, dict[str, Any]],
    open_sockets: int,
) -> None:
    """Within :data:`BOUND_S`, only the ``open_sockets`` handlers still run, every connection
    is back in the pool and no session is idle in transaction; then no game is half-written
    (each log contiguous and agreeing with its row) and each acknowledged state is stored."""
    engine = server.app[SERVICES].db
    database = make_url(database_url).database or ""
    admin = await asyncpg.connect(database_url)
    try:
        deadline = time.monotonic() + BOUND_S
        while True:
            pool = engine.pool
            assert isinstance(pool, QueuePool), pool
            state = (
                len(handlers.tasks) - open_sockets,
                pool.checkedout(),
                await _lingering(admin, database),
            )
            if state == (0, 0, 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert state == (0, 0, 0), f"(handlers left, connections out, idle in transaction) {state}"

        for stored in await checked_games(admin):
            last = acked.get(stored.row["id"])
            if last is not None:
                assert stored.row["seq"] == last["seq"], (stored.row["id"], last["seq"])
                assert agrees(stored.replayed, last)
    finally:
        await admin.close()


async def test_vanishing_clients_leave_no_connection_or_transaction_behind(
    tracked: tuple[TestServer, Handlers], database_url: str
) -> None:
    server, handlers = tracked
    port = server.port
    assert port is not None
    rng = random.Random(20260314)
    outcomes: Counter[str] = Counter()
    problems: list[str] = []
    async with TestClient(server) as client:
        tokens = [(await register(client, f"Vanish{i}"))["token"] for i in range(VANISHING_PLAYERS)]
        for token in tokens:  # each starts with a game to act on
            ws, _ = await WsPlayer.connect(client, token)
            assert (await ws.request({"type": "new_game"}))["type"] == "game"
            await ws.close()
        steady = []
        for i in range(STEADY_PLAYERS):
            ws, _ = await WsPlayer.connect(client, (await register(client, f"Steady{i}"))["token"])
            steady.append(ws)
        stop = asyncio.Event()
        playing = [
            asyncio.create_task(_steady(ws, seed, stop, problems)) for seed, ws in enumerate(steady)
        ]

        for _ in range(WAVES):
            await _wave(port, tokens, rng, handlers, outcomes)
        stop.set()
        acked = {
            gid: s
            for done in await asyncio.wait_for(asyncio.gather(*playing), BOUND_S)
            for gid, s in done.items()
        }
        assert problems == [], problems
        assert handlers.cancelled and outcomes["reset"] and outcomes["cancel_client"], outcomes

        await _settled_and_consistent(server, handlers, database_url, acked, len(steady))

        # Every game of the players who vanished is still playable: no lock was left held and
        # no cached copy differs from what was stored.
        for token in tokens:
            ws, welcome = await WsPlayer.connect(client, token)
            for game in welcome["games"]:
                if game["status"] != "playing":
                    continue
                action = choose_action(game, rng, undo_share=0.0)
                reply = await asyncio.wait_for(
                    ws.request(
                        {"type": "action", "game_id": game["game_id"], "seq": game["seq"], **action}
                    ),
                    BOUND_S,
                )
                assert reply["type"] in ("accepted", "rejected"), reply
                assert reply.get("code") != "stale_seq", reply
            await ws.close()
        for ws in steady:
            await ws.close()


async def test_an_action_whose_handler_is_cancelled_keeps_its_game_until_stored(
    tracked: tuple[TestServer, Handlers], database_url: str
) -> None:
    """A handler cancelled while its action waits for the group commit: the player's next
    request on that game (from another socket) waits for the outcome instead of racing it
    into the same batch, which would fail every other player's action in that batch."""
    server, handlers = tracked
    port = server.port
    assert port is not None
    async with TestClient(server) as client:
        sockets: dict[str, WsPlayer] = {}
        games: dict[str, dict[str, Any]] = {}
        for name in ("Owner", "Blocker", "Bystander"):
            info = await register(client, name)
            sockets[name], _ = await WsPlayer.connect(client, info["token"])
            games[name] = (await sockets[name].request({"type": "new_game"}))["game"]
            if name == "Owner":
                token = info["token"]
        owner_game = games["Owner"]
        assert owner_game["stock_count"] > 0
        vanishing = await RawWs.connect("127.0.0.1", port)
        await vanishing.send({"type": "hello", "token": token, "id": "h"})
        assert (await asyncio.wait_for(vanishing.recv(), BOUND_S))["type"] == "welcome"

        games_service = server.app[SERVICES].games
        committer = games_service._committer
        assert isinstance(committer, GroupCommitter)  # the server's, over PostgreSQL

        def queued() -> int:
            """Writes waiting for the writer's next batch (white-box)."""
            return 0 if committer._queue is None else committer._queue.qsize()

        def waits_for_game(game_id: int) -> bool:
            """Whether a request waits for the game's lock (white-box)."""
            live = games_service._live._cache.get(game_id)
            return live is not None and live.lock.locked() and bool(live.lock._waiters)

        admin = await asyncpg.connect(database_url)
        acked: dict[int, dict[str, Any]] = {}
        try:
            # Hold the action log's table lock, so that the writer's next batch waits in
            # PostgreSQL (a locked game row would only be skipped).
            hold = admin.transaction()
            await hold.start()
            await admin.execute("LOCK TABLE game_actions IN ACCESS EXCLUSIVE MODE")
            blocker = asyncio.create_task(sockets["Blocker"].act(games["Blocker"], "draw"))
            await _waiting_on_a_lock(admin)

            # The owner's draw queues behind it; its handler is cancelled while it waits.
            await vanishing.send(
                {
                    "type": "action",
                    "game_id": owner_game["game_id"],
                    "seq": 0,
                    "action": "draw",
                    "id": "a",
                }
            )
            await eventually(lambda: queued() == 1, "the owner's draw to wait for its batch")
            handlers.cancel(vanishing.local_port)
            await asyncio.sleep(0)  # the cancellation reaches the handler
            # The same draw again from the owner's other socket, and a bystander's action.
            again = asyncio.create_task(sockets["Owner"].act(owner_game, "draw"))
            bystander = asyncio.create_task(sockets["Bystander"].act(games["Bystander"], "draw"))
            # Release the lock once the bystander's draw is queued for the next batch and the
            # owner's second draw has reached the game: waiting for the first one's outcome
            # (or, were it to race it, queued alongside, or answered at once).
            await eventually(
                lambda: (
                    queued() >= 2
                    and (waits_for_game(owner_game["game_id"]) or queued() >= 3 or again.done())
                ),
                "the bystander's draw to queue and the owner's again to reach the game",
            )
            await hold.rollback()

            replies = await asyncio.wait_for(asyncio.gather(blocker, again, bystander), BOUND_S)
        finally:
            await admin.close()
            vanishing.close()
        # The bystander's action shared a batch with the owner's: it must not have failed.
        outcomes = [(r["type"], r.get("code")) for r in replies]
        assert outcomes == [("accepted", None)] * 3, "blocker, owner again, bystander"
        for reply in replies:
            acked[reply["game"]["game_id"]] = reply["game"]
        assert acked[owner_game["game_id"]]["seq"] == 1
        await _settled_and_consistent(server, handlers, database_url, acked, len(sockets))
        for ws in sockets.values():
            await ws.close()


async def _waiting_on_a_lock(admin: asyncpg.Connection) -> None:
    """Return once a server session waits for a lock (the writer's batch)."""
    deadline = time.monotonic() + BOUND_S
    while not await admin.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'tripeaks' AND wait_event_type = 'Lock'"
    ):
        assert time.monotonic() < deadline, "the writer never waited for the held lock"
        await asyncio.sleep(0.02)
