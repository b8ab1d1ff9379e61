"""Websocket play end to end: real server, real PostgreSQL, real websocket clients."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import GameCode, RuleSet
from server.services.clock import FakeClock
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, blocking_line, daily_code, find_winning_line, register

# TP1-E-AAAAAAA: waste 4H; bottom row 18..27 = 4S 7S 9H TS 9D TD 5H TH 6D QS.
VECTOR = "TP1-E-AAAAAAA"


async def _rows(database_url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


def _daily_code(settings: Settings, clock: FakeClock) -> GameCode:
    assert settings.daily_secret
    return daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)


async def _new_player(client: TestClient[Any, Any], name: str, **hello: Any) -> WsPlayer:
    info = await register(client, name)
    ws, _ = await WsPlayer.connect(client, info["token"], **hello)
    return ws


async def test_free_game_played_to_a_win_commits_every_action_before_its_ack(
    client: TestClient[Any, Any], database_url: str, clock: FakeClock
) -> None:
    code = GameCode.parse("TP1-E-AAAAAAB")
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    ws = await _new_player(client, "Winner")
    game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
    assert game["mode"] == "free" and game["code"] == str(code) and game["status"] == "playing"
    conn = await asyncpg.connect(database_url)
    try:
        for action in line:
            clock.advance(ms=250)
            reply = await ws.act(game, action.kind.value, action.pos)
            assert reply["type"] == "accepted", reply
            game = reply["game"]
            # The ack arrived: the action must already be committed, seen from another session.
            stored = await conn.fetchval(
                "SELECT count(*) FROM game_actions WHERE game_id = $1 AND seq = $2",
                game["game_id"],
                game["seq"],
            )
            assert stored == 1
    finally:
        await conn.close()
    moves = len(line)
    assert game["status"] == "won"
    assert game["cards_left"] == 0
    assert game["score"] == 500 - moves + 300
    assert game["moves"] == moves and game["undos"] == 0
    assert game["elapsed_ms"] == 250 * moves
    assert game["can_undo"] is False
    rows = await _rows(
        database_url,
        "SELECT status, score, moves, seq, elapsed_ms FROM games WHERE id = $1",
        game["game_id"],
    )
    assert tuple(rows[0]) == ("won", game["score"], moves, moves, 250 * moves)
    reply = await ws.act(game, "draw")
    assert reply["type"] == "rejected" and reply["code"] == "game_over"


async def test_free_game_to_a_blocked_end_then_undo_out_of_it(
    client: TestClient[Any, Any],
) -> None:
    code = GameCode.parse("TP1-E-AAAAAAB")
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    ws = await _new_player(client, "Blocker", locale="zh-Hant")
    game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
    game = await ws.play(game, line)
    assert game["status"] == "blocked"
    assert game["message"] == "僵局：已無可走的步驟"
    assert game["stock_count"] == 0
    assert game["can_undo"] is True
    reply = await ws.act(game, "draw")
    assert reply["code"] == "game_over"
    reply = await ws.act(game, "undo")
    assert reply["type"] == "accepted"
    assert reply["game"]["status"] == "playing"
    assert "message" not in reply["game"]


async def test_ranked_daily_blocked_game_refuses_undo(
    client: TestClient[Any, Any], settings: Settings, clock: FakeClock
) -> None:
    code = _daily_code(settings, clock)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    ws = await _new_player(client, "Ranked")
    game = (await ws.request({"type": "join_daily"}))["game"]
    assert game["mode"] == "daily" and game["code"] is None
    assert game["daily_date"] == clock.now().date().isoformat()
    game = await ws.play(game, line)
    assert game["status"] == "blocked"
    reply = await ws.act(game, "undo")
    assert reply["type"] == "rejected" and reply["code"] == "game_over"
    assert reply["game"]["status"] == "blocked"


async def test_rejection_codes_over_the_wire_with_messages_in_both_languages(
    client: TestClient[Any, Any],
) -> None:
    en = await _new_player(client, "English")
    zh = await _new_player(client, "Chinese", locale="zh-Hant")
    quiet = await _new_player(client, "Quiet", error_help=False)
    for ws, not_adjacent, blocked in (
        (en, "Must be one rank higher or lower", "This card is blocked."),
        (zh, "點數必須大一級或小一級", "這張牌被擋住了"),
        (quiet, None, None),
    ):
        game = (await ws.request({"type": "new_game", "code": VECTOR}))["game"]
        reply = await ws.act(game, "remove", 18)  # 4S on 4H
        assert (reply["type"], reply["code"]) == ("rejected", "not_adjacent")
        assert reply.get("message") == not_adjacent
        assert reply["game"] == game  # nothing changed, not even the moves counter
        reply = await ws.act(game, "remove", 0)  # a face-down peak top
        assert (reply["code"], reply.get("message")) == ("blocked", blocked)
        reply = await ws.act(game, "undo")
        assert reply["code"] == "nothing_to_undo" and "message" not in reply
        reply = await ws.act(game, "remove", 24)  # 5H on 4H
        assert reply["type"] == "accepted"
        game = reply["game"]
        assert game["tableau"][24] is None and game["waste"] == "5H"
        reply = await ws.act(game, "remove", 24)
        assert reply["code"] == "no_card"
        for _ in range(23):
            game = (await ws.act(game, "draw"))["game"]
        reply = await ws.act(game, "draw")
        assert reply["code"] in {"stock_empty", "game_over"}


async def test_stale_seq_gets_the_current_state_and_a_repeat_is_not_applied_twice(
    client: TestClient[Any, Any], database_url: str
) -> None:
    ws = await _new_player(client, "Repeater")
    game = (await ws.request({"type": "new_game", "code": VECTOR}))["game"]
    first = await ws.act(game, "remove", 24)
    assert first["type"] == "accepted"
    # The client did not see the ack (say, a reconnect) and sends the same action again.
    again = await ws.act(game, "remove", 24)
    assert again["type"] == "accepted"
    assert again["game"] == first["game"] | {"elapsed_ms": again["game"]["elapsed_ms"]}
    rows = await _rows(
        database_url, "SELECT seq FROM game_actions WHERE game_id = $1", game["game_id"]
    )
    assert [r["seq"] for r in rows] == [1]
    # A different action from an old seq is stale: rejected with the current state.
    stale = await ws.act(game, "draw")
    assert (stale["type"], stale["code"]) == ("rejected", "stale_seq")
    assert stale["game"]["seq"] == 1 and stale["game"]["stock_count"] == 23
    # A seq from the future is stale too.
    future = await ws.act({**game, "seq": 7}, "draw")
    assert future["code"] == "stale_seq"
    # Undo repeated is not applied twice either.
    current = first["game"]
    undo = await ws.act(current, "undo")
    assert undo["type"] == "accepted" and undo["game"]["seq"] == 2
    repeat = await ws.act(current, "undo")
    assert repeat["type"] == "accepted" and repeat["game"]["seq"] == 2
    assert repeat["game"]["tableau"][24] == "5H"


async def test_server_restart_mid_game_resumes_the_same_state_and_undo_still_works(
    make_server: ServerFactory,
) -> None:
    code = GameCode.parse("TP1-E-AAAAAAC")
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    first = await make_server()
    async with TestClient(first) as client:
        info = await register(client, "Restarter")
        ws, _ = await WsPlayer.connect(client, info["token"])
        game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
        game = await ws.play(game, line[:20])
        await ws.close()
    await first.close()

    second = await make_server()
    async with TestClient(second) as client:
        ws, welcome = await WsPlayer.connect(client, info["token"])
        assert [g["game_id"] for g in welcome["games"]] == [game["game_id"]]
        resumed = (await ws.request({"type": "resume", "game_id": game["game_id"]}))["game"]
        assert resumed | {"elapsed_ms": 0} == game | {"elapsed_ms": 0}
        # The undo history survived the restart: undo all 20 actions, one by one.
        state = resumed
        for _ in range(20):
            reply = await ws.act(state, "undo")
            assert reply["type"] == "accepted", reply
            state = reply["game"]
        assert state["score"] == 500 and state["stock_count"] == 23
        assert (await ws.act(state, "undo"))["code"] == "nothing_to_undo"
        # And the game can be played to the end from there.
        final = await ws.play(state, line)
        assert final["status"] == "won"


async def test_players_play_the_daily_to_the_end_and_are_ranked_over_rest(
    client: TestClient[Any, Any], settings: Settings, clock: FakeClock
) -> None:
    code = _daily_code(settings, clock)
    win = find_winning_line(code.deal(), code.rules)
    block = blocking_line(code.deal(), code.rules)
    assert win is not None and block is not None
    sockets: dict[str, WsPlayer] = {}
    games: dict[str, dict[str, Any]] = {}
    for name in ("Ann", "Ben", "Cy", "Dee"):
        info = await register(client, name)
        sockets[name], _ = await WsPlayer.connect(client, info["token"])
        games[name] = (await sockets[name].request({"type": "join_daily"}))["game"]
    assert len({g["game_id"] for g in games.values()}) == 4
    clock.advance(seconds=30)
    # Ben and Dee win with the same line at the same server time: they share rank 1.
    # Ann tries to take back a draw (refused: ranked play has no undo), then wins with the same
    # line 5 s later: same score and moves, a longer time, rank 3. Cy ends blocked: rank 4.
    final = {
        "Ben": await sockets["Ben"].play(games["Ben"], win),
        "Dee": await sockets["Dee"].play(games["Dee"], win),
    }
    refused = await sockets["Ann"].act(games["Ann"], "undo")
    assert refused["code"] == "ranked_no_undo"
    assert refused["game"] == games["Ann"] | {"elapsed_ms": 30_000}  # unchanged but its time
    clock.advance(seconds=5)
    final["Ann"] = await sockets["Ann"].play(games["Ann"], win)
    final["Cy"] = await sockets["Cy"].play(games["Cy"], block)
    assert final["Ann"]["score"] == final["Ben"]["score"] == 500 - len(win) + 300
    assert final["Ann"]["moves"] == len(win) and final["Ann"]["undos"] == 0
    assert final["Cy"]["status"] == "blocked"

    today = clock.now().date().isoformat()
    resp = await client.get(f"/api/v1/daily/{today}/leaderboard")
    assert resp.status == 200
    board = await resp.json()
    assert [(e["name"], e["rank"]) for e in board["entries"]] == [
        ("Ben", 1),
        ("Dee", 1),
        ("Ann", 3),
        ("Cy", 4),
    ]
    assert board["next_cursor"] is None
    cy_entry = board["entries"][-1]
    assert cy_entry["status"] == "blocked" and cy_entry["score"] == final["Cy"]["score"]
    assert [e["elapsed_ms"] for e in board["entries"][:3]] == [30_000, 30_000, 35_000]
    assert {e["undos"] for e in board["entries"]} == {0}
    daily = await (await client.get("/api/v1/daily")).json()
    assert daily["players"] == 4 and daily["code"] is None
    # Joining again resumes the same attempt.
    again = (await sockets["Ben"].request({"type": "join_daily"}))["game"]
    assert again["game_id"] == games["Ben"]["game_id"] and again["status"] == "won"


async def test_daily_is_closed_after_its_date_and_its_code_published(
    client: TestClient[Any, Any], settings: Settings, clock: FakeClock
) -> None:
    code = _daily_code(settings, clock)
    ws = await _new_player(client, "Late")
    game = (await ws.request({"type": "join_daily"}))["game"]
    game = (await ws.act(game, "draw"))["game"]
    clock.set(
        dt.datetime.combine(
            clock.now().date() + dt.timedelta(days=1), dt.time(0, 0, 1), tzinfo=dt.UTC
        )
    )
    reply = await ws.act(game, "draw")
    assert (reply["type"], reply["code"]) == ("rejected", "daily_closed")
    assert reply["game"]["code"] == str(code)
    assert reply["game"]["seq"] == 1
    resign = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert resign["type"] == "error" and resign["code"] == "daily_closed"
    # Today's daily is a new attempt on a new deal.
    today = (await ws.request({"type": "join_daily"}))["game"]
    assert today["game_id"] != game["game_id"] and today["code"] is None


async def test_resign_ends_the_game_and_a_second_resign_is_refused(
    client: TestClient[Any, Any],
) -> None:
    ws = await _new_player(client, "Quitter")
    game = (await ws.request({"type": "new_game"}))["game"]
    assert GameCode.parse(game["code"]).rules is RuleSet.EASY
    reply = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert reply["type"] == "game" and reply["game"]["status"] == "resigned"
    again = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert (again["type"], again["code"]) == ("error", "game_over")
    reply = await ws.act(reply["game"], "undo")
    assert reply["code"] == "game_over"


async def test_new_game_with_classic_rules_and_random_code(client: TestClient[Any, Any]) -> None:
    ws = await _new_player(client, "Classic")
    game = (await ws.request({"type": "new_game", "rules": "C"}))["game"]
    assert game["rules"] == "C" and game["code"].startswith("TP1-C-")
    legacy = (await ws.request({"type": "new_game", "code": "tp1-n-aaaaaaa"}))["game"]
    assert legacy["code"] == VECTOR and legacy["rules"] == "E"


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("{not json", "bad_json"),
        ("[1, 2]", "not_an_object"),
        ('{"type": "teleport"}', "unknown_type"),
        ('{"no_type": 1}', "unknown_type"),
        ('{"type": "action", "game_id": "1", "seq": 0, "action": "draw"}', "invalid_message"),
        ('{"type": "action", "game_id": 1, "seq": -1, "action": "draw"}', "invalid_message"),
        ('{"type": "action", "game_id": 1, "seq": 0, "action": "fly"}', "invalid_message"),
        ('{"type": "action", "game_id": 1, "seq": 0, "action": "remove"}', "invalid_message"),
        (
            '{"type": "action", "game_id": 1, "seq": 0, "action": "remove", "pos": 28}',
            "invalid_message",
        ),
        (
            '{"type": "action", "game_id": 1, "seq": 0, "action": "draw", "pos": 3}',
            "invalid_message",
        ),
        ('{"type": "action", "game_id": 1, "seq": true, "action": "draw"}', "invalid_message"),
        ('{"type": "ping", "extra": 1}', "invalid_message"),
        ('{"type": "new_game", "code": "TP2-E-AAAAAAA"}', "bad_code"),
        ('{"type": "new_game", "code": "TP1-E-AAAA"}', "bad_code"),
        ('{"type": "new_game", "code": 12}', "invalid_message"),
        ('{"type": "resume", "game_id": 999999}', "unknown_game"),
        ('{"type": "action", "game_id": 999999, "seq": 0, "action": "draw"}', "unknown_game"),
    ],
)
async def test_bad_input_gets_a_clear_error_and_the_connection_stays_usable(
    client: TestClient[Any, Any], frame: str, code: str
) -> None:
    ws = await _new_player(client, "Fuzzer")
    await ws.send_raw(frame)
    reply = await ws.recv()
    assert reply["type"] == "error" and reply["code"] == code, reply
    assert reply["message"]
    assert (await ws.request({"type": "ping"}))["type"] == "pong"


async def test_error_replies_echo_the_request_id(client: TestClient[Any, Any]) -> None:
    ws = await _new_player(client, "Echo")
    await ws.send_raw('{"type": "resume", "game_id": 424242, "id": "abc"}')
    reply = await ws.recv()
    assert reply == {**reply, "type": "error", "code": "unknown_game", "id": "abc"}


async def test_someone_elses_game_is_refused_and_untouched(
    client: TestClient[Any, Any], database_url: str
) -> None:
    owner = await _new_player(client, "Owner")
    thief = await _new_player(client, "Thief")
    game = (await owner.request({"type": "new_game", "code": VECTOR}))["game"]
    for message in (
        {"type": "resume", "game_id": game["game_id"]},
        {"type": "action", "game_id": game["game_id"], "seq": 0, "action": "draw"},
        {"type": "resign", "game_id": game["game_id"]},
    ):
        reply = await thief.request(message)
        assert (reply["type"], reply["code"]) == ("error", "not_your_game")
    rows = await _rows(database_url, "SELECT seq, status FROM games WHERE id = $1", game["game_id"])
    assert tuple(rows[0]) == (0, "playing")


async def test_requests_before_hello_and_bad_tokens_are_refused(
    client: TestClient[Any, Any],
) -> None:
    ws = WsPlayer(await client.ws_connect("/ws"))
    reply = await ws.request({"type": "new_game"})
    assert (reply["type"], reply["code"]) == ("error", "hello_required")
    reply = await ws.request({"type": "hello", "token": "not-a-token"})
    assert (reply["type"], reply["code"]) == ("error", "unauthorized")
    info = await register(client, "Later")
    reply = await ws.request({"type": "hello", "token": info["token"]})
    assert reply["type"] == "welcome"


async def test_binary_frames_close_with_1003(client: TestClient[Any, Any]) -> None:
    ws = await client.ws_connect("/ws")
    await ws.send_bytes(b"\x00\x01")
    msg = await ws.receive()
    assert msg.type.name == "CLOSE" and msg.data == 1003


async def test_oversized_frames_close_with_1009_and_others_are_unaffected(
    client: TestClient[Any, Any],
) -> None:
    bystander = await _new_player(client, "Bystander")
    ws = await client.ws_connect("/ws")
    await ws.send_str('{"type": "ping", "id": "' + "x" * 10_000 + '"}')
    msg = await ws.receive()
    assert msg.type.name == "CLOSE" and msg.data == 1009
    assert (await bystander.request({"type": "ping"}))["type"] == "pong"


async def test_a_flood_is_rate_limited_then_closed_with_1008(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.web.outbox import Outbox

    reading_at_close: list[bool] = []
    shut = Outbox.shut

    async def observed_shut(self: Outbox, code: int, message: bytes) -> None:
        transport = self._transport
        reading_at_close.append(transport is not None and transport.is_reading())
        await shut(self, code, message)

    monkeypatch.setattr(Outbox, "shut", observed_shut)
    server = await make_server(ws_rate_per_second=5)
    async with TestClient(server) as client:
        info = await register(client, "Flooder")
        ws = await client.ws_connect("/ws")
        await ws.send_str(f'{{"type": "hello", "token": "{info["token"]}"}}')
        assert (await ws.receive_json())["type"] == "welcome"
        for _ in range(40):
            await ws.send_str('{"type": "ping"}')
        codes = []
        while True:
            msg = await ws.receive()
            if msg.type.name != "TEXT":
                break
            codes.append(msg.json().get("code"))
        assert "rate_limited" in codes and codes[-1] == "flood"
        assert msg.type.name == "CLOSE" and msg.data == 1008
        # The server stopped reading the flooder before closing: what it keeps sending costs
        # the server nothing while the close goes out.
        assert reading_at_close == [False]


async def test_hello_timeout_closes_with_1008(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.web import ws as ws_module

    monkeypatch.setattr(ws_module, "HELLO_TIMEOUT_S", 0.2)
    server = await make_server()
    async with TestClient(server) as client:
        ws = await client.ws_connect("/ws")
        reply = await ws.receive_json()
        assert reply["code"] == "hello_timeout"
        msg = await ws.receive()
        assert msg.type.name == "CLOSE" and msg.data == 1008


async def test_a_player_who_said_hello_may_stay_quiet_past_the_hello_timeout(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.web import ws as ws_module

    monkeypatch.setattr(ws_module, "HELLO_TIMEOUT_S", 0.2)
    server = await make_server()
    async with TestClient(server) as client:
        info = await register(client, "Quiet")
        ws, _ = await WsPlayer.connect(client, info["token"])
        # Quiet for several hello time-outs, reading all along: nothing comes, and the
        # connection stays open.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ws.ws.receive(), timeout=1.0)
        assert not ws.ws.closed
        assert (await ws.request({"type": "ping"}))["type"] == "pong"


async def test_a_refused_hello_still_leaves_the_hello_timeout_running(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.web import ws as ws_module

    monkeypatch.setattr(ws_module, "HELLO_TIMEOUT_S", 0.3)
    server = await make_server()
    async with TestClient(server) as client:
        ws = await client.ws_connect("/ws")
        await ws.send_json({"type": "hello", "token": "not-a-token", "id": 1})
        assert (await ws.receive_json())["code"] == "unauthorized"
        assert (await ws.receive_json())["code"] == "hello_timeout"
        msg = await ws.receive()
        assert msg.type.name == "CLOSE" and msg.data == 1008


async def test_shutdown_closes_sockets_with_1001(make_server: ServerFactory) -> None:
    server = await make_server()
    async with TestClient(server) as client:
        info = await register(client, "Goodbye")
        ws, _ = await WsPlayer.connect(client, info["token"])
        await server.close()
        msg = await ws.ws.receive()
        assert msg.type.name == "CLOSE" and msg.data == 1001


async def test_a_game_whose_log_holds_an_undone_removal_reloads_after_a_restart(
    make_server: ServerFactory,
) -> None:
    first = await make_server()
    async with TestClient(first) as client:
        info = await register(client, "Undoer")
        ws, _ = await WsPlayer.connect(client, info["token"])
        game = (await ws.request({"type": "new_game", "code": VECTOR}))["game"]
        game = (await ws.act(game, "remove", 24))["game"]  # 5H on 4H
        game = (await ws.act(game, "undo"))["game"]  # its log row records pos 24
        game = (await ws.act(game, "draw"))["game"]
        await ws.close()
    await first.close()
    second = await make_server()
    async with TestClient(second) as client:
        ws, _ = await WsPlayer.connect(client, info["token"])
        resumed = (await ws.request({"type": "resume", "game_id": game["game_id"]}))["game"]
        assert resumed | {"elapsed_ms": 0} == game | {"elapsed_ms": 0}
        assert (await ws.act(resumed, "undo"))["type"] == "accepted"


async def test_a_reader_that_keeps_up_is_never_closed_however_many_bytes_it_is_sent(
    make_server: ServerFactory,
) -> None:
    """The bytes waiting for a reader are bounded (TRIPEAKS_WS_SEND_BUFFER_BYTES), not the bytes
    sent to it: a player who reads every reply gets many times the bound over one connection."""
    bound = 4096
    code = GameCode.parse("TP1-E-AAAAAAB")
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    server = await make_server(ws_send_buffer_bytes=bound)
    async with TestClient(server) as client:
        ws = await _new_player(client, "Reader")
        sent = 0
        for _ in range(2):
            reply = await ws.request({"type": "new_game", "code": str(code)})
            sent += len(json.dumps(reply))
            game = reply["game"]
            for action in line:
                reply = await ws.act(game, action.kind.value, action.pos)
                assert reply["type"] == "accepted", (action, reply)
                sent += len(json.dumps(reply))
                game = reply["game"]
            assert game["status"] == "won"
        assert sent > 10 * bound
        assert not ws.ws.closed
        assert (await ws.request({"type": "ping"}))["type"] == "pong"
