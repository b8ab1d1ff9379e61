"""The server behind a real PgBouncer in ``pool_mode = transaction`` (how most managed
PostgreSQL is offered): ``DATABASE_URL`` points at PgBouncer, ``TRIPEAKS_DB_POOLER=transaction``,
and ``TRIPEAKS_DIRECT_DATABASE_URL`` at PostgreSQL itself for what a transaction pooler cannot
carry (``LISTEN`` and the migrations' session-level advisory lock).

The session's PgBouncer is the ``pgbouncer`` fixture (tests/conftest.py); these tests fail, never
skip, without the program. Play, the daily and its ranking, a race across two server processes,
1,000 concurrent leaderboard reads and 20 players at once all go through it: before the pooler
setting existed, the same tests failed with ``prepared statement "__asyncpg_stmt_…__" does not
exist`` (actions answered ``unavailable``, reads answered 503) and races that never saw each
other's progress.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from pydantic import ValidationError
from sqlalchemy import make_url, text

from server.bench.process import crowd_env
from server.config import Settings
from server.engine import GameCode, RuleSet
from server.services.daily import derive_daily_code
from server.storage.db import DatabaseConfigError, create_engine, migrate
from server.storage.events import CHANNEL, Event, Listener, RaceRoomChanged, encode_event
from tests.conftest import PgBouncer, ServerFactory, _admin, _db_url
from tests.helpers import (
    TIMEOUT,
    WsPlayer,
    blocking_line,
    connect_player,
    find_winning_line,
    register,
)
from tests.pooler import DAILY_SECRET, Bouncer, PoolMode, ServerProcess

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
WIN = find_winning_line(CODE.deal(), CODE.rules)
BLOCK = blocking_line(CODE.deal(), CODE.rules)


@pytest.fixture
def pooled_url(pgbouncer: PgBouncer, database_url: str) -> str:
    """The test's database, reached through the session's PgBouncer."""
    return pgbouncer.pooled(database_url)


@pytest.fixture
def pooled_server(make_server: ServerFactory, pooled_url: str, database_url: str) -> ServerFactory:
    """Start servers configured as behind a transaction pooler: ``DATABASE_URL`` is PgBouncer,
    the direct URL is PostgreSQL."""

    async def start(**overrides: Any) -> TestServer:
        pooled = {
            "database_url": pooled_url,
            "direct_database_url": database_url,
            "db_pooler": "transaction",
        }
        return await make_server(**{**pooled, **overrides})

    return start


async def _player(client: Client, name: str) -> WsPlayer:
    ws, _ = await WsPlayer.connect(client, (await register(client, name))["token"])
    return ws


async def _fetchval(url: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def _eventually(predicate: Any, what: str) -> None:
    """Wait (polling) for a condition nothing announces."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------------- the pooler itself


async def test_the_session_pgbouncer_pools_by_transaction(pooled_url: str) -> None:
    """The fixture is what production looks like: a session's state does not follow its
    client from one transaction to the next (two clients take turns on one server)."""
    first = await asyncpg.connect(pooled_url, statement_cache_size=0)
    second = await asyncpg.connect(pooled_url, statement_cache_size=0)
    try:
        pid = await first.fetchval("SELECT pg_backend_pid()")
        assert await second.fetchval("SELECT pg_backend_pid()") == pid
    finally:
        await first.close()
        await second.close()


async def test_the_engines_startup_parameters_are_kept_per_client_through_the_pooler(
    pooled_url: str,
) -> None:
    """PgBouncer 1.18 tracks ``application_name`` and ``TimeZone``: the engine's ``UTC`` and
    ``tripeaks`` hold on every statement while other clients share the same server connections
    with another time zone; ``SET LOCAL`` ends with its transaction."""
    engine = create_engine(pooled_url, pool_size=4, pooler="transaction")
    others = [
        await asyncpg.connect(
            pooled_url,
            statement_cache_size=0,
            server_settings={"application_name": "other", "timezone": "Asia/Taipei"},
        )
        for _ in range(4)
    ]
    seen: Counter[tuple[str, str, str]] = Counter()

    async def ours() -> None:
        async with engine.connect() as conn:
            row = (
                await conn.execute(
                    text(
                        "SELECT current_setting('TimeZone'), current_setting('application_name'),"
                        " current_setting('lock_timeout')"
                    )
                )
            ).one()
            seen[(row[0], row[1], row[2])] += 1
            await conn.commit()
        async with engine.begin() as conn:
            await conn.execute(text("SET LOCAL lock_timeout = 1234"))

    async def theirs(conn: asyncpg.Connection) -> None:
        for _ in range(25):
            assert await conn.fetchval("SELECT current_setting('TimeZone')") == "Asia/Taipei"

    try:
        await asyncio.gather(*(ours() for _ in range(100)), *(theirs(c) for c in others))
    finally:
        for conn in others:
            await conn.close()
        await engine.dispose()
    assert seen == {("UTC", "tripeaks", "0"): 100}


# ---------------------------------------------------------------------------- configuration


def test_the_pooler_setting_and_the_direct_url_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://app@pgbouncer:6432/tripeaks")
    monkeypatch.setenv("TRIPEAKS_DB_POOLER", "Transaction")
    monkeypatch.setenv("TRIPEAKS_DIRECT_DATABASE_URL", "postgresql://app@primary:5432/tripeaks")
    settings = Settings()
    assert settings.db_pooler == "transaction"
    assert settings.direct_database_url == "postgresql://app@primary:5432/tripeaks"
    monkeypatch.delenv("TRIPEAKS_DB_POOLER")
    monkeypatch.delenv("TRIPEAKS_DIRECT_DATABASE_URL")
    assert (Settings().db_pooler, Settings().direct_database_url) == ("none", None)


def test_a_transaction_pooler_without_a_direct_url_is_refused_naming_both_variables() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(database_url="postgresql://app@pgbouncer:6432/tripeaks", db_pooler="transaction")
    message = str(refused.value)
    assert "TRIPEAKS_DIRECT_DATABASE_URL" in message and "TRIPEAKS_DB_POOLER" in message
    with pytest.raises(ValidationError):
        Settings(db_pooler="statement")


async def test_the_listener_takes_a_url_with_the_engines_query_options(
    database_url: str,
) -> None:
    """``?prepared_statement_cache_size=0`` is an option of the engine's driver, not a server
    setting: the listener leaves it out rather than failing the server's start with it."""
    received: list[Event] = []
    listener = Listener(f"{database_url}?prepared_statement_cache_size=0", received.append)
    await listener.start()
    try:
        conn = await asyncpg.connect(database_url)
        try:
            probe = encode_event(RaceRoomChanged(7, "ACDEFG", 3))
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, probe)
        finally:
            await conn.close()
        await _eventually(lambda: received, "the event arrives")
        assert received == [RaceRoomChanged(7, "ACDEFG", 3)]
    finally:
        await listener.stop()


async def test_a_server_starts_with_the_cache_option_in_both_urls(
    pooled_server: ServerFactory, pooled_url: str, database_url: str
) -> None:
    server = await pooled_server(
        database_url=f"{pooled_url}?prepared_statement_cache_size=0",
        direct_database_url=f"{database_url}?prepared_statement_cache_size=0",
    )
    async with TestClient(server) as client:
        assert (await client.get("/readyz")).status == 200


# -------------------------------------------------------------------------------- migrations


async def test_concurrent_starts_through_the_pooler_migrate_on_the_direct_url_in_turn(
    empty_database_url: str, pgbouncer: PgBouncer, make_server: ServerFactory
) -> None:
    """Four processes starting at once on an empty database migrate it one after the other
    (the advisory lock is a session's, held on the direct connection) and leave no lock."""
    pooled = pgbouncer.pooled(empty_database_url)
    servers = await asyncio.wait_for(
        asyncio.gather(
            *(
                make_server(
                    database_url=pooled,
                    direct_database_url=empty_database_url,
                    db_pooler="transaction",
                )
                for _ in range(4)
            )
        ),
        60,
    )
    async with TestClient(servers[0]) as client:
        await register(client, "Ann")
    # This database's advisory locks only: pg_locks shows the whole server's, and other
    # databases (another test run's template being migrated) may hold one meanwhile.
    held = await _fetchval(
        empty_database_url,
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    assert held == 0


async def test_a_server_whose_database_is_dropped_behind_the_pooler_still_shuts_down(
    empty_database_url: str, pgbouncer: PgBouncer, make_server: ServerFactory
) -> None:
    """With its database gone, PgBouncer keeps each new request waiting for a server
    connection it cannot open, and a cancelled query's driver waits on that connection while
    it closes: each shutdown step is given up after its bound all the same, so the process
    ends (it would otherwise wait for PgBouncer's ``query_wait_timeout``, minutes)."""
    server = await make_server(
        database_url=pgbouncer.pooled(empty_database_url),
        direct_database_url=empty_database_url,
        db_pooler="transaction",
    )
    name = make_url(empty_database_url).database
    await _admin(f'DROP DATABASE "{name}" WITH (FORCE)')
    await asyncio.wait_for(server.close(), 60)
    # The steps left behind end once PgBouncer reaches a database of that name again.
    await _admin(f'CREATE DATABASE "{name}"')
    this = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not this]
    if left:
        await asyncio.wait_for(asyncio.wait(left), TIMEOUT)


async def test_an_engine_for_a_transaction_pooler_refuses_to_migrate(pooled_url: str) -> None:
    engine = create_engine(pooled_url, pool_size=1, pooler="transaction")
    try:
        with pytest.raises(DatabaseConfigError, match="TRIPEAKS_DIRECT_DATABASE_URL"):
            await migrate(engine)
    finally:
        await engine.dispose()
    with pytest.raises(DatabaseConfigError, match="unknown pooler"):
        create_engine(pooled_url, pooler="session")  # type: ignore[arg-type]


async def _tripeaks(*args: str, **env: str) -> tuple[int, str]:
    """Run the ``tripeaks`` command with only ``env`` (and PATH) in its environment."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "server",
        *args,
        env={"PATH": os.environ.get("PATH", ""), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_tripeaks_migrate_behind_the_pooler_uses_the_direct_url(
    pgbouncer: PgBouncer, empty_database_url: str
) -> None:
    pooled = pgbouncer.pooled(empty_database_url)
    code, out = await _tripeaks(
        "migrate",
        DATABASE_URL=pooled,
        TRIPEAKS_DB_POOLER="transaction",
        TRIPEAKS_DIRECT_DATABASE_URL=empty_database_url,
    )
    assert code == 0, out
    assert "database schema is up to date" in out
    assert await _fetchval(empty_database_url, "SELECT count(*) FROM alembic_version") == 1
    # Without the direct URL, it says what is missing and why, and does nothing.
    code, out = await _tripeaks("migrate", DATABASE_URL=pooled, TRIPEAKS_DB_POOLER="transaction")
    assert code == 2, out
    assert "TRIPEAKS_DIRECT_DATABASE_URL" in out and "advisory lock" in out


async def test_resigning_a_row_locked_elsewhere_waits_only_the_write_timeout_through_the_pooler(
    pooled_server: ServerFactory, database_url: str
) -> None:
    """``SET LOCAL lock_timeout`` holds inside the resignation's transaction through the
    pooler, and ends with it."""
    server = await pooled_server(db_write_timeout_s=0.5)
    async with TestClient(server) as client:
        ann = await _player(client, "Ann")
        game = (await ann.request({"type": "new_game"}))["game"]
        lock = await asyncpg.connect(database_url)
        try:
            async with lock.transaction():
                await lock.execute("SELECT 1 FROM games WHERE id = $1 FOR UPDATE", game["game_id"])
                started = time.monotonic()
                reply = await ann.request({"type": "resign", "game_id": game["game_id"]})
                assert (reply["type"], reply["code"]) == ("error", "unavailable"), reply
                assert time.monotonic() - started < 5
        finally:
            await lock.close()
        reply = await ann.request({"type": "resign", "game_id": game["game_id"]})
        assert reply["game"]["status"] == "resigned", reply
        await ann.close()


# ----------------------------------------------------- two server processes behind PgBouncer
#
# Real ``tripeaks serve`` processes (each with its own driver, statement names, pools and event
# listener) behind a PgBouncer with its default pool size (20 server connections), in
# transaction mode and in session mode. Before statements went out unnamed through a
# transaction pooler, the two processes' ``__asyncpg_stmt_<n>__`` collided on the server
# sessions they share: ``already exists``, players answered ``unavailable``, reads 503.

MODES: tuple[PoolMode, ...] = ("transaction", "session")
#: ``TRIPEAKS_DB_POOL_SIZE`` of each process in session mode, where every connection a process
#: holds open holds one of PgBouncer's server connections: two processes, each with up to twice
#: this, its event listener and its event publisher, fit PgBouncer's default pool of 20
#: (2 x (2 x 4 + 2) = 20).
SESSION_POOL_SIZE = 4
#: Seconds after PgBouncer is back within which every player is served again.
RECOVERY_S = 10.0
#: What a server's log never says: a failure that reached a handler, a task that died.
NEVER_LOGGED = ("unexpected error", "internal_error", "Task exception was never retrieved")


@dataclass
class Deployment:
    """Two server processes behind one PgBouncer, over one database."""

    mode: PoolMode
    bouncer: Bouncer
    direct_url: str
    servers: list[ServerProcess]

    @property
    def bases(self) -> list[str]:
        return [server.base for server in self.servers]

    def check_logs(self) -> None:
        """No failure reached a handler, and no task died, in either process."""
        for server in self.servers:
            text = server.text()
            for phrase in NEVER_LOGGED:
                assert phrase not in text, f"{server.base} logged {phrase!r}:\n{text[-6000:]}"

    async def check_acked(self, acked: set[tuple[int, int]]) -> None:
        """Every action acknowledged ``accepted`` (game id, seq) is stored."""
        conn = await asyncpg.connect(self.direct_url)
        try:
            rows = await conn.fetch(
                "SELECT game_id, seq FROM game_actions WHERE game_id = ANY($1::bigint[])",
                sorted({game_id for game_id, _ in acked}),
            )
        finally:
            await conn.close()
        lost = acked - {(row["game_id"], row["seq"]) for row in rows}
        assert not lost, f"{len(lost)} acknowledged actions are not stored: {sorted(lost)[:10]}"


def _server_env(mode: PoolMode, pooled: str, direct: str, data: Path) -> dict[str, str]:
    # Every simulated player and reader connects from 127.0.0.1.
    env = crowd_env(pooled, data, DAILY_SECRET)
    env["TRIPEAKS_RACE_COUNTDOWN_S"] = "0.5"
    if mode == "transaction":
        env.update(TRIPEAKS_DB_POOLER="transaction", TRIPEAKS_DIRECT_DATABASE_URL=direct)
    else:
        env.update(TRIPEAKS_DB_POOL_SIZE=str(SESSION_POOL_SIZE))
    return env


@pytest.fixture(scope="module", params=MODES)
def deployment(
    request: pytest.FixtureRequest, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """PgBouncer (the mode of the parameter, its default pool size) and two server processes
    behind it over a fresh migrated database; everything stopped and dropped afterwards."""
    mode: PoolMode = request.param
    name = f"tripeaks_test_pooler_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"'))
    direct = _db_url(name)
    bouncer = Bouncer(mode)
    servers: list[ServerProcess] = []
    folder = tmp_path_factory.mktemp(f"pooler-{mode}")
    try:
        bouncer.start()
        for i in range(2):
            env = _server_env(mode, bouncer.pooled(direct), direct, folder / f"data{i}")
            servers.append(ServerProcess(env, folder / f"server{i}.log"))
        for server in servers:
            server.start()

        async def ready() -> None:
            await asyncio.gather(*(server.ready() for server in servers))

        asyncio.run(ready())
        yield Deployment(mode, bouncer, direct, servers)
        for server in servers:
            assert server.stop() == 0, server.text()[-4000:]
    finally:
        for server in servers:
            server.stop()
        bouncer.close()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _http() -> aiohttp.ClientSession:
    """A client with every request in flight at once (no connection limit)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))


async def test_players_register_and_play_on_two_processes_behind_pgbouncer(
    deployment: Deployment,
) -> None:
    """20 players at once, on either process: register, say hello, play a deal to its end and
    resign a second game; every request is answered, none ``unavailable``, and every
    acknowledged action is stored."""
    assert WIN is not None
    outcomes: Counter[str] = Counter()
    acked: set[tuple[int, int]] = set()

    async def play(http: aiohttp.ClientSession, i: int) -> None:
        player = await connect_player(http, deployment.bases[i % 2], f"Player {i}")
        outcomes["welcome"] += 1
        try:
            reply = await player.request({"type": "new_game", "code": str(CODE)})
            outcomes[f"new_game {reply.get('code') or reply['type']}"] += 1
            game = reply["game"]
            for action in WIN:
                reply = await player.act(game, action.kind.value, action.pos)
                outcomes[f"action {reply.get('code') or reply['type']}"] += 1
                if reply["type"] != "accepted":
                    return
                game = reply["game"]
                acked.add((game["game_id"], game["seq"]))
            outcomes[f"final {game['status']}"] += 1
            spare = (await player.request({"type": "new_game"}))["game"]
            reply = await player.request({"type": "resign", "game_id": spare["game_id"]})
            outcomes[f"resign {reply.get('code') or reply['game']['status']}"] += 1
        finally:
            await player.close()

    async with _http() as http:
        await asyncio.gather(*(play(http, i) for i in range(20)))
    assert outcomes == {
        "welcome": 20,
        "new_game game": 20,
        "action accepted": 20 * len(WIN),
        "final won": 20,
        "resign resigned": 20,
    }, outcomes
    await deployment.check_acked(acked)
    deployment.check_logs()


async def test_a_race_across_two_processes_behind_pgbouncer(deployment: Deployment) -> None:
    """A host on one process, racers on both: seats taken on one are seen on the other, every
    racer is dealt in, sees the others' progress and the results."""
    assert WIN is not None and BLOCK is not None
    a, b = deployment.bases
    async with _http() as http:
        host = await connect_player(http, a, "Host")
        guests = [
            await connect_player(http, base, f"Guest {i}") for i, base in enumerate((b, b, a))
        ]
        racers = [host, *guests]
        created = await host.request({"type": "race_create", "code": str(CODE)})
        invite = created["race"]["invite"]
        for guest in guests:
            joined = await guest.request({"type": "race_join", "invite": invite})
            assert joined["role"] == "racer", joined
        room = await host.until("race_room")
        while len(room["race"]["players"]) < len(racers):
            room = await host.until("race_room")
        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running", started
        games = [(await ws.until("race_go", invite=invite))["game"] for ws in racers]
        winner = guests[0]
        lines = [WIN if ws is winner else BLOCK for ws in racers]
        await asyncio.gather(
            *(ws.play(g, line) for ws, g, line in zip(racers, games, lines, strict=True))
        )
        won = await host.until("race_progress", player_id=winner.player_id, status="won")
        assert won["cards_left"] == 0
        for ws in racers:
            results = (await ws.until("race_results"))["race"]["results"]
            assert (results[0]["rank"], results[0]["name"]) == (1, "Guest 0")
            assert len(results) == len(racers)
        for base in (a, b):
            async with http.get(f"{base}/api/v1/races/{invite}") as resp:
                body = await resp.json()
                assert (body["status"], body["code"]) == ("finished", str(CODE))
        for ws in racers:
            await ws.close()
    deployment.check_logs()


async def test_a_burst_of_reads_over_every_read_endpoint_behind_pgbouncer(
    deployment: Deployment,
) -> None:
    """400 reads at once, half on each process, over the daily, its board (a page, around a
    player), a date's daily, a profile, a race room and a game record: every one answered 200
    (the burst waits for the connections its process may hold, and PgBouncer's, in turn)."""
    async with _http() as http:
        players = [
            await connect_player(http, base, f"Reader {i}")
            for i, base in enumerate(deployment.bases)
        ]
        async with http.get(f"{deployment.bases[0]}/api/v1/daily") as resp:
            today = (await resp.json())["date"]
        # With the solver off the server deals the date's first candidate.
        code = derive_daily_code(
            DAILY_SECRET.encode(), dt.date.fromisoformat(today), RuleSet.EASY, 0
        )
        line = blocking_line(code.deal(), code.rules)
        assert line is not None
        dailies = []
        for player in players:
            game = (await player.request({"type": "join_daily"}))["game"]
            dailies.append(await player.play(game, line))
        assert dailies[0]["status"] == "blocked", dailies[0]
        invite = (await players[1].request({"type": "race_create"}))["race"]["invite"]
        pid = players[0].player_id
        paths = [
            "/api/v1/daily",
            f"/api/v1/daily/{today}",
            f"/api/v1/daily/{today}/leaderboard",
            f"/api/v1/daily/{today}/leaderboard/around/{pid}",
            f"/api/v1/players/{pid}",
            f"/api/v1/races/{invite}",
            f"/api/v1/games/{dailies[0]['game_id']}",
        ]

        async def read(i: int) -> tuple[str, int]:
            path = paths[i % len(paths)]
            async with http.get(deployment.bases[i % 2] + path) as resp:
                await resp.read()
                return path, resp.status

        answers = await asyncio.gather(*(read(i) for i in range(400)))
        for player in players:
            await player.close()
    statuses = Counter(status for _, status in answers)
    assert statuses == {200: 400}, Counter(answers)
    deployment.check_logs()


@dataclass
class Timeline:
    """When PgBouncer went away and came back (event loop time; None: not yet)."""

    stopped: float | None = None
    back: float | None = None

    def in_window(self, sent: float, answered: float) -> bool:
        """Whether a request was in flight during the restart or within :data:`RECOVERY_S`
        after it."""
        if self.stopped is None or answered < self.stopped:
            return False
        return self.back is None or sent <= self.back + RECOVERY_S


async def test_a_pgbouncer_restart_mid_play(deployment: Deployment) -> None:
    """PgBouncer stopped (every client and server connection cut) and started again while
    players play and read on both processes: no 5xx and no ``internal_error`` ever, errors
    (``unavailable``, 503) only while it is away and right after, everyone served again after
    it, and every acknowledged action stored."""
    assert WIN is not None
    loop = asyncio.get_running_loop()
    timeline = Timeline()
    stop = asyncio.Event()
    acked: set[tuple[int, int]] = set()
    #: (in the window, what) -> count
    seen: Counter[tuple[bool, str]] = Counter()
    served_after: Counter[str] = Counter()

    def note(sent: float, what: str) -> None:
        answered = loop.time()
        seen[(timeline.in_window(sent, answered), what)] += 1
        if timeline.back is not None and sent > timeline.back + RECOVERY_S:
            served_after[what] += 1

    async def play(player: WsPlayer) -> None:
        game = (await player.request({"type": "new_game", "code": str(CODE)}))["game"]
        while not stop.is_set():
            if game["status"] != "playing":
                sent = loop.time()
                reply = await player.request({"type": "new_game", "code": str(CODE)})
                note(sent, f"new_game {reply.get('code') or reply['type']}")
                if reply["type"] == "game":
                    game = reply["game"]
                continue
            action = WIN[game["seq"]]
            sent = loop.time()
            reply = await player.act(game, action.kind.value, action.pos)
            note(sent, f"action {reply.get('code') or reply['type']}")
            if reply["type"] == "accepted":
                game = reply["game"]
                acked.add((game["game_id"], game["seq"]))
            else:  # its fate may be unknown: ask where the game is
                await asyncio.sleep(0.05)
                sent = loop.time()
                reply = await player.request({"type": "resume", "game_id": game["game_id"]})
                note(sent, f"resume {reply.get('code') or reply['type']}")
                if reply["type"] == "game":
                    game = reply["game"]

    async def read(http: aiohttp.ClientSession, base: str, path: str) -> None:
        while not stop.is_set():
            sent = loop.time()
            async with http.get(base + path) as resp:
                await resp.read()
                note(sent, f"GET {resp.status}")
            await asyncio.sleep(0.02)

    async with _http() as http:
        players = [
            await connect_player(http, deployment.bases[i % 2], f"Restart {i}") for i in range(6)
        ]
        profile = f"/api/v1/players/{players[0].player_id}"
        tasks = [asyncio.create_task(play(player)) for player in players] + [
            asyncio.create_task(read(http, base, path))
            for base in deployment.bases
            for path in ("/api/v1/daily", profile)
        ]
        try:
            await asyncio.sleep(2)
            timeline.stopped = loop.time()
            await asyncio.to_thread(deployment.bouncer.stop)
            await asyncio.sleep(1)
            await asyncio.to_thread(deployment.bouncer.start)
            timeline.back = loop.time()
            await asyncio.sleep(RECOVERY_S + 3)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
        for player in players:
            await player.close()
    outside = {what: n for (inside, what), n in seen.items() if not inside}
    inside = {what: n for (inside, what), n in seen.items() if inside}
    allowed = {"action accepted", "new_game game", "resume game", "GET 200"}
    assert set(outside) <= allowed, (outside, inside)
    assert not any(what.startswith("GET 5") and what != "GET 503" for what in inside), inside
    assert not any("internal_error" in what for what in inside), inside
    assert served_after["action accepted"] >= len(players), (served_after, inside)
    assert served_after["GET 200"] >= 4, served_after
    await deployment.check_acked(acked)
    deployment.check_logs()


async def test_a_start_behind_a_session_pooler_with_no_connection_free_says_so_and_exits(
    database_url: str, tmp_path: Path
) -> None:
    """Every server connection of a session pooler is held by other clients: the start waits
    for one no longer than ``TRIPEAKS_DB_START_TIMEOUT_S`` and exits saying what it waited for
    and why (it used to wait in PgBouncer's queue for minutes, saying nothing)."""
    bouncer = Bouncer("session", pool_size=2)
    holders: list[asyncpg.Connection] = []
    try:
        await asyncio.to_thread(bouncer.start)
        pooled = bouncer.pooled(database_url)
        for _ in range(2):  # in session mode a client keeps its server connection
            holder = await asyncpg.connect(pooled, statement_cache_size=0)
            await holder.fetchval("SELECT 1")
            holders.append(holder)
        env = _server_env("session", pooled, database_url, tmp_path / "data")
        server = ServerProcess({**env, "TRIPEAKS_DB_START_TIMEOUT_S": "3"}, tmp_path / "log")
        started = time.monotonic()
        server.start()
        assert server.process is not None
        status = await asyncio.to_thread(server.process.wait, 60)
        text = server.text()
        assert status == 1, text
        assert time.monotonic() - started < 30, text
        assert "could not start: the database did not answer within 3 s" in text, text
        assert "TRIPEAKS_DB_START_TIMEOUT_S" in text and "migrating the schema" in text, text
        assert "TRIPEAKS_DB_POOL_SIZE" in text, text
    finally:
        for holder in holders:
            await holder.close()
        await asyncio.to_thread(bouncer.close)
