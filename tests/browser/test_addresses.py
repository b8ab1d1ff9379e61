"""Every view has its own address: Back and Forward move between views, a reload shows the
same view, and a shared link to a past day's board opens that board; so do the week's and the
month's boards, each period at its own address."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from server.config import Settings
from server.engine import RuleSet
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import PHONE, finish_daily_over_ws, open_page, register
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import daily_code

DATE = dt.date(2026, 3, 14)  # the test clock's day


async def _at(page: Page, base: str, path: str, view: str, *, settings: bool = False) -> None:
    """The page is at ``path`` showing ``view`` (and the settings panel over it or not)."""
    await expect(page).to_have_url(base + path)
    await expect(page.locator(f"#view-{view}")).to_be_visible()
    panel = page.locator("#settings")
    await (expect(panel).to_be_visible() if settings else expect(panel).to_be_hidden())


async def test_back_forward_and_reload_move_between_the_views_by_their_addresses(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Ada")
    me: Any = await page.evaluate("() => window.tripeaks.store.player")

    visited: list[tuple[str, str, bool]] = [("/", "home", False)]
    await _at(page, base, "/", "home")
    await page.click("#btn-random")
    await expect(page.locator("#board")).to_be_visible()
    game: Any = await page.evaluate("() => window.tripeaks.store.game")
    visited.append((f"/games/{game['game_id']}", "play", False))
    await page.click("#stock")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await page.click("#nav-home")
    visited.append(("/", "home", False))
    await page.click("#nav-leaderboard")
    visited.append((f"/daily/{DATE}", "leaderboard", False))
    await _at(page, base, *visited[-1][:2])
    await page.click("#lb-prev")
    visited.append(("/daily/2026-03-13", "leaderboard", False))
    await _at(page, base, *visited[-1][:2])
    await page.click("#nav-home")
    visited.append(("/", "home", False))
    await page.click("#home-following")
    visited.append(("/following", "following", False))
    await _at(page, base, *visited[-1][:2])
    await page.click("#nav-home")
    visited.append(("/", "home", False))
    await page.click("#menu-profile")
    visited.append((f"/players/{me['id']}", "profile", False))
    await _at(page, base, *visited[-1][:2])
    await page.click("#nav-settings")
    visited.append(("/settings", "profile", True))
    await _at(page, base, "/settings", "profile", settings=True)

    # Back through every view, then forward again.
    for path, view, settings in reversed(visited[:-1]):
        await page.go_back()
        await _at(page, base, path, view, settings=settings)
    for path, view, settings in visited[1:]:
        await page.go_forward()
        await _at(page, base, path, view, settings=settings)

    # Closing the settings goes back to the view under them.
    await page.click("#settings-close")
    await _at(page, base, f"/players/{me['id']}", "profile")

    # A reload shows the same view: the table (the game as it was), a board, the settings.
    await page.goto(f"{base}/games/{game['game_id']}")
    await _at(page, base, f"/games/{game['game_id']}", "play")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await page.reload()
    await _at(page, base, f"/games/{game['game_id']}", "play")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await page.goto(f"{base}/daily/2026-03-13")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-13")
    await page.reload()
    await _at(page, base, "/daily/2026-03-13", "leaderboard")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-13")
    await page.goto(f"{base}/following")
    await page.reload()
    await _at(page, base, "/following", "following")
    await page.goto(f"{base}/settings")
    await _at(page, base, "/settings", "home", settings=True)
    await page.click("#settings-close")
    await _at(page, base, "/", "home")

    # A replay (of the free game, given up) and a race room, back and forth.
    await page.goto(f"{base}/games/{game['game_id']}")
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-panel")).to_be_visible()
    await page.goto(f"{base}/replay/{game['game_id']}")
    await _at(page, base, f"/replay/{game['game_id']}", "replay")
    await page.go_back()
    await _at(page, base, f"/games/{game['game_id']}", "play")
    await page.go_forward()
    await _at(page, base, f"/replay/{game['game_id']}", "replay")
    await page.click("#nav-home")
    await _at(page, base, "/", "home")
    await page.click(".race-create summary")
    await page.click("#btn-race-create")
    invite = await page.locator("#race-invite-code").text_content()
    await _at(page, base, f"/race/{invite}", "play")
    await page.go_back()
    await _at(page, base, "/", "home")
    await page.go_forward()
    await _at(page, base, f"/race/{invite}", "play")
    await expect(page.locator("#race-invite-code")).to_have_text(str(invite))
    await page.reload()
    await _at(page, base, f"/race/{invite}", "play")
    await context.close()
    assert page_errors == []


async def test_a_link_to_a_past_days_board_opens_it_on_a_phone_signed_out(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    await finish_daily_over_ws(client, "Bob", code)
    clock.advance(days=1)

    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser,
        base,
        page_errors,
        f"/daily/{DATE}",
        viewport=PHONE,
        has_touch=True,
        is_mobile=True,
        locale="zh-TW",
    )
    await _at(page, base, f"/daily/{DATE}", "leaderboard")
    await expect(page.locator("#lb-date")).to_have_value(str(DATE))
    await expect(page.locator("#lb-table tbody tr")).to_have_count(1)
    await expect(page.locator("#lb-table tbody tr")).to_contain_text("Bob")
    await expect(page.locator("#lb-code-shown")).to_have_text(str(code))
    # The next day, by its button: a new address, and Back comes back to the linked day.
    await page.click("#lb-next")
    await _at(page, base, "/daily/2026-03-15", "leaderboard")
    await page.go_back()
    await _at(page, base, f"/daily/{DATE}", "leaderboard")
    await expect(page.locator("#lb-date")).to_have_value(str(DATE))
    await context.close()
    assert page_errors == []


async def _board_at(page: Page, base: str, kind: str, period: str, title: str) -> None:
    """The page is at the board of a week or month (``kind``), its tab pressed, its title shown."""
    await _at(page, base, f"/boards/{kind}/{period}", "leaderboard")
    await expect(page.locator(f"#lb-tab-{kind}")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#lb-period")).to_be_visible()
    await expect(page.locator("#lb-list")).to_be_hidden()
    await expect(page.locator("#lbp-title")).to_have_text(title)


async def test_the_week_and_month_tabs_and_their_periods_have_addresses(
    browser: Browser, make_server: ServerFactory, clock: FakeClock, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    backend = PostgresBackend(server.app[SERVICES].db)
    (bob,) = await backend.add_players(["Bob"])
    done = dt.datetime(2026, 3, 14, 1, tzinfo=dt.UTC)
    await backend.add_games(
        [
            Seed(bob, 700, 40, 90_000, done, daily_date=DATE),  # W11, March
            Seed(bob, 300, 40, 90_000, done, daily_date=dt.date(2026, 2, 20)),  # W08, February
        ]
    )
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Ada")
    rows = page.locator("#lbp-table tbody tr")
    week11 = ("week", "2026-W11", "Week 2026-W11 · 2026-03-09 – 2026-03-15")
    week10 = ("week", "2026-W10", "Week 2026-W10 · 2026-03-02 – 2026-03-08")
    march = ("month", "2026-03", "Month 2026-03 · 2026-03-01 – 2026-03-31")
    february = ("month", "2026-02", "Month 2026-02 · 2026-02-01 – 2026-02-28")
    await page.click("#nav-leaderboard")
    await _at(page, base, f"/daily/{DATE}", "leaderboard")
    await page.click("#lb-tab-week")
    await _board_at(page, base, *week11)
    await expect(rows.locator("td.name")).to_have_text(["Bob"])
    await page.click("#lbp-prev")
    await _board_at(page, base, *week10)
    await expect(page.locator("#lbp-empty")).to_be_visible()
    await page.click("#lb-tab-month")
    await _board_at(page, base, *march)
    await page.click("#lbp-prev")
    await _board_at(page, base, *february)
    await expect(rows.locator("td:nth-child(3)")).to_have_text(["300"])

    # Back through the periods and tabs to the day's board, then forward again.
    for board in (march, week10, week11):
        await page.go_back()
        await _board_at(page, base, *board)
    await page.go_back()
    await _at(page, base, f"/daily/{DATE}", "leaderboard")
    await expect(page.locator("#lb-tab-day")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#lb-table tbody tr")).to_have_count(1)
    await expect(page.locator("#lb-period")).to_be_hidden()
    for board in (week11, week10, march, february):
        await page.go_forward()
        await _board_at(page, base, *board)
    await expect(rows.locator("td:nth-child(3)")).to_have_text(["300"])

    # A reload shows the same tab and period.
    await page.reload()
    await _board_at(page, base, *february)
    await expect(rows.locator("td:nth-child(3)")).to_have_text(["300"])
    # The Day tab: the day's board at its address; Back comes back to the month.
    await page.click("#lb-tab-day")
    await _at(page, base, f"/daily/{DATE}", "leaderboard")
    await expect(page.locator("#lb-table tbody tr")).to_have_count(1)
    await page.go_back()
    await _board_at(page, base, *february)
    await context.close()

    # A shared link to a past week, on a phone in Chinese, signed out.
    context, page = await open_page(
        browser,
        base,
        page_errors,
        "/boards/week/2026-W08",
        viewport=PHONE,
        has_touch=True,
        is_mobile=True,
        locale="zh-TW",
    )
    await _board_at(page, base, "week", "2026-W08", "2026-W08 週 · 2026-02-16 – 2026-02-22")
    rows = page.locator("#lbp-table tbody tr")
    await expect(rows.locator("td:nth-child(3)")).to_have_text(["300"])
    await page.click("#lbp-next")
    await _board_at(page, base, "week", "2026-W09", "2026-W09 週 · 2026-02-23 – 2026-03-01")
    await page.go_back()
    await _board_at(page, base, "week", "2026-W08", "2026-W08 週 · 2026-02-16 – 2026-02-22")
    # A week that does not exist, or a month after today's, shows today's in its place.
    await page.goto(f"{base}/boards/week/2026-W60")
    await _board_at(page, base, "week", "2026-W11", "2026-W11 週 · 2026-03-09 – 2026-03-15")
    await page.goto(f"{base}/boards/month/2026-12")
    await _board_at(page, base, "month", "2026-03", "2026-03 月 · 2026-03-01 – 2026-03-31")
    await expect(rows.locator("td:nth-child(3)")).to_have_text(["700"])
    await context.close()
    assert page_errors == []
