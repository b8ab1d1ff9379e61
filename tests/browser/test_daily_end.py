"""The end of a daily in the browser: the rank among those who finished so far (kept current
while the panel shows), the streak kept or begun, a countdown to the next daily in the
player's own time zone, and Share — a text that names no card and not the deal's code —
copied on a desktop, handed to the share sheet on a phone."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from playwright.async_api import Browser, Page, expect

from server.config import Settings
from server.engine import FULL_DECK, GameCode, RuleSet
from server.engine.solver import solve
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import (
    PHONE,
    covered_cards,
    finish_daily_over_ws,
    game_state,
    no_overflow,
    open_page,
    play_line,
    register,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import blocking_line, daily_code, find_winning_line

DATE = dt.date(2026, 3, 14)  # the test clock's day: the next daily opens 2026-03-15 00:00 UTC
CARD = re.compile(r"\b[2-9TJQKA][CDHS]\b")


async def _play_the_daily(page: Page, code: GameCode) -> dict[str, Any]:
    """Open today's daily from the menu and finish it by clicks; its final STATE."""
    await page.click("#btn-daily")
    await expect(page.locator("#board")).to_be_visible()
    line = find_winning_line(code.deal(), code.rules) or blocking_line(code.deal(), code.rules)
    assert line is not None
    await play_line(page, line)
    final: dict[str, Any] = await game_state(page)
    assert final["status"] in ("won", "blocked")
    await expect(page.locator("#end-panel")).to_be_visible()
    return final


async def _boxes(page: Page) -> dict[str, Any]:
    """Where the peaks, the piles and the end panel are on the page (px), and its height."""
    boxes: dict[str, Any] = await page.evaluate(
        """() => {
            const box = s => document.querySelector(s).getBoundingClientRect().toJSON();
            return {peaks: box('#peaks'), piles: box('.piles'), end: box('#end-panel'),
                    height: window.innerHeight};
        }"""
    )
    return boxes


def _assert_spoiler_free(text: str, code: GameCode) -> None:
    assert not CARD.search(text), text
    assert str(code) not in text
    for group in str(code).split("-")[2:]:
        assert group not in text, text
    for card in FULL_DECK:
        assert str(card) not in text.split(), text
    assert not re.search(r"spades|hearts|clubs|diamonds|黑桃|紅心|梅花|方塊", text), text


async def _my_rank(client: TestClient[Any, Any], player_id: int) -> int:
    resp = await client.get(f"/api/v1/daily/{DATE}/leaderboard/around/{player_id}?radius=0")
    body = await resp.json()
    rank: int = body["entries"][0]["rank"]
    return rank


async def test_the_end_of_a_daily_says_rank_streak_and_next_daily_and_shares_no_card(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    par = solve(code.deal(), code.rules).par
    await finish_daily_over_ws(client, "Bob", code)

    context, page = await open_page(browser, base, page_errors, timezone_id="Asia/Taipei")
    await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    await register(page, "Ada")
    me: Any = await page.evaluate("() => window.tripeaks.store.player")
    # Ranked results on the two days before: today's keeps a streak of three.
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(me["id"], 600, 40, 90_000, clock.now() - dt.timedelta(days=d), daily_date=day)
            for d, day in ((2, DATE - dt.timedelta(days=2)), (1, DATE - dt.timedelta(days=1)))
        ]
    )
    clock.advance(seconds=30)
    final = await _play_the_daily(page, code)

    rank = await _my_rank(client, me["id"])
    await expect(page.locator("#end-rank")).to_have_text(
        f"You are #{rank} of 2 who have finished so far"
    )
    await expect(page.locator("#end-streak")).to_have_text("Streak kept: 3 days in a row")
    await expect(page.locator("#end-streak")).to_have_attribute("data-kept", "true")
    # 12:00:30 UTC now; the next daily opens at midnight UTC: 08:00 on Sunday in Taipei.
    countdown = page.locator("#end-countdown")
    await expect(countdown).to_have_text(
        re.compile(r"^Next daily in 11:59:\d\d \(Sun 8:00\s?AM, your time\)$")
    )
    first = await countdown.inner_text()
    await expect(countdown).not_to_have_text(first)  # it counts down

    # Another player finishes while the panel shows: the count follows by itself.
    await finish_daily_over_ws(client, "Cy", code)
    rank = await _my_rank(client, me["id"])
    await expect(page.locator("#end-rank")).to_have_text(
        f"You are #{rank} of 3 who have finished so far"
    )

    # Share: copied to the clipboard, naming the day, the rules, score against par, the time,
    # the rank and the streak, with a mark per peak; no card, no code.
    await page.click("#end-share")
    await expect(page.locator("#end-share-status")).to_have_text("Result copied: paste it anywhere")
    text: str = await page.evaluate("() => navigator.clipboard.readText()")
    lines = text.split("\n")
    minutes, seconds = divmod(final["elapsed_ms"] // 1000, 60)
    assert lines[0] == "TriPeaks daily 2026-03-14 · Easy rules"
    assert re.fullmatch("[🟩🟨⬜]{3}", lines[1]), lines
    if final["status"] == "won":
        assert lines[1] == "🟩🟩🟩"
    assert lines[2] == f"Score {final['score']}/{par} par · {minutes}:{seconds:02d}"
    assert lines[3] == f"#{rank} of 3"
    assert lines[4] == "Streak 3 days"
    _assert_spoiler_free(text, code)

    # In Traditional Chinese the panel says the same.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#end-rank")).to_have_text(f"目前已完成的 3 人中，你排第 {rank} 名")
    await expect(page.locator("#end-streak")).to_have_text("連續紀錄保持：連續 3 天")
    await expect(countdown).to_contain_text("下一局每日挑戰：11:59:")

    # Put aside and brought back, the panel still counts down.
    await page.click("#end-close")
    await expect(page.locator("#end-panel")).to_be_hidden()
    await page.click("#btn-show-end")
    await expect(countdown).to_contain_text("下一局每日挑戰：11:59:")
    await context.close()
    assert page_errors == []


async def test_on_a_phone_a_given_up_daily_begins_no_streak_and_shares_through_the_sheet(
    browser: Browser,
    make_server: ServerFactory,
    settings: Settings,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    context, page = await open_page(
        browser,
        base,
        page_errors,
        viewport=PHONE,
        has_touch=True,
        is_mobile=True,
        locale="zh-TW",
        timezone_id="America/New_York",
    )
    # The phone's share sheet, as the page sees it: what it was given is kept.
    await context.add_init_script("navigator.share = async (data) => { window.__shared = data; };")
    await page.reload()
    await register(page, "Zhi")
    await page.click("#btn-daily")
    await expect(page.locator("#board")).to_be_visible()
    # The table fills the phone's screen, the cards in its lower half, under the thumb.
    playing = await _boxes(page)
    assert playing["peaks"]["bottom"] > playing["height"] / 2, playing
    assert playing["piles"]["bottom"] <= playing["height"], playing
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-panel")).to_be_visible()
    await expect(page.locator("#end-rank")).to_have_text("放棄的牌局不計排名")
    await expect(page.locator("#end-streak")).to_have_text("沒有連續紀錄：放棄的牌局不會開始新紀錄")
    # 12:00 UTC is 08:00 in New York; the next daily opens at 20:00 there, on Saturday.
    await expect(page.locator("#end-countdown")).to_have_text(
        re.compile(r"^下一局每日挑戰：1[12]:\d\d:\d\d 後（你的時間 週六 ?下午 ?8:00）$")
    )
    await no_overflow(page)
    ended = await _boxes(page)
    assert ended["end"]["top"] >= ended["peaks"]["bottom"], ended  # the cards stay in sight

    await page.click("#end-share")
    await expect(page.locator("#end-share-status")).to_have_text("已分享")
    shared: dict[str, str] = await page.evaluate("() => window.__shared")
    text = shared["text"]
    assert text.split("\n")[0] == "TriPeaks 每日挑戰 2026-03-14 · 簡單規則"
    assert text.split("\n")[1] == "⬜⬜⬜"  # no peak touched
    _assert_spoiler_free(text, code)
    await context.close()
    assert page_errors == []


async def test_on_a_phone_a_finished_daily_ranks_keeps_the_streak_and_shares_no_card(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    await finish_daily_over_ws(client, "Bob", code)
    context, page = await open_page(
        browser,
        base,
        page_errors,
        viewport=PHONE,
        has_touch=True,
        is_mobile=True,
        timezone_id="Europe/London",
    )
    # The phone's share sheet, as the page sees it: what it was given is kept.
    await context.add_init_script("navigator.share = async (data) => { window.__shared = data; };")
    await page.reload()
    await register(page, "Ada")
    me: Any = await page.evaluate("() => window.tripeaks.store.player")
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(
                me["id"],
                600,
                40,
                90_000,
                clock.now() - dt.timedelta(days=1),
                daily_date=DATE - dt.timedelta(days=1),
            )
        ]
    )
    final = await _play_the_daily(page, code)

    rank = await _my_rank(client, me["id"])
    await expect(page.locator("#end-rank")).to_have_text(
        f"You are #{rank} of 2 who have finished so far"
    )
    await expect(page.locator("#end-streak")).to_have_text("Streak kept: 2 days in a row")
    # 12:00 UTC is 12:00 in London in March; the next daily opens at midnight, on Sunday.
    await expect(page.locator("#end-countdown")).to_have_text(
        re.compile(r"^Next daily in 1[12]:\d\d:\d\d \(Sun 12:00\s?AM, your time\)$")
    )
    await no_overflow(page)
    ended = await covered_cards(page, "#end-panel")
    assert ended["covered"] == [], ended  # under the cards
    assert ended["panels"][0][1]["top"] >= ended["peaks"]["bottom"], ended

    await page.click("#end-share")
    await expect(page.locator("#end-share-status")).to_have_text("Shared")
    shared: dict[str, str] = await page.evaluate("() => window.__shared")
    lines = shared["text"].split("\n")
    assert lines[0] == "TriPeaks daily 2026-03-14 · Easy rules"
    assert lines[3] == f"#{rank} of 2"
    assert lines[4] == "Streak 2 days"
    _assert_spoiler_free(shared["text"], code)
    assert final["status"] in ("won", "blocked")
    await context.close()
    assert page_errors == []
