"""Presence in race rooms: everyone in a room sees each racer and watcher as connected,
reconnecting or gone, with when (docs/rules.md §4 "Presence").

Real servers on loopback (often two processes on one database, the room's events crossing by
``LISTEN/NOTIFY``), real websocket clients, and for the frozen racer a real client process
stopped with ``SIGSTOP``: no close frame, no answer to the server's pings. The grace period is
measured on the game clock (the test's fake clock), so each test moves it past the grace.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.engine import GameCode
from server.services.clock import FakeClock
from server.web.keys import HUB, SERVICES
from tests.conftest import ServerFactory
from tests.helpers import TIMEOUT, WsPlayer, eventually, register

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
GRACE_S = 30.0
SETTINGS: dict[str, Any] = {
    "race_countdown_s": 0.05,
    "race_sweep_s": 0.05,
    "race_grace_s": GRACE_S,
    "instance_timeout_s": 1.0,
}
#: A process whose connections are dropped fast when they stop answering pings.
QUICK_HEARTBEAT: dict[str, Any] = {**SETTINGS, "ws_heartbeat_s": 0.5}
Room = dict[str, Any]


# ------------------------------------------------------------------------------------ helpers


async def _player(client: Client, name: str) -> WsPlayer:
    info = await register(client, name)
    ws, _ = await WsPlayer.connect(client, info["token"])
    return ws


async def _open_room(host: WsPlayer, *racers: WsPlayer) -> str:
    reply = await host.request({"type": "race_create", "code": str(CODE)})
    assert reply["type"] == "race", reply
    invite: str = reply["race"]["invite"]
    for ws in racers:
        joined = await ws.request({"type": "race_join", "invite": invite})
        assert joined["role"] == "racer", joined
    return invite


async def _room_until(ws: WsPlayer, holds: Callable[[Room], bool]) -> Room:
    """Read ``ws``'s messages until a room (``race``, ``race_room`` or ``race_results``) for
    which ``holds`` is true arrives; return that room."""
    while True:
        message = await ws.recv()
        if message["type"] in ("race", "race_room", "race_results"):
            room: Room = message["race"]
            if holds(room):
                return room


def _racer(room: Room, player_id: int) -> dict[str, Any] | None:
    return next((p for p in room["players"] if p["player_id"] == player_id), None)


def _state(room: Room, player_id: int) -> str | None:
    """A racer's or watcher's presence state in ``room`` (None when not listed)."""
    listed = _racer(room, player_id) or next(
        (w for w in room["watchers"] if w["player_id"] == player_id), None
    )
    return None if listed is None else listed["presence"]["state"]


def _is(player_id: int, state: str) -> Callable[[Room], bool]:
    return lambda room: _state(room, player_id) == state


def _time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


async def _start(
    host: WsPlayer, invite: str, clock: FakeClock, *racers: WsPlayer
) -> dict[int, Any]:
    started = await host.request({"type": "race_start", "invite": invite})
    assert started["race"]["status"] == "running", started
    games = {ws.player_id: (await ws.until("race_go", invite=invite))["game"] for ws in racers}
    clock.advance(seconds=1)
    return games


CLIENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import aiohttp

    async def main(url, token, invite):
        async with aiohttp.ClientSession() as http:
            async with http.ws_connect(url) as ws:
                await ws.send_json({"type": "hello", "token": token, "id": "h"})
                await ws.send_json({"type": "race_join", "invite": invite, "id": "j"})
                async for msg in ws:  # answers pings while it runs
                    data = json.loads(msg.data)
                    if data.get("id") == "j":
                        print(data["role"], flush=True)

    asyncio.run(main(*sys.argv[1:]))
    """
)


@pytest.fixture
def client_process() -> Iterator[Callable[[str, str, str], subprocess.Popen[str]]]:
    """Start a websocket client in a process of its own (``url``, ``token``, ``invite``): it
    says hello, joins the room and prints its role; killed however the test ends."""
    started: list[subprocess.Popen[str]] = []

    def start(url: str, token: str, invite: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", CLIENT_SCRIPT, url, token, invite],
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()  # a stopped process dies of SIGKILL too
        process.wait(timeout=30)
        if process.stdout is not None:
            process.stdout.close()


# -------------------------------------------------------------------------- the frozen racer


async def test_a_frozen_racer_is_shown_reconnecting_then_gone_and_the_host_starts_without_them(
    make_server: ServerFactory,
    clock: FakeClock,
    client_process: Callable[[str, str, str], subprocess.Popen[str]],
) -> None:
    hosts = await make_server(**SETTINGS)
    theirs = await make_server(**QUICK_HEARTBEAT)  # another process: the frozen racer's
    async with TestClient(hosts) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        frozen = await register(client, "Frozen")
        process = client_process(f"http://{theirs.host}:{theirs.port}/ws", frozen["token"], invite)
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), TIMEOUT)
        assert line.strip() == "racer"
        room = await _room_until(host, _is(frozen["id"], "connected"))

        os.kill(process.pid, signal.SIGSTOP)  # no close frame, no pong: frozen
        room = await _room_until(host, _is(frozen["id"], "reconnecting"))
        presence = _racer(room, frozen["id"])["presence"]  # type: ignore[index]
        since, until = _time(presence["since"]), _time(presence["until"])
        assert until - since == dt.timedelta(seconds=GRACE_S)
        assert room["grace_s"] == GRACE_S
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, frozen["id"]) == "reconnecting"  # the REST view agrees
        assert _state(body, host.player_id) == _state(body, ann.player_id) == "connected"

        clock.advance(seconds=GRACE_S + 1)
        room = await _room_until(host, _is(frozen["id"], "gone"))
        assert _time(_racer(room, frozen["id"])["presence"]["since"]) >= until  # type: ignore[index]
        assert _racer(room, frozen["id"])["presence"]["until"] is None  # type: ignore[index]
        assert room["status"] == "lobby" and room["host_id"] == host.player_id

        # The host starts without them: they are dealt out of the race.
        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running"
        assert [p["player_id"] for p in started["race"]["players"]] == [
            host.player_id,
            ann.player_id,
        ]
        await ann.until("race_go", invite=invite)


async def test_a_racer_back_within_the_grace_period_resumes_their_seat_and_game(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        games = await _start(host, invite, clock, host, ann)
        game = await ann.play(games[ann.player_id], [])
        reply = await ann.act(game, "draw")
        assert reply["type"] == "accepted"
        await ann.close()
        room = await _room_until(host, _is(ann.player_id, "reconnecting"))
        assert room["status"] == "running"

        clock.advance(seconds=GRACE_S - 5)  # still within the grace period
        again, welcome = await WsPlayer.connect(client, ann.token)
        assert [r["invite"] for r in welcome["races"]] == [invite]
        room = await _room_until(host, _is(ann.player_id, "connected"))
        joined = await again.request({"type": "race_join", "invite": invite})
        assert joined["role"] == "racer" and joined["game"]["seq"] == 1
        reply = await again.act(joined["game"], "draw")
        assert reply["type"] == "accepted", reply

        # Past the original grace period nothing happens to a racer who came back.
        clock.advance(seconds=10)
        await eventually(lambda: _no_reconnecting(server), "the sweep to see nobody reconnecting")
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, ann.player_id) == "connected"
        assert _racer(body, ann.player_id)["progress"]["status"] == "playing"  # type: ignore[index]


async def _no_reconnecting(server: TestServer) -> bool:
    services = server.app[SERVICES]
    async with services.db.connect() as conn:
        rows = await conn.exec_driver_sql(
            "SELECT count(*) FROM race_presence WHERE state = 'reconnecting'"
        )
        return rows.scalar() == 0


async def test_a_racer_gone_during_the_race_has_their_game_resigned_and_the_race_ends(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        games = await _start(host, invite, clock, host, ann)
        await ann.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        clock.advance(seconds=GRACE_S + 1)
        progress = await host.until("race_progress", player_id=ann.player_id)
        assert progress["status"] == "resigned"
        # The race waits for nobody gone: the host's resignation ends it.
        await host.request({"type": "resign", "game_id": games[host.player_id]["game_id"]})
        results = (await host.until("race_results", invite=None))["race"]
        statuses = {r["player_id"]: r["status"] for r in results["results"]}
        assert statuses == {host.player_id: "resigned", ann.player_id: "resigned"}
        assert _state(results, ann.player_id) == "gone"


async def test_a_racer_who_leaves_a_running_race_is_gone_at_once(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        bob = await _player(client, "Bob")
        invite = await _open_room(host, ann, bob)
        await _start(host, invite, clock, host, ann, bob)
        left = await ann.request({"type": "race_leave", "invite": invite})
        assert left["type"] == "race_left"
        await _room_until(host, _is(ann.player_id, "gone"))

        async def resigned() -> bool:
            body = await (await client.get(f"/api/v1/races/{invite}")).json()
            assert _state(body, ann.player_id) == "gone"
            return _racer(body, ann.player_id)["progress"]["status"] == "resigned"  # type: ignore[index,no-any-return]

        await eventually(resigned, "the leaver's game to be resigned")


# --------------------------------------------------------------------------------- the lobby


async def test_the_host_role_passes_to_a_connected_racer_when_the_host_is_gone(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        bob = await _player(client, "Bob")
        invite = await _open_room(host, ann, bob)
        await ann.close()  # Ann is reconnecting: the role skips her
        await _room_until(bob, _is(ann.player_id, "reconnecting"))
        await host.close()
        await _room_until(bob, _is(host.player_id, "reconnecting"))
        clock.advance(seconds=GRACE_S + 1)
        room = await _room_until(
            bob, lambda r: _state(r, host.player_id) == "gone" and r["host_id"] == bob.player_id
        )
        assert _state(room, ann.player_id) == "gone"
        started = await bob.request({"type": "race_start", "invite": invite})
        assert [p["player_id"] for p in started["race"]["players"]] == [bob.player_id]


async def test_a_newcomer_takes_the_seat_of_a_racer_gone_from_a_full_lobby(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS, race_max_players=2)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        cat = await _player(client, "Cat")
        refused = await cat.request({"type": "race_join", "invite": invite})
        assert (refused["type"], refused["code"]) == ("error", "room_full")
        await ann.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        refused = await cat.request({"type": "race_join", "invite": invite})
        assert refused["code"] == "room_full"  # a reconnecting racer keeps their seat
        clock.advance(seconds=GRACE_S + 1)
        await _room_until(host, _is(ann.player_id, "gone"))
        joined = await cat.request({"type": "race_join", "invite": invite})
        assert joined["role"] == "racer", joined
        assert [p["player_id"] for p in joined["race"]["players"]] == [
            host.player_id,
            cat.player_id,
        ]


async def test_a_racer_back_in_the_lobby_after_the_grace_period_is_connected_again(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        await ann.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        clock.advance(seconds=GRACE_S + 1)
        await _room_until(host, _is(ann.player_id, "gone"))
        again, welcome = await WsPlayer.connect(client, ann.token)
        assert [r["invite"] for r in welcome["races"]] == [invite]  # still seated
        await _room_until(host, _is(ann.player_id, "connected"))
        await again.close()


# ------------------------------------------------------------------------------- watchers


async def test_watchers_are_listed_with_their_presence_and_leave_the_list_when_they_leave(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        invite = await _open_room(host)
        watcher = await _player(client, "Watcher")
        other = await _player(client, "Other")
        for ws in (watcher, other):
            joined = await ws.request({"type": "race_join", "invite": invite, "watch": True})
            assert joined["role"] == "spectator"
        room = await _room_until(
            host,
            lambda r: _state(r, watcher.player_id) == _state(r, other.player_id) == "connected",
        )
        assert room["watchers_total"] == 2
        assert _racer(room, watcher.player_id) is None  # no seat

        await watcher.request({"type": "race_leave", "invite": invite})
        room = await _room_until(host, lambda r: _state(r, watcher.player_id) is None)
        assert room["watchers_total"] == 1

        await other.close()
        await _room_until(host, _is(other.player_id, "reconnecting"))
        clock.advance(seconds=GRACE_S + 1)
        room = await _room_until(host, _is(other.player_id, "gone"))
        assert room["watchers"][0]["name"] == "Other"


async def test_two_connections_of_one_racer_count_as_one_presence(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    first = await make_server(**SETTINGS)
    second = await make_server(**SETTINGS)
    async with TestClient(first) as client, TestClient(second) as other_client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        tab, _ = await WsPlayer.connect(other_client, ann.token)  # a second tab, elsewhere
        await ann.close()
        await eventually(
            lambda: _presence_rows(first, "connected", 2), "both racers to stay connected"
        )
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, ann.player_id) == "connected"
        await tab.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))


async def _presence_rows(server: TestServer, state: str, count: int) -> bool:
    services = server.app[SERVICES]
    async with services.db.connect() as conn:
        connections = (await conn.exec_driver_sql("SELECT count(*) FROM race_connections")).scalar()
        rows = (
            await conn.exec_driver_sql(
                f"SELECT count(*) FROM race_presence WHERE state = '{state}'"
            )
        ).scalar()
        return connections == count and rows == count


# -------------------------------------------------------------------- server processes


async def test_a_process_taken_for_dead_hands_its_racers_over_and_records_them_again(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    hosts = await make_server(**SETTINGS)
    # A process too slow for the others' time-out: it refreshes its record every 2 s, and the
    # others take it for dead after 1 s.
    slow = await make_server(**{**SETTINGS, "race_sweep_s": 2.0, "instance_timeout_s": 6.0})
    async with TestClient(hosts) as client, TestClient(slow) as slow_client:
        host = await _player(client, "Host")
        info = await register(client, "Ann")
        ann, _ = await WsPlayer.connect(slow_client, info["token"])
        invite = await _open_room(host, ann)
        await _room_until(host, _is(ann.player_id, "reconnecting"))  # taken for dead
        room = await _room_until(host, _is(ann.player_id, "connected"))  # back, next sweep
        assert room["invite"] == invite
        assert slow.app[HUB].subscribers(room["race_id"]) == 1

        # A process gone for good (its record is never refreshed again): the others drop
        # it once.
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "INSERT INTO server_instances (id, seen_at) "
                "VALUES ('dead', now() - interval '1 hour')"
            )
            await eventually(
                lambda: _instance_gone(conn, "dead"), "the dead process's record to be dropped"
            )
        finally:
            await conn.close()


async def _instance_gone(conn: asyncpg.Connection, instance: str) -> bool:
    count: int = await conn.fetchval(
        "SELECT count(*) FROM server_instances WHERE id = $1", instance
    )
    return count == 0


async def test_a_finished_race_keeps_the_presence_it_ended_with(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        invite = await _open_room(host)
        watcher = await _player(client, "Watcher")
        await watcher.request({"type": "race_join", "invite": invite, "watch": True})
        games = await _start(host, invite, clock, host)
        await host.request({"type": "resign", "game_id": games[host.player_id]["game_id"]})
        ended = (await watcher.until("race_results"))["race"]
        assert _state(ended, watcher.player_id) == _state(ended, host.player_id) == "connected"
        await watcher.close()
        await host.close()
        await eventually(
            lambda: _no_connections(server), "the closed connections to leave the records"
        )
        clock.advance(seconds=GRACE_S + 1)
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert {k: v for k, v in body.items() if k != "server_time"} == {
            k: v for k, v in ended.items() if k != "server_time"
        }


async def _no_connections(server: TestServer) -> bool:
    services = server.app[SERVICES]
    async with services.db.connect() as conn:
        return (await conn.exec_driver_sql("SELECT count(*) FROM race_connections")).scalar() == 0


# ------------------------------------------------------------------ faults on the way


async def test_a_closed_connection_left_on_record_is_dropped_by_the_sweep(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        await _open_room(host, ann)
        room = await _room_until(host, _is(ann.player_id, "connected"))
        # A record of a connection this process does not hold (its close was never recorded:
        # cancelled as it committed, or the database was away at the time).
        instance = server.app[SERVICES].presence.instance
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(
                "INSERT INTO race_connections "
                "(race_id, instance_id, connection, player_id, connected_at) "
                "VALUES ($1, $2, 'ws-closed-long-ago', $3, now())",
                room["race_id"],
                instance,
                ann.player_id,
            )
        finally:
            await conn.close()
        await ann.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        assert await _presence_rows(server, "connected", 1)  # only the host's own


async def test_a_close_while_the_room_is_locked_is_recorded_once_it_is_free(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        room = await _room_until(host, _is(ann.player_id, "connected"))
        locker = await asyncpg.connect(database_url)
        try:
            tx = locker.transaction()
            await tx.start()
            await locker.execute("SELECT id FROM races WHERE id = $1 FOR UPDATE", room["race_id"])
            await ann.close()
            # The close cannot be recorded while the room is locked (each try gives up after
            # the lock wait); the sweep keeps trying.
            await eventually(
                lambda: _waiting_on_a_lock(locker), "a presence write to wait on the room's lock"
            )
            await tx.rollback()
        finally:
            await locker.close()
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, ann.player_id) == "reconnecting"


async def _waiting_on_a_lock(conn: asyncpg.Connection) -> bool:
    waiting = await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return bool(waiting)


async def _held_for(conn: asyncpg.Connection, seconds: float) -> bool:
    """Whether the transaction open on ``conn`` began more than ``seconds`` ago by the
    database's clock."""
    held: bool = await conn.fetchval(
        "SELECT clock_timestamp() - now() > make_interval(secs => $1)", seconds
    )
    return held


async def test_a_process_that_shuts_down_hands_its_racers_over_at_once(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    hosts = await make_server(**{**SETTINGS, "instance_timeout_s": 3600.0})
    leaving = await make_server(**{**SETTINGS, "instance_timeout_s": 3600.0})
    async with TestClient(hosts) as client:
        host = await _player(client, "Host")
        info = await register(client, "Ann")
        leaving_client = TestClient(leaving)
        await leaving_client.start_server()
        ann, _ = await WsPlayer.connect(leaving_client, info["token"])
        invite = await _open_room(host, ann)
        await _room_until(host, _is(ann.player_id, "connected"))
        await leaving_client.close()  # a clean shutdown: no waiting for the instance time-out
        await _room_until(host, _is(ann.player_id, "reconnecting"))
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, ann.player_id) == "reconnecting"


async def test_a_locked_room_does_not_get_healthy_processes_taken_for_dead(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    first = await make_server(**SETTINGS)
    second = await make_server(**SETTINGS)
    async with TestClient(first) as client, TestClient(second) as other_client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        locked_invite = await _open_room(host, ann)
        await ann.close()
        locked = await _room_until(host, _is(ann.player_id, "reconnecting"))
        # Another room, followed through the second process.
        info = await register(client, "Bea")
        bea, _ = await WsPlayer.connect(other_client, info["token"])
        cat = await _player(client, "Cat")
        invite = await _open_room(cat, bea)
        steady = await _room_until(cat, _is(bea.player_id, "connected"))
        locker = await asyncpg.connect(database_url)
        try:
            tx = locker.transaction()
            await tx.start()
            await locker.execute("SELECT id FROM races WHERE id = $1 FOR UPDATE", locked["race_id"])
            clock.advance(seconds=GRACE_S + 1)  # the sweeps now want the locked room
            await eventually(lambda: _waiting_on_a_lock(locker), "a sweep to wait on the lock")
            # Held past the instance time-out (1 s) three times over, by the database's clock
            # (the time-out's), with the sweeps waiting on it throughout: the heartbeats go on.
            await eventually(
                lambda: _held_for(locker, 3 * SETTINGS["instance_timeout_s"]),
                "the lock to be held past the instance time-out",
                every_s=0.1,
            )
            await eventually(lambda: _waiting_on_a_lock(locker), "the sweeps to keep trying")
            await tx.rollback()
        finally:
            await locker.close()
        await _room_until(host, _is(ann.player_id, "gone"))
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert body["version"] == steady["version"]  # nobody in it was ever dropped
        assert _state(body, bea.player_id) == "connected"
        assert locked_invite != invite


async def test_leaving_a_lobby_from_one_tab_keeps_the_player_watching_from_another(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ben = await _player(client, "Ben")
        invite = await _open_room(host, ben)
        tab, _ = await WsPlayer.connect(client, ben.token)  # follows the room too (seated)
        await ben.request({"type": "race_leave", "invite": invite})
        room = await _room_until(host, lambda r: _racer(r, ben.player_id) is None)
        assert _state(room, ben.player_id) == "connected"  # a watcher now, from the other tab
        again = await ben.request({"type": "race_join", "invite": invite})
        assert again["role"] == "racer"
        await ben.close()
        await eventually(lambda: _presence_rows(server, "connected", 2), "the close to be recorded")
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, ben.player_id) == "connected"  # the other tab is still there
        await tab.close()
        await _room_until(host, _is(ben.player_id, "reconnecting"))


async def test_starting_from_another_tab_makes_the_host_connected(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        other_tab, _ = await WsPlayer.connect(client, host.token)  # open before the room
        ann = await _player(client, "Ann")
        invite = await _open_room(host, ann)
        await host.close()
        await _room_until(ann, _is(host.player_id, "reconnecting"))
        # Within the grace period, the host starts from the tab that never followed the room.
        started = await other_tab.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running", started
        assert _state(started["race"], host.player_id) == "connected"
        assert [p["player_id"] for p in started["race"]["players"]] == [
            host.player_id,
            ann.player_id,
        ]
        await other_tab.until("race_go", invite=invite)


async def test_a_racer_back_in_a_lobby_whose_host_is_gone_takes_the_host_role(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        watcher = await _player(client, "Watcher")
        invite = await _open_room(host, ann)
        await watcher.request({"type": "race_join", "invite": invite, "watch": True})
        await ann.close()
        await _room_until(watcher, _is(ann.player_id, "reconnecting"))
        await host.close()
        await _room_until(watcher, _is(host.player_id, "reconnecting"))
        clock.advance(seconds=GRACE_S + 1)
        room = await _room_until(
            watcher,
            lambda r: _state(r, host.player_id) == _state(r, ann.player_id) == "gone",
        )
        assert room["host_id"] == host.player_id  # nobody connected to pass it to
        back, _ = await WsPlayer.connect(client, ann.token)
        room = await _room_until(watcher, _is(ann.player_id, "connected"))
        assert room["host_id"] == ann.player_id
        started = await back.request({"type": "race_start", "invite": invite})
        assert [p["player_id"] for p in started["race"]["players"]] == [ann.player_id]


async def test_connections_opened_while_a_dead_process_is_dropped_stay_on_record(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(**SETTINGS)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        ann = await _player(client, "Ann")
        await _open_room(host, ann)
        locked = await _room_until(host, _is(ann.player_id, "connected"))
        cat = await _player(client, "Cat")
        invite = await _open_room(cat)
        # A dead process with a connection in the first room, which is locked for a while: the
        # sweep that drops it waits for the room (less than its lock wait).
        locker = await asyncpg.connect(database_url)
        try:
            await locker.execute(
                "INSERT INTO server_instances (id, seen_at) VALUES ('dead', now() - interval '1 h')"
            )
            await locker.execute(
                "INSERT INTO race_connections "
                "(race_id, instance_id, connection, player_id, connected_at) "
                "VALUES ($1, 'dead', 'ws-1', $2, now())",
                locked["race_id"],
                host.player_id,
            )
            tx = locker.transaction()
            await tx.start()
            await locker.execute("SELECT id FROM races WHERE id = $1 FOR UPDATE", locked["race_id"])
            await eventually(lambda: _waiting_on_a_lock(locker), "the sweep to wait for the room")
            # Meanwhile Cat opens another tab (recorded at its hello).
            tab, _ = await WsPlayer.connect(client, cat.token)
            await tx.rollback()
            await eventually(lambda: _instance_gone(locker, "dead"), "the dead process dropped")
        finally:
            await locker.close()
        await cat.close()  # the other tab is still open: Cat stays connected
        clock.advance(seconds=GRACE_S + 1)
        await eventually(lambda: _no_reconnecting(server), "the sweeps to settle", every_s=0.05)
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert _state(body, cat.player_id) == "connected"
        await tab.close()


async def test_recording_again_after_being_taken_for_dead_is_retried_past_a_locked_room(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    # A long instance time-out: nobody takes anybody for dead again while the test holds the
    # room (that would hide a retry that never comes).
    slow_to_judge = {**SETTINGS, "instance_timeout_s": 8.0}
    hosts = await make_server(**slow_to_judge)
    theirs = await make_server(**slow_to_judge)
    async with TestClient(hosts) as client, TestClient(theirs) as their_client:
        host = await _player(client, "Host")
        info = await register(client, "Ann")
        ann, _ = await WsPlayer.connect(their_client, info["token"])
        await _open_room(host, ann)
        room = await _room_until(host, _is(ann.player_id, "connected"))
        locker = await asyncpg.connect(database_url)
        try:
            tx = locker.transaction()
            await tx.start()
            await locker.execute("SELECT id FROM races WHERE id = $1 FOR UPDATE", room["race_id"])
            # Taken for dead (as after a long stall) while the room is locked: the process
            # notices at its next heartbeat, tries to record Ann again, and gives up on the
            # locked room after its lock wait.
            await asyncpg_execute(
                database_url,
                "DELETE FROM server_instances WHERE id = $1",
                theirs.app[SERVICES].presence.instance,
            )
            await eventually(
                lambda: _waiting_on_a_lock(locker), "the process to try to record Ann again"
            )
            await eventually(
                lambda: _not(_waiting_on_a_lock(locker)), "the try to give up on the lock"
            )
            await tx.commit()
        finally:
            await locker.close()
        # Ann's records went with the deleted process record; she is recorded again once the
        # room is free, however long it was locked.
        await eventually(lambda: _presence_rows(hosts, "connected", 2), "Ann recorded again")


async def asyncpg_execute(url: str, sql: str, *args: Any) -> None:
    """Run one statement on a connection of its own (committed at once)."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def _not(condition: Awaitable[bool]) -> bool:
    return not await condition
