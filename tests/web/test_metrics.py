"""``GET /metrics``: the Prometheus text of a real server, scraped before and after play.

The process-wide metrics are shared by every server a test process starts, so the tests
compare scrapes taken before and after what they do; what a scrape reads from the
application (its pool) or the database (rooms, today's daily) is the test's own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.config import Settings
from server.services.clock import FakeClock
from server.web.app import create_app
from server.web.keys import ADMISSION
from server.web.metrics import ACTIVITY_TIMEOUT_S, REJECTION_CODES
from tests.conftest import ServerFactory
from tests.helpers import RawWs, Samples, WsPlayer, eventually, metric, metric_samples, register

#: Series read from the database at scrape time.
DATABASE_SERIES = ("tripeaks_race_rooms", "tripeaks_daily_players", "tripeaks_daily_ranked")


async def scrape(client: TestClient[Any, Any]) -> Samples:
    """Every sample of one scrape."""
    resp = await client.get("/metrics")
    assert resp.status == 200, await resp.text()
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return metric_samples(await resp.text())


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return metric(after, name, **labels) - metric(before, name, **labels)


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


async def test_a_played_game_moves_the_action_ack_and_commit_metrics(
    client: TestClient[Any, Any], settings: Settings
) -> None:
    before = await scrape(client)
    info = await register(client, "Counted")
    ws, _ = await WsPlayer.connect(client, info["token"])
    game = (await ws.request({"type": "new_game", "code": "TP1-E-AAAAAAA"}))["game"]
    for _ in range(3):
        reply = await ws.act(game, "draw")
        assert reply["type"] == "accepted", reply
        game = reply["game"]
    reply = await ws.act(game, "remove", 0)  # the top of a peak: covered
    assert (reply["type"], reply["code"]) == ("rejected", "blocked")
    after = await scrape(client)

    assert moved(before, after, "tripeaks_actions_total", outcome="accepted", code="") == 3
    assert moved(before, after, "tripeaks_actions_total", outcome="rejected", code="blocked") == 1
    total = sum(
        after[key] - before.get(key, 0.0) for key in after if key[0] == "tripeaks_actions_total"
    )
    assert total == 4
    assert moved(before, after, "tripeaks_action_ack_seconds_count") == 4
    assert moved(before, after, "tripeaks_action_ack_seconds_bucket", le="+Inf") == 4
    assert moved(before, after, "tripeaks_action_ack_seconds_sum") > 0
    # Three writes, in one to three batches, each batch timed.
    batches = moved(before, after, "tripeaks_group_commit_batch_writes_count")
    assert 1 <= batches <= 3
    assert moved(before, after, "tripeaks_group_commit_batch_writes_sum") == 3
    assert moved(before, after, "tripeaks_group_commit_seconds_count") == batches
    assert moved(before, after, "tripeaks_group_commit_seconds_sum") > 0
    # Every rejection code is a series from the start (rates need no first sample).
    rejections = {
        dict(labels)["code"]
        for name, labels in after
        if name == "tripeaks_actions_total" and ("outcome", "rejected") in labels
    }
    assert rejections == set(REJECTION_CODES)
    # This application's pool, read when scraped.
    assert metric(after, "tripeaks_db_pool_size") == settings.db_pool_size
    assert 0 <= metric(after, "tripeaks_db_pool_checked_out") <= 2 * settings.db_pool_size

    assert moved(before, after, "tripeaks_websockets_open") == 1
    await ws.close()

    async def closed() -> bool:
        now = await scrape(client)
        return (
            metric(now, "tripeaks_websockets_open") == metric(before, "tripeaks_websockets_open")
            and moved(before, now, "tripeaks_websocket_closes_total", reason="client") == 1
        )

    await eventually(closed, "the closed socket to leave the open ones, counted as the client's")


async def test_an_action_before_hello_and_on_an_unknown_game_count_as_errors(
    client: TestClient[Any, Any],
) -> None:
    before = await scrape(client)
    anonymous = WsPlayer(await client.ws_connect("/ws"))
    action = {"type": "action", "game_id": 1, "seq": 0, "action": "draw"}
    assert (await anonymous.request(action))["code"] == "hello_required"
    info = await register(client, "Lost")
    ws, _ = await WsPlayer.connect(client, info["token"])
    assert (await ws.request({**action, "game_id": 999_999}))["code"] == "unknown_game"
    after = await scrape(client)
    errors = {"hello_required": 1, "unknown_game": 1}
    assert {
        code: moved(before, after, "tripeaks_actions_total", outcome="error", code=code)
        for code in errors
    } == errors
    assert moved(before, after, "tripeaks_action_ack_seconds_count") == 2
    await anonymous.close()
    await ws.close()


async def test_rate_limited_registrations_are_counted(make_server: ServerFactory) -> None:
    server = await make_server(register_per_minute=2)
    async with TestClient(server) as client:
        before = await scrape(client)
        statuses = []
        for i in range(4):
            resp = await client.post("/api/v1/players", json={"name": f"Limited{i}"})
            statuses.append(resp.status)
        assert statuses == [201, 201, 429, 429]
        after = await scrape(client)
        assert moved(before, after, "tripeaks_rate_limited_total", kind="registration") == 2


async def test_rate_limited_messages_and_a_flood_are_counted(make_server: ServerFactory) -> None:
    server = await make_server(ws_rate_per_second=5)
    async with TestClient(server) as client:
        token = (await register(client, "Flooder"))["token"]
        before = await scrape(client)
        ws = await client.ws_connect("/ws")
        await ws.send_json({"type": "hello", "token": token})
        assert (await ws.receive_json())["type"] == "welcome"
        for _ in range(40):
            await ws.send_str('{"type": "ping"}')
        codes = []
        while (msg := await ws.receive()).type.name == "TEXT":
            codes.append(msg.json().get("code"))
        assert codes[-1] == "flood"
        limited = codes.count("rate_limited")
        assert limited > 0

        async def counted() -> bool:
            now = await scrape(client)
            return (
                moved(before, now, "tripeaks_rate_limited_total", kind="websocket_message")
                == limited
                and moved(before, now, "tripeaks_websocket_closes_total", reason="flood") == 1
            )

        await eventually(counted, "the rate-limited messages and the flood's close counted")


async def test_closes_are_counted_by_reason(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from server.web import ws as ws_module

    watcher = await make_server()
    doomed = await make_server()
    async with TestClient(watcher) as client, TestClient(doomed) as doomed_client:
        before = await scrape(client)
        binary = await client.ws_connect("/ws")
        await binary.send_bytes(b"\x00")
        huge = await client.ws_connect("/ws")
        await huge.send_str("x" * 5000)  # over TRIPEAKS_WS_MAX_MESSAGE_BYTES (4096)
        monkeypatch.setattr(ws_module, "HELLO_TIMEOUT_S", 0.2)
        silent = await client.ws_connect("/ws")
        assert (await silent.receive_json())["code"] == "hello_timeout"
        for ws, code in ((binary, 1003), (huge, 1009), (silent, 1008)):
            msg = await ws.receive()
            assert (msg.type.name, msg.data) == ("CLOSE", code)
        staying = await doomed_client.ws_connect("/ws")
        closing = asyncio.create_task(doomed.close())  # shuts down: its sockets get 1001
        msg = await staying.receive()
        assert (msg.type.name, msg.data) == ("CLOSE", 1001)
        await closing

        expected = {
            "binary_frame": 1,
            "message_too_big": 1,
            "hello_timeout": 1,
            "server_shutdown": 1,
        }

        async def counted() -> bool:
            now = await scrape(client)
            closes = {
                reason: moved(before, now, "tripeaks_websocket_closes_total", reason=reason)
                for reason in expected
            }
            return closes == expected and metric(now, "tripeaks_websockets_open") == metric(
                before, "tripeaks_websockets_open"
            )

        await eventually(counted, "each close counted under its reason")


async def test_a_client_that_stops_answering_pings_is_closed_for_the_heartbeat(
    make_server: ServerFactory,
) -> None:
    server = await make_server(ws_heartbeat_s=0.5)
    async with TestClient(server) as client:
        token = (await register(client, "Deaf"))["token"]
        before = await scrape(client)
        assert server.port is not None
        raw = await RawWs.connect(server.host, server.port)  # answers no ping: reads nothing
        try:
            assert (await raw.request({"type": "hello", "token": token}, "h"))["type"] == "welcome"

            async def counted() -> bool:
                closes = moved(
                    before,
                    await scrape(client),
                    "tripeaks_websocket_closes_total",
                    reason="heartbeat",
                )
                return closes == 1

            await eventually(counted, "the silent client's close, counted for the heartbeat")
        finally:
            raw.close()


async def test_admission_turning_a_newcomer_away_is_counted(make_server: ServerFactory) -> None:
    server = await make_server(db_pool_size=2, admission_wait_s=0.2)
    async with TestClient(server) as client:
        before = await scrape(client)
        held = server.app[ADMISSION].turn()
        await held.__aenter__()  # every slot taken (half a pool of 2)
        try:
            resp = await client.post("/api/v1/players", json={"name": "Latecomer"})
            assert resp.status == 503
        finally:
            await held.__aexit__(None, None, None)
        after = await scrape(client)
        assert (
            moved(before, after, "tripeaks_admission_server_busy_total", reason="wait_timeout") == 1
        )


async def test_race_rooms_and_todays_daily_are_read_from_the_database(
    client: TestClient[Any, Any],
) -> None:
    samples = await scrape(client)
    assert metric(samples, "tripeaks_race_rooms", state="lobby") == 0
    assert ("tripeaks_race_rooms", frozenset({("state", "running")})) in samples
    assert ("tripeaks_daily_players", frozenset()) in samples
    info = await register(client, "Daily Racer")
    ws, _ = await WsPlayer.connect(client, info["token"])
    assert (await ws.request({"type": "join_daily"}))["type"] == "game"
    assert (await ws.request({"type": "race_create"}))["type"] == "race"
    samples = await scrape(client)
    assert metric(samples, "tripeaks_race_rooms", state="lobby") == 1
    assert metric(samples, "tripeaks_race_rooms", state="running") == 0
    assert metric(samples, "tripeaks_daily_players") == 1
    assert metric(samples, "tripeaks_daily_ranked") == 0
    await ws.close()


async def test_a_database_that_does_not_answer_in_time_leaves_its_series_out(
    client: TestClient[Any, Any], database_url: str
) -> None:
    before = await scrape(client)
    assert names(before) >= set(DATABASE_SERIES)
    locker = await asyncpg.connect(database_url)
    try:
        transaction = locker.transaction()
        await transaction.start()
        await locker.execute("LOCK TABLE races IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        during = await scrape(client)
        assert time.monotonic() - started < ACTIVITY_TIMEOUT_S + 2
        await transaction.rollback()
    finally:
        await locker.close()
    assert not names(during) & set(DATABASE_SERIES)
    assert moved(before, during, "tripeaks_metrics_query_failures_total") == 1
    assert "tripeaks_actions_total" in names(during)  # the rest is there
    after = await scrape(client)
    assert names(after) >= set(DATABASE_SERIES)


async def test_the_solver_is_counted_when_the_app_runs_its_own(
    settings: Settings, clock: FakeClock
) -> None:
    server = TestServer(create_app(settings, clock=clock), host="127.0.0.1")
    await server.start_server()
    try:
        async with TestClient(server) as client:
            before = await scrape(client)
            for _ in range(2):
                assert (await client.get("/api/v1/daily")).status == 200
            after = await scrape(client)
    finally:
        await server.close()
    # Choosing the date's deal grades its candidates (solve and difficulty, one task each),
    # which leaves the chosen deal's analysis cached: the par of both answers is a hit.
    assert moved(before, after, "tripeaks_solver_seconds_count", task="grade") >= 1
    assert moved(before, after, "tripeaks_solver_cache_total", result="hit") >= 2
    misses = moved(before, after, "tripeaks_solver_cache_total", result="miss")
    assert moved(before, after, "tripeaks_solver_seconds_count", task="analyse") == misses


async def test_metrics_can_be_turned_off(make_server: ServerFactory) -> None:
    server = await make_server(metrics=False)
    async with TestClient(server) as client:
        assert (await client.get("/metrics")).status == 404
        assert (await client.get("/healthz")).status == 200


async def test_a_quick_race_match_moves_the_queue_metrics(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    async with TestClient(server) as client:
        before = await scrape(client)
        players = []
        for name in ("Qa", "Qb"):
            ws, _ = await WsPlayer.connect(client, (await register(client, name))["token"])
            await ws.request({"type": "queue_join", "rules": "C"})
            players.append(ws)

        async def waiting_two() -> bool:
            return metric(await scrape(client), "tripeaks_queue_waiting", rules="C") == 2

        await eventually(waiting_two, "a matcher pass to count the two waiting")
        clock.advance(seconds=12)  # two may start a race after 10 s
        for ws in players:
            await ws.until("queue_matched")
        after = await scrape(client)
        assert moved(before, after, "tripeaks_queue_match_players_count", rules="C") == 1
        assert moved(before, after, "tripeaks_queue_match_players_sum", rules="C") == 2
        assert moved(before, after, "tripeaks_queue_wait_seconds_count", rules="C") == 2
        # Each waited the 12 s the clock moved (the matcher's clock), within one bucket.
        assert 2 * 12 <= moved(before, after, "tripeaks_queue_wait_seconds_sum", rules="C") < 2 * 13
        for ws in players:
            await ws.close()
