"""Backends killed (``pg_terminate_backend``) again and again while players play and read, and
while the pool sets up new connections (SQLAlchemy's connect hook, ``set_type_codec``): every
answer is a success or ``unavailable`` / 503 (``server_busy`` when the pool is short), never
``internal_error`` / 500, and nothing escapes to the log as an unexpected error.

PostgreSQL alone: it is its backends that are killed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from server.engine import GameCode
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, find_winning_line, register

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
WIN = find_winning_line(CODE.deal(), CODE.rules)
#: Seconds of killing.
KILLING_S = 4.0
#: Seconds between two rounds of killing every backend of the test's database.
KILL_EVERY_S = 0.03
#: What a websocket request may be answered while its database goes away (``outcome_unknown``:
#: an action whose commit was not confirmed and whose fate could not be read, the backends of
#: the settling being killed too: docs/protocol.md §5.6).
WS_ANSWERS = {
    "game",
    "accepted",
    "error unavailable",
    "error outcome_unknown",
    "error server_busy",
    "rejected stale_seq",
}
#: What a REST request may be answered then.
HTTP_ANSWERS = {200, 503}


async def _kill_backends(database_url: str, until: float) -> int:
    """Terminate every other backend of the database, round after round, until ``until``
    (monotonic); returns how many were killed."""
    admin = await asyncpg.connect(database_url)
    killed = 0
    try:
        while time.monotonic() < until:
            killed += await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            await asyncio.sleep(KILL_EVERY_S)
    finally:
        await admin.close()
    return killed


async def test_killed_backends_are_answered_unavailable_never_internal_error(
    make_server: ServerFactory, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert WIN is not None
    # A small pool: connections are replaced (and set up anew) all the time.
    server = await make_server(db_pool_size=2, admission_wait_s=2)
    ws_answers: Counter[str] = Counter()
    http_answers: Counter[tuple[str, int]] = Counter()
    async with TestClient(server) as client:
        tokens = [(await register(client, f"Killed {i}"))["token"] for i in range(6)]
        players = [(await WsPlayer.connect(client, token))[0] for token in tokens]
        until = time.monotonic() + KILLING_S

        async def play(player: WsPlayer) -> None:
            game: dict[str, Any] | None = None
            while time.monotonic() < until:
                if game is None or game["status"] != "playing":
                    reply = await player.request({"type": "new_game", "code": str(CODE)})
                else:
                    action = WIN[game["seq"]]
                    reply = await player.act(game, action.kind.value, action.pos)
                ws_answers[" ".join(filter(None, (reply["type"], reply.get("code"))))] += 1
                if reply["type"] in ("game", "accepted"):
                    game = reply["game"]
                elif game is not None:  # ask where the game is (its write's fate is unknown)
                    resumed = await player.request({"type": "resume", "game_id": game["game_id"]})
                    ws_answers[" ".join(filter(None, (resumed["type"], resumed.get("code"))))] += 1
                    if resumed["type"] == "game":
                        game = resumed["game"]

        async def read(token: str, method: str, path: str) -> None:
            headers = {"Authorization": f"Bearer {token}"}
            while time.monotonic() < until:
                resp = await client.request(method, path, headers=headers)
                await resp.read()
                http_answers[(f"{method} {path}", resp.status)] += 1

        profile = f"/api/v1/players/{players[0].player_id}"
        killer = asyncio.create_task(_kill_backends(database_url, until))
        await asyncio.gather(
            *(play(player) for player in players),
            read(tokens[0], "GET", "/api/v1/daily"),
            read(tokens[1], "GET", profile),
            read(tokens[2], "DELETE", "/api/v1/players/me/sessions"),
            read(tokens[3], "GET", "/readyz"),
        )
        killed = await killer
        # Afterwards every player is served again.
        for player in players:
            reply = await player.request({"type": "new_game", "code": str(CODE)})
            assert reply["type"] == "game", reply
            await player.close()
    assert killed > 0
    assert set(ws_answers) <= WS_ANSWERS, ws_answers
    assert {status for _, status in http_answers} <= HTTP_ANSWERS, http_answers
    assert ws_answers["error unavailable"] > 0, ws_answers  # the killing was felt
    unexpected = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and "unexpected" in r.getMessage()
    ]
    assert not unexpected, unexpected
    print(f"killed {killed} backends; websocket {dict(ws_answers)}; http {dict(http_answers)}")
