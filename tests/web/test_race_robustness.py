"""Races under stress: spectators, reconnects, restarts, several server processes, stalled and
vanished receivers, the time limit, simultaneous finishes, room limits and bad input.

Real servers on loopback, real PostgreSQL (``LISTEN/NOTIFY``), real websocket clients; the
countdown's release runs on a real (short) timer while the game clock is the fake one, so each
test advances the fake clock past ``starts_at`` once the deal has arrived.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import deque
from typing import Any

import asyncpg
import pytest
from aiohttp.base_protocol import BaseProtocol
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import REGISTRY

from server.engine import Action, GameCode
from server.services.clock import FakeClock
from server.web.keys import HUB, SOCKETS
from server.web.ws import WRITER_LIMIT
from tests.conftest import ServerFactory
from tests.helpers import (
    TIMEOUT,
    RawWs,
    WsPlayer,
    blocking_line,
    eventually,
    find_winning_line,
    register,
)

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
RACE_SETTINGS: dict[str, Any] = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}


# ------------------------------------------------------------------------------------ helpers


async def _player(client: Client, name: str) -> WsPlayer:
    info = await register(client, name)
    ws, _ = await WsPlayer.connect(client, info["token"])
    return ws


async def _open_room(host: WsPlayer, *racers: WsPlayer, **create: Any) -> str:
    """The host opens a room of ``CODE`` (unless told otherwise); the racers take seats."""
    reply = await host.request({"type": "race_create", "code": str(CODE), **create})
    assert reply["type"] == "race", reply
    invite: str = reply["race"]["invite"]
    for ws in racers:
        joined = await ws.request({"type": "race_join", "invite": invite})
        assert (joined["type"], joined["role"]) == ("race", "racer"), joined
    return invite


async def _start(
    host: WsPlayer, invite: str, racers: list[WsPlayer], clock: FakeClock
) -> dict[WsPlayer, dict[str, Any]]:
    """Start the race, collect every racer's deal, and move the game clock past the countdown."""
    started = await host.request({"type": "race_start", "invite": invite})
    assert started["type"] == "race" and started["race"]["status"] == "running", started
    games = {ws: (await ws.until("race_go", invite=invite))["game"] for ws in racers}
    clock.advance(seconds=1)
    return games


def _no_cards(message: Any) -> None:
    """Fail if a message names cards: no tableau, waste, game or code (of an unfinished race)."""
    if isinstance(message, dict):
        for key in ("tableau", "waste", "game", "stock"):
            assert key not in message, message
        for value in message.values():
            _no_cards(value)
    elif isinstance(message, list):
        for value in message:
            _no_cards(value)


def _watching(message: dict[str, Any], player_id: int) -> bool:
    """Whether ``message`` is a room naming ``player_id`` a connected watcher."""
    watchers = message.get("race", {}).get("watchers", [])
    return any(
        w["player_id"] == player_id and w["presence"]["state"] == "connected" for w in watchers
    )


async def _raw_player(client: Client, server: TestServer, name: str) -> tuple[RawWs, int]:
    info = await register(client, name)
    assert server.port is not None
    raw = await RawWs.connect(server.host, server.port, rcvbuf=4096)
    welcome = await raw.request({"type": "hello", "token": info["token"]}, "hello")
    assert welcome["type"] == "welcome", welcome
    return raw, int(info["id"])


def _session_of(server: TestServer, race_id: int, player_id: int) -> Any:
    """The server's websocket session of a player following a race (white-box: the hub's
    subscribers are the sessions)."""
    hub = server.app[HUB]
    (session,) = [s for s in hub._rooms.get(race_id, ()) if s.player_id == player_id]
    return session


def _choke(session: Any) -> asyncio.WriteTransport:
    """Shrink the server side's socket send buffer and its transport's high-water mark, so a
    peer that stops reading stalls the server's writer after a few KiB, not a few hundred (the
    kernel's smallest buffers: its floor is above the 1 KiB asked)."""
    transport: asyncio.WriteTransport = session.outbox._transport
    transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1024)
    transport.set_write_buffer_limits(high=1024)
    return transport


async def _eventually(predicate: Any, what: str) -> None:
    """Wait (polling) for a condition on the server's side that no message announces."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


async def _until_results(ws: WsPlayer) -> list[dict[str, Any]]:
    """Every message pushed to ``ws`` up to and including the race's results."""
    seen = []
    while True:
        message = await ws.recv()
        seen.append(message)
        if message["type"] == "race_results":
            return seen


def _last_progress(messages: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each racer's last progress message; their ``seq`` never goes back (a resignation
    keeps it, changing the status)."""
    last: dict[int, dict[str, Any]] = {}
    for m in messages:
        if m["type"] == "race_progress":
            previous = last.get(m["player_id"])
            assert previous is None or m["seq"] >= previous["seq"], (previous, m)
            last[m["player_id"]] = m
    return last


@pytest.fixture
async def race_server(make_server: ServerFactory) -> TestServer:
    return await make_server(**RACE_SETTINGS)


WIN = find_winning_line(CODE.deal(), CODE.rules)
BLOCK = blocking_line(CODE.deal(), CODE.rules)
assert WIN is not None and BLOCK is not None


# ---------------------------------------------------------------------------------- watching


async def test_spectators_see_progress_and_results_but_no_cards_and_cannot_act(
    race_server: TestServer, clock: FakeClock
) -> None:
    assert WIN is not None and BLOCK is not None
    async with TestClient(race_server) as client:
        host, ann, early, late = [
            await _player(client, n) for n in ("Host", "Ann", "Early", "Late")
        ]
        invite = await _open_room(host, ann)
        watching = await early.request({"type": "race_join", "invite": invite, "watch": True})
        assert (watching["type"], watching["role"]) == ("race", "spectator")
        assert "game" not in watching
        assert [p["name"] for p in watching["race"]["players"]] == ["Host", "Ann"]  # no seat

        games = await _start(host, invite, [host, ann], clock)
        assert games[host]["tableau"] == games[ann]["tableau"]
        late_join = await late.request({"type": "race_join", "invite": invite})
        assert (late_join["role"], late_join["race"]["status"]) == ("spectator", "running")
        assert "game" not in late_join
        assert [p["name"] for p in late_join["race"]["players"]] == ["Host", "Ann"]

        for spectator in (early, late):
            reply = await spectator.act(games[host], "draw")
            assert (reply["type"], reply["code"]) == ("error", "not_your_game")
            reply = await spectator.request({"type": "resume", "game_id": games[ann]["game_id"]})
            assert (reply["type"], reply["code"]) == ("error", "not_your_game")
            reply = await spectator.request({"type": "resign", "game_id": games[ann]["game_id"]})
            assert (reply["type"], reply["code"]) == ("error", "not_your_game")
            reply = await spectator.request({"type": "race_start", "invite": invite})
            assert (reply["type"], reply["code"]) == ("error", "not_host")

        final_host = await host.play(games[host], WIN)
        final_ann = await ann.play(games[ann], BLOCK)
        assert (final_host["status"], final_ann["status"]) == ("won", "blocked")

        results = []
        for spectator in (early, late):
            seen = await _until_results(spectator)
            assert not {m["type"] for m in seen} & {"race_go", "game", "accepted", "rejected"}
            for message in seen:
                if message["type"] != "race_results":  # the results reveal the code, no more
                    _no_cards(message)
                    assert message["race"]["code"] is None if "race" in message else True
            last = _last_progress(seen)
            assert set(last) == {host.player_id, ann.player_id}
            assert last[host.player_id] | {"elapsed_ms": 0} == {
                "type": "race_progress",
                "invite": invite,
                "player_id": host.player_id,
                "seq": len(WIN),
                "cards_left": 0,
                "score": final_host["score"],
                "moves": final_host["moves"],
                "status": "won",
                "elapsed_ms": 0,
            }
            assert (last[ann.player_id]["status"], last[ann.player_id]["seq"]) == (
                "blocked",
                len(BLOCK),
            )
            results.append(seen[-1]["race"])
        assert results[0] == results[1] | {"server_time": results[0]["server_time"]}
        assert [(r["name"], r["rank"]) for r in results[0]["results"]] == [("Host", 1), ("Ann", 2)]


# ------------------------------------------------------------------ reconnects and restarts


async def test_a_racer_reconnecting_mid_race_gets_the_room_and_their_game_back(
    race_server: TestServer, clock: FakeClock
) -> None:
    assert WIN is not None
    async with TestClient(race_server) as client:
        host = await _player(client, "Host")
        ann_info = await register(client, "Ann")
        ann, _ = await WsPlayer.connect(client, ann_info["token"])
        invite = await _open_room(host, ann)
        games = await _start(host, invite, [host, ann], clock)
        before = await ann.play(games[ann], WIN[:12])
        await ann.close()
        host_state = await host.play(games[host], WIN[:5])  # the race goes on meanwhile

        ann, welcome = await WsPlayer.connect(client, ann_info["token"])
        assert [g for g in welcome["games"] if g["game_id"] == before["game_id"]] == [before]
        rejoined = await ann.request({"type": "race_join", "invite": invite})
        assert (rejoined["type"], rejoined["role"]) == ("race", "racer")
        assert rejoined["game"] == before
        room = rejoined["race"]
        assert room["status"] == "running"
        progress = {p["name"]: p["progress"] for p in room["players"]}
        assert progress["Host"]["cards_left"] == host_state["cards_left"]
        assert progress["Ann"]["moves"] == before["moves"]

        final = await ann.play(before, WIN[12:])
        assert final["status"] == "won"
        seen = await host.until("race_progress", player_id=ann.player_id, status="won")
        assert seen["seq"] == len(WIN)
        await host.request({"type": "resign", "game_id": games[host]["game_id"]})
        for ws in (host, ann):
            ranked = (await ws.until("race_results"))["race"]["results"]
            assert [(r["name"], r["rank"], r["status"]) for r in ranked] == [
                ("Ann", 1, "won"),
                ("Host", 2, "resigned"),
            ]


async def test_a_race_survives_a_server_restart_with_its_action_history(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    assert WIN is not None and BLOCK is not None
    first = await make_server(**RACE_SETTINGS)
    async with TestClient(first) as client:
        host_info, ann_info = await register(client, "Host"), await register(client, "Ann")
        host, _ = await WsPlayer.connect(client, host_info["token"])
        ann, _ = await WsPlayer.connect(client, ann_info["token"])
        invite = await _open_room(host, ann)
        games = await _start(host, invite, [host, ann], clock)
        host_state = await host.play(games[host], WIN[:10])
        ann_state = await ann.play(games[ann], BLOCK[:3])  # three draws
    await first.close()

    second = await make_server(**RACE_SETTINGS)
    async with TestClient(second) as client:
        host, welcome = await WsPlayer.connect(client, host_info["token"])
        assert [g["game_id"] for g in welcome["games"]] == [host_state["game_id"]]
        ann, _ = await WsPlayer.connect(client, ann_info["token"])
        states = {}
        for ws, state in ((host, host_state), (ann, ann_state)):
            rejoined = await ws.request({"type": "race_join", "invite": invite})
            assert (rejoined["role"], rejoined["race"]["status"]) == ("racer", "running")
            assert rejoined["game"] == state
            states[ws] = rejoined["game"]

        # The game rebuilt from its stored actions is a ranked one still: no undo.
        refused = await host.act(states[host], "undo")
        assert (refused["type"], refused["code"]) == ("rejected", "ranked_no_undo"), refused
        assert refused["game"] == host_state
        final_host = await host.play(states[host], WIN[10:])
        assert final_host["status"] == "won"
        final_ann = await ann.play(states[ann], BLOCK[3:])
        assert final_ann["status"] == "blocked"
        for ws in (host, ann):
            ranked = (await ws.until("race_results"))["race"]["results"]
            assert [(r["name"], r["status"]) for r in ranked] == [
                ("Host", "won"),
                ("Ann", "blocked"),
            ]
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert body["status"] == "finished" and body["results"] == ranked


async def test_players_on_two_server_processes_race_as_one(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    assert WIN is not None and BLOCK is not None
    server_a = await make_server(**RACE_SETTINGS)
    server_b = await make_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host = await _player(on_a, "Host")
        ann, bob = await _player(on_b, "Ann"), await _player(on_b, "Bob")
        sam = await _player(on_a, "Sam")
        invite = await _open_room(host, ann, bob)
        update = await host.until("race_room")  # seats taken on B, seen on A
        while len(update["race"]["players"]) < 3:
            update = await host.until("race_room")
        assert [p["name"] for p in update["race"]["players"]] == ["Host", "Ann", "Bob"]
        watching = await sam.request({"type": "race_join", "invite": invite, "watch": True})
        assert watching["role"] == "spectator"

        games = await _start(host, invite, [host, ann, bob], clock)
        assert len({g["game_id"] for g in games.values()}) == 3
        final_host = await host.play(games[host], WIN)
        final_ann = await ann.play(games[ann], BLOCK)
        bob_state = await bob.play(games[bob], WIN[:4])
        await bob.request({"type": "resign", "game_id": games[bob]["game_id"]})
        expected = {
            host.player_id: ("won", final_host["seq"]),
            ann.player_id: ("blocked", final_ann["seq"]),
            bob.player_id: ("resigned", bob_state["seq"]),
        }

        rooms = []
        for ws in (host, ann, bob, sam):
            seen = await _until_results(ws)
            last = _last_progress(seen)
            assert {pid: (m["status"], m["seq"]) for pid, m in last.items()} == expected
            rooms.append(seen[-1]["race"])
        results = rooms[0]["results"]
        assert [(r["name"], r["rank"]) for r in results] == [("Host", 1), ("Bob", 2), ("Ann", 3)]
        assert all(room["results"] == results for room in rooms)
        for client in (on_a, on_b):
            resp = await client.get(f"/api/v1/races/{invite}")
            assert resp.status == 200
            body = await resp.json()
            assert (body["status"], body["results"], body["code"]) == (
                "finished",
                results,
                str(CODE),
            )


async def test_simultaneous_final_actions_on_two_processes_get_one_agreed_order(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    assert WIN is not None
    server_a = await make_server(**RACE_SETTINGS)
    server_b = await make_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host, ann = await _player(on_a, "Host"), await _player(on_b, "Ann")
        sam, sue = await _player(on_a, "Sam"), await _player(on_b, "Sue")
        invite = await _open_room(host, ann)
        for spectator in (sam, sue):
            await spectator.request({"type": "race_join", "invite": invite, "watch": True})
        games = await _start(host, invite, [host, ann], clock)
        states = await asyncio.gather(
            host.play(games[host], WIN[:-1]), ann.play(games[ann], WIN[:-1])
        )
        last = WIN[-1]
        replies = await asyncio.gather(
            host.act(states[0], last.kind.value, last.pos),
            ann.act(states[1], last.kind.value, last.pos),
        )
        assert [(r["type"], r["game"]["status"]) for r in replies] == [("accepted", "won")] * 2

        rooms = [(await ws.until("race_results"))["race"] for ws in (host, ann, sam, sue)]
        results = rooms[0]["results"]
        # Equal finish times: one shared first place, listed the same way everywhere (by player
        # id), and a race won for each of them.
        assert [r["rank"] for r in results] == [1, 1]
        assert all(r["cleared"] and r["status"] == "won" for r in results)
        assert results[0]["elapsed_ms"] == results[1]["elapsed_ms"]
        assert [r["player_id"] for r in results] == sorted([host.player_id, ann.player_id])
        assert all(room["results"] == results for room in rooms)
        for client in (on_a, on_b):
            body = await (await client.get(f"/api/v1/races/{invite}")).json()
            assert body["results"] == results
            for ws in (host, ann):
                profile = await (await client.get(f"/api/v1/players/{ws.player_id}")).json()
                assert (profile["races_played"], profile["races_won"]) == (1, 1)


async def test_resigning_at_once_ranks_below_playing_on_on_either_process(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    """Results by progress (docs/rules.md §4 "Results order"): racers who removed cards and
    then resigned or were blocked rank above those who resigned at once, whatever the score;
    as many cards at the same score are parted by who got there first; those who resigned at
    once share a rank. Every follower on either process, and either process's REST, reads the
    same results, which agree with the progress pushed during the race."""
    assert WIN is not None and BLOCK is not None
    server_a = await make_server(**RACE_SETTINGS)
    server_b = await make_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host, dan, cy = [await _player(on_a, n) for n in ("Host", "Dan", "Cy")]
        ann, bob, eve = [await _player(on_b, n) for n in ("Ann", "Bob", "Eve")]
        racers = [host, ann, bob, cy, dan, eve]
        invite = await _open_room(host, *racers[1:])
        update = await host.until("race_room")  # seats taken on B, seen on A
        while len(update["race"]["players"]) < len(racers):
            update = await host.until("race_room")
        games = await _start(host, invite, racers, clock)

        async def resign(ws: WsPlayer) -> dict[str, Any]:
            reply = await ws.request({"type": "resign", "game_id": games[ws]["game_id"]})
            assert reply["game"]["status"] == "resigned", reply
            state: dict[str, Any] = reply["game"]
            return state

        # Ann and Bob resign at once: 500 points, nothing removed.
        await resign(ann)
        await resign(bob)
        # Host removes three cards and resigns: 497.
        await host.play(games[host], WIN[:3])
        await resign(host)
        # Dan removes two cards, and Eve the same two, two seconds later: 498 each.
        await dan.play(games[dan], WIN[:2])
        clock.advance(seconds=2)
        await eve.play(games[eve], WIN[:2])
        await resign(dan)
        # Cy draws the whole stock and removes two cards: blocked at 475.
        assert sum(a.kind.value == "remove" for a in BLOCK) == 2
        blocked = await cy.play(games[cy], BLOCK)
        assert blocked["status"] == "blocked"
        await resign(eve)  # the last game still being played: the race finishes

        rooms: list[dict[str, Any]] = []
        progress: list[dict[int, dict[str, Any]]] = []
        for ws in racers:
            messages = await _until_results(ws)
            progress.append(_last_progress(messages))
            rooms.append(messages[-1]["race"])
        results = rooms[0]["results"]
        assert [(r["name"], r["rank"], r["status"]) for r in results] == [
            ("Host", 1, "resigned"),
            ("Dan", 2, "resigned"),
            ("Eve", 3, "resigned"),
            ("Cy", 4, "blocked"),
            ("Ann", 5, "resigned"),
            ("Bob", 5, "resigned"),
        ]
        assert [(r["cards_removed"], r["score"]) for r in results] == [
            (3, 497),
            (2, 498),
            (2, 498),
            (2, 475),
            (0, 500),
            (0, 500),
        ]
        last = {r["name"]: r["last_removal_ms"] for r in results}
        assert last["Ann"] is None and last["Bob"] is None
        assert last["Eve"] == last["Dan"] + 2000  # the same two cards, two seconds later
        assert last["Cy"] == next(r["elapsed_ms"] for r in results if r["name"] == "Cy")
        assert {r["player_id"]: r["game_id"] for r in results} == {
            ws.player_id: games[ws]["game_id"] for ws in racers
        }
        assert all(room["results"] == results for room in rooms)
        final = {r["player_id"]: (r["status"], r["cards_left"], r["score"]) for r in results}
        for last_seen in progress:  # the progress pushed during the race ends at the results
            assert {
                pid: (m["status"], m["cards_left"], m["score"]) for pid, m in last_seen.items()
            } == final
        for client in (on_a, on_b):
            body = await (await client.get(f"/api/v1/races/{invite}")).json()
            assert (body["status"], body["results"]) == ("finished", results)
            won = await (await client.get(f"/api/v1/players/{host.player_id}")).json()
            lost = await (await client.get(f"/api/v1/players/{ann.player_id}")).json()
            assert (won["races_won"], lost["races_won"]) == (1, 0)


# --------------------------------------------------------------------------- the time limit


async def test_the_time_limit_ends_the_race_and_ranks_those_still_playing(
    race_server: TestServer, clock: FakeClock
) -> None:
    assert WIN is not None
    async with TestClient(race_server) as client:
        host, ann, dan, bob, sam = [
            await _player(client, n) for n in ("Host", "Ann", "Dan", "Bob", "Sam")
        ]
        invite = await _open_room(host, ann, dan, bob, time_limit_s=30)
        await sam.request({"type": "race_join", "invite": invite, "watch": True})
        games = await _start(host, invite, [host, ann, dan, bob], clock)
        await host.play(games[host], WIN)
        ann_state = await ann.play(games[ann], WIN[:21])  # a peak cleared: 579 points, 13 left
        dan_state = await dan.play(games[dan], WIN[:2])  # two removals: 498 points, 26 left
        bob_state = await bob.play(games[bob], [Action.draw(), Action.draw()])  # 498, 28 left
        assert (ann_state["score"], dan_state["score"], bob_state["score"]) == (579, 498, 498)
        assert (dan_state["cards_left"], bob_state["cards_left"]) == (26, 28)
        started = await host.request({"type": "race_join", "invite": invite})
        assert started["race"]["ends_at"] is not None

        clock.advance(seconds=30)  # past ends_at (the start was 1 s after starts_at)
        rooms = [(await ws.until("race_results"))["race"] for ws in (host, ann, dan, bob, sam)]
        results = rooms[0]["results"]
        assert [(r["name"], r["rank"], r["status"], r["cleared"]) for r in results] == [
            ("Host", 1, "won", True),
            ("Ann", 2, "playing", False),
            ("Dan", 3, "playing", False),
            ("Bob", 4, "playing", False),
        ]
        assert [(r["score"], r["cards_left"]) for r in results[1:]] == [
            (579, 13),
            (498, 26),
            (498, 28),
        ]
        assert all(room["results"] == results for room in rooms)
        assert rooms[0]["finished_at"] == rooms[0]["ends_at"]

        reply = await ann.act(ann_state, "draw")
        assert (reply["type"], reply["code"]) == ("rejected", "race_over")
        shown = reply["game"]
        assert shown == ann_state | {"elapsed_ms": shown["elapsed_ms"], "code": shown["code"]}
        assert shown["code"] in (None, str(CODE))  # the deal may be shown once time is up
        reply = await bob.request({"type": "resign", "game_id": bob_state["game_id"]})
        assert (reply["type"], reply["code"]) == ("error", "race_over")
        body = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert (body["status"], body["results"]) == ("finished", results)
        # A finished race's players are in no room any more; its games are not listed.
        welcome = (await WsPlayer.connect(client, ann.token))[1]
        assert welcome["games"] == []


# ------------------------------------------------------------------------ slow and gone peers


async def test_a_stalled_spectator_stays_bounded_and_does_not_slow_the_racers(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    limit = 16
    server = await make_server(**RACE_SETTINGS, ws_send_queue=limit)
    async with TestClient(server) as client:
        names = ("Host", "Ann", "Bob", "Cy", "Di", "Ed")
        racers = [await _player(client, name) for name in names]
        host = racers[0]
        invite = await _open_room(host, *racers[1:])
        games = await _start(host, invite, racers, clock)
        raw, watcher_id = await _raw_player(client, server, "Watcher")
        try:
            joined = await raw.request({"type": "race_join", "invite": invite}, "join")
            assert joined["role"] == "spectator"
            assert _watching(joined, watcher_id)
            session = _session_of(server, joined["race"]["race_id"], watcher_id)
            transport = _choke(session)
            # From here on the spectator reads nothing while the racers play fast.
            worst_ack = most_pending = most_buffered = 0.0
            assert WIN is not None
            line = WIN[:-1]  # each racer all but wins: some 240 progress messages in all

            async def churn(ws: WsPlayer, game: dict[str, Any]) -> None:
                nonlocal worst_ack, most_pending, most_buffered
                for action in line:
                    t0 = time.monotonic()
                    reply = await ws.act(game, action.kind.value, action.pos)
                    worst_ack = max(worst_ack, time.monotonic() - t0)
                    assert reply["type"] == "accepted", reply
                    game = reply["game"]
                    most_pending = max(most_pending, session.outbox.pending)
                    most_buffered = max(most_buffered, transport.get_write_buffer_size())

            await asyncio.gather(*(churn(ws, games[ws]) for ws in racers))
            published = len(line) * len(racers)
            assert worst_ack < 2.0, worst_ack  # generous: an ack takes milliseconds
            # Progress is coalesced per racer, and the room per room: never more queued than
            # there are racers, plus the room (the announcement of the spectator's own arrival
            # reaches it when it follows the room in time), and the stalled socket's own buffer
            # stays at a few KiB.
            assert 0 < most_pending <= len(racers) + 1 < limit
            assert most_buffered <= WRITER_LIMIT + 4096  # a writer's chunk over the mark
            assert not session.outbox.closed

            # The spectator reads again: each racer's latest progress is there (the stale ones
            # were dropped on the way), and the race goes on being followed to its results.
            latest: dict[int, int] = {}
            received = 0
            while latest != {ws.player_id: len(line) for ws in racers}:
                message = await raw.recv()
                if message["type"] == "race_room":  # its own arrival, at most once
                    assert _watching(message, watcher_id), message
                    continue
                assert message["type"] == "race_progress", message
                received += 1
                latest[message["player_id"]] = message["seq"]
            assert received < published
            for ws in racers:
                await ws.request({"type": "resign", "game_id": games[ws]["game_id"]})
            while (message := await raw.recv())["type"] != "race_results":
                assert message["type"] == "race_room" or (
                    message["type"] == "race_progress" and message["status"] == "resigned"
                ), message
            assert [r["status"] for r in message["race"]["results"]] == ["resigned"] * len(names)
        finally:
            raw.close()


async def test_a_spectator_that_never_reads_but_pings_is_closed_for_the_bytes_waiting(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    """Coalescing keeps a stalled spectator's queue short: what it does not read piles up in
    its transport and the kernel instead, and its pings keep it from being taken for dead.
    The bytes waiting for it are bounded all the same (TRIPEAKS_WS_SEND_BUFFER_BYTES)."""
    bound = 8 * 1024
    server = await make_server(**RACE_SETTINGS, ws_send_buffer_bytes=bound)
    slow_closes = ("tripeaks_websocket_closes_total", {"reason": "slow_reader"})
    slow_before = REGISTRY.get_sample_value(*slow_closes) or 0.0
    async with TestClient(server) as client:
        names = ("Host", "Ann", "Bob", "Cy", "Di", "Ed")
        racers = [await _player(client, name) for name in names]
        invite = await _open_room(racers[0], *racers[1:])
        games = await _start(racers[0], invite, racers, clock)
        raw, watcher_id = await _raw_player(client, server, "Pinger")
        try:
            joined = await raw.request({"type": "race_join", "invite": invite}, "join")
            session = _session_of(server, joined["race"]["race_id"], watcher_id)
            most_pending = 0

            async def ping() -> None:
                # Reads nothing, but says it is there every 20 ms.
                for i in range(10_000):
                    if session.outbox.closed:
                        return
                    await raw.send({"type": "ping", "id": f"p{i}"})
                    await asyncio.sleep(0.02)

            async def churn(ws: WsPlayer, game: dict[str, Any]) -> None:
                nonlocal most_pending
                assert WIN is not None
                for action in WIN[:-1]:
                    if session.outbox.closed:
                        return
                    reply = await ws.act(game, action.kind.value, action.pos)
                    assert reply["type"] == "accepted", reply
                    game = reply["game"]
                    most_pending = max(most_pending, session.outbox.pending)

            pinging = asyncio.create_task(ping())
            try:
                await asyncio.gather(*(churn(ws, games[ws]) for ws in racers))
                await _eventually(lambda: session.outbox.closed, "the spectator was closed")
            finally:
                pinging.cancel()
            assert session.outbox.overflowed
            # Not for its queue's length: coalescing kept that short.
            assert most_pending <= len(racers) + 2 < session.outbox.limit // 2
            await _eventually(lambda: session.ws not in server.app[SOCKETS], "socket gone")
            assert REGISTRY.get_sample_value(*slow_closes) == slow_before + 1
        finally:
            raw.close()


async def test_a_racer_who_stops_reading_is_closed_with_1008_or_cut_off(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**RACE_SETTINGS, ws_send_queue=16)
    slow_closes = ("tripeaks_websocket_closes_total", {"reason": "slow_reader"})
    slow_before = REGISTRY.get_sample_value(*slow_closes)
    async with TestClient(server) as client:
        host = await _player(client, "Host")
        invite = await _open_room(host)
        slow, slow_id = await _raw_player(client, server, "Slow")
        deaf, deaf_id = await _raw_player(client, server, "Deaf")
        try:
            race_id = 0
            for raw in (slow, deaf):
                joined = await raw.request({"type": "race_join", "invite": invite}, "join")
                assert joined["role"] == "racer"
                race_id = joined["race"]["race_id"]
            games = await _start(host, invite, [host], clock)
            sessions = [_session_of(server, race_id, pid) for pid in (slow_id, deaf_id)]
            for session in sessions:
                _choke(session)
            # Requests whose replies are never read: they cannot be coalesced, so they pile
            # up until the outbox overflows and the connection is closed.
            for raw in (slow, deaf):
                for i in range(200):
                    await raw.send({"type": "race_join", "invite": invite, "id": i})
            await _eventually(lambda: all(s.outbox.closed for s in sessions), "both overflowed")
            assert all(s.outbox.pending == 0 for s in sessions)
            t0 = time.monotonic()
            state = games[host]
            for _ in range(5):  # others play on, promptly
                reply = await host.act(state, "draw")
                assert reply["type"] == "accepted"
                state = reply["game"]
            assert time.monotonic() - t0 < 2.0

            # A slow reader that reads on finds the policy close at the end of its backlog.
            assert await slow.close_frame() == 1008
            # One that never reads is cut off all the same: nothing of it stays on the server.
            await _eventually(lambda: server.app[HUB].subscribers(race_id) == 1, "dropped")
            await _eventually(
                lambda: all(s.ws not in server.app[SOCKETS] for s in sessions), "sockets gone"
            )
            assert REGISTRY.get_sample_value(*slow_closes) == (slow_before or 0) + 2
            deaf_transport = sessions[1].outbox._transport
            await _eventually(  # not merely closing, waiting for ever to flush its backlog
                lambda: deaf_transport.is_closing() and not deaf_transport.get_write_buffer_size(),
                "the deaf connection was dropped",
            )
            with pytest.raises(ConnectionError):
                while True:  # the deaf client finds its connection reset (or closed)
                    await deaf.recv()
        finally:
            slow.close()
            deaf.close()


async def test_a_spectator_vanishing_mid_broadcast_does_not_disturb_the_racers(
    race_server: TestServer, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    assert WIN is not None and BLOCK is not None
    async with TestClient(race_server) as client:
        host, ann, stays = [await _player(client, n) for n in ("Host", "Ann", "Stays")]
        # Four more racers, so that the racers' moves (no undo in a race) fill the pipe.
        more = [await _player(client, f"Racer{i}") for i in range(4)]
        invite = await _open_room(host, ann, *more)
        gone, gone_id = await _raw_player(client, race_server, "Gone")
        try:
            joined = await gone.request({"type": "race_join", "invite": invite, "watch": True}, "j")
            race_id = joined["race"]["race_id"]
            await stays.request({"type": "race_join", "invite": invite, "watch": True})
            games = await _start(host, invite, [host, ann, *more], clock)
            session = _session_of(race_server, race_id, gone_id)
            transport = _choke(session)

            # Fill the vanishing spectator's pipe until the server's writer waits in the middle
            # of writing to it: its transport paused writing (the buffer went over the high-water
            # mark; it stays paused, anywhere above the low mark, while the peer reads nothing)
            # and messages queue behind it.
            protocol = transport.get_protocol()
            assert isinstance(protocol, BaseProtocol)

            def writing() -> bool:
                return protocol.writing_paused and session.outbox.pending > 0

            deadline = time.monotonic() + TIMEOUT

            async def churn(
                ws: WsPlayer, state: dict[str, Any], line: list[Action]
            ) -> tuple[dict[str, Any], list[Action]]:
                """Play ``line`` until the spectator's writer waits; the game and what is left."""
                while len(line) > 1 and not writing():  # the last move is kept: the race runs on
                    assert time.monotonic() < deadline, "the spectator's pipe did not fill in time"
                    state = (await ws.act(state, line[0].kind.value, line[0].pos))["game"]
                    line = line[1:]
                return state, line

            assert WIN is not None and BLOCK is not None
            lines = {host: WIN, ann: BLOCK, **{ws: WIN for ws in more}}
            played = await asyncio.gather(*(churn(ws, games[ws], lines[ws]) for ws in lines))
            # The racers' progress reaches the room after their acks (events are published once
            # their commits are in, several in one batch): when it was not enough, the watcher
            # who stays leaves and comes back, and each time every follower is sent the room.

            async def filled() -> bool:
                if writing():
                    return True
                await stays.request({"type": "race_leave", "invite": invite})
                await stays.request({"type": "race_join", "invite": invite, "watch": True})
                return writing()

            await eventually(
                filled,
                "the spectator's pipe to fill: "
                f"{transport.get_write_buffer_size()} bytes buffered, paused: "
                f"{protocol.writing_paused}, {session.outbox.pending} queued, "
                f"closed: {session.outbox.closed}",
                within_s=TIMEOUT,
            )
            gone.abort()
            final_host, final_ann, *_ = await asyncio.gather(
                *(ws.play(*left) for ws, left in zip(lines, played, strict=True))
            )
            assert (final_host["status"], final_ann["status"]) == ("won", "blocked")
            seen = await _until_results(stays)
            results = [r["name"] for r in seen[-1]["race"]["results"]]
            assert sorted(results[:-1]) == ["Host", "Racer0", "Racer1", "Racer2", "Racer3"]
            assert results[-1] == "Ann"  # the winners, then the one blocked
            await _eventually(
                lambda: race_server.app[HUB].subscribers(race_id) == 7, "gone dropped"
            )
            assert session.outbox.closed
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            assert errors == []
        finally:
            gone.close()  # (a failure above must not leave its socket open)


# ------------------------------------------------------------------------ limits and leaving


async def test_room_limits_and_closed_rooms_give_clear_errors(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(**RACE_SETTINGS, race_max_players=2, race_max_rooms=1)
    async with TestClient(server) as client:
        host, ann, carl, dan = [await _player(client, n) for n in ("Host", "Ann", "Carl", "Dan")]
        invite = await _open_room(host, ann)
        reply = await carl.request({"type": "race_join", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "room_full")
        assert "2" in reply["message"]
        reply = await carl.request({"type": "race_join", "invite": invite, "watch": True})
        assert reply["role"] == "spectator"  # watching takes no seat

        for ws in (host, ann):
            reply = await ws.request({"type": "race_create"})
            assert (reply["type"], reply["code"]) == ("error", "too_many_rooms")
        other = (await carl.request({"type": "race_create"}))["race"]["invite"]
        for ws in (host, ann):
            reply = await ws.request({"type": "race_join", "invite": other})
            assert (reply["type"], reply["code"]) == ("error", "too_many_rooms")
            assert reply["message"]

        # The only player leaves a lobby: it closes, and nobody can join, watch or start it.
        assert (await carl.request({"type": "race_leave", "invite": other}))["type"] == "race_left"
        body = await (await client.get(f"/api/v1/races/{other}")).json()
        assert body["status"] == "closed" and body["players"] == []
        for message in (
            {"type": "race_join", "invite": other},
            {"type": "race_join", "invite": other, "watch": True},
        ):
            reply = await dan.request(message)
            assert (reply["type"], reply["code"]) == ("error", "race_closed")
        reply = await carl.request({"type": "race_start", "invite": other})
        assert (reply["type"], reply["code"]) == ("error", "race_closed")
        # A closed room no longer counts against its players' limit.
        assert (await carl.request({"type": "race_create"}))["type"] == "race"

        # Nor does a finished race.
        games = await _start(host, invite, [host, ann], clock)
        for ws in (host, ann):
            await ws.request({"type": "resign", "game_id": games[ws]["game_id"]})
        await host.until("race_results")
        assert (await host.request({"type": "race_create"}))["type"] == "race"


async def test_leaving_passes_the_host_in_a_lobby_and_resigns_in_a_running_race(
    race_server: TestServer, clock: FakeClock
) -> None:
    assert WIN is not None
    async with TestClient(race_server) as client:
        host, ann, bob = [await _player(client, n) for n in ("Host", "Ann", "Bob")]
        invite = await _open_room(host, ann, bob)
        left = await host.request({"type": "race_leave", "invite": invite})
        assert left == {"type": "race_left", "invite": invite, "id": left["id"]}
        update = await ann.until("race_room")
        while [p["name"] for p in update["race"]["players"]] != ["Ann", "Bob"]:
            update = await ann.until("race_room")
        room = update["race"]
        assert room["host_id"] == ann.player_id
        assert [(p["name"], p["host"]) for p in room["players"]] == [("Ann", True), ("Bob", False)]
        reply = await host.request({"type": "race_start", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "not_host")

        games = await _start(ann, invite, [ann, bob], clock)
        assert (await bob.request({"type": "race_leave", "invite": invite}))["type"] == "race_left"
        resigned = await ann.until("race_progress", player_id=bob.player_id)
        assert resigned["status"] == "resigned"
        reply = await bob.act(games[bob], "draw")
        assert (reply["type"], reply["code"]) == ("rejected", "game_over")

        await ann.play(games[ann], WIN)
        ranked = (await ann.until("race_results"))["race"]["results"]
        assert [(r["name"], r["rank"], r["status"]) for r in ranked] == [
            ("Ann", 1, "won"),
            ("Bob", 2, "resigned"),
        ]


# -------------------------------------------------------------------------------- bad input


BAD_MESSAGES: list[tuple[dict[str, Any], str]] = [
    ({"type": "race_join", "invite": 123}, "invalid_message"),
    ({"type": "race_join"}, "invalid_message"),
    ({"type": "race_join", "invite": ""}, "invalid_message"),
    ({"type": "race_join", "invite": "A" * 21}, "invalid_message"),
    ({"type": "race_join", "invite": "ACDEFG", "watch": "yes"}, "invalid_message"),
    ({"type": "race_join", "invite": "ACDEFG", "seat": 1}, "invalid_message"),
    ({"type": "race_start", "invite": ["ACDEFG"]}, "invalid_message"),
    ({"type": "race_leave"}, "invalid_message"),
    ({"type": "race_create", "time_limit_s": "60"}, "invalid_message"),
    ({"type": "race_create", "time_limit_s": 60.5}, "invalid_message"),
    ({"type": "race_create", "time_limit_s": 0}, "invalid_message"),
    ({"type": "race_create", "time_limit_s": True}, "invalid_message"),
    ({"type": "race_create", "rules": "X"}, "invalid_message"),
    ({"type": "race_create", "code": 5}, "invalid_message"),
    ({"type": "race_create", "code": "TP1-E-AAA"}, "bad_code"),
    ({"type": "race_create", "time_limit_s": 29}, "bad_time_limit"),
    ({"type": "race_create", "time_limit_s": 7201}, "bad_time_limit"),
    ({"type": "race_join", "invite": "ZZZZZZ"}, "bad_invite"),
    ({"type": "race_join", "invite": "ACDEF"}, "bad_invite"),
    ({"type": "race_join", "invite": "ACDEFGH"}, "bad_invite"),
    ({"type": "race_join", "invite": "0O1IL5"}, "bad_invite"),
    ({"type": "race_start", "invite": "ACD?FG"}, "bad_invite"),
    ({"type": "race_leave", "invite": "ACDÉFG"}, "bad_invite"),
    ({"type": "race_join", "invite": "CCCCCC"}, "unknown_invite"),
    ({"type": "race_join", "invite": "CCCCCC", "watch": True}, "unknown_invite"),
    ({"type": "race_start", "invite": "CCCCCC"}, "unknown_invite"),
    ({"type": "race_leave", "invite": "CCCCCC"}, "unknown_invite"),
]


async def test_bad_race_messages_get_a_clear_error_and_the_connection_stays_usable(
    race_server: TestServer,
) -> None:
    async with TestClient(race_server) as client:
        ws = await _player(client, "Sender")
        for message, code in BAD_MESSAGES:
            reply = await ws.request(message)  # the error echoes the request's id
            assert (reply["type"], reply["code"]) == ("error", code), (message, reply)
            assert isinstance(reply["message"], str) and reply["message"], reply
        assert (await ws.request({"type": "ping"}))["type"] == "pong"
        assert ws.inbox == deque()  # and nothing else was sent
        resp = await client.get("/api/v1/races/CCCCCC")
        assert resp.status == 404
        resp = await client.get("/api/v1/races/0O1IL5")
        assert resp.status == 400


async def test_bad_race_requests_in_a_real_room_get_clear_errors(
    race_server: TestServer, clock: FakeClock
) -> None:
    async with TestClient(race_server) as client:
        host, ann, late, stranger = [
            await _player(client, n) for n in ("Host", "Ann", "Late", "Stranger")
        ]
        invite = (await host.request({"type": "race_create"}))["race"]["invite"]
        # An invite read aloud and typed back in lower case, with a dash, still works.
        spoken = f"{invite[:3].lower()}-{invite[3:].lower()}"
        joined = await ann.request({"type": "race_join", "invite": spoken})
        assert (joined["role"], joined["race"]["invite"]) == ("racer", invite)
        resp = await client.get(f"/api/v1/races/{spoken}")
        assert resp.status == 200 and (await resp.json())["invite"] == invite
        reply = await stranger.request({"type": "race_leave", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "not_in_race")
        reply = await ann.request({"type": "race_start", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "not_host")

        started = await host.request({"type": "race_start", "invite": invite})
        assert started["type"] == "race"
        reply = await host.request({"type": "race_start", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "already_started")
        reply = await late.request({"type": "race_join", "invite": invite})
        assert (reply["type"], reply["role"]) == ("race", "spectator") and "game" not in reply
        reply = await stranger.request({"type": "race_leave", "invite": invite})
        assert (reply["type"], reply["code"]) == ("error", "not_in_race")
        # A spectator may stop watching.
        assert (await late.request({"type": "race_leave", "invite": invite}))["type"] == "race_left"

        games = {ws: (await ws.until("race_go"))["game"] for ws in (host, ann)}
        reply = await host.act(games[host], "draw")  # the game clock has not reached starts_at
        # Refused without a state: nothing of the deal shows before the start.
        assert (reply["type"], reply["code"]) == ("error", "race_not_started")
        assert reply["message"] and "game" not in reply
        clock.advance(seconds=1)
        reply = await ann.act(games[host], "draw")
        assert (reply["type"], reply["code"]) == ("error", "not_your_game")
        reply = await ann.request({"type": "resign", "game_id": games[host]["game_id"]})
        assert (reply["type"], reply["code"]) == ("error", "not_your_game")
        assert (await host.act(games[host], "draw"))["type"] == "accepted"
        assert (await ann.act(games[ann], "draw"))["type"] == "accepted"


async def test_a_racer_leaving_on_a_process_behind_has_their_game_resigned(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server_a = await make_server(**RACE_SETTINGS)
    server_b = await make_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host = await _player(on_a, "Host")
        info = await register(on_a, "Racer")
        racer, _ = await WsPlayer.connect(on_a, info["token"])
        invite = await _open_room(host, racer)
        game = (await _start(host, invite, [host, racer], clock))[racer]
        # The racer's second socket, on B, caches the game at seq 0.
        racer_b, _ = await WsPlayer.connect(on_b, info["token"])
        resumed = await racer_b.request({"type": "resume", "game_id": game["game_id"]})
        assert resumed["game"]["seq"] == 0
        moved = await racer.act(game, "draw")
        assert moved["type"] == "accepted"
        left = await racer_b.request({"type": "race_leave", "invite": invite})
        assert left["type"] == "race_left", left
        conn = await asyncpg.connect(database_url)
        try:
            row = await conn.fetchrow(
                "SELECT status, seq FROM games WHERE id = $1", game["game_id"]
            )
        finally:
            await conn.close()
        assert (row["status"], row["seq"]) == ("resigned", 1)
        after = await racer.act(moved["game"], "draw")
        assert after["type"] == "rejected" and after["game"]["status"] == "resigned", after


async def test_a_racer_moving_between_server_processes_always_gets_their_current_game(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    assert WIN is not None
    server_a = await make_server(**RACE_SETTINGS)
    server_b = await make_server(**RACE_SETTINGS)
    async with TestClient(server_a) as on_a, TestClient(server_b) as on_b:
        host = await _player(on_a, "Host")
        info = await register(on_a, "Ann")
        ann, _ = await WsPlayer.connect(on_a, info["token"])
        invite = await _open_room(host, ann)
        games = await _start(host, invite, [host, ann], clock)
        state = await ann.play(games[ann], WIN[:10])  # on A, which keeps the game in memory
        for client, actions in ((on_b, WIN[10:15]), (on_a, WIN[15:20]), (on_b, WIN[20:])):
            await ann.close()
            ann, welcome = await WsPlayer.connect(client, info["token"])
            assert [g for g in welcome["games"] if g["game_id"] == state["game_id"]] == [state]
            rejoined = await ann.request({"type": "race_join", "invite": invite})
            assert rejoined["game"] == state
            state = await ann.play(state, actions)
        assert state["status"] == "won"
        progress = await host.until("race_progress", player_id=ann.player_id, status="won")
        assert progress["seq"] == len(WIN)

        # Two devices at once, one on each process: each plays on from what the other did.
        laptop, _ = await WsPlayer.connect(on_b, host.token)
        state = await host.play(games[host], WIN[:3])  # on A, which keeps the game in memory
        for device, actions in ((laptop, WIN[3:6]), (host, WIN[6:9]), (laptop, WIN[9:12])):
            state = await device.play(state, actions)
        assert state["seq"] == 12
