"""The page never shows an older game as if nothing had happened: after a reconnection it
resumes with the seq it was last acknowledged, and a stored game behind it (acknowledged
actions lost with a database) is said on the table before the stored game is shown."""

from __future__ import annotations

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from tests.browser.support import at_free_game, game_state, reconnect, record_texts, shown
from tests.conftest import ServerFactory
from tests.web.test_resume_acknowledged import lose_actions_after

# TP1-E-AAAAAAA: waste 4H, bottom row 4S 7S 9H TS 9D TD 5H TH 6D QS; stock KH 7C 9C … 2S.
CODE = "TP1-E-AAAAAAA"


async def test_a_game_stored_behind_the_acknowledged_one_is_said_after_a_reconnection(
    browser: Browser, make_server: ServerFactory, database_url: str, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await at_free_game(browser, base, page_errors, "Lee", CODE)
    for moves in ("1", "2", "3"):
        await page.click("#stock")
        await expect(page.locator("#stat-moves")).to_have_text(moves)
    game_id = (await game_state(page))["game_id"]

    await lose_actions_after(database_url, game_id, 1)
    await record_texts(page, "#message")
    await reconnect(page)
    await shown(page, "#message", "some confirmed moves were lost", contains=True)
    await expect(page.locator("#stat-moves")).to_have_text("1")
    assert (await game_state(page))["seq"] == 1
    # Play goes on from the stored game.
    await page.click("#stock")
    await expect(page.locator("#stat-moves")).to_have_text("2")

    await context.close()
    assert page_errors == []
