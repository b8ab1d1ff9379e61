"""One player served by two server processes in turn: a process whose cached copy of a game is
behind the stored row answers from the stored row — for a repeated action, a resignation and a
racer leaving — never with a spurious ``stale_seq`` or a leave that resigns nothing."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy import select

from server.services.clock import FakeClock
from server.storage.db import create_engine
from server.storage.models import Game
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, register
from tests.web.test_race_robustness import RACE_SETTINGS, _open_room, _player, _start

Client = TestClient[Any, Any]


async def _stored(database_url: str, game_id: int) -> tuple[str, int]:
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            row = (
                await conn.execute(select(Game.status, Game.seq).where(Game.id == game_id))
            ).one()
    finally:
        await engine.dispose()
    return row.status, row.seq


async def _game_on_both(
    make_server: ServerFactory,
) -> tuple[WsPlayer, WsPlayer, dict[str, Any], list[Client]]:
    """A free game started on process A, then cached by process B (a second socket's hello
    lists it): returns the player's sockets on A and B, the game's STATE and the clients."""
    on_a = TestClient(await make_server())
    on_b = TestClient(await make_server())
    await on_a.start_server()
    await on_b.start_server()
    info = await register(on_a, "Twice")
    ws_a, _ = await WsPlayer.connect(on_a, info["token"])
    game = (await ws_a.request({"type": "new_game"}))["game"]
    ws_b, welcome = await WsPlayer.connect(on_b, info["token"])
    assert [g["game_id"] for g in welcome["games"]] == [game["game_id"]]
    resumed = await ws_b.request({"type": "resume", "game_id": game["game_id"]})
    assert resumed["game"]["seq"] == 0
    return ws_a, ws_b, game, [on_a, on_b]


async def test_a_repeated_action_on_a_process_behind_is_acknowledged(
    make_server: ServerFactory,
) -> None:
    ws_a, ws_b, game, clients = await _game_on_both(make_server)
    try:
        first = await ws_a.act(game, "draw")
        assert first["type"] == "accepted" and first["game"]["seq"] == 1
        # The client did not see that ack and sends the same message again on B.
        again = await ws_b.act(game, "draw")
        assert again["type"] == "accepted", again
        assert again["game"] == {**first["game"], "elapsed_ms": again["game"]["elapsed_ms"]}
        # A different action at the old seq is stale, answered with the stored state.
        other = await ws_b.act(game, "undo")
        assert (other["type"], other["code"], other["game"]["seq"]) == ("rejected", "stale_seq", 1)
    finally:
        for client in clients:
            await client.close()


async def test_a_resignation_on_a_process_behind_resigns_the_stored_game(
    make_server: ServerFactory, database_url: str
) -> None:
    ws_a, ws_b, game, clients = await _game_on_both(make_server)
    try:
        state = (await ws_a.act(game, "draw"))["game"]
        state = (await ws_a.act(state, "draw"))["game"]
        resigned = await ws_b.request({"type": "resign", "game_id": game["game_id"]})
        assert resigned["type"] == "game", resigned
        assert (resigned["game"]["status"], resigned["game"]["seq"]) == ("resigned", 2)
        assert resigned["game"]["moves"] == state["moves"]
        assert await _stored(database_url, game["game_id"]) == ("resigned", 2)
        late = await ws_a.act(state, "draw")
        assert late["type"] == "rejected" and late["game"]["status"] == "resigned", late
    finally:
        for client in clients:
            await client.close()


async def test_a_racer_leaving_on_a_process_behind_has_their_game_resigned(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    on_a = TestClient(await make_server(**RACE_SETTINGS))
    on_b = TestClient(await make_server(**RACE_SETTINGS))
    await on_a.start_server()
    await on_b.start_server()
    try:
        host = await _player(on_a, "Host")
        racer_info = await register(on_a, "Racer")
        racer, _ = await WsPlayer.connect(on_a, racer_info["token"])
        invite = await _open_room(host, racer)
        games = await _start(host, invite, [host, racer], clock)
        game = games[racer]
        # The racer's second socket, on B, caches the game at seq 0.
        racer_b, _ = await WsPlayer.connect(on_b, racer_info["token"])
        assert (await racer_b.request({"type": "resume", "game_id": game["game_id"]}))["game"][
            "seq"
        ] == 0
        moved = await racer.act(game, "draw")
        assert moved["type"] == "accepted"
        left = await racer_b.request({"type": "race_leave", "invite": invite})
        assert left["type"] == "race_left", left
        assert await _stored(database_url, game["game_id"]) == ("resigned", 1)
        after = await racer.act(moved["game"], "draw")
        assert after["type"] == "rejected" and after["game"]["status"] == "resigned", after
    finally:
        await on_a.close()
        await on_b.close()
