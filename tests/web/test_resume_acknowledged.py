"""A ``resume`` never quietly shows a game older than the client was acknowledged: given the seq
it last had acknowledged, a stored game behind it (acknowledged actions lost with a database, as
when a primary is lost under asynchronous replication) is the distinct error
``behind_acknowledged``; without ``seq`` the stored state is shown."""

from __future__ import annotations

from typing import Any

import asyncpg
from aiohttp.test_utils import TestClient

from server.engine import GameCode
from tests.helpers import WsPlayer, find_winning_line, register


async def lose_actions_after(database_url: str, game_id: int, seq: int) -> None:
    """Take the stored game back to ``seq`` as a database that lost the later actions would
    hold it: its log cut there and its row at that state."""
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute(
                "DELETE FROM game_actions WHERE game_id = $1 AND seq > $2", game_id, seq
            )
            await conn.execute(
                "UPDATE games SET seq = $2, moves = $2, score = 500 - $2 WHERE id = $1",
                game_id,
                seq,
            )
    finally:
        await conn.close()


async def test_a_resume_behind_the_acknowledged_seq_is_an_error_not_an_older_state(
    client: TestClient[Any, Any], database_url: str
) -> None:
    code = GameCode.parse("TP1-E-AAAAAAD")
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    info = await register(client, "Acknowledged")
    ws, _ = await WsPlayer.connect(client, info["token"])
    game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
    game = await ws.play(game, line[:4])
    assert game["seq"] == 4
    resume = {"type": "resume", "game_id": game["game_id"]}

    # Stored as acknowledged (or ahead of an older seq): the state.
    for seq in (4, 2, 0):
        reply = await ws.request({**resume, "seq": seq})
        assert (reply["type"], reply["game"]["seq"]) == ("game", 4), reply

    await lose_actions_after(database_url, game["game_id"], 2)
    reply = await ws.request({**resume, "seq": 4})
    assert reply["type"] == "error" and reply["code"] == "behind_acknowledged", reply
    assert "seq 2" in reply["message"] and "seq 4" in reply["message"]
    # Without seq: the stored state, which play goes on from.
    stored = (await ws.request(resume))["game"]
    assert stored["seq"] == 2
    assert (await ws.request({**resume, "seq": 2}))["game"]["seq"] == 2
    assert (await ws.act(stored, "draw"))["type"] == "accepted"

    bad = await ws.request({**resume, "seq": -1})
    assert (bad["type"], bad["code"]) == ("error", "invalid_message"), bad
    await ws.close()
