"""Moderation as players meet it, on a real server: a banned player is refused the daily, opening
a race, a racer's seat and starting a lobby opened before the ban, with the reason, and keeps
free play and watching; a daily game finished after the ban stays off the board until the unban;
registration keeps a keyed hash of the client's address (the forwarded one behind a trusted
proxy), never the address."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from server.config import Settings
from server.engine import RuleSet
from server.services.addresses import address_key, hash_address
from server.services.moderation import ModerationService
from server.storage.db import create_engine
from server.storage.models import Player
from server.web.keys import SERVICES
from tests.helpers import WsPlayer, blocking_line, daily_code, register

Client = TestClient[Any, Any]
DATE = dt.date(2026, 3, 14)
BOARD = "/api/v1/daily/2026-03-14/leaderboard"
BANNED = (
    "you are banned from ranked play (since {since}): played the daily with a solver. Free play "
    "and watching races are still open to you"
)


def moderation(server: TestServer) -> ModerationService:
    service: ModerationService = server.app[SERVICES].moderation
    return service


async def test_a_banned_player_gets_no_ranked_play_but_keeps_free_play_and_watching(
    client: Client, server: TestServer
) -> None:
    mallory = await register(client, "Mallory")
    alice = await register(client, "Alice")
    ws_m, _ = await WsPlayer.connect(client, mallory["token"])
    ws_a, _ = await WsPlayer.connect(client, alice["token"])
    lobby = (await ws_a.request({"type": "race_create"}))["race"]["invite"]
    ban = await moderation(server).ban("Mallory", "played the daily with a solver", "mod")
    message = BANNED.format(since=ban.action.at.date().isoformat())

    for request in (
        {"type": "join_daily"},
        {"type": "race_create"},
        {"type": "race_join", "invite": lobby},
    ):
        reply = await ws_m.request(request)
        assert reply["type"] == "error", (request, reply)
        assert (reply["code"], reply["message"]) == ("banned", message)
        # The page says it in the player's language from the ban's own members.
        assert reply["ban"] == {
            "since": ban.action.at.date().isoformat(),
            "reason": "played the daily with a solver",
        }
    watching = await ws_m.request({"type": "race_join", "invite": lobby, "watch": True})
    assert watching["type"] == "race" and watching["role"] == "spectator"
    free = await ws_m.request({"type": "new_game", "code": "TP1-E-AAAAAAA"})
    assert free["type"] == "game"
    assert (await ws_m.act(free["game"], "draw"))["type"] == "accepted"

    await moderation(server).unban("Mallory", "mod")
    joined = await ws_m.request({"type": "join_daily"})
    assert joined["type"] == "game" and joined["game"]["mode"] == "daily"
    seated = await ws_m.request({"type": "race_join", "invite": lobby})
    assert seated["type"] == "race" and seated["role"] == "racer"


async def test_a_host_banned_after_opening_a_lobby_is_refused_its_start(
    client: Client, server: TestServer
) -> None:
    mallory = await register(client, "Mallory")
    alice = await register(client, "Alice")
    ws_m, _ = await WsPlayer.connect(client, mallory["token"])
    ws_a, _ = await WsPlayer.connect(client, alice["token"])
    lobby = (await ws_m.request({"type": "race_create"}))["race"]["invite"]
    assert (await ws_a.request({"type": "race_join", "invite": lobby}))["role"] == "racer"
    ban = await moderation(server).ban("Mallory", "played the daily with a solver", "mod")

    reply = await ws_m.request({"type": "race_start", "invite": lobby})
    assert reply["type"] == "error"
    message = BANNED.format(since=ban.action.at.date().isoformat())
    assert (reply["code"], reply["message"]) == ("banned", message)
    assert reply["ban"]["reason"] == "played the daily with a solver"
    room = await (await client.get(f"/api/v1/races/{lobby}")).json()
    assert room["status"] == "lobby"

    await moderation(server).unban("Mallory", "mod")
    started = await ws_m.request({"type": "race_start", "invite": lobby})
    assert started["type"] == "race" and started["race"]["status"] == "running"


async def test_a_daily_finished_after_the_ban_stays_off_the_board_until_the_unban(
    client: Client, server: TestServer, settings: Settings
) -> None:
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    mallory = await register(client, "Mallory")
    ws, _ = await WsPlayer.connect(client, mallory["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    ban = await moderation(server).ban("Mallory", "played the daily with a solver", "mod")
    assert [g.id for g in ban.hidden] == [game["game_id"]]
    # Playing on in a game started before the ban is free play's business: it is stored …
    final = await ws.play(game, line)
    assert final["status"] == "blocked"
    # … but off the board, and out of the date's counts.
    board = await (await client.get(BOARD)).json()
    assert board["entries"] == []
    info = await (await client.get("/api/v1/daily/2026-03-14")).json()
    assert (info["players"], info["ranked"]) == (0, 0)
    around = await client.get(f"{BOARD}/around/{mallory['id']}")
    assert around.status == 404

    await moderation(server).unban("Mallory", "mod")
    board = await (await client.get(BOARD)).json()
    assert [(e["rank"], e["player_id"], e["status"]) for e in board["entries"]] == [
        (1, mallory["id"], "blocked")
    ]
    info = await (await client.get("/api/v1/daily/2026-03-14")).json()
    assert (info["players"], info["ranked"]) == (1, 1)


async def stored_hash(database_url: str, player_id: int) -> bytes | None:
    engine: AsyncEngine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            value = await conn.scalar(select(Player.address_hash).where(Player.id == player_id))
    finally:
        await engine.dispose()
    return None if value is None else bytes(value)


async def test_registration_keeps_a_keyed_hash_of_the_peer_address(
    client: Client, settings: Settings, database_url: str
) -> None:
    key = address_key((settings.daily_secret or "").encode())
    ada = await register(client, "Ada")
    assert await stored_hash(database_url, ada["id"]) == hash_address(key, "127.0.0.1")
    # Without the trusted-proxy setting a forwarded address is not believed.
    resp = await client.post(
        "/api/v1/players", json={"name": "Bea"}, headers={"X-Forwarded-For": "203.0.113.9"}
    )
    bea = await resp.json()
    assert await stored_hash(database_url, bea["id"]) == hash_address(key, "127.0.0.1")


async def test_behind_a_trusted_proxy_the_forwarded_address_is_hashed(
    make_server: Any, settings: Settings, database_url: str
) -> None:
    server = await make_server(trust_forwarded_for=True)
    key = address_key((settings.daily_secret or "").encode())
    async with TestClient(server) as proxied:
        resp = await proxied.post(
            "/api/v1/players",
            json={"name": "Cy"},
            headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.9"},
        )
        assert resp.status == 201
        cy = await resp.json()
    stored = await stored_hash(database_url, cy["id"])
    assert stored == hash_address(key, "203.0.113.9")
    assert stored != hash_address(key, "127.0.0.1")
