"""The daily challenge over REST (``GET /api/v1/daily``, ``GET /api/v1/daily/{date}``) and the
websocket ``join_daily``, on real servers with a fake clock.

PostgreSQL only: a real server's services are built over it. The service's rules run on both
stores in ``test_daily_service.py``."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.config import Settings
from server.engine import DealVersion, GameCode, RuleSet
from server.engine.difficulty import measure
from server.engine.solver import solve
from server.services.clock import FakeClock
from server.services.daily import derive_daily_code
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, daily_code, register

Client = TestClient[Any, Any]
TODAY = dt.date(2026, 3, 14)
OTHER_SECRET = "a-completely-different-key-42-xyzabc"
GOLDEN_DAILY = "TP2-E-JUARKOZ-NKAMKHZ-EGGOVVK-QOORJDP"


async def _get(client: Client, path: str) -> dict[str, Any]:
    resp = await client.get(path)
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def _error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status == status, await resp.text()
    body: dict[str, Any] = await resp.json()
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    return body


def _past_midnight(clock: FakeClock) -> None:
    clock.set(dt.datetime(2026, 3, 15, 0, 0, 0, 1000, tzinfo=dt.UTC))


def _bottom_row(code: GameCode) -> list[str]:
    return [str(c) for c in code.deal().tableau[18:]]


async def test_today_is_the_fake_clocks_utc_date_with_hidden_code(
    client: Client, settings: Settings
) -> None:
    body = await _get(client, "/api/v1/daily")
    code = daily_code((settings.daily_secret or "").encode(), TODAY, RuleSet.EASY)
    assert body == {
        "date": "2026-03-14",
        "rules": "E",
        "code": None,
        "is_open": True,
        "players": 0,
        "ranked": 0,
        "closes_at": "2026-03-15T00:00:00Z",
        "server_time": "2026-03-14T12:00:00Z",  # the fake clock's
        "par": solve(code.deal(), code.rules).par,
        "line": None,
        "difficulty": "expert",  # a Saturday
        "baselines": None,
    }
    assert await _get(client, "/api/v1/daily/2026-03-14") == body


async def test_the_level_shows_from_the_start_and_the_baselines_once_the_date_is_over(
    client: Client, clock: FakeClock, settings: Settings
) -> None:
    today = await _get(client, "/api/v1/daily")
    assert (today["difficulty"], today["baselines"]) == ("expert", None)
    clock.set(dt.datetime(2026, 3, 14, 23, 59, 59, 999000, tzinfo=dt.UTC))
    assert (await _get(client, "/api/v1/daily/2026-03-14"))["baselines"] is None

    _past_midnight(clock)
    past = await _get(client, "/api/v1/daily/2026-03-14")
    code = GameCode.parse(past["code"])
    figures = measure(code.deal(), code.rules, past["par"])
    assert past["difficulty"] == figures.level.value == "expert"
    assert past["baselines"] == {
        "greedy": {"status": figures.greedy_status.value, "score": figures.greedy_score},
        "random": {
            "playouts": 1000,
            "win_rate": round(figures.random_wins / 1000, 4),
            "median_score": figures.random_median_score,
        },
    }
    # The new date (a Sunday) is expert too, its baselines still hidden.
    sunday = await _get(client, "/api/v1/daily")
    assert (sunday["date"], sunday["difficulty"], sunday["baselines"]) == (
        "2026-03-15",
        "expert",
        None,
    )
    clock.advance(days=1)
    monday = await _get(client, "/api/v1/daily")
    assert (monday["date"], monday["difficulty"]) == ("2026-03-16", "easy")


async def test_date_follows_utc_not_local_time(client: Client, clock: FakeClock) -> None:
    # 23:59:59.999 UTC on the 14th is still the 14th, whatever the server's local zone.
    clock.set(
        dt.datetime(2026, 3, 15, 8, 59, 59, 999000, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    )
    assert (await _get(client, "/api/v1/daily"))["date"] == "2026-03-14"
    clock.advance(ms=1)
    assert (await _get(client, "/api/v1/daily"))["date"] == "2026-03-15"


async def test_players_count_increments_as_players_join_over_websocket(client: Client) -> None:
    players = []
    for i, name in enumerate(["Ann", "Ben", "Cid"], start=1):
        info = await register(client, name)
        ws, _ = await WsPlayer.connect(client, info["token"])
        reply = await ws.request({"type": "join_daily"})
        assert reply["type"] == "game", reply
        game = reply["game"]
        assert game["mode"] == "daily"
        assert game["daily_date"] == "2026-03-14"
        assert game["code"] is None  # hidden while the date is open
        assert game["rules"] == "E"
        players.append((ws, game))
        body = await _get(client, "/api/v1/daily")
        assert body["players"] == i
        assert body["ranked"] == 0

    # Joining again resumes the same attempt: the count does not move.
    ws, game = players[0]
    again = await ws.request({"type": "join_daily"})
    assert again["game"]["game_id"] == game["game_id"]
    assert (await _get(client, "/api/v1/daily"))["players"] == 3

    # Everyone got the same deal.
    rows = {tuple(g["tableau"][18:]) for _, g in players}
    wastes = {g["waste"] for _, g in players}
    assert len(rows) == 1 and len(wastes) == 1

    # A resigned game counts as a player but never as ranked.
    resigned = await ws.request({"type": "resign", "game_id": game["game_id"]})
    assert resigned["game"]["status"] == "resigned"
    body = await _get(client, "/api/v1/daily")
    assert (body["players"], body["ranked"]) == (3, 0)
    for w, _ in players:
        await w.close()


async def test_code_is_published_after_midnight_and_matches_the_dealt_game(
    client: Client, clock: FakeClock, settings: Settings
) -> None:
    alice = await register(client, "Alice")
    ws, _ = await WsPlayer.connect(client, alice["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    played = await ws.act(game, "draw")
    assert played["type"] == "accepted"
    seen_row = game["tableau"][18:]
    seen_waste, drawn = game["waste"], played["game"]["waste"]

    clock.advance(ms=5)
    assert (await _get(client, "/api/v1/daily/2026-03-14"))["code"] is None

    _past_midnight(clock)
    body = await _get(client, "/api/v1/daily/2026-03-14")
    assert body["is_open"] is False
    assert body["code"] is not None
    published = GameCode.parse(body["code"])
    assert str(published) == body["code"]  # upper-case canonical form
    assert published.rules is RuleSet.EASY
    assert published == daily_code((settings.daily_secret or "").encode(), TODAY, RuleSet.EASY)
    deal = published.deal()
    assert _bottom_row(published) == seen_row
    assert str(deal.waste) == seen_waste
    assert str(deal.stock[0]) == drawn

    # The websocket state of the closed daily now shows the code too, and play is refused.
    state = (await ws.request({"type": "resume", "game_id": game["game_id"]}))["game"]
    assert state["code"] == body["code"]
    refused = await ws.act(played["game"], "draw")
    assert (refused["type"], refused["code"]) == ("rejected", "daily_closed")

    # The new day has its own, still hidden, deal.
    today = await _get(client, "/api/v1/daily")
    assert today["date"] == "2026-03-15" and today["code"] is None and today["is_open"]
    await ws.close()


async def test_servers_with_different_secrets_agree_on_the_days_code(
    make_server: ServerFactory, clock: FakeClock, settings: Settings
) -> None:
    first = await make_server()
    second = await make_server(daily_secret=OTHER_SECRET)
    async with TestClient(first) as one, TestClient(second) as two:
        # The second server is the first to need today's deal: its secret decides.
        ann = await register(two, "Ann")
        ws_two, _ = await WsPlayer.connect(two, ann["token"])
        game_two = (await ws_two.request({"type": "join_daily"}))["game"]
        ben = await register(one, "Ben")
        ws_one, _ = await WsPlayer.connect(one, ben["token"])
        game_one = (await ws_one.request({"type": "join_daily"}))["game"]
        assert game_one["tableau"] == game_two["tableau"]
        assert game_one["waste"] == game_two["waste"]
        assert (await _get(one, "/api/v1/daily"))["players"] == 2

        mine = daily_code((settings.daily_secret or "").encode(), TODAY, RuleSet.EASY)
        theirs = daily_code(OTHER_SECRET.encode(), TODAY, RuleSet.EASY)
        assert mine != theirs

        _past_midnight(clock)
        code_one = (await _get(one, "/api/v1/daily/2026-03-14"))["code"]
        code_two = (await _get(two, "/api/v1/daily/2026-03-14"))["code"]
        assert code_one == code_two == str(theirs)
        assert _bottom_row(theirs) == game_one["tableau"][18:]

        # For the new day the first server asks first: its secret wins on both.
        assert (await _get(one, "/api/v1/daily"))["date"] == "2026-03-15"
        assert (await _get(two, "/api/v1/daily"))["date"] == "2026-03-15"
        clock.advance(days=1)
        next_one = (await _get(one, "/api/v1/daily/2026-03-15"))["code"]
        next_two = (await _get(two, "/api/v1/daily/2026-03-15"))["code"]
        mine_next = daily_code(
            (settings.daily_secret or "").encode(), dt.date(2026, 3, 15), RuleSet.EASY
        )
        assert next_one == next_two == str(mine_next)
        await ws_one.close()
        await ws_two.close()


async def test_concurrent_first_requests_on_two_servers_store_one_code(
    make_server: ServerFactory, clock: FakeClock
) -> None:

    first = await make_server()
    second = await make_server(daily_secret=OTHER_SECRET)
    async with TestClient(first) as one, TestClient(second) as two:
        await asyncio.gather(
            *(c.get("/api/v1/daily") for c in (one, two, one, two, one, two)),
        )
        _past_midnight(clock)
        codes = {(await _get(c, "/api/v1/daily/2026-03-14"))["code"] for c in (one, two)}
        assert len(codes) == 1 and None not in codes


@pytest.mark.parametrize("date", ["2026-03-15", "2027-01-01", "9999-12-31"])
async def test_future_date_is_bad_date(client: Client, date: str) -> None:
    body = await _error(await client.get(f"/api/v1/daily/{date}"), 400, "bad_date")
    assert date in body["error"]["message"]


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "2026-3-14",
        "2026-02-30",
        "2026-13-01",
        "20260314",
        "2026-03-14T00:00",
        "2026-03-1x",
        "１２３４-05-06",
        "2026-W11-6",  # an ISO week date: Python reads it, the API must not
        "2026-03-14 ",
        "x" * 300,
    ],
)
async def test_bad_date_text_is_bad_date(client: Client, text: str) -> None:
    await _error(await client.get(f"/api/v1/daily/{text}"), 400, "bad_date")


async def test_past_date_publishes_its_code(client: Client, clock: FakeClock) -> None:
    today = await _get(client, "/api/v1/daily")
    assert today["code"] is None
    _past_midnight(clock)
    body = await _get(client, f"/api/v1/daily/{today['date']}")
    assert body["is_open"] is False
    assert body["code"] is not None and body["code"].startswith("TP2-E-")
    assert GameCode.parse(body["code"]).version is DealVersion.TP2
    assert body["closes_at"] == "2026-03-15T00:00:00Z"
    assert (await _get(client, f"/api/v1/daily/{today['date']}"))["code"] == body["code"]


async def test_past_date_without_a_daily_is_404_and_stores_nothing(
    client: Client, database_url: str
) -> None:
    for date in ("2026-03-13", "0001-01-01"):
        resp = await client.get(f"/api/v1/daily/{date}")
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == "no_daily"
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM daily_challenges") == 0
    finally:
        await conn.close()


async def test_daily_rules_setting_c_gives_classic(
    make_server: ServerFactory, clock: FakeClock, settings: Settings
) -> None:
    server: TestServer = await make_server(daily_rules="C")
    async with TestClient(server) as client:
        body = await _get(client, "/api/v1/daily")
        assert body["rules"] == "C"
        alice = await register(client, "Alice")
        ws, _ = await WsPlayer.connect(client, alice["token"])
        game = (await ws.request({"type": "join_daily"}))["game"]
        assert game["rules"] == "C"
        _past_midnight(clock)
        code = (await _get(client, "/api/v1/daily/2026-03-14"))["code"]
        assert code.startswith("TP2-C-")
        assert GameCode.parse(code) == daily_code(
            (settings.daily_secret or "").encode(), TODAY, RuleSet.CLASSIC
        )
        await ws.close()


def test_tripeaks_daily_rules_env_is_read_case_insensitively(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TRIPEAKS_DAILY_RULES", "c")
    assert Settings(database_url="postgresql://x@h/db", data_dir=tmp_path).daily_rules == "C"
    monkeypatch.setenv("TRIPEAKS_DAILY_RULES", "E")
    assert Settings(database_url="postgresql://x@h/db", data_dir=tmp_path).daily_rules == "E"


def test_derived_code_is_a_tp2_code_pinned_by_a_golden_value() -> None:
    code = derive_daily_code(b"k" * 32, dt.date(2026, 12, 1), RuleSet.EASY, candidate=3)
    assert code.version is DealVersion.TP2
    # HMAC-SHA256(key, "TP2-daily:2026-12-01:3:0") as a 256-bit number, modulo 26**28.
    digest = hmac.new(b"k" * 32, b"TP2-daily:2026-12-01:3:0", hashlib.sha256).digest()
    assert code.number == int.from_bytes(digest, "big") % 26**28
    assert str(code) == GOLDEN_DAILY


def test_derived_code_depends_on_secret_and_date() -> None:
    a = derive_daily_code(b"s" * 16, TODAY, RuleSet.EASY)
    assert a == derive_daily_code(b"s" * 16, TODAY, RuleSet.EASY)
    assert a != derive_daily_code(b"t" * 16, TODAY, RuleSet.EASY)
    assert a != derive_daily_code(b"s" * 16, TODAY + dt.timedelta(days=1), RuleSet.EASY)
    classic = derive_daily_code(b"s" * 16, TODAY, RuleSet.CLASSIC)
    assert classic.rules is RuleSet.CLASSIC
    assert str(classic)[6:] == str(a)[6:]  # same number, other rule letter
    assert a.version is DealVersion.TP2 and a.number >= 26**7
