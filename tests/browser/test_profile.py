"""A player's profile in the browser, built by real play over faked dates: Ada finishes the
daily on three consecutive UTC dates (the server's fake clock moved a day at a time), and her
profile shows a streak of 3, the three dates coloured on the calendar with their rank, score
and share of par on hover and focus and in words, reached from the menu, from her name on the
leaderboard and from its address, in both languages."""

from __future__ import annotations

import re
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.config import Settings
from server.engine import RuleSet
from server.services.clock import FakeClock
from tests.browser.support import (
    DESKTOP,
    PHONE,
    game_state,
    identify_daily,
    no_overflow,
    open_page,
    play_line,
    register,
)
from tests.conftest import ServerFactory
from tests.helpers import blocking_line, find_winning_line


async def test_three_dailies_on_three_dates_make_a_streak_of_three_on_the_profile(
    browser: Browser,
    make_server: ServerFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    secret = settings.daily_secret or ""
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Ada")
    player = await page.evaluate("() => window.tripeaks.store.player")

    dates: list[str] = []
    results: list[dict[str, Any]] = []
    for n in range(3):
        if n:
            clock.advance(days=1)
            await page.click("#nav-home")
        date = clock.now().date()
        dates.append(date.isoformat())
        await expect(page.locator("#daily-info")).to_contain_text(date.isoformat())
        await page.click("#btn-daily")
        await expect(page.locator("#play-title")).to_contain_text(date.isoformat())
        code = await identify_daily(page, secret, date, RuleSet.EASY)
        deal = code.deal()
        # Won on the first and last dates, blocked on the middle one when the deal allows.
        line = (None if n == 1 else find_winning_line(deal, code.rules)) or blocking_line(
            deal, code.rules
        )
        assert line is not None
        await play_line(page, line)
        await expect(page.locator("#end-panel")).to_be_visible()
        results.append(await game_state(page))
    assert all(r["status"] in ("won", "blocked") for r in results)

    # From the menu's link: the address is the profile's.
    await page.click("#nav-home")
    await page.click("#menu-profile")
    await expect(page.locator("#view-profile")).to_be_visible()
    assert page.url.endswith(f"/players/{player['id']}")
    await expect(page.locator("#profile-title")).to_have_text("Ada (you)")
    await expect(page.locator("#profile-since")).to_have_text(f"Member since {dates[0]} (UTC)")
    await expect(page.locator("#profile-streak-current dd")).to_have_text("3 days")
    await expect(page.locator("#profile-streak-best dd")).to_have_text("3 days")
    await expect(page.locator("#profile-ranked-days dd")).to_have_text("3")
    best = max(r["score"] for r in results)
    await expect(page.locator("#profile-best-score dd")).to_have_text(str(best))
    await expect(page.locator("#profile-races dd")).to_have_text("0")

    # The calendar: each date coloured by its result, with rank, score and share of par in
    # words, on hover and on focus.
    for shown_date, result in zip(dates, results, strict=True):
        cell = page.locator(f'#profile-calendar td[data-date="{shown_date}"]')
        await expect(cell).to_have_attribute("data-status", result["status"])
        await expect(cell).to_have_class(re.compile(rf"\b{result['status']}\b"))
        words = re.compile(
            rf"^{shown_date}: {result['status'].capitalize()} · rank 1 · score {result['score']}"
            r" · \d+(\.\d)?% of par$"
        )
        await expect(cell.locator(".sr-only")).to_have_text(words)
        await cell.hover()
        await expect(page.locator("#profile-day-detail")).to_have_text(words)
    await expect(page.locator(f'#profile-calendar td[data-date="{dates[2]}"]')).to_have_attribute(
        "aria-current", "date"
    )
    await page.locator(f'#profile-calendar td[data-date="{dates[0]}"]').focus()
    await expect(page.locator("#profile-day-detail")).to_contain_text(f"{dates[0]}: ")
    day_before = page.locator('#profile-calendar td[data-date="2026-03-13"]')
    await expect(day_before).to_have_attribute("data-status", "none")
    await expect(page.locator(".profile-month")).to_have_count(3)  # January to March
    await page.click("#profile-all summary")
    await expect(page.locator("#profile-days tbody tr")).to_have_count(3)

    # In Traditional Chinese.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#profile-streak-current dt")).to_have_text("目前連續天數")
    await expect(page.locator("#profile-streak-current dd")).to_have_text("3 天")
    # On a phone the months stack: nothing sticks out sideways.
    await page.set_viewport_size(PHONE)
    await no_overflow(page)
    await page.set_viewport_size(DESKTOP)
    await page.select_option("#lang-select", "en")

    # From her name on the leaderboard, and from the address in a browser not signed in.
    await page.click("#nav-leaderboard")
    await page.locator("#lb-table a.player-link", has_text="Ada").click()
    await expect(page.locator("#view-profile")).to_be_visible()
    await expect(page.locator("#profile-streak-current dd")).to_have_text("3 days")
    await page.go_back()
    await expect(page.locator("#view-leaderboard")).to_be_visible()

    other, visitor = await open_page(browser, base, page_errors, f"/players/{player['id']}")
    await expect(visitor.locator("#profile-title")).to_have_text("Ada")
    await expect(visitor.locator("#profile-streak-best dd")).to_have_text("3 days")
    await visitor.goto(f"{base}/players/424242")
    await expect(visitor.locator("#profile-error")).to_have_text("There is no such player.")
    await other.close()
    await context.close()
    assert page_errors == []
