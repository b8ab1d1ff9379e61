"""Abuse and multi-process consistency: what a hostile or unlucky client can do, and can't."""

from __future__ import annotations

import secrets
from typing import Any

import asyncpg
import pytest
import sqlalchemy.exc
from aiohttp.test_utils import TestClient

from server.storage.sessions import storage_errors
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, register

Client = TestClient[Any, Any]
VECTOR = "TP1-E-AAAAAAA"


async def test_a_game_resigned_on_one_process_cannot_be_played_on_another(
    make_server: ServerFactory, database_url: str
) -> None:
    one, two = await make_server(), await make_server()
    async with TestClient(one) as c1, TestClient(two) as c2:
        info = await register(c1, "Twice")
        a, _ = await WsPlayer.connect(c1, info["token"])
        b, _ = await WsPlayer.connect(c2, info["token"])
        game = (await a.request({"type": "new_game", "code": VECTOR}))["game"]
        game = (await a.act(game, "draw"))["game"]  # process one now holds seq 1
        resigned = await b.request({"type": "resign", "game_id": game["game_id"]})
        assert resigned["game"]["status"] == "resigned"
        reply = await a.act(game, "draw")  # process one's copy is out of date
        assert reply["type"] == "rejected"
        assert reply["game"]["status"] == "resigned"
        conn = await asyncpg.connect(database_url)
        try:
            row = await conn.fetchrow(
                "SELECT status, seq FROM games WHERE id = $1", game["game_id"]
            )
            count = await conn.fetchval(
                "SELECT count(*) FROM game_actions WHERE game_id = $1", game["game_id"]
            )
        finally:
            await conn.close()
        assert (row["status"], row["seq"], count) == ("resigned", 1, 1)


async def test_a_stale_request_is_answered_with_the_stored_state_of_another_process(
    make_server: ServerFactory,
) -> None:
    one, two = await make_server(), await make_server()
    async with TestClient(one) as c1, TestClient(two) as c2:
        info = await register(c1, "Split")
        a, _ = await WsPlayer.connect(c1, info["token"])
        b, _ = await WsPlayer.connect(c2, info["token"])
        start = (await a.request({"type": "new_game", "code": VECTOR}))["game"]
        after_draw = (await a.act(start, "draw"))["game"]
        moved = (await b.request({"type": "resume", "game_id": start["game_id"]}))["game"]
        moved = (await b.act(moved, "undo"))["game"]
        moved = (await b.act(moved, "remove", 24))["game"]
        assert moved["seq"] == 3
        # Process one still holds seq 1: a repeat of its last action is no longer a repeat.
        reply = await a.act(start, "draw")
        assert (reply["type"], reply["code"]) == ("rejected", "stale_seq")
        assert reply["game"]["seq"] == 3
        reply = await a.act(after_draw, "remove", 24)
        assert (reply["type"], reply["code"]) == ("rejected", "stale_seq")
        assert reply["game"] == moved | {"elapsed_ms": reply["game"]["elapsed_ms"]}


async def _stored(database_url: str, game_id: int) -> tuple[str, int]:
    """A game row's status and seq."""
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow("SELECT status, seq FROM games WHERE id = $1", game_id)
    finally:
        await conn.close()
    return row["status"], row["seq"]


async def _game_on_both(c1: Client, c2: Client) -> tuple[WsPlayer, WsPlayer, dict[str, Any]]:
    """A free game started on process one, then cached by process two (its hello lists the
    game, its resume reads it): the player's sockets on each and the game's STATE."""
    info = await register(c1, "Twice")
    a, _ = await WsPlayer.connect(c1, info["token"])
    game = (await a.request({"type": "new_game"}))["game"]
    b, welcome = await WsPlayer.connect(c2, info["token"])
    assert [g["game_id"] for g in welcome["games"]] == [game["game_id"]]
    resumed = await b.request({"type": "resume", "game_id": game["game_id"]})
    assert resumed["game"]["seq"] == 0
    return a, b, game


async def test_a_repeated_action_on_a_process_behind_is_acknowledged(
    make_server: ServerFactory,
) -> None:
    one, two = await make_server(), await make_server()
    async with TestClient(one) as c1, TestClient(two) as c2:
        a, b, game = await _game_on_both(c1, c2)
        first = await a.act(game, "draw")
        assert first["type"] == "accepted" and first["game"]["seq"] == 1
        # The client did not see that ack and sends the same message again on process two.
        again = await b.act(game, "draw")
        assert again["type"] == "accepted", again
        assert again["game"] == {**first["game"], "elapsed_ms": again["game"]["elapsed_ms"]}
        # A different action at the old seq is stale, answered with the stored state.
        other = await b.act(game, "undo")
        assert (other["type"], other["code"], other["game"]["seq"]) == ("rejected", "stale_seq", 1)


async def test_a_resignation_on_a_process_behind_resigns_the_stored_game(
    make_server: ServerFactory, database_url: str
) -> None:
    one, two = await make_server(), await make_server()
    async with TestClient(one) as c1, TestClient(two) as c2:
        a, b, game = await _game_on_both(c1, c2)
        state = (await a.act(game, "draw"))["game"]
        state = (await a.act(state, "draw"))["game"]
        resigned = await b.request({"type": "resign", "game_id": game["game_id"]})
        assert resigned["type"] == "game", resigned
        assert (resigned["game"]["status"], resigned["game"]["seq"]) == ("resigned", 2)
        assert resigned["game"]["moves"] == state["moves"]
        assert await _stored(database_url, game["game_id"]) == ("resigned", 2)
        late = await a.act(state, "draw")
        assert late["type"] == "rejected" and late["game"]["status"] == "resigned", late


async def test_a_lone_surrogate_in_an_id_is_escaped_not_fatal(
    client: TestClient[Any, Any],
) -> None:
    info = await register(client, "Surrogate")
    ws, _ = await WsPlayer.connect(client, info["token"])
    await ws.send_raw('{"type": "ping", "id": "\\ud800"}')
    reply = await ws.recv()  # refused, and the refusal still reaches the client
    assert (reply["type"], reply["code"], reply["id"]) == ("error", "invalid_message", "\ud800")
    assert (await ws.request({"type": "ping"}))["type"] == "pong"


async def test_deeply_nested_json_bodies_are_bad_json(client: TestClient[Any, Any]) -> None:
    resp = await client.post(
        "/api/v1/players", data="[" * 60_000, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "bad_json"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/players", '{"name": 1' + "0" * 5000 + "}"),  # past int()'s 4,300 digits
        ("/api/v1/sessions", '{"name": 1' + "0" * 5000 + ', "recovery_code": "x"}'),
        ("/api/v1/players", '{"name": NaN}'),
        ("/api/v1/sessions", '{"name": "Ada", "recovery_code": -Infinity}'),
    ],
)
async def test_numbers_json_does_not_have_are_bad_json(
    client: TestClient[Any, Any], path: str, body: str
) -> None:
    resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["error"]["code"] == "bad_json"


async def test_a_frame_of_exactly_the_limit_is_accepted(client: TestClient[Any, Any]) -> None:
    info = await register(client, "Exact")
    ws, _ = await WsPlayer.connect(client, info["token"])
    frame = '{"type": "ping", "id": "x"' + " " * (4096 - 27) + "}"
    assert len(frame.encode()) == 4096
    await ws.send_raw(frame)
    assert (await ws.recv()) == {"type": "pong", "id": "x"}
    await ws.send_raw(frame + " ")
    msg = await ws.ws.receive()
    assert msg.type.name == "CLOSE" and msg.data == 1009


async def test_registrations_from_one_address_are_rate_limited(
    make_server: ServerFactory,
) -> None:
    server = await make_server(register_per_minute=3)
    async with TestClient(server) as client:
        statuses = []
        for i in range(5):
            resp = await client.post("/api/v1/players", json={"name": f"Many{i}"})
            statuses.append(resp.status)
        assert statuses == [201, 201, 201, 429, 429]
        assert (await resp.json())["error"]["code"] == "rate_limited"


async def test_ipv6_addresses_of_one_64_share_their_rate_limit(make_server: ServerFactory) -> None:
    server = await make_server(register_per_minute=2, trust_forwarded_for=True)
    # A /64 of its own per run: the limiter's counts live as long as the process.
    site, subnet = secrets.randbelow(1 << 16), secrets.randbelow((1 << 16) - 1)
    net = f"2001:db8:{site:x}:{subnet:x}"
    async with TestClient(server) as client:

        async def register_from(address: str, name: str) -> int:
            resp = await client.post(
                "/api/v1/players", json={"name": name}, headers={"X-Forwarded-For": address}
            )
            return resp.status

        # Three addresses of one subscriber's /64 count as one address...
        assert await register_from(f"{net}::1", "Sixa") == 201
        assert await register_from(f"{net}:aaaa::2", "Sixb") == 201
        assert await register_from(f"{net}:ffff:1:2:3", "Sixc") == 429
        # ...and the next /64 is another one.
        assert await register_from(f"2001:db8:{site:x}:{subnet + 1:x}::1", "Sixd") == 201


async def test_one_player_may_hold_only_so_many_sockets(make_server: ServerFactory) -> None:
    server = await make_server(max_sockets_per_player=2)
    async with TestClient(server) as client:
        info = await register(client, "Hoarder")
        first, _ = await WsPlayer.connect(client, info["token"])
        second, _ = await WsPlayer.connect(client, info["token"])
        third = WsPlayer(await client.ws_connect("/ws"))
        reply = await third.request({"type": "hello", "token": info["token"]})
        assert (reply["type"], reply["code"]) == ("error", "too_many_connections")
        await first.close()
        for _ in range(50):  # the server notices the close
            reply = await third.request({"type": "hello", "token": info["token"]})
            if reply["type"] == "welcome":
                break
        assert reply["type"] == "welcome"
        assert (await second.request({"type": "ping"}))["type"] == "pong"


async def test_game_codes_take_only_ascii_letters(client: TestClient[Any, Any]) -> None:
    info = await register(client, "Ascii")
    ws, _ = await WsPlayer.connect(client, info["token"])
    for code in ("TP1-E-AAAAAAı", "TP1-E-ſAAAAAA"):
        reply = await ws.request({"type": "new_game", "code": code})
        assert (reply["type"], reply["code"]) == ("error", "bad_code")


async def test_look_alike_names_are_the_same_name(client: TestClient[Any, Any]) -> None:
    await register(client, "Ada")
    resp = await client.post("/api/v1/players", json={"name": "𝕬𝖉𝖆"})
    assert resp.status == 409
    assert (await resp.json())["error"]["code"] == "name_taken"


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (sqlalchemy.exc.TimeoutError("no connection came free"), "server_busy"),
        (sqlalchemy.exc.OperationalError("SELECT 1", None, Exception("gone")), "unavailable"),
        (ConnectionRefusedError("refused"), "unavailable"),
    ],
)
async def test_a_database_failure_under_a_websocket_message_is_answered_by_its_kind(
    make_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    failure: Exception,
    code: str,
) -> None:
    """A pool time-out is ``server_busy`` (with when to come back), any other database
    failure ``unavailable``: the one translation the REST API uses too. The failure is raised
    as storage raises it (through its one translation of driver errors)."""
    server = await make_server()

    async def failing(player_id: int, game_id: int, **_: object) -> object:
        with storage_errors():
            raise failure

    monkeypatch.setattr(server.app[SERVICES].games, "resume", failing)
    async with TestClient(server) as client:
        token = (await register(client, "Failing"))["token"]
        player, _ = await WsPlayer.connect(client, token)
        reply = await player.request({"type": "resume", "game_id": 5})
        assert reply["type"] == "error" and reply["code"] == code
        assert ("retry_after_ms" in reply) is (code == "server_busy")
        await player.close()
