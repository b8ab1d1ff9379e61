"""A read that fails says so and offers to try again: a board the server could not read (503)
never shows as an empty day, nor does the next page of rows or my place on it."""

from __future__ import annotations

import re
from typing import Any

from playwright.async_api import Browser, expect

from tests.browser.support import PHONE, fail_next, no_overflow, open_page, register
from tests.conftest import ServerFactory

BOARD = re.compile(r"/api/v1/daily/[0-9-]+/leaderboard\?")
AROUND = re.compile(r"/api/v1/daily/[0-9-]+/leaderboard/around/")


async def test_a_board_that_could_not_be_read_says_so_and_is_read_again(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Ada")
    failed = await fail_next(page, BOARD)
    await page.click("#nav-leaderboard")
    alert = page.locator("#lb-failed")
    await expect(alert).to_be_visible()
    await expect(alert.locator("p")).to_have_text(
        "The board could not be read: The server is busy. Please try again shortly."
    )
    await expect(page.locator("#lb-empty")).to_have_count(0)  # never an empty day
    assert len(failed) == 1
    await alert.get_by_role("button", name="Try again").click()
    await expect(page.locator("#lb-empty")).to_have_text("No results for this day yet.")
    await expect(alert).to_have_count(0)

    # My place on the board, the same.
    failed = await fail_next(page, AROUND)
    await page.click("#lb-prev")
    around = page.locator("#lb-around-failed")
    await expect(around.locator("p")).to_have_text(
        "Your place could not be read: The server is busy. Please try again shortly."
    )
    await around.get_by_role("button", name="Try again").click()
    await expect(page.locator("#lb-around p")).to_have_text(
        "You have no ranked result on this day."
    )
    await context.close()
    assert page_errors == []


async def test_on_a_phone_in_chinese_the_failure_and_its_retry_fit(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True, locale="zh-TW"
    )
    await register(page, "Zhi")
    failed: list[Any] = await fail_next(page, BOARD)
    await page.click("#nav-leaderboard")
    alert = page.locator("#lb-failed")
    await expect(alert.locator("p")).to_have_text("無法讀取排行榜：伺服器忙碌中，請稍後再試。")
    retry = alert.get_by_role("button", name="重試")
    box = await retry.bounding_box()
    assert box is not None and box["height"] >= 44 and box["width"] >= 44
    await no_overflow(page)
    await retry.click()
    await expect(page.locator("#lb-empty")).to_have_text("這一天還沒有成績。")
    assert len(failed) == 1
    await context.close()
    assert page_errors == []
