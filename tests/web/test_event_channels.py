"""Events between processes on one channel per room: two real server processes each LISTEN to
the rooms their websockets follow and no other, a room's events cross from one process to the
other, and a change whose event never came reaches the followers by the room sweep."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, connect_player, eventually, metric, metric_samples, register
from tests.pooler import DAILY_SECRET, ServerProcess

#: A TP1 deal: its first draw is always accepted.
CODE = "TP1-E-AAAAAAA"


@pytest.fixture
def two_processes(database_url: str, tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """Two ``tripeaks serve`` processes over the test's database."""
    servers = []
    for name in ("a", "b"):
        env = {
            "DATABASE_URL": database_url,
            "TRIPEAKS_DAILY_SECRET": DAILY_SECRET,
            "TRIPEAKS_DATA_DIR": str(tmp_path / name),
            "TRIPEAKS_SOLVER_WORKERS": "0",
            "TRIPEAKS_RACE_COUNTDOWN_S": "0.2",
            "TRIPEAKS_LOG_LEVEL": "WARNING",
        }
        servers.append(ServerProcess(env, tmp_path / f"{name}.log"))
    try:
        for server in servers:
            server.start()
        yield servers
        for server in servers:
            assert server.stop() == 0, server.text()[-4000:]
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _channels(http: aiohttp.ClientSession, server: ServerProcess) -> float:
    """How many room channels ``server`` LISTENs to, by its /metrics."""
    async with http.get(f"{server.base}/metrics") as resp:
        return metric(metric_samples(await resp.text()), "tripeaks_event_room_channels")


async def _listening(
    http: aiohttp.ClientSession, servers: list[ServerProcess], counts: list[int]
) -> None:
    async def holds() -> bool:
        return [await _channels(http, s) for s in servers] == counts

    await eventually(holds, f"the processes to LISTEN to {counts} room channels")


async def test_each_process_listens_to_the_rooms_it_serves_and_passes_their_events_on(
    two_processes: list[ServerProcess], http: aiohttp.ClientSession
) -> None:
    a, b = two_processes
    for server in two_processes:
        await server.ready()
    host = await connect_player(http, a.base, "Host")
    guest = await connect_player(http, b.base, "Guest")
    solo = await connect_player(http, a.base, "Solo")
    await _listening(http, two_processes, [0, 0])

    room = await host.request({"type": "race_create", "code": CODE})
    invite = room["race"]["invite"]
    joined = await guest.request({"type": "race_join", "invite": invite})
    assert joined["role"] == "racer", joined
    alone = await solo.request({"type": "race_create", "code": CODE})
    # A serves both rooms; B only the one its guest follows.
    await _listening(http, two_processes, [2, 1])

    # The host's join announcement and start cross from A to the guest on B.
    await host.request({"type": "race_start", "invite": invite})
    game = (await host.until("race_go"))["game"]
    await guest.until("race_go")
    accepted = await host.act(game, "draw")
    assert accepted["type"] == "accepted", accepted
    progress = await guest.until("race_progress", player_id=host.player_id)
    assert (progress["invite"], progress["seq"]) == (invite, 1)

    # Solo's room is A's alone: its start and progress are never B's to receive.
    await solo.request({"type": "race_start", "invite": alone["race"]["invite"]})
    solo_game = (await solo.until("race_go"))["game"]
    assert (await solo.act(solo_game, "draw"))["type"] == "accepted"
    await _listening(http, two_processes, [2, 1])

    # The guest leaves: B lets the room's channel go; A still serves the host there.
    await guest.request({"type": "race_leave", "invite": invite})
    await _listening(http, two_processes, [2, 0])
    for player in (host, guest, solo):
        await player.close()
    await _listening(http, two_processes, [0, 0])


async def test_a_change_whose_event_never_came_reaches_the_followers_by_the_room_sweep(
    make_server: ServerFactory, database_url: str
) -> None:
    server = await make_server(race_countdown_s=0.05, event_sweep_s=0.2)
    async with TestClient(server) as client:
        host_info, ann_info = await register(client, "Host"), await register(client, "Ann")
        host, _ = await WsPlayer.connect(client, host_info["token"])
        ann, _ = await WsPlayer.connect(client, ann_info["token"])
        room = await host.request({"type": "race_create", "code": CODE})
        invite = room["race"]["invite"]
        await ann.request({"type": "race_join", "invite": invite})
        await host.request({"type": "race_start", "invite": invite})
        game = (await host.until("race_go"))["game"]
        await ann.until("race_go")
        # A write whose event was lost (its process died between the commit and the publish):
        # the stored game moves on, and no event says so.
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "UPDATE games SET moves = 7, score = 777 WHERE id = $1", game["game_id"]
            )
        finally:
            await conn.close()

        def shows_it(message: dict[str, Any]) -> bool:
            racer = next(p for p in message["race"]["players"] if p["player_id"] == host.player_id)
            return bool(racer["progress"]) and racer["progress"]["moves"] == 7

        message = await ann.until("race_room")
        while not shows_it(message):
            message = await ann.until("race_room")
        assert message["race"]["invite"] == invite
