"""Durability: a server killed with SIGKILL under load loses no acknowledged action."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg

from server.bench.crowd import choose_action
from server.bench.process import free_port
from tests.e2e.logs import agrees, checked_games
from tests.e2e.test_cli import _env, _start
from tests.helpers import WAIT_S


async def _play(
    base: str, seed: int, stop: asyncio.Event, going: asyncio.Event, seen: dict[int, Any]
) -> None:
    """Play free games as fast as acks come; remember the last acknowledged state per game
    (``going`` is set once 300 actions in all were acknowledged)."""
    rng = random.Random(seed)
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/api/v1/players", json={"name": f"Durable{seed}"}) as r:
            token = (await r.json())["token"]
        try:
            async with http.ws_connect(f"{base.replace('http', 'ws')}/ws") as ws:
                await ws.send_json({"type": "hello", "token": token})
                await ws.receive_json()
                state: dict[str, Any] | None = None
                while not stop.is_set():
                    if state is None or state["status"] != "playing":
                        await ws.send_json({"type": "new_game"})
                        state = (await ws.receive_json())["game"]
                        continue
                    message = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
                    message.update(choose_action(state, rng, undo_share=0.1))
                    await ws.send_json(message)
                    reply = await ws.receive_json()
                    if reply["type"] == "accepted":
                        state = reply["game"]
                        seen[state["game_id"]] = state
                        if sum(s["seq"] for s in seen.values()) >= 300:
                            going.set()
        except (aiohttp.ClientError, ConnectionError, TypeError, json.JSONDecodeError):
            return  # the server was killed under us


async def test_sigkill_under_load_loses_no_acknowledged_action(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = _env(
        TRIPEAKS_PORT=str(port),
        TRIPEAKS_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
        TRIPEAKS_DAILY_SECRET="durability-daily-key-0123456789abcd",
        TRIPEAKS_WS_RATE_PER_SECOND="10000",
        TRIPEAKS_SOLVER_WORKERS="0",
    )
    proc = _start(env, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    seen: dict[int, dict[str, Any]] = {}
    stop, going = asyncio.Event(), asyncio.Event()
    players = [asyncio.create_task(_play(base, seed, stop, going, seen)) for seed in range(20)]
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(going.wait(), WAIT_S)
        proc.send_signal(signal.SIGKILL)  # mid-flight: actions are being committed right now
        proc.wait(10)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*players, return_exceptions=True), 30)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert sum(s["seq"] for s in seen.values()) >= 300, "the load did not get going"

    # Restart on the same database: it must come up and serve every game.
    restarted = _start(env, port, tmp_path / "server2.log")
    try:
        conn = await asyncpg.connect(database_url)
        try:
            # No gap, no duplicate, every row agrees with its log ...
            stored = {g.row["id"]: g for g in await checked_games(conn)}
            for game_id, last in seen.items():
                # ... and every acknowledged action is there (later unacknowledged ones may be).
                assert stored[game_id].row["seq"] >= last["seq"]
                assert agrees(stored[game_id].replay_to(last["seq"]), last)
        finally:
            await conn.close()
    finally:
        restarted.send_signal(signal.SIGTERM)
        try:
            restarted.wait(15)
        except subprocess.TimeoutExpired:
            restarted.kill()
            restarted.wait(10)
