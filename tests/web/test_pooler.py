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
import os
import sys
import time
from collections import Counter
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from pydantic import ValidationError
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine

from server.config import Settings
from server.engine import GameCode, RuleSet
from server.services.clock import FakeClock
from server.storage import db as db_module
from server.storage.db import DatabaseConfigError, create_engine, migrate
from server.storage.events import CHANNEL, Event, Listener, RaceRoomChanged, encode_event
from tests.conftest import PgBouncer, ServerFactory, _admin
from tests.helpers import (
    TIMEOUT,
    WAIT_S,
    WsPlayer,
    blocking_line,
    daily_code,
    find_winning_line,
    register,
)

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
WIN = find_winning_line(CODE.deal(), CODE.rules)
BLOCK = blocking_line(CODE.deal(), CODE.rules)
RACE_SETTINGS: dict[str, Any] = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}


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


# ----------------------------------------------------------------------------------- playing


async def test_a_free_game_a_resignation_and_a_ranked_daily_over_rest_through_the_pooler(
    pooled_server: ServerFactory, settings: Settings, clock: FakeClock, database_url: str
) -> None:
    assert WIN is not None
    server = await pooled_server()
    async with TestClient(server) as client:
        ann = await _player(client, "Ann")
        game = (await ann.request({"type": "new_game", "code": str(CODE)}))["game"]
        final = await ann.play(game, WIN)
        assert final["status"] == "won"
        resp = await client.get(f"/api/v1/games/{game['game_id']}")
        assert resp.status == 200
        body = await resp.json()
        assert (body["status"], body["score"], len(body["actions"])) == (
            "won",
            final["score"],
            len(WIN),
        )
        # A resignation runs in a transaction with SET LOCAL lock_timeout.
        other = (await ann.request({"type": "new_game"}))["game"]
        resigned = await ann.request({"type": "resign", "game_id": other["game_id"]})
        assert resigned["game"]["status"] == "resigned", resigned

        # The daily: three players, ranked over REST.
        assert settings.daily_secret
        code = daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)
        win, block = (
            find_winning_line(code.deal(), code.rules),
            blocking_line(code.deal(), code.rules),
        )
        assert win is not None and block is not None
        players = {name: await _player(client, name) for name in ("Ben", "Cy", "Dee")}
        dailies = {
            n: (await ws.request({"type": "join_daily"}))["game"] for n, ws in players.items()
        }
        clock.advance(seconds=30)
        await players["Ben"].play(dailies["Ben"], win)
        await players["Cy"].play(dailies["Cy"], block)
        await players["Dee"].play(dailies["Dee"], win)
        today = clock.now().date().isoformat()
        board = await (await client.get(f"/api/v1/daily/{today}/leaderboard")).json()
        assert [(e["name"], e["rank"]) for e in board["entries"]] == [
            ("Ben", 1),
            ("Dee", 1),
            ("Cy", 3),
        ]
        around = await client.get(
            f"/api/v1/daily/{today}/leaderboard/around/{players['Cy'].player_id}"
        )
        assert around.status == 200
        daily = await (await client.get("/api/v1/daily")).json()
        assert (daily["players"], daily["ranked"]) == (3, 3)
        for ws in (ann, *players.values()):
            await ws.close()
    stored = await _fetchval(database_url, "SELECT count(*) FROM game_actions")
    assert stored == len(WIN) + 2 * len(win) + len(block)


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


async def test_twenty_players_play_at_once_through_the_pooler_without_unavailable(
    pooled_server: ServerFactory, database_url: str
) -> None:
    """20 players register, play a deal to its end and resign a second game, all at once:
    every request is answered, none ``unavailable`` (each outcome is counted, so a failure
    shows how many)."""
    assert WIN is not None
    server = await pooled_server()
    outcomes: Counter[str] = Counter()

    async def play(client: Client, name: str) -> None:
        resp = await client.post("/api/v1/players", json={"name": name})
        outcomes[f"register {resp.status}"] += 1
        if resp.status != 201:
            return
        ws = WsPlayer(await client.ws_connect("/ws"))
        try:
            reply = await ws.request({"type": "hello", "token": (await resp.json())["token"]})
            outcomes[f"hello {reply.get('code') or reply['type']}"] += 1
            if reply["type"] != "welcome":
                return
            reply = await ws.request({"type": "new_game", "code": str(CODE)})
            outcomes[f"new_game {reply.get('code') or reply['type']}"] += 1
            if reply["type"] != "game":
                return
            game = reply["game"]
            for action in WIN:
                reply = await ws.act(game, action.kind.value, action.pos)
                outcomes[f"action {reply.get('code') or reply['type']}"] += 1
                if reply["type"] != "accepted":
                    return
                game = reply["game"]
            outcomes[f"final {game['status']}"] += 1
            spare = await ws.request({"type": "new_game"})
            if spare["type"] == "game":
                reply = await ws.request({"type": "resign", "game_id": spare["game"]["game_id"]})
                outcomes[f"resign {reply.get('code') or reply['game']['status']}"] += 1
        finally:
            await ws.close()

    async with TestClient(server) as client:
        await asyncio.gather(*(play(client, f"Player {i}") for i in range(20)))
    assert outcomes == {
        "register 201": 20,
        "hello welcome": 20,
        "new_game game": 20,
        "action accepted": 20 * len(WIN),
        "final won": 20,
        "resign resigned": 20,
    }, outcomes
    assert await _fetchval(database_url, "SELECT count(*) FROM game_actions") == 20 * len(WIN)


async def test_a_thousand_concurrent_leaderboard_reads_through_the_pooler_all_succeed(
    make_server: ServerFactory,
    pooled_server: ServerFactory,
    settings: Settings,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert settings.daily_secret
    code = daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)
    block = blocking_line(code.deal(), code.rules)
    assert block is not None
    today = clock.now().date().isoformat()
    # The board is filled through a server on the direct URL; only the reads go through the
    # pooler.
    async with TestClient(await make_server()) as client:
        players = [await _player(client, f"Ranked {i}") for i in range(6)]
        for i, ws in enumerate(players):
            game = (await ws.request({"type": "join_daily"}))["game"]
            clock.advance(seconds=i + 1)
            await ws.play(game, block)
            await ws.close()
        board = await (await client.get(f"/api/v1/daily/{today}/leaderboard")).json()
        assert len(board["entries"]) == 6
    paths = [
        f"/api/v1/daily/{today}/leaderboard",
        f"/api/v1/daily/{today}/leaderboard?limit=3",
        f"/api/v1/daily/{today}/leaderboard/around/{players[2].player_id}?radius=2",
        f"/api/v1/daily/{today}",
    ]
    # The burst queues for the server's 20 connections; on a slow machine the last reads would
    # wait past the pool's 10 s and be shed with 503 (the server's overload policy, not what is
    # checked here): this server's reads may wait their turn however long it takes.
    monkeypatch.setattr(
        db_module,
        "create_async_engine",
        lambda *args, **kwargs: create_async_engine(*args, **{**kwargs, "pool_timeout": WAIT_S}),
    )
    server = await pooled_server()
    # Every request in flight at once: a client session without a connection limit.
    async with TestClient(server, connector=aiohttp.TCPConnector(limit=0)) as client:

        async def read(path: str) -> tuple[int, Any]:
            resp = await client.get(path)
            return resp.status, await resp.json()

        answers = await asyncio.gather(*(read(paths[i % len(paths)]) for i in range(1000)))
    statuses = Counter(status for status, _ in answers)
    assert statuses == {200: 1000}, statuses
    firsts = [body for i, (_, body) in enumerate(answers) if i % len(paths) == 0]
    assert all(body == board for body in firsts)


# ------------------------------------------------------------------------------------- races


async def test_a_race_between_two_processes_through_the_pooler_crosses_progress(
    pooled_server: ServerFactory, clock: FakeClock
) -> None:
    """Events are published (``pg_notify`` in the committing transaction) through the pooler
    and received on each process's direct ``LISTEN`` connection."""
    assert WIN is not None and BLOCK is not None
    server_a = await pooled_server(**RACE_SETTINGS)
    server_b = await pooled_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host, guest = await _player(on_a, "Host"), await _player(on_b, "Guest")
        created = await host.request({"type": "race_create", "code": str(CODE)})
        invite = created["race"]["invite"]
        joined = await guest.request({"type": "race_join", "invite": invite})
        assert joined["role"] == "racer", joined
        room = await host.until("race_room")  # the guest's seat, taken on B, seen on A
        while len(room["race"]["players"]) < 2:
            room = await host.until("race_room")
        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running", started
        games = {ws: (await ws.until("race_go", invite=invite))["game"] for ws in (host, guest)}
        clock.advance(seconds=1)

        # Both play at once; each sees the other's progress, pushed from the other process.
        await asyncio.gather(host.play(games[host], BLOCK), guest.play(games[guest], WIN))
        guest_won = await host.until("race_progress", player_id=guest.player_id, status="won")
        assert guest_won["cards_left"] == 0
        host_blocked = await guest.until(
            "race_progress", player_id=host.player_id, status="blocked"
        )
        assert host_blocked["seq"] == len(BLOCK)
        for ws in (host, guest):
            results = (await ws.until("race_results"))["race"]
            assert [(r["rank"], r["name"]) for r in results["results"]] == [
                (1, "Guest"),
                (2, "Host"),
            ]
        for client in (on_a, on_b):
            body = await (await client.get(f"/api/v1/races/{invite}")).json()
            assert (body["status"], body["code"]) == ("finished", str(CODE))
        await host.close()
        await guest.close()
