"""Tables and buttons in 繁體中文 never break a word across lines (名/次, 取/消/追/蹤): on a
1280-px desktop and a 390-px touch phone, every cell, button and link-button shown takes no
more lines than its text has words, measured in the page (the welcome, the menu, the day's,
week's and month's boards, the friends' view, the players followed, a profile, the settings,
the table, the end of a free game and of a daily, a replay); and no view scrolls sideways on
the phone."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, ViewportSize, expect

from server.config import Settings
from server.engine import RuleSet
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import (
    DESKTOP,
    PHONE,
    finish_daily_over_ws,
    no_overflow,
    open_page,
    register,
    wrapped_words,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import daily_code

DATE = dt.date(2026, 3, 14)  # the test clock's day
LONG_NAME = "Adalberta Maximiliana Q"


async def _words_kept(page: Page, view: str) -> None:
    await page.wait_for_function(
        "() => document.getAnimations().every(a => a.playState !== 'running')"
    )
    found = await wrapped_words(page)
    assert found == [], (view, found)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
async def test_no_word_breaks_across_lines_in_chinese_and_nothing_scrolls_sideways(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
    viewport: ViewportSize,
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    for name in (LONG_NAME, "Bob"):
        await finish_daily_over_ws(client, name, code)
    phone = viewport == PHONE
    touch: dict[str, Any] = {"has_touch": True, "is_mobile": True} if phone else {}
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser, base, page_errors, viewport=viewport, locale="zh-TW", **touch
    )
    await _words_kept(page, "register")
    await no_overflow(page)
    await register(page, "小明")
    me: Any = await page.evaluate("() => window.tripeaks.store.player")
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [Seed(me["id"], 400, 60, 90_000, clock.now(), daily_date=DATE)]
    )
    await _words_kept(page, "home")
    await no_overflow(page)

    # Today's board, then the day's board once it is over (each row has its replay link), with
    # one player followed (取消追蹤) and one not (追蹤).
    await page.click("#nav-leaderboard")
    await expect(page.locator("#lb-table tbody tr")).to_have_count(3)
    await page.locator("#lb-table").get_by_role("button", name=f"追蹤 {LONG_NAME}").click()
    await expect(
        page.locator("#lb-table").get_by_role("button", name=f"取消追蹤 {LONG_NAME}")
    ).to_be_visible()
    await _words_kept(page, "board")
    await no_overflow(page)
    clock.set(dt.datetime(2026, 3, 15, 0, 5, tzinfo=dt.UTC))
    await page.goto(f"{base}/daily/{DATE}")
    await expect(page.locator("#lb-table a.replay-link")).to_have_count(3)
    await _words_kept(page, "past board")
    await no_overflow(page)
    await page.click("#lb-friends")
    await expect(page.locator("#lb-friends-table tbody tr")).to_have_count(2)
    await _words_kept(page, "friends")
    await no_overflow(page)
    # The week's and the month's boards (this week holds 14 and 15 March).
    await page.click("#lb-everyone")
    for kind in ("week", "month"):
        await page.click(f"#lb-tab-{kind}")
        await expect(page.locator("#lbp-table tbody tr")).to_have_count(3)
        await _words_kept(page, f"{kind}'s board")
        await no_overflow(page)

    # The players I follow.
    await page.goto(f"{base}/following")
    await expect(page.locator("#following-table tbody tr")).to_have_count(1)
    await _words_kept(page, "following")
    await no_overflow(page)

    # A profile, with every result in its table.
    await page.goto(f"{base}/players/{me['id']}")
    await page.click("#profile-all summary")
    await expect(page.locator("#profile-days tbody tr")).to_have_count(1)
    await _words_kept(page, "profile")
    await no_overflow(page)

    # The settings, and a free game's table.
    await page.goto(f"{base}/settings")
    await expect(page.locator("#settings")).to_be_visible()
    await _words_kept(page, "settings")
    await no_overflow(page)
    await page.click("#settings-close")
    await page.click("#btn-random")
    await expect(page.locator("#board")).to_be_visible()
    await _words_kept(page, "table")
    await no_overflow(page)
    # Its end (given up), its replay, and the end of today's daily (given up).
    game: Any = await page.evaluate("() => window.tripeaks.store.game")
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-panel")).to_be_visible()
    await _words_kept(page, "end of a free game")
    await no_overflow(page)
    await page.goto(f"{base}/replay/{game['game_id']}")
    await expect(page.locator("#replay-step")).not_to_be_empty()
    await _words_kept(page, "replay")
    await no_overflow(page)
    await page.click("#nav-home")
    await page.click("#btn-daily")
    await expect(page.locator("#board")).to_be_visible()
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-countdown")).not_to_be_empty()
    await _words_kept(page, "end of a daily")
    await no_overflow(page)
    await context.close()
    assert page_errors == []
