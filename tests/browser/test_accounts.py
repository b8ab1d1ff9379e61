"""A banned player reads why in their own language: the refusal's ban (since when, and the
moderator's reason) in the page's words, in English and in Traditional Chinese."""

from __future__ import annotations

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.web.keys import SERVICES
from tests.browser.support import open_page, register
from tests.conftest import ServerFactory


async def test_a_banned_player_reads_the_ban_and_its_reason_in_their_language(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Mallory")
    ban = await server.app[SERVICES].moderation.ban("Mallory", "played with a solver", "mod")
    since = ban.action.at.date().isoformat()

    await page.click("#btn-daily")
    await expect(page.locator("#home-error")).to_have_text(
        f"You are banned from ranked play since {since}: played with a solver. "
        "Free play and watching races are still open to you."
    )
    await page.select_option("#lang-select", "zh-Hant")
    await page.click("#btn-daily")
    await expect(page.locator("#home-error")).to_have_text(
        f"你自 {since} 起被禁止參加排名賽：played with a solver。你仍可進行自由牌局及觀看競速賽。"
    )
    await context.close()
    assert page_errors == []
