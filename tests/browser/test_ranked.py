"""Ranked games in the browser: no Undo button in the daily or a race, U that says why it does
nothing, and the note on it shown once, before the first ranked game, in both languages
(docs/rules.md §4 "Ranked play")."""

from __future__ import annotations

import json
import re

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from tests.browser.support import PHONE, open_page, record_texts, register, shown
from tests.conftest import ServerFactory

NOTE_EN = (
    "The daily challenge and races are ranked. A card you have drawn or turned over stays seen, "
    "so a ranked game has no Undo: every move counts. Free play keeps Undo."
)
NOTE_ZH = (
    "每日挑戰和競速賽都是排名賽。抽過或翻開的牌已經看見，所以排名賽沒有「還原」，每一步都算數。"
    "自由牌局仍可還原。"
)


async def _daily_players(base: str) -> int:
    async with ClientSession() as http, http.get(f"{base}/api/v1/daily") as answer:
        body = json.loads(await answer.text())
    players: int = body["players"]
    return players


async def test_the_note_comes_once_before_the_first_ranked_game_and_undo_is_free_play_only(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.5)
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, ranked_note_read=False)
    await register(page, "Ranko")

    # The daily's clock starts with its game: the note comes first, and no game is made yet.
    note = page.locator("#ranked-note")
    await expect(note).to_be_hidden()
    await page.click("#btn-daily")
    await expect(note).to_be_visible()
    await expect(page.locator("#ranked-note-title")).to_have_text("Ranked games have no undo")
    await expect(page.locator("#ranked-note-text")).to_have_text(NOTE_EN)
    await expect(page.locator("#board")).to_be_hidden()
    assert await _daily_players(base) == 0
    await page.click("#ranked-note-ok")
    await expect(note).to_be_hidden()
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_contain_text("Daily challenge")
    assert await _daily_players(base) == 1

    # No Undo button in the daily; a draw, then U: nothing is taken back, and the page says why.
    await expect(page.locator("#btn-undo")).to_be_hidden()
    await page.click("#stock")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await record_texts(page, "#message")
    await page.keyboard.press("u")
    await shown(page, "#message", "Ranked games have no undo: what you have seen cannot be unseen.")
    await expect(page.locator("#stat-score")).to_have_text("499")
    await expect(page.locator("#btn-undo")).to_be_hidden()

    # Free play keeps Undo.
    await page.click("#nav-home")
    await page.click("#btn-random")
    await expect(page.locator("#play-title")).to_contain_text("TP1-")
    await expect(page.locator("#btn-undo")).to_be_visible()
    await page.click("#stock")
    await expect(page.locator("#stat-score")).to_have_text("499")
    await page.click("#btn-undo")
    await expect(page.locator("#stat-score")).to_have_text("500")

    # A race is ranked too, but the note was read: it does not come again, after a reload
    # either, and the race game has no Undo button.
    await page.reload()
    await expect(page.locator("#board")).to_be_visible()
    await page.click("#nav-home")
    await page.click(".race-create summary")
    await page.click("#btn-race-create")
    await expect(page.locator("#race-invite-code")).to_have_text(re.compile(r"^[0-9A-Z]{6}$"))
    await expect(note).to_be_hidden()
    await page.click("#race-start")
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_contain_text("Race")
    await expect(page.locator("#btn-undo")).to_be_hidden()
    await expect(note).to_be_hidden()
    await context.close()
    assert page_errors == []


async def test_the_note_in_traditional_chinese_on_a_phone_before_a_race(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser,
        base,
        page_errors,
        viewport=PHONE,
        locale="zh-TW",
        has_touch=True,
        ranked_note_read=False,
    )
    await register(page, "小明")
    await page.click(".race-create summary")
    await page.click("#btn-race-create")
    note = page.locator("#ranked-note")
    await expect(note).to_be_visible()
    await expect(page.locator("#ranked-note-title")).to_have_text("排名賽不能還原")
    await expect(page.locator("#ranked-note-text")).to_have_text(NOTE_ZH)
    await expect(page.locator("#ranked-note-ok")).to_have_text("知道了")
    box = await page.locator("#ranked-note-ok").bounding_box()
    assert box is not None and box["height"] >= 44 and box["width"] >= 44
    note_box = await note.bounding_box()
    assert note_box is not None and note_box["x"] >= 0 and note_box["x"] + note_box["width"] <= 390
    # Escape closes it as the button does; the race room opens.
    await page.keyboard.press("Escape")
    await expect(note).to_be_hidden()
    await expect(page.locator("#race-invite-code")).to_be_visible()
    assert await page.evaluate("() => localStorage.getItem('tripeaks.rankedNoteSeen')") == "true"
    await context.close()
    assert page_errors == []
