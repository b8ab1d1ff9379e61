"""The end of a game leaves the cards in sight: the end panel of a daily, of a free game and of
a race's game, and the race's results, never cover a card of the peaks, the stock or the waste,
on a 1280 × 800 desktop (the panel beside the cards, or under them in a race, whose room takes
the side) and on a 390 × 844 touch phone (under them), in English and in 繁體中文. Each game is
given up at once, so that all 28 cards of the peaks are still on the table."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, ViewportSize, expect

from server.engine import GameCode
from server.services.clock import FakeClock
from tests.browser.support import PHONE, covered_cards, no_overflow, open_page, register
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer
from tests.helpers import register as register_rest

CODE = GameCode.parse("TP1-E-AAAAAAB")
DESKTOP_800: ViewportSize = {"width": 1280, "height": 800}


async def _uncovered(page: Page, *panels: str) -> dict[str, Any]:
    """The shown ``panels`` cover no card; all 28 cards of the peaks, the stock and the waste
    are on the table; nothing sticks out sideways. What was measured."""
    await page.wait_for_function(
        "() => document.getAnimations().every(a => a.playState !== 'running')"
    )
    await no_overflow(page)
    report = await covered_cards(page, *panels)
    assert report["cards"] == 30, report
    assert len(report["panels"]) == len(panels), report
    assert report["covered"] == [], report
    return report


async def _give_up(page: Page) -> None:
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-panel")).to_be_visible()


def _beside(report: dict[str, Any]) -> None:
    """On a desktop the end panel is beside the peaks, and on the screen."""
    (name, end), *_ = report["panels"]
    assert name == "end-panel"
    assert end["left"] >= report["peaks"]["right"], report
    assert end["top"] < report["height"] / 2, report


async def test_the_end_panels_leave_every_card_in_sight_on_a_desktop_and_a_phone(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    sizes = {"desktop": DESKTOP_800, "phone": PHONE}
    for n, (size, locale) in enumerate(
        [("desktop", "en-US"), ("desktop", "zh-TW"), ("phone", "en-US"), ("phone", "zh-TW")]
    ):
        phone = size == "phone"
        context, page = await open_page(
            browser,
            base,
            page_errors,
            viewport=sizes[size],
            locale=locale,
            has_touch=phone,
            is_mobile=phone,
        )
        await register(page, f"Ada {n}")

        # Today's daily, given up: its rank, streak, countdown and Share.
        await page.click("#btn-daily")
        await expect(page.locator("#board")).to_be_visible()
        await _give_up(page)
        await expect(page.locator("#end-daily")).to_be_visible()
        await expect(page.locator("#end-countdown")).not_to_be_empty()
        daily = await _uncovered(page, "#end-panel")
        if not phone:
            _beside(daily)

        # A free game of a code, given up: its code and what next.
        await page.click("#nav-home")
        await page.fill("#free-code", str(CODE))
        await page.click("#btn-play-code")
        await expect(page.locator("#stat-moves")).to_have_text("0")
        await _give_up(page)
        await expect(page.locator("#end-copy")).to_be_visible()
        free = await _uncovered(page, "#end-panel")
        if not phone:
            _beside(free)

        # A race: the results beside the table (under it on a phone), the end panel under it.
        info = await register_rest(client, f"Host {n}")
        host, _ = await WsPlayer.connect(client, info["token"])
        created = await host.request({"type": "race_create", "code": str(CODE)})
        invite = created["race"]["invite"]
        await page.goto(f"{base}/race/{invite}")
        await page.click("#invite-join")
        await expect(page.locator("#race-players li")).to_have_count(2)
        await host.request({"type": "race_start", "invite": invite})
        game = (await host.until("race_go", invite=invite))["game"]
        await expect(page.locator("#race-countdown")).to_contain_text(["Go!", "開始"][n % 2])
        clock.advance(seconds=1)  # the race has started on the server's clock
        await _give_up(page)
        await host.request({"type": "resign", "game_id": game["game_id"]})
        await expect(page.locator("#race-results tbody tr")).to_have_count(2)
        race = await _uncovered(page, "#end-panel", "#race-panel")
        (_, end), (_, results) = race["panels"]
        assert end["top"] >= race["peaks"]["bottom"], race  # under the cards
        if not phone:
            assert results["left"] >= race["peaks"]["right"], race  # the room's side
        await host.close()
        await context.close()
    assert page_errors == []
