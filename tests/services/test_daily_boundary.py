"""One clock for the daily boundary (the database's), and daily deals prepared before their
date opens. Real servers on one PostgreSQL; processes whose clocks differ from it.

Every test here but the one of :meth:`DailyService.prepare_ahead` is PostgreSQL's only: they
run real servers (whose services are built over PostgreSQL), or move a real database's date
under processes whose own clocks differ from it, or cross midnight between two of its
statements. ``test_daily_service.py`` has the daily's rules on both stores."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import DealVersion, GameCode, RuleSet
from server.services import Services
from server.services.analysis import Analyzer
from server.services.clock import Clock, FakeClock, SystemClock
from server.services.daily import DailyService
from server.storage.db import create_engine
from tests.backends import Backend
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, daily_code, register

Client = TestClient[Any, Any]
SECRET = b"test-daily-key-0123456789abcdefghij"
StartServer = Callable[[Clock], Any]


async def _database_now(database_url: str) -> dt.datetime:
    conn = await asyncpg.connect(database_url)
    try:
        now: dt.datetime = await conn.fetchval("SELECT statement_timestamp()")
    finally:
        await conn.close()
    return now.astimezone(dt.UTC)


async def _get(client: Client, path: str, status: int = 200) -> dict[str, Any]:
    resp = await client.get(path)
    assert resp.status == status, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def _store_yesterdays_daily_game(
    database_url: str, player_id: int, date: dt.date, code: GameCode
) -> int:
    """A daily game started on ``date`` (before today), as a process stored it then."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO daily_challenges (date, code, rules) VALUES ($1, $2, $3)",
            date,
            str(code),
            code.rules.value,
        )
        game_id: int = await conn.fetchval(
            """INSERT INTO games (player_id, code, rules, deal_version, mode, daily_date, status,
                                  score, moves, undos, seq, created_at)
               VALUES ($1, $2, $3, $4, 'daily', $5, 'playing', 500, 0, 0, 0, $6)
               RETURNING id""",
            player_id,
            str(code),
            code.rules.value,
            code.version.value,
            date,
            dt.datetime.combine(date, dt.time(23, 0), tzinfo=dt.UTC),
        )
    finally:
        await conn.close()
    return game_id


async def test_processes_whose_clocks_differ_agree_on_when_a_date_closes(
    make_server: ServerFactory, database_url: str, settings: Settings
) -> None:
    db_now = await _database_now(database_url)
    midnight = dt.datetime.combine(db_now.date(), dt.time(), tzinfo=dt.UTC)
    if db_now - midnight < dt.timedelta(minutes=2) or midnight + dt.timedelta(
        days=1
    ) - db_now < dt.timedelta(minutes=2):
        pytest.skip("the database's date changes within two minutes of this test")
    today, yesterday = db_now.date(), db_now.date() - dt.timedelta(days=1)
    # One process is right; one lags into yesterday (23:55), one runs ahead into tomorrow.
    lagging = SystemClock(-(db_now - midnight) - dt.timedelta(minutes=5))
    ahead = SystemClock(midnight + dt.timedelta(days=1, minutes=5) - db_now)
    assert lagging.now().date() == yesterday and ahead.now().date() > today
    right = await make_server(own_clock=SystemClock())
    late = await make_server(own_clock=lagging)
    early = await make_server(own_clock=ahead)

    async with TestClient(right) as a, TestClient(late) as b, TestClient(early) as c:
        ada = await register(a, "Ada")
        secret = (settings.daily_secret or "").encode()
        old_code = daily_code(secret, yesterday, RuleSet.EASY)
        old_game = await _store_yesterdays_daily_game(database_url, ada["id"], yesterday, old_code)

        # The right process publishes yesterday's code; the lagging one agrees it is public,
        # and refuses to play on that date although its own clock still says it is that date.
        published = await _get(a, f"/api/v1/daily/{yesterday.isoformat()}")
        assert published["code"] == str(old_code) and published["is_open"] is False
        assert (await _get(b, f"/api/v1/daily/{yesterday.isoformat()}"))["code"] == str(old_code)
        late_ws, _ = await WsPlayer.connect(b, ada["token"])
        state = (await late_ws.request({"type": "resume", "game_id": old_game}))["game"]
        refused = await late_ws.act(state, "draw")
        assert (refused["type"], refused["code"]) == ("rejected", "daily_closed")
        assert refused["game"]["code"] == str(old_code)  # public now: shown with the refusal
        resign = await late_ws.request({"type": "resign", "game_id": old_game})
        assert (resign["type"], resign["code"]) == ("error", "daily_closed")

        # Every process's "today" is the database's.
        for client in (a, b, c):
            body = await _get(client, "/api/v1/daily")
            assert (body["date"], body["is_open"], body["code"]) == (today.isoformat(), True, None)

        # The process whose clock runs ahead neither publishes today's code nor refuses play.
        early_ws, _ = await WsPlayer.connect(c, ada["token"])
        game = (await early_ws.request({"type": "join_daily"}))["game"]
        assert (game["daily_date"], game["code"]) == (today.isoformat(), None)
        played = await early_ws.act(game, "draw")
        assert played["type"] == "accepted" and played["game"]["code"] is None
        assert (await _get(c, f"/api/v1/games/{game['game_id']}"))["code"] is None
        await _get(c, f"/api/v1/daily/{(today + dt.timedelta(days=1)).isoformat()}", 400)

        # The lagging process joins today's daily, not the one its clock names.
        late_game = (await late_ws.request({"type": "join_daily"}))["game"]
        assert late_game["game_id"] == game["game_id"]
        assert (await late_ws.act(played["game"], "draw"))["type"] == "accepted"

        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch("SELECT seq FROM game_actions WHERE game_id = $1", old_game)
            assert rows == []  # nothing was stored on the closed date
        finally:
            await conn.close()
        await late_ws.close()
        await early_ws.close()


async def _wait_for_daily_row(database_url: str, date: dt.date) -> asyncpg.Record:
    conn = await asyncpg.connect(database_url)
    try:
        async with asyncio.timeout(60):
            while True:
                row = await conn.fetchrow(
                    "SELECT code, created_at FROM daily_challenges WHERE date = $1", date
                )
                if row is not None:
                    return row
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def test_the_next_dates_deal_is_chosen_before_midnight_and_served_from_the_store(
    make_server: ServerFactory, clock: FakeClock, database_url: str, settings: Settings
) -> None:
    clock.set(dt.datetime(2026, 3, 14, 23, 30, tzinfo=dt.UTC))
    server = await make_server(daily_prepare_every_s=0.05, daily_prepare_ahead_s=3600)
    tomorrow = dt.date(2026, 3, 15)
    row = await _wait_for_daily_row(database_url, tomorrow)
    midnight = dt.datetime(2026, 3, 15, tzinfo=dt.UTC)
    assert row["created_at"] < midnight
    prepared = GameCode.parse(row["code"])
    assert prepared.version is DealVersion.TP2
    assert prepared == daily_code((settings.daily_secret or "").encode(), tomorrow, RuleSet.EASY)
    async with TestClient(server) as client:
        # Before it opens nothing of it shows: a future date is refused outright.
        await _get(client, "/api/v1/daily/2026-03-15", 400)
        assert (await _get(client, "/api/v1/daily"))["date"] == "2026-03-14"

        clock.set(midnight + dt.timedelta(milliseconds=1))
        body = await _get(client, "/api/v1/daily")
        assert (body["date"], body["code"], body["is_open"]) == ("2026-03-15", None, True)
        ada = await register(client, "Ada")
        ws, _ = await WsPlayer.connect(client, ada["token"])
        game = (await ws.request({"type": "join_daily"}))["game"]
        deal = prepared.deal()
        assert game["tableau"][18:] == [str(card) for card in deal.tableau[18:]]
        assert game["waste"] == str(deal.waste)
        await ws.close()

    # A second process with another secret (a rotated one) serves the stored deal unchanged.
    rotated = await make_server(daily_secret="a-rotated-daily-key-0123456789abcdef")
    async with TestClient(rotated) as client:
        clock.set(dt.datetime(2026, 3, 16, 0, 0, 1, tzinfo=dt.UTC))
        assert (await _get(client, "/api/v1/daily/2026-03-15"))["code"] == str(prepared)


async def test_prepare_ahead_stores_tomorrow_only_within_the_lead(
    backend: Backend, clock: FakeClock, analyzer: Analyzer
) -> None:
    daily = DailyService(backend.daily, clock, SECRET, analyzer=analyzer)
    lead = dt.timedelta(hours=1)
    clock.set(dt.datetime(2026, 3, 14, 22, 59, 59, tzinfo=dt.UTC))
    assert await daily.prepare_ahead(lead) == [dt.date(2026, 3, 14)]
    clock.advance(seconds=1)
    assert await daily.prepare_ahead(lead) == [dt.date(2026, 3, 14), dt.date(2026, 3, 15)]
    assert sorted(await backend.deals()) == [dt.date(2026, 3, 14), dt.date(2026, 3, 15)]
    # Asked again, nothing changes: the stored deals are kept.
    deals = await backend.deals()
    assert await daily.prepare_ahead(lead) == [dt.date(2026, 3, 14), dt.date(2026, 3, 15)]
    assert await backend.deals() == deals


async def test_a_date_stored_with_a_tp1_deal_keeps_it_and_publishes_its_tp1_code(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    legacy = GameCode.parse("TP1-E-AAAAAAB")
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO daily_challenges (date, code, rules) VALUES ($1, $2, 'E')",
            dt.date(2026, 3, 14),
            str(legacy),
        )
    finally:
        await conn.close()
    server = await make_server()
    async with TestClient(server) as client:
        ada = await register(client, "Ada")
        ws, _ = await WsPlayer.connect(client, ada["token"])
        game = (await ws.request({"type": "join_daily"}))["game"]
        assert game["code"] is None
        assert game["waste"] == str(legacy.deal().waste)
        assert (await ws.act(game, "draw"))["type"] == "accepted"
        clock.set(dt.datetime(2026, 3, 15, 0, 0, 1, tzinfo=dt.UTC))
        assert (await _get(client, "/api/v1/daily/2026-03-14"))["code"] == "TP1-E-AAAAAAB"
        record = await _get(client, f"/api/v1/games/{game['game_id']}")
        assert (record["code"], record["deal_version"]) == ("TP1-E-AAAAAAB", "TP1")
        # The new date is dealt from TP2.
        today = await ws.request({"type": "join_daily"})
        assert today["game"]["daily_date"] == "2026-03-15"
        record = await _get(client, f"/api/v1/games/{today['game']['game_id']}")
        assert (record["code"], record["deal_version"]) == (None, "TP2")
        await ws.close()


async def test_a_join_that_crosses_midnight_stores_no_game_on_the_closed_date(
    database_url: str, settings: Settings, analyzer: Analyzer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "Today" is read, then the date closes before the game is stored: the insert checks the
    database's date too, and the join lands on the new date."""
    engine = create_engine(database_url, pool_size=2)
    services = Services.build(
        engine,
        SystemClock(),
        daily_secret=(settings.daily_secret or "").encode(),
        daily_rules=RuleSet.EASY,
        analyzer=analyzer,
    )
    try:
        today = await services.daily.today()
        yesterday = today - dt.timedelta(days=1)
        player = (await services.players.register("Ada")).player
        await _store_daily(database_url, yesterday)
        real_today = DailyService.today
        reads: list[dt.date] = []

        async def read_just_before_midnight(self: DailyService) -> dt.date:
            date = yesterday if not reads else await real_today(self)
            reads.append(date)
            return date

        monkeypatch.setattr(DailyService, "today", read_just_before_midnight)
        snapshot = await services.games.join_daily(player.id)
        assert snapshot.daily_date == today and reads[0] == yesterday and reads[-1] == today
        conn = await asyncpg.connect(database_url)
        try:
            dates = await conn.fetch("SELECT daily_date FROM games WHERE player_id = $1", player.id)
            players = await conn.fetchval(
                "SELECT players FROM daily_players WHERE daily_date = $1", yesterday
            )
        finally:
            await conn.close()
        assert [r["daily_date"] for r in dates] == [today]
        assert players in (None, 0)
    finally:
        await services.close()
        await engine.dispose()


async def _store_daily(database_url: str, date: dt.date) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO daily_challenges (date, code, rules) VALUES ($1, $2, 'E')",
            date,
            str(GameCode.random(RuleSet.EASY, DealVersion.TP2)),
        )
    finally:
        await conn.close()
