"""Quick races over websockets on two servers sharing one database (two app instances with their
own process records and LISTEN connections, as two processes have): players asking on either
are matched into one race and told ``queue_matched`` wherever their socket is; nobody is in two
races; cancelling and closing the socket leave the queue; a waiting player whose process is
dead does not hold the others up (docs/protocol.md §11.11)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import func, select

from server.errors import StorageUnavailable
from server.services.clock import FakeClock
from server.storage.models import QueuedPlayer, RacePlayer
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, eventually, register

Client = TestClient[Any, Any]
SETTINGS: dict[str, Any] = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}


async def _queued(server: TestServer) -> int:
    async with server.app[SERVICES].db.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(QueuedPlayer)) or 0)


async def _empty(server: TestServer) -> bool:
    return await _queued(server) == 0


async def _seats(server: TestServer) -> dict[int, int]:
    async with server.app[SERVICES].db.connect() as conn:
        rows = await conn.execute(
            select(RacePlayer.player_id, func.count()).group_by(RacePlayer.player_id)
        )
        return {player_id: count for player_id, count in rows}


async def _waiting_from(
    client: Client, database_url: str, clock: FakeClock, instance: str, seen_ago: dt.timedelta
) -> None:
    """Record a server process ``instance`` last seen ``seen_ago`` before the database's now,
    with a player registered as ``instance`` waiting under Easy from it (one transaction: the
    presence sweep may drop the process at any moment)."""
    player_id = (await register(client, instance.capitalize()))["id"]
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO server_instances (id, seen_at) VALUES ($1, now() - $2::interval)",
                instance,
                seen_ago,
            )
            await conn.execute(
                "INSERT INTO race_queue (player_id, rules, rating, instance_id, "
                "connection, joined_at) VALUES ($1, 'E', 0, $2, 'k', $3)",
                player_id,
                instance,
                clock.now(),
            )
    finally:
        await conn.close()


async def _ann_and_bob_matched(client: Client, clock: FakeClock) -> tuple[WsPlayer, WsPlayer]:
    """Ann and Bob, registered and connected, ask for a quick race under Easy and wait long
    enough for a race of two: they are matched into one race (both told ``queue_matched``
    with the same invite)."""
    ann, _ = await WsPlayer.connect(client, (await register(client, "Ann"))["token"])
    bob, _ = await WsPlayer.connect(client, (await register(client, "Bob"))["token"])
    await ann.request({"type": "queue_join"})
    await bob.request({"type": "queue_join"})
    clock.advance(seconds=11)  # two may start a race now
    first = await ann.until("queue_matched")
    assert (await bob.until("queue_matched"))["invite"] == first["invite"]
    return ann, bob


async def test_players_on_two_servers_are_matched_into_one_race_and_told_where_they_are(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    one, two = await make_server(**SETTINGS), await make_server(**SETTINGS)
    async with TestClient(one) as c1, TestClient(two) as c2:
        players: list[WsPlayer] = []
        for n in range(4):
            client = c1 if n % 2 else c2
            info = await register(client, f"Quick{n}")
            ws, _ = await WsPlayer.connect(client, info["token"])
            players.append(ws)
        for ws in players:
            waiting = await ws.request({"type": "queue_join", "rules": "C"})
            assert waiting["type"] == "queue_waiting", waiting
            assert (waiting["rules"], waiting["rating"]) == ("C", 0)
        matched = [await ws.until("queue_matched") for ws in players]
        assert {m["invite"] for m in matched} == {matched[0]["invite"]}
        assert {m["rules"] for m in matched} == {"C"}
        assert await _queued(one) == 0
        seats = await _seats(one)
        assert sorted(seats) == sorted(ws.player_id for ws in players)
        assert set(seats.values()) == {1}
        clock.advance(seconds=1)
        for ws in players:
            joined = await ws.request({"type": "race_join", "invite": matched[0]["invite"]})
            assert joined["role"] == "racer" and joined["game"] is not None, joined
            assert joined["race"]["code"] is None  # sealed while it runs
        for ws in players:
            await ws.close()


async def test_cancelling_and_closing_the_socket_leave_the_queue(
    make_server: ServerFactory,
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        ann, _ = await WsPlayer.connect(client, (await register(client, "Ann"))["token"])
        bob, _ = await WsPlayer.connect(client, (await register(client, "Bob"))["token"])
        await ann.request({"type": "queue_join"})
        await bob.request({"type": "queue_join", "rules": "E"})
        assert await _queued(server) == 2
        cancelled = await ann.request({"type": "queue_cancel"})
        assert cancelled["type"] == "queue_cancelled" and cancelled["was_waiting"] is True
        again = await ann.request({"type": "queue_cancel"})
        assert again["was_waiting"] is False
        await bob.close()

        await eventually(lambda: _empty(server), "the closed socket's player to leave the queue")
        assert await _seats(server) == {}
        await ann.close()


async def test_a_waiting_player_whose_queue_cannot_be_left_at_the_close_is_still_offline(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = await make_server(**SETTINGS)
    friends = server.app[SERVICES].friends

    async def down(connection: object) -> list[int]:
        raise StorageUnavailable("the database is down")

    async with TestClient(server) as client:
        ann_info, bob_info = await register(client, "Ann"), await register(client, "Bob")
        ann, _ = await WsPlayer.connect(client, ann_info["token"])
        bob, _ = await WsPlayer.connect(client, bob_info["token"])
        await friends.follow(ann_info["id"], bob_info["id"])
        await bob.request({"type": "queue_join", "rules": "E"})
        monkeypatch.setattr(server.app[SERVICES].matchmaker, "disconnected", down)
        await bob.close()

        async def bob_offline() -> bool:
            return not any(p.online for p in await friends.following(ann_info["id"]))

        await eventually(bob_offline, "Bob, whose queue could not be left, shown offline")
        await ann.close()


async def test_a_waiting_player_of_a_dead_process_does_not_hold_the_others_up(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(**{**SETTINGS, "instance_timeout_s": 1.0})
    async with TestClient(server) as client:
        # A process that stopped an hour ago, with a player waiting from it.
        await _waiting_from(client, database_url, clock, "dead", dt.timedelta(hours=1))
        ann, bob = await _ann_and_bob_matched(client, clock)
        seats = await _seats(server)
        assert sorted(seats) == sorted([ann.player_id, bob.player_id])  # not the dead process's
        # Its row goes with the dead process's record, which the presence sweep drops.
        await eventually(lambda: _empty(server), "the dead process's player to leave the queue")
        await ann.close()
        await bob.close()


async def test_a_matched_player_who_never_comes_is_gone_after_the_grace_period(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**{**SETTINGS, "race_grace_s": 30.0})
    services = server.app[SERVICES]
    async with TestClient(server) as client:
        infos = [await register(client, name) for name in ("Ann", "Bob", "Cy", "Ghost")]
        # Each asks from a socket of their own; the ghost's stays open and never takes the seat.
        askers = [(await WsPlayer.connect(client, info["token"]))[0] for info in infos]
        for ws in askers:
            await ws.request({"type": "queue_join", "rules": "E"})
        rooms: list[Any] = []

        async def matched() -> bool:
            rooms[:] = await services.races.active_for(infos[0]["id"])
            return bool(rooms)

        await eventually(matched, "the four to be matched")
        invite = rooms[0].invite
        # From the match on, every racer is reconnecting until they take their seat.
        assert {seat.presence.state for seat in rooms[0].seats} == {"reconnecting"}
        clock.advance(seconds=1)
        sockets = askers[:3]
        for ws in sockets:
            joined = await ws.request({"type": "race_join", "invite": invite})
            assert joined["role"] == "racer" and joined["game"] is not None, joined
            await ws.request({"type": "resign", "game_id": joined["game"]["game_id"]})
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert body["status"] == "running"
        states = {p["name"]: p["presence"]["state"] for p in body["players"]}
        assert states == {"Ann": "connected", "Bob": "connected", "Cy": "connected"} | {
            "Ghost": "reconnecting"
        }

        clock.advance(seconds=31)  # the ghost's grace period is over: gone, game resigned
        finished = (await sockets[0].until("race_results"))["race"]
        ghost = next(p for p in finished["players"] if p["name"] == "Ghost")
        assert ghost["presence"]["state"] == "gone"
        assert ghost["progress"]["status"] == "resigned"
        assert finished["finished_at"] < finished["ends_at"]
        for ws in askers:
            await ws.close()


async def test_a_process_late_by_half_its_time_out_has_its_players_left_out_of_matches(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(**{**SETTINGS, "instance_timeout_s": 60.0})
    async with TestClient(server) as client:
        # A process last seen 35 s ago: not dead yet (60 s), but past half its time-out.
        await _waiting_from(client, database_url, clock, "late", dt.timedelta(seconds=35))
        ann, bob = await _ann_and_bob_matched(client, clock)
        assert sorted(await _seats(server)) == sorted([ann.player_id, bob.player_id])
        assert await _queued(server) == 1  # still waiting: its process is not dead
        await ann.close()
        await bob.close()
