"""A game row locked by another transaction holds up only that game: bystanders' actions are
acknowledged, the waiting player's connection keeps answering pings (websocket and ``ping``
messages), its actions are applied in order once the row is free, and past the write timeout
the action is answered ``unavailable`` with nothing written. Real sockets, a real row lock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import asyncpg
from aiohttp.test_utils import TestClient

from tests.conftest import ServerFactory
from tests.helpers import TIMEOUT, WAIT_S, WsPlayer, register

Client = TestClient[Any, Any]


@asynccontextmanager
async def row_locked(database_url: str, game_id: int) -> AsyncIterator[asyncpg.Connection]:
    """Hold ``game_id``'s row with ``SELECT … FOR UPDATE`` in an open transaction, as a slow
    statement or a stuck session would."""
    conn = await asyncpg.connect(database_url)
    try:
        transaction = conn.transaction()
        await transaction.start()
        await conn.execute("SELECT 1 FROM games WHERE id = $1 FOR UPDATE", game_id)
        try:
            yield conn
        finally:
            await transaction.rollback()
    finally:
        await conn.close()


async def _stored(database_url: str, game_id: int) -> tuple[int, int]:
    conn = await asyncpg.connect(database_url)
    try:
        seq = await conn.fetchval("SELECT seq FROM games WHERE id = $1", game_id)
        logged = await conn.fetchval(
            "SELECT count(*) FROM game_actions WHERE game_id = $1", game_id
        )
    finally:
        await conn.close()
    return int(seq), int(logged)


async def _receive(ws: aiohttp.ClientWebSocketResponse) -> aiohttp.WSMessage:
    return await asyncio.wait_for(ws.receive(), TIMEOUT)


async def test_a_locked_row_delays_only_its_game_and_its_connection_keeps_answering(
    make_server: ServerFactory, database_url: str
) -> None:
    # Ann's actions wait as long as the row is held, however slowly the test gets through
    # what it checks meanwhile: the write timeout is far away (its test is the next one).
    server = await make_server(db_write_timeout_s=WAIT_S)
    async with TestClient(server) as client:
        ann = await register(client, "Ann")
        ben, _ = await WsPlayer.connect(client, (await register(client, "Ben"))["token"])
        bens_game = (await ben.request({"type": "new_game"}))["game"]
        # Ann's connection answers websocket pings itself (autoping off), so the test sees them.
        ws = await client.ws_connect("/ws", autoping=False)
        await ws.send_json({"type": "hello", "token": ann["token"], "id": "h"})
        assert json.loads((await _receive(ws)).data)["type"] == "welcome"
        await ws.send_json({"type": "new_game", "id": "g"})
        game = json.loads((await _receive(ws)).data)["game"]

        async with row_locked(database_url, game["game_id"]):
            # Two actions in a row on the locked game: both wait, in order.
            for seq, rid in ((0, "a1"), (1, "a2")):
                await ws.send_json(
                    {
                        "type": "action",
                        "game_id": game["game_id"],
                        "seq": seq,
                        "action": "draw",
                        "id": rid,
                    }
                )
            # Meanwhile the connection answers a ping message and a websocket ping...
            await ws.send_json({"type": "ping", "id": "p"})
            assert json.loads((await _receive(ws)).data) == {"type": "pong", "id": "p"}
            await ws.ping(b"still there?")
            pong = await _receive(ws)
            assert (pong.type, pong.data) == (aiohttp.WSMsgType.PONG, b"still there?")
            # ...and another player's actions go through, one commit after the other.
            for _ in range(3):
                reply = await ben.act(bens_game, "draw")
                assert reply["type"] == "accepted", reply
                bens_game = reply["game"]
            assert await _stored(database_url, game["game_id"]) == (0, 0)
        # Once the row is free, Ann's two draws are applied, in the order she sent them.
        replies = [json.loads((await _receive(ws)).data) for _ in range(2)]
        assert [(r["type"], r["id"], r["game"]["seq"]) for r in replies] == [
            ("accepted", "a1", 1),
            ("accepted", "a2", 2),
        ]
        assert await _stored(database_url, game["game_id"]) == (2, 2)
        await ws.close()
        await ben.close()


async def test_an_action_on_a_row_locked_past_the_write_timeout_is_unavailable_and_unwritten(
    make_server: ServerFactory, database_url: str
) -> None:
    server = await make_server(db_write_timeout_s=0.5)
    async with TestClient(server) as client:
        ann, _ = await WsPlayer.connect(client, (await register(client, "Ann"))["token"])
        game = (await ann.request({"type": "new_game"}))["game"]
        async with row_locked(database_url, game["game_id"]):
            reply = await ann.act(game, "draw")
            assert (reply["type"], reply["code"]) == ("error", "unavailable")
            assert "nothing was changed" in reply["message"]
            assert await _stored(database_url, game["game_id"]) == (0, 0)
            resign = await ann.request({"type": "resign", "game_id": game["game_id"]})
            assert (resign["type"], resign["code"]) == ("error", "unavailable")
        assert await _stored(database_url, game["game_id"]) == (0, 0)
        # The game is as it was: the same action now goes through.
        reply = await ann.act(game, "draw")
        assert reply["type"] == "accepted" and reply["game"]["seq"] == 1
        await ann.close()
