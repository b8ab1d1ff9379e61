"""The page's boards and rooms on a 390 × 844 touch phone: the daily leaderboard (with the
follow buttons and replay links of a finished date, and a long name), the week's and the
month's boards, the friends' view, a
profile, a replay and a race room (lobby and results) each fit the screen's width, and
everything tapped there (buttons, links, the calendar's days) is at least 44 × 44 px."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from server.config import Settings
from server.engine import RuleSet
from server.engine.solver import solve
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import PHONE, open_page, register, wrapped_words
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, daily_code
from tests.helpers import register as register_over_rest

DATE = dt.date(2026, 3, 14)  # the test clock's day
LONG_NAME = "Adalberta Maximiliana Q"  # 23 characters: a name one cannot shorten


async def _fits(page: Page, view: str) -> None:
    """Nothing sticks out sideways and every tap target is at least 44 × 44 px."""
    await page.wait_for_function(
        "() => document.getAnimations().every(a => a.playState !== 'running')"
    )
    report: dict[str, Any] = await page.evaluate(
        """() => ({
            overflow: document.documentElement.scrollWidth - window.innerWidth,
            small: [...document.querySelectorAll(
                    'button:not(.card), a[href], td[tabindex], summary')]
                .filter(el => el.checkVisibility())
                .map(el => [el.id || el.getAttribute('aria-label') || el.textContent.trim(),
                            el.getBoundingClientRect()])
                .filter(([, r]) => r.width < 44 || r.height < 44)
                .map(([name, r]) => [name, r.width, r.height]),
        })"""
    )
    assert report["overflow"] <= 0, (view, report)
    assert report["small"] == [], (view, report)


async def test_every_board_and_room_fits_a_phone_with_big_tap_targets(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True
    )
    await register(page, "Me")
    # The top bar's "Playing as" is hidden on a phone: the menu says it, under its heading.
    await expect(page.locator("#who")).to_be_hidden()
    await expect(page.locator("#home-who")).to_have_text("Playing as Me")
    await expect(page.locator("#view-home h1")).to_have_text("Choose a game")
    await expect(page.locator("#nav-home")).to_have_attribute("aria-label", "TriPeaks: home")
    await _fits(page, "home")

    # Two players finish the daily; my own result is stored beside theirs.
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = list(solve(code.deal(), code.rules).line)
    game_ids = []
    for name in (LONG_NAME, "Bob"):
        player = await register_over_rest(client, name)
        ws, _ = await WsPlayer.connect(client, player["token"])
        game = (await ws.request({"type": "join_daily"}))["game"]
        clock.advance(seconds=40)
        final = await ws.play(game, line)
        assert final["status"] in ("won", "blocked")
        game_ids.append(game["game_id"])
        await ws.close()
    me: Any = await page.evaluate("() => window.tripeaks.store.player")
    done = clock.now()
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [Seed(me["id"], 400, 60, 90_000, done, daily_date=DATE)]
    )
    clock.set(dt.datetime(2026, 3, 15, 0, 5, tzinfo=dt.UTC))  # the date is over: replays

    # The board of the finished date: every row has a follow button and a replay link.
    await page.click("#nav-leaderboard")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-15")
    await page.click("#lb-prev")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-14")
    rows = page.locator("#lb-table tbody tr")
    await expect(rows).to_have_count(3)
    await expect(page.locator("#lb-table a.replay-link")).to_have_count(3)
    await expect(page.locator("#lb-table .follow-btn")).to_have_count(2)
    await expect(page.locator("#lb-around-table tbody tr")).to_have_count(3)
    await expect(page.locator("#lb-around-table .follow-btn")).to_have_count(2)
    long_row = page.locator("#lb-table tbody tr", has_text=LONG_NAME)
    await expect(long_row.get_by_role("link", name=f"Replay {LONG_NAME}'s game")).to_be_visible()
    await _fits(page, "leaderboard")
    # The week's and the month's boards, under their tabs.
    for kind in ("week", "month"):
        await page.click(f"#lb-tab-{kind}")
        await expect(page.locator("#lbp-table tbody tr")).to_have_count(3)
        await _fits(page, f"{kind}'s board")
    await page.click("#lb-tab-day")
    await expect(rows).to_have_count(3)

    # The friends' view, after following both from their rows.
    for name in (LONG_NAME, "Bob"):
        await page.locator("#lb-table").get_by_role("button", name=f"Follow {name}").click()
        await expect(
            page.locator("#lb-table").get_by_role("button", name=f"Unfollow {name}")
        ).to_be_visible()
    await page.get_by_role("button", name="Friends", exact=True).click()
    await expect(page.locator("#lb-friends-table tbody tr")).to_have_count(3)
    await expect(page.locator("#lb-friends-table a.replay-link")).to_have_count(3)
    await _fits(page, "friends")

    # A profile, with its calendar of dailies (the day played is tapped to read it).
    await page.locator("#lb-friends-table a.player-link", has_text=LONG_NAME).click()
    await expect(page.locator("#view-profile")).to_be_visible()
    await expect(page.locator(".profile-month td[tabindex]")).not_to_have_count(0)
    await _fits(page, "profile")

    # A replay: no keyboard help on a touch screen, and the texts keep off the screen's edges.
    await page.goto(f"{base}/replay/{game_ids[0]}")
    await expect(page.locator("#replay-moves li")).to_have_count(len(line))
    await expect(page.locator(".replay-keys")).to_be_hidden()
    await page.locator("#replay-forward").tap()
    await expect(page.locator("#replay-step")).to_have_text(f"Move 1 of {len(line)}")
    await _fits(page, "replay")
    edges = await page.evaluate(
        """() => ['#replay-slider', '#replay-step', '#replay-result', '#replay-now']
            .map(s => document.querySelector(s).getBoundingClientRect())
            .map(r => [r.left, innerWidth - r.right])"""
    )
    assert all(left >= 6 and right >= 6 for left, right in edges), edges
    # The list of moves shows several moves at once, and ends between two of them.
    box = await page.evaluate(
        """() => { const l = document.querySelector('#replay-moves');
                   return [l.clientHeight, l.querySelector('li').offsetHeight]; }"""
    )
    assert box[0] >= 6 * box[1] and box[0] % box[1] == 0, box

    # A race room: the lobby, then the results of a race given up at once.
    await page.click("#nav-home")
    await page.click(".race-create summary")
    await page.click("#btn-race-create")
    await expect(page.locator("#race-invite-code")).to_be_visible()
    await _fits(page, "lobby")
    await page.click("#race-start")
    await expect(page.locator("#race-countdown")).to_contain_text("Go!")
    clock.advance(seconds=1)  # the race's start has passed on the server's clock too
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#race-results tbody tr")).to_have_count(1)
    await expect(page.locator("#race-results a.replay-link")).to_have_count(1)
    await page.click("#end-close")
    await _fits(page, "race results")
    # In Traditional Chinese the results keep each word whole (已放棄, not 已/放/棄).
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#race-results th").first).to_have_text("名次")
    assert await wrapped_words(page) == []
    await _fits(page, "race results in Chinese")

    await context.close()
    assert page_errors == []
