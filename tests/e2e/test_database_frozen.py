"""PostgreSQL frozen under play (every one of its processes stopped with ``SIGSTOP``, sockets
open, nothing answering): every request meanwhile is answered within its deadlines instead of
hanging, and the same server process and sockets play on once the database is thawed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from server.bench.process import free_port
from server.errors import StorageUnavailable
from server.storage.db import DatabaseDeadlines, create_engine
from server.storage.single import read_single
from tests.e2e.test_cli import _start
from tests.e2e.test_database_restart import (
    REPLY_BOUND_S,
    Phase,
    World,
    _health,
    _play,
    _until,
    outage_env,
    signed_in_players,
)
from tests.freeze import freeze, thaw
from tests.helpers import WAIT_S, eventually
from tests.pg import PrivatePostgres

PLAYERS = 4
#: Errors each player must get to requests sent while the database is frozen.
OUTAGE_ERRORS = 2
#: Actions each player must get accepted before the freeze and after the thaw.
ACCEPTED = 5
#: A read still running when the database is frozen (far longer than its deadline).
SLOW_READ = "SELECT pg_sleep(30)"


async def test_a_frozen_database_answers_unavailable_in_time_and_play_resumes_on_thaw(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    port = free_port()
    env = outage_env(
        port,
        tmp_path,
        private_postgres.url,
        # Deadlines short enough that each reply comes within the players' REPLY_BOUND_S.
        TRIPEAKS_DB_CONNECT_TIMEOUT_S="0.5",
        TRIPEAKS_DB_STATEMENT_TIMEOUT_S="1",
        TRIPEAKS_DB_WRITE_TIMEOUT_S="0.5",
    )
    proc = _start(env, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    world = World()
    tasks: list[asyncio.Task[None]] = []
    frozen: list[int] = []
    try:
        async with aiohttp.ClientSession() as http:
            players = await signed_in_players(http, base, PLAYERS, "Frozen")
            tasks = [asyncio.create_task(_play(p, world)) for p in players]

            def accepted(phase: Phase) -> list[int]:
                return [p.replies[phase, "accepted"] for p in players]

            def stopped() -> bool:
                return any(t.done() for t in tasks)

            await _until(lambda: min(accepted(Phase.UP)) >= ACCEPTED, WAIT_S, "play to get going")

            # Frozen while every player has an action on its way.
            world.phase = Phase.STOPPING
            frozen = await asyncio.to_thread(freeze, private_postgres)
            world.phase = Phase.DOWN
            await _until(
                lambda: (
                    min(p.replies[Phase.DOWN, "unavailable"] for p in players) >= OUTAGE_ERRORS
                    or stopped()
                ),
                WAIT_S,
                "every player to be told the database is unavailable",
            )
            status, body = await _health(http, base)
            assert (status, body["database"]) == (503, "unreachable")

            world.phase = Phase.STARTING
            thaw(frozen)
            world.phase = Phase.BACK
            await _until(
                lambda: min(accepted(Phase.BACK)) >= ACCEPTED or stopped(),
                WAIT_S,
                "play to resume",
            )
            assert (await _health(http, base))[0] == 200
            world.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks), 2 * REPLY_BOUND_S)
            for p in players:
                await p.ws.close()
    finally:
        thaw(frozen)
        world.stop.set()
        for task in tasks:
            task.cancel()
        proc.terminate()
        proc.wait(30)
    # No reply outlived REPLY_BOUND_S, every error was `unavailable`, and each player resumed
    # at its last acknowledged state (or one on: an action in flight at the freeze, stored).
    problems = [f"player {p.seed}: {problem}" for p in players for problem in p.problems]
    assert not problems, "\n".join(problems) + "\n" + (tmp_path / "server.log").read_text()[-4000:]
    assert all(p.resumed is not None for p in players)


async def test_a_read_past_its_deadline_gives_its_connection_up(
    private_postgres: PrivatePostgres,
) -> None:
    """A statement read through the driver alone (a game's load) that runs past its deadline
    leaves its connection waiting for a cancel the frozen server never confirms: it is never
    put back in the pool, where the next checkout's ping would wait on that cancel for as long
    as the database stays frozen."""
    deadlines = DatabaseDeadlines(connect_s=1.0, statement_s=3.0, checkout_s=5.0)
    engine = create_engine(private_postgres.url, pool_size=1, deadlines=deadlines)
    frozen: list[int] = []
    try:
        reading = asyncio.create_task(read_single(engine, SLOW_READ, []))
        watcher = await asyncpg.connect(private_postgres.url)
        try:

            async def running() -> bool:
                return bool(
                    await watcher.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE query = $1", SLOW_READ
                    )
                )

            await eventually(running, "the read to be running")
        finally:
            await watcher.close()
        frozen = freeze(private_postgres)
        with pytest.raises(StorageUnavailable):
            await asyncio.wait_for(reading, WAIT_S)
        # The next read checks a connection out within its deadlines (a new one, which the
        # frozen server does not take either) instead of pinging the first one.
        with pytest.raises(StorageUnavailable):
            await asyncio.wait_for(read_single(engine, "SELECT 1", []), WAIT_S)
        thaw(frozen)
        frozen = []

        async def answers() -> bool:
            try:
                row = await read_single(engine, "SELECT 2", [])
            except StorageUnavailable:
                return False
            return row is not None and row[0] == 2

        await eventually(answers, "the thawed database to answer")
    finally:
        if frozen:
            thaw(frozen)
        await asyncio.wait_for(engine.dispose(), WAIT_S)
