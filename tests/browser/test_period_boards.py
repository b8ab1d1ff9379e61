"""The weekly and monthly boards in the browser after several faked dates: Ada finishes the
daily on Saturday 14, Sunday 15 and Monday 16 March 2026 (the server's fake clock moved a day at
a time; 14 and 15 are in ISO week 2026-W11, 16 begins W12), beside Bob's and Cy's stored
results. The Week and Month tabs of the leaderboard show each period's totals and ranks, the
period before, her row around her, the friends' view and her profile's ranks, in English and
繁體中文, on a desktop and a 390-px phone; a failed read says so and offers to try again."""

from __future__ import annotations

import datetime as dt

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.config import Settings
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import (
    fail_next,
    finish_the_daily,
    fits_desktop_and_phone,
    open_page,
    register,
)
from tests.conftest import ServerFactory


async def test_week_and_month_boards_after_three_faked_dates(
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

    scores: dict[str, int] = {}
    for n in range(3):
        if n:
            clock.advance(days=1)
            await page.click("#nav-home")
        date = clock.now().date()
        state = await finish_the_daily(page, secret, date)
        assert state["status"] in ("won", "blocked")
        scores[date.isoformat()] = state["score"]
    assert clock.now().date() == dt.date(2026, 3, 16)

    # Bob: a little on Saturday, a lot on Monday; Cy: only on 1 March (W09, in March).
    bob, cy = await PostgresBackend(server.app[SERVICES].db).add_players(["Bob", "Cy"])
    done = dt.datetime(2026, 3, 16, 1, tzinfo=dt.UTC)
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(bob, 1, 40, 90_000, done, status="blocked", daily_date=dt.date(2026, 3, 14)),
            Seed(bob, 5000, 30, 60_000, done, daily_date=dt.date(2026, 3, 16)),
            Seed(cy, 100, 30, 60_000, done, daily_date=dt.date(2026, 3, 1)),
        ]
    )
    week11 = scores["2026-03-14"] + scores["2026-03-15"]
    month = sum(scores.values())

    # This week (W12): Bob first, Ada second, her row around her.
    await page.click("#nav-leaderboard")
    await expect(page.locator("#lb-table")).to_be_visible()
    await page.click("#lb-tab-week")
    await expect(page.locator("#lb-tab-week")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#lb-table")).to_be_hidden()
    await expect(page.locator("#lbp-title")).to_have_text("Week 2026-W12 · 2026-03-16 – 2026-03-22")
    rows = page.locator("#lbp-table tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(0).locator("td")).to_have_text(["1", "Bob", "5000", "1", "1:00"])
    await expect(rows.nth(1).locator("td").nth(0)).to_have_text("2")
    await expect(rows.nth(1).locator("td").nth(1)).to_have_text("Ada (you)")
    await expect(rows.nth(1).locator("td").nth(2)).to_have_text(str(scores["2026-03-16"]))
    await expect(page.locator("#lbp-around-table tr[aria-current=true] td").nth(0)).to_have_text(
        "2"
    )
    await expect(page.locator("#lbp-next")).to_be_disabled()

    # The week before (W11): Ada's two days first, Bob's one point second.
    await page.click("#lbp-prev")
    await expect(page.locator("#lbp-title")).to_contain_text("2026-W11 · 2026-03-09 – 2026-03-15")
    await expect(rows.nth(0).locator("td")).to_contain_text(["1", "Ada (you)", str(week11), "2"])
    await expect(rows.nth(1).locator("td")).to_contain_text(["2", "Bob", "1", "1"])
    await expect(page.locator("#lbp-next")).to_be_enabled()

    # The month: Bob, Ada (three days), Cy.
    await page.click("#lb-tab-month")
    await expect(page.locator("#lbp-title")).to_have_text("Month 2026-03 · 2026-03-01 – 2026-03-31")
    await expect(rows).to_have_count(3)
    await expect(rows.locator("td.name")).to_have_text(["Bob", "Ada (you)", "Cy"])
    await expect(rows.nth(1).locator("td").nth(2)).to_have_text(str(month))
    await expect(rows.nth(1).locator("td").nth(3)).to_have_text("3")
    await page.click("#lbp-prev")
    await expect(page.locator("#lbp-title")).to_contain_text("2026-02")
    await expect(page.locator("#lbp-empty")).to_have_text("No results in this period yet.")
    await expect(page.locator("#lbp-around")).to_have_text(
        "You have no ranked result in this period."
    )
    await page.click("#lbp-next")
    await expect(rows).to_have_count(3)

    # The friends' view: Ada and whom she follows (Cy), at their ranks on the whole board.
    await page.evaluate(
        "([token, id]) => fetch(`/api/v1/players/me/following/${id}`, "
        "{method: 'PUT', headers: {Authorization: `Bearer ${token}`}})",
        [await page.evaluate("() => window.tripeaks.store.token"), cy],
    )
    await page.click("#lbp-friends")
    await expect(rows.locator("td.name")).to_have_text(["Ada (you)", "Cy"])
    await expect(rows.locator("td:first-child")).to_have_text(["2", "3"])
    await page.click("#lbp-everyone")
    await expect(rows).to_have_count(3)

    # Back to the daily board: its own table again.
    await page.click("#lb-tab-day")
    await expect(page.locator("#lb-table")).to_be_visible()
    await expect(page.locator("#lb-period")).to_be_hidden()

    # In Traditional Chinese, on a desktop and on a phone: no word broken, nothing sideways.
    await page.click("#lb-tab-week")
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#lb-tab-week")).to_have_text("每週")
    await expect(page.locator("#lbp-table th").nth(2)).to_have_text("總分")
    await expect(page.locator("#lbp-title")).to_contain_text("2026-W12 週")
    await fits_desktop_and_phone(page)
    await page.select_option("#lang-select", "en")

    # The profile shows her ranks this week and this month.
    await rows.nth(1).locator("a.player-link").click()
    await expect(page.locator("#view-profile")).to_be_visible()
    await expect(page.locator("#profile-week dt")).to_have_text("This week (2026-W12)")
    await expect(page.locator("#profile-week dd")).to_have_text(
        f"#2 · {scores['2026-03-16']} points"
    )
    await expect(page.locator("#profile-month dd")).to_have_text(f"#2 · {month} points")
    await page.go_back()

    # A failed read says it failed and offers to try again.
    await fail_next(page, "**/api/v1/boards/month/**")
    await page.click("#nav-leaderboard")
    await page.click("#lb-tab-month")
    await expect(page.locator("#lbp-failed")).to_be_visible()
    await expect(page.locator("#lbp-empty")).to_have_count(0)
    await page.click("#lbp-retry")
    await expect(rows).to_have_count(3)
    await context.close()
    assert page_errors == []
