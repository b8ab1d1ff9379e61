"""Accounts that travel, on real servers: a recovery code signs a device in over REST, a token
is rotated and the other devices signed out, and every websocket of a revoked token is closed
at once (4001, ``signed out``) on whichever server process holds it — two processes on one
database here.

PostgreSQL only: real servers, and revocations reaching another process through NOTIFY. The
service's rules run on both stores in ``tests/services/test_accounts.py``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from aiohttp import WSMsgType
from aiohttp.test_utils import TestClient

from server.services.welcomes import Welcomed, WelcomeService
from server.web.keys import HUB, SERVICES
from server.web.ws_session import WsSession
from tests.conftest import ServerFactory
from tests.helpers import WAIT_S, WsPlayer, eventually, metric, metric_samples, register

Client = TestClient[Any, Any]
SIGN_IN_FAILED = {"code": "sign_in_failed", "message": "the name or the recovery code is wrong"}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _me(client: Client, token: str) -> int:
    return (await client.get("/api/v1/players/me", headers=_bearer(token))).status


async def _signed_out(ws: WsPlayer) -> None:
    """Wait for the server to close ``ws`` as signed out (4001)."""
    while True:
        msg = await asyncio.wait_for(ws.ws.receive(), WAIT_S)
        if msg.type is WSMsgType.TEXT:
            continue  # a reply or a push sent before the close
        assert msg.type is WSMsgType.CLOSE, msg
        assert (msg.data, msg.extra) == (4001, "signed out")
        return


async def test_a_recovery_code_signs_a_device_in_with_a_token_of_its_own(client: Client) -> None:
    ada = await register(client, "Ada")
    resp = await client.post(
        "/api/v1/sessions", json={"name": "ada", "recovery_code": ada["recovery_code"].lower()}
    )
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    assert set(body) == {"id", "name", "token"}
    assert (body["id"], body["name"]) == (ada["id"], "Ada")
    assert body["token"] != ada["token"]
    assert await _me(client, body["token"]) == 200
    assert await _me(client, ada["token"]) == 200  # the first device stays signed in
    ws, welcome = await WsPlayer.connect(client, body["token"])
    assert welcome["player"] == {"id": ada["id"], "name": "Ada"}
    await ws.close()


async def test_a_wrong_name_or_code_gets_one_answer(client: Client) -> None:
    ada = await register(client, "Ada")
    bob = await register(client, "Bob")
    for body in (
        {"name": "Ada", "recovery_code": bob["recovery_code"]},
        {"name": "Nobody", "recovery_code": ada["recovery_code"]},
        {"name": "x", "recovery_code": ada["recovery_code"]},
        {"name": "Ada", "recovery_code": "not a code"},
    ):
        resp = await client.post("/api/v1/sessions", json=body)
        assert resp.status == 401
        assert await resp.json() == {"error": SIGN_IN_FAILED}
    for raw, code in (
        (b"{not json", "bad_json"),
        (b"[]", "bad_json"),
        (b'{"name": "Ada"}', "invalid_input"),
        (b'{"name": "Ada", "recovery_code": 7}', "invalid_input"),
    ):
        resp = await client.post(
            "/api/v1/sessions", data=raw, headers={"Content-Type": "application/json"}
        )
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == code


async def test_sign_ins_from_one_address_are_rate_limited_right_or_wrong(
    make_server: ServerFactory,
) -> None:
    server = await make_server(sign_in_per_minute=3)
    async with TestClient(server) as client:
        ada = await register(client, "Ada")
        before = metric_samples(await (await client.get("/metrics")).text())
        statuses = []
        for code in ("WRONG", "WRONG", ada["recovery_code"], ada["recovery_code"], "WRONG"):
            body = {"name": "Ada", "recovery_code": code}
            statuses.append((await client.post("/api/v1/sessions", json=body)).status)
        assert statuses == [401, 401, 201, 429, 429]
        resp = await client.post(
            "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
        )
        assert (await resp.json())["error"] == {
            "code": "rate_limited",
            "message": "too many sign-ins from this address; try again later",
        }
        # Registrations are counted apart.
        assert (await client.post("/api/v1/players", json={"name": "Bob"})).status == 201
        after = metric_samples(await (await client.get("/metrics")).text())
        kind = "tripeaks_rate_limited_total"
        assert metric(after, kind, kind="sign_in") - metric(before, kind, kind="sign_in") == 3


async def test_a_rotated_token_stops_working_at_once_and_its_sockets_close(
    client: Client,
) -> None:
    ada = await register(client, "Ada")
    old_ws, _ = await WsPlayer.connect(client, ada["token"])
    resp = await client.post("/api/v1/players/me/token", headers=_bearer(ada["token"]))
    assert resp.status == 200
    body = await resp.json()
    assert set(body) == {"token"} and body["token"] != ada["token"]
    assert await _me(client, ada["token"]) == 401
    assert await _me(client, body["token"]) == 200
    await _signed_out(old_ws)
    # The new token says hello; the old one cannot, nor rotate again.
    new_ws, _ = await WsPlayer.connect(client, body["token"])
    again = WsPlayer(await client.ws_connect("/ws"))
    refused = await again.request({"type": "hello", "token": ada["token"]})
    assert refused["code"] == "unauthorized"
    resp = await client.post("/api/v1/players/me/token", headers=_bearer(ada["token"]))
    assert resp.status == 401
    assert (await new_ws.request({"type": "ping"}))["type"] == "pong"
    await new_ws.close()
    await again.close()


async def test_a_new_recovery_code_replaces_the_old_one(client: Client) -> None:
    ada = await register(client, "Ada")
    resp = await client.post("/api/v1/players/me/recovery-code", headers=_bearer(ada["token"]))
    assert resp.status == 200
    code = (await resp.json())["recovery_code"]
    assert code != ada["recovery_code"]
    old = await client.post(
        "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
    )
    assert old.status == 401
    new = await client.post("/api/v1/sessions", json={"name": "Ada", "recovery_code": code})
    assert new.status == 201
    assert await _me(client, ada["token"]) == 200
    resp = await client.post("/api/v1/players/me/recovery-code")
    assert resp.status == 401


async def test_signing_out_keeps_the_callers_device_or_none(client: Client) -> None:
    ada = await register(client, "Ada")
    bob = await register(client, "Bob")
    devices = []
    for _ in range(2):
        resp = await client.post(
            "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
        )
        devices.append((await resp.json())["token"])
    resp = await client.delete("/api/v1/players/me/sessions", headers=_bearer(devices[0]))
    assert resp.status == 200 and await resp.json() == {"signed_out": 2}
    assert [await _me(client, t) for t in (devices[0], devices[1], ada["token"])] == [
        200,
        401,
        401,
    ]
    assert await _me(client, bob["token"]) == 200
    resp = await client.delete(
        "/api/v1/players/me/sessions?keep=current", headers=_bearer(devices[0])
    )
    assert await resp.json() == {"signed_out": 0}
    resp = await client.delete("/api/v1/players/me/sessions?keep=all", headers=_bearer(devices[0]))
    assert resp.status == 400 and (await resp.json())["error"]["code"] == "bad_keep"
    resp = await client.delete("/api/v1/players/me/sessions?keep=none", headers=_bearer(devices[0]))
    assert await resp.json() == {"signed_out": 1}
    assert await _me(client, devices[0]) == 401


async def test_signing_out_other_devices_closes_their_sockets_on_every_process(
    make_server: ServerFactory,
) -> None:
    one, two = await make_server(), await make_server()
    async with TestClient(one) as c1, TestClient(two) as c2:
        ada = await register(c1, "Ada")
        bob = await register(c1, "Bob")
        signed_in = await c2.post(
            "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
        )
        phone = (await signed_in.json())["token"]
        here_one, _ = await WsPlayer.connect(c1, ada["token"])
        here_two, _ = await WsPlayer.connect(c2, ada["token"])
        phone_one, _ = await WsPlayer.connect(c1, phone)
        phone_two, _ = await WsPlayer.connect(c2, phone)
        bob_two, _ = await WsPlayer.connect(c2, bob["token"])

        resp = await c1.delete("/api/v1/players/me/sessions", headers=_bearer(ada["token"]))
        assert await resp.json() == {"signed_out": 1}
        await _signed_out(phone_one)  # on the process that answered
        await _signed_out(phone_two)  # and on the other, told through the database
        for ws in (here_one, here_two, bob_two):
            assert (await ws.request({"type": "ping"}))["type"] == "pong"

        # Rotating closes the caller's own sockets of the old token, on both processes.
        resp = await c2.post("/api/v1/players/me/token", headers=_bearer(ada["token"]))
        assert resp.status == 200
        await _signed_out(here_one)
        await _signed_out(here_two)
        assert (await bob_two.request({"type": "ping"}))["type"] == "pong"
        await bob_two.close()


async def test_a_hello_racing_a_revocation_is_closed_all_the_same(
    make_server: ServerFactory,
) -> None:
    """A revocation handled while a hello's token is being looked up (found still valid) is
    checked again once the connection counts as signed in."""
    one, two = await make_server(), await make_server()
    services, hub = two.app[SERVICES], two.app[HUB]
    welcomes: WelcomeService = services.welcomes
    looked_up, go_on = asyncio.Event(), asyncio.Event()
    real_welcome = welcomes.welcome

    async def slow_welcome(token: str | None, held: Mapping[int, int] | None = None) -> Welcomed:
        found = await real_welcome(token, held)
        looked_up.set()
        await go_on.wait()
        return found

    async with TestClient(one) as c1, TestClient(two) as c2:
        ada = await register(c1, "Ada")
        welcomes.welcome = slow_welcome  # type: ignore[method-assign]
        ws = WsPlayer(await c2.ws_connect("/ws"))
        await ws.send({"type": "hello", "token": ada["token"], "id": "h"})
        await asyncio.wait_for(looked_up.wait(), WAIT_S)
        seen = hub.revocations
        resp = await c1.post("/api/v1/players/me/token", headers=_bearer(ada["token"]))
        assert resp.status == 200
        await eventually(lambda: hub.revocations > seen, "process two handling the revocation")
        go_on.set()
        await _signed_out(ws)


async def test_a_device_signed_out_has_nothing_stored_before_its_socket_is_closed(
    make_server: ServerFactory, monkeypatch: Any
) -> None:
    """The revocation's notice closes a signed-out device's sockets a few milliseconds after
    the sign-out commits; whatever that device sends meanwhile is refused, not stored. The
    other process's notice is held back here (as by a slow listener), so every request below
    comes in that window."""
    one, two = await make_server(), await make_server()
    monkeypatch.setattr(two.app[HUB], "check_tokens", lambda connections: None)
    async with TestClient(one) as c1, TestClient(two) as c2:
        ada = await register(c1, "Ada")
        signed_in = await c2.post(
            "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
        )
        phone = (await signed_in.json())["token"]
        on_phone, _ = await WsPlayer.connect(c2, phone)
        state = (await on_phone.request({"type": "new_game"}))["game"]
        moved = await on_phone.request(
            {"type": "action", "game_id": state["game_id"], "seq": 0, "action": "draw"}
        )
        assert moved["type"] == "accepted"

        resp = await c1.delete("/api/v1/players/me/sessions", headers=_bearer(ada["token"]))
        assert await resp.json() == {"signed_out": 1}
        reply = await on_phone.request(
            {"type": "action", "game_id": state["game_id"], "seq": 1, "action": "draw"}
        )
        assert (reply["type"], reply["code"]) == ("error", "unauthorized")
        await _signed_out(on_phone)  # closed by the refusal itself
        game = await c1.get(f"/api/v1/games/{state['game_id']}", headers=_bearer(ada["token"]))
        assert (await game.json())["seq"] == 1  # the refused draw is not stored

        # A request that changes ranked or shared state is refused before it does anything.
        other, _ = await WsPlayer.connect(c2, ada["token"])
        resp = await c1.post("/api/v1/players/me/token", headers=_bearer(ada["token"]))
        assert resp.status == 200
        reply = await other.request({"type": "join_daily"})
        assert (reply["type"], reply["code"]) == ("error", "unauthorized")
        await _signed_out(other)


async def test_requests_taken_up_before_a_sign_out_closes_the_socket_are_all_answered(
    make_server: ServerFactory,
) -> None:
    """A device signed out while requests of its own wait to be served (one being served,
    the others queued behind it) gets an answer to each — the one being served as it ends,
    the others ``unauthorized`` — and only then the close 4001; so does a request read while
    they are answered."""
    server = await make_server()
    games = server.app[SERVICES].games
    serving, go_on = asyncio.Event(), asyncio.Event()
    real_new_free_game = games.new_free_game

    async def slow_new_free_game(*args: Any, **kwargs: Any) -> Any:
        serving.set()
        await go_on.wait()
        return await real_new_free_game(*args, **kwargs)

    async with TestClient(server) as client:
        ada = await register(client, "Ada")
        phone = await client.post(
            "/api/v1/sessions", json={"name": "Ada", "recovery_code": ada["recovery_code"]}
        )
        on_phone, _ = await WsPlayer.connect(client, (await phone.json())["token"])
        games.new_free_game = slow_new_free_game  # type: ignore[method-assign]
        await on_phone.send({"type": "new_game", "id": 0})
        await asyncio.wait_for(serving.wait(), WAIT_S)
        queued = 40
        for n in range(1, queued + 1):
            await on_phone.send({"type": "resume", "game_id": 1, "id": n})
        (connection,) = server.app[HUB]._signed_in[ada["id"]]
        assert isinstance(connection, WsSession)
        session = connection

        await eventually(lambda: session.requests.qsize() == queued, "the requests to queue")
        resp = await client.delete("/api/v1/players/me/sessions", headers=_bearer(ada["token"]))
        assert await resp.json() == {"signed_out": 1}
        await eventually(lambda: session.signed_out, "the revocation to reach the socket")
        await on_phone.send({"type": "resume", "game_id": 1, "id": queued + 1})
        go_on.set()

        answers: dict[int, dict[str, Any]] = {}
        while True:
            msg = await asyncio.wait_for(on_phone.ws.receive(), WAIT_S)
            if msg.type is not WSMsgType.TEXT:
                assert msg.type is WSMsgType.CLOSE, msg
                assert (msg.data, msg.extra) == (4001, "signed out")
                break
            reply = json.loads(msg.data)
            answers[reply["id"]] = reply
        assert answers[0]["type"] == "game"  # served as it was, being served already
        assert sorted(answers) == list(range(queued + 2))
        for n in range(1, queued + 2):
            assert (answers[n]["type"], answers[n]["code"]) == ("error", "unauthorized")


async def test_one_worker_serves_a_connections_requests_from_the_first_to_the_close(
    make_server: ServerFactory,
) -> None:
    """A connection's requests are served by one task in the order they came, not a task
    each; the task ends with the connection."""
    server = await make_server()
    async with TestClient(server) as client:
        ada = await register(client, "Ada")
        player, _ = await WsPlayer.connect(client, ada["token"])
        (connection,) = server.app[HUB]._signed_in[ada["id"]]
        assert isinstance(connection, WsSession)
        worker = connection.worker
        assert worker is not None and not worker.done()
        game = await player.request({"type": "new_game"})
        assert game["type"] == "game"
        # Several at once: answered in order, by the same worker.
        for n in range(5):
            await player.send({"type": "resume", "game_id": game["game"]["game_id"], "id": n})
        replies = [await player.recv() for _ in range(5)]
        assert [r["id"] for r in replies] == list(range(5))
        assert all(r["type"] == "game" for r in replies)
        await eventually(lambda: connection.idle.is_set(), "the worker to wait for more")
        assert connection.worker is worker and not worker.done()
        await player.ws.close()
        await eventually(lambda: worker.done(), "the worker to end with the connection")
