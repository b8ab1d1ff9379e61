"""A first end-to-end pass: register, connect, play a free game."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient

from tests.helpers import WsPlayer, register


async def test_register_connect_and_draw(client: TestClient[Any, Any]) -> None:
    alice = await register(client, "Alice")
    ws, welcome = await WsPlayer.connect(client, alice["token"])
    assert welcome["player"] == {"id": alice["id"], "name": "Alice"}
    reply = await ws.request({"type": "new_game", "code": "TP1-E-AAAAAAA"})
    game = reply["game"]
    assert game["tableau"][18:] == ["4S", "7S", "9H", "TS", "9D", "TD", "5H", "TH", "6D", "QS"]
    assert game["tableau"][:18] == ["down"] * 18
    reply = await ws.act(game, "draw")
    assert reply["type"] == "accepted"
    assert reply["game"]["waste"] == "KH"
    assert reply["game"]["score"] == 499
    await ws.close()
