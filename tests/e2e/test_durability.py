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

from server.bench.load import choose_action, free_port
from server.engine import Action, Card, Game, GameCode
from tests.e2e.test_cli import _env, _start


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


def _view(game: Game) -> dict[str, Any]:
    view = game.view()
    return {
        "tableau": [str(c) if isinstance(c, Card) else c for c in view.tableau],
        "waste": str(view.waste),
        "stock_count": view.stock_count,
        "score": view.score,
        "moves": view.moves,
        "undos": view.undos,
        "status": view.status.value,
    }


async def test_sigkill_under_load_loses_no_acknowledged_action(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    env = _env(
        TRIPEAKS_PORT=str(port),
        TRIPEAKS_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
        TRIPEAKS_DAILY_SECRET="durability-secret-0123456789",
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
            await asyncio.wait_for(going.wait(), 20)
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
            for game_id, last in seen.items():
                seqs = [
                    r["seq"]
                    for r in await conn.fetch(
                        "SELECT seq FROM game_actions WHERE game_id = $1 ORDER BY seq", game_id
                    )
                ]
                row = await conn.fetchrow("SELECT seq, code FROM games WHERE id = $1", game_id)
                # No gap, no duplicate, the row agrees with its log ...
                assert seqs == list(range(1, len(seqs) + 1))
                assert row["seq"] == len(seqs)
                # ... and every acknowledged action is there (later unacknowledged ones may be).
                assert len(seqs) >= last["seq"]
                kinds = await conn.fetch(
                    "SELECT kind, pos FROM game_actions WHERE game_id = $1 AND seq <= $2 "
                    "ORDER BY seq",
                    game_id,
                    last["seq"],
                )
                code = GameCode.parse(row["code"])
                actions = [Action.from_record(k, p) for k, p in kinds]
                replayed = Game.replay(code.deal(), code.rules, actions)
                assert _view(replayed) == {k: last[k] for k in _view(replayed)}
        finally:
            await conn.close()
    finally:
        restarted.send_signal(signal.SIGTERM)
        try:
            restarted.wait(15)
        except subprocess.TimeoutExpired:
            restarted.kill()
            restarted.wait(10)
