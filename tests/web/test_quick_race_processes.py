"""Quick races across two real ``tripeaks serve`` processes on one database (docs/protocol.md
§11.11): players asking on either process are matched into one race and told on their own
process; a waiting player whose process is killed (``SIGKILL``: no close, no goodbye) leaves the
queue with its process's record and holds nobody up."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from tests.helpers import connect_player, eventually
from tests.pooler import DAILY_SECRET, ServerProcess


def _env(database_url: str, data: Path) -> dict[str, str]:
    return {
        "DATABASE_URL": database_url,
        "TRIPEAKS_DAILY_SECRET": DAILY_SECRET,
        "TRIPEAKS_DATA_DIR": str(data),
        "TRIPEAKS_SOLVER_WORKERS": "0",
        "TRIPEAKS_REGISTER_PER_MINUTE": "100000",
        "TRIPEAKS_RACE_COUNTDOWN_S": "0.5",
        "TRIPEAKS_RACE_SWEEP_S": "0.2",
        "TRIPEAKS_INSTANCE_TIMEOUT_S": "2",
        "TRIPEAKS_LOG_LEVEL": "WARNING",
    }


@pytest.fixture
async def processes(database_url: str, tmp_path: Path) -> AsyncIterator[list[ServerProcess]]:
    servers = [
        ServerProcess(_env(database_url, tmp_path / f"data{i}"), tmp_path / f"server{i}.log")
        for i in range(2)
    ]
    try:
        for server in servers:
            server.start()
        await asyncio.gather(*(server.ready() for server in servers))
        yield servers
    finally:
        for server in servers:
            server.stop()


async def _count(database_url: str, query: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval(query))
    finally:
        await conn.close()


async def test_players_on_two_processes_are_matched_into_one_race(
    processes: list[ServerProcess], database_url: str
) -> None:
    async with aiohttp.ClientSession() as http:
        players = [await connect_player(http, processes[n % 2].base, f"Proc{n}") for n in range(4)]
        for ws in players:
            assert (await ws.request({"type": "queue_join", "rules": "E"}))["type"] == (
                "queue_waiting"
            )
        matched = [await ws.until("queue_matched") for ws in players]
        assert len({m["invite"] for m in matched}) == 1
        seats = await _count(database_url, "SELECT count(*) FROM race_players")
        assert seats == 4
        assert await _count(database_url, "SELECT count(DISTINCT player_id) FROM race_players") == 4
        assert await _count(database_url, "SELECT count(*) FROM race_queue") == 0
        for ws in players:
            await ws.close()


async def test_a_waiting_player_of_a_killed_process_leaves_the_queue_and_holds_nobody_up(
    processes: list[ServerProcess], database_url: str
) -> None:
    doomed, alive = processes
    async with aiohttp.ClientSession() as http:
        ghost = await connect_player(http, doomed.base, "Ghost")
        await ghost.request({"type": "queue_join"})
        assert doomed.process is not None
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()

        async def ghost_gone() -> bool:
            return await _count(database_url, "SELECT count(*) FROM race_queue") == 0

        await eventually(ghost_gone, "the killed process's waiting player to leave the queue")
        players = [await connect_player(http, alive.base, f"Alive{n}") for n in range(4)]
        for ws in players:
            await ws.request({"type": "queue_join"})
        matched = [await ws.until("queue_matched") for ws in players]
        assert len({m["invite"] for m in matched}) == 1
        seated = await _count(
            database_url, f"SELECT count(*) FROM race_players WHERE player_id = {ghost.player_id}"
        )
        assert seated == 0
        for ws in players:
            await ws.close()
