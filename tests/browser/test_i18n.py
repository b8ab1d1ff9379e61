"""Languages: English and Traditional Chinese, switchable; the server's messages follow."""

from __future__ import annotations

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from tests.browser.support import open_page, record_texts, register, shown
from tests.conftest import ServerFactory

# TP1-E-AAAAAAA: waste 4H, bottom row 4S 7S 9H TS 9D TD 5H TH 6D QS (docs/rules.md §3 test vector).
CODE = "TP1-E-AAAAAAA"


async def test_language_switch_to_traditional_chinese(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "小明")
    await expect(page.locator("#nav-home")).to_have_attribute("aria-label", "TriPeaks: home")
    await expect(page.locator("#home-title")).to_have_text("Choose a game")

    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("html")).to_have_attribute("lang", "zh-Hant")
    await expect(page.locator("#btn-daily")).to_have_text("開始今日挑戰")
    await expect(page.locator("#nav-leaderboard")).to_have_text("排行榜")
    await expect(page.locator("#who")).to_have_text("玩家：小明")
    await expect(page.locator("#nav-home")).to_have_attribute("aria-label", "TriPeaks：首頁")
    await expect(page.locator("h1#home-title")).to_have_text("選擇玩法")
    await expect(page.locator("#race-invite")).to_have_attribute("placeholder", "6 個字母或數字")
    # My own name is marked with a full-width bracket and no space before it.
    await page.click("#menu-profile")
    await expect(page.locator("#profile-title")).to_have_text("小明（你）")
    await page.click("#nav-home")
    await expect(page.locator("#home-title")).to_be_visible()

    await page.fill("#free-code", CODE.lower())
    await page.click("#btn-play-code")
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_have_text(f"自由牌局 · {CODE} · 簡單規則")
    # Undo is 還原, never 復原 (that is the recovery code's, 復原碼).
    await expect(page.locator("#btn-undo")).to_contain_text("還原")
    await expect(page.locator('#peaks .card[data-pos="18"]')).to_have_attribute(
        "aria-label", "黑桃 4"
    )
    await expect(page.locator('#peaks .card[data-pos="0"]')).to_have_attribute("aria-label", "蓋牌")
    await expect(page.locator("#waste-card")).to_have_attribute("aria-label", "棄牌：紅心 4")
    await expect(page.locator("#stock")).to_have_attribute("aria-label", "牌庫：23 張。抽一張牌")

    # Rejections come from the server in the chosen language.
    await record_texts(page, "#message")  # a message shows for a few seconds only
    await page.click('#peaks .card[data-pos="27"]')  # QS on 4H
    await shown(page, "#message", "點數必須大一級或小一級")
    await record_texts(page, "#message")
    await page.click('#peaks .card[data-pos="0"]')  # face down
    await shown(page, "#message", "這張牌被擋住了")

    # A king is a letter like the queen and the jack (and as in the rule text, "K 與 A 相連").
    await page.click("#stock")
    await expect(page.locator("#waste-card")).to_have_attribute("aria-label", "棄牌：紅心 K")

    # The choice is remembered, and switching back brings English texts and messages.
    await page.reload()
    await expect(page.locator("html")).to_have_attribute("lang", "zh-Hant")
    await expect(page.locator("#board")).to_be_visible()  # the game on the table is resumed
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await page.select_option("#lang-select", "en")
    await expect(page.locator("#btn-undo")).to_contain_text("Undo")
    await record_texts(page, "#message")
    await page.click('#peaks .card[data-pos="18"]')  # 4S on KH
    await shown(page, "#message", "Must be one rank higher or lower")

    await context.close()
    assert page_errors == []


async def test_both_languages_have_every_text(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    keys = await page.evaluate(
        """async () => {
            const en = await (await fetch('/i18n/en.json')).json();
            const zh = await (await fetch('/i18n/zh-Hant.json')).json();
            const empty = [...Object.entries(en), ...Object.entries(zh)]
                .filter(([, v]) => typeof v !== 'string' || !v).map(([k]) => k);
            return {en: Object.keys(en).sort(), zh: Object.keys(zh).sort(), empty};
        }"""
    )
    assert keys["en"] == keys["zh"]
    assert keys["empty"] == []
    # Every data-i18n key used by the page exists.
    used = await page.eval_on_selector_all(
        "[data-i18n],[data-i18n-placeholder],[data-i18n-aria-label],[data-i18n-title]",
        """els => els.flatMap(e => [e.dataset.i18n, e.dataset.i18nPlaceholder,
            e.dataset.i18nAriaLabel, e.dataset.i18nTitle]).filter(Boolean)""",
    )
    assert set(used) <= set(keys["en"])

    # A Traditional Chinese browser starts in Traditional Chinese.
    zh_ctx, zh_page = await open_page(browser, base, page_errors, locale="zh-TW")
    await expect(zh_page.locator("html")).to_have_attribute("lang", "zh-Hant")
    await expect(zh_page.locator("#register-submit")).to_have_text("開始遊戲")
    await zh_ctx.close()
    await context.close()
    assert page_errors == []


async def test_leaderboard_messages_follow_a_language_switch(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Ada")

    # Ada has not played today: "around me" says so, in English first.
    await page.click("#nav-leaderboard")
    await expect(page.locator("#view-leaderboard")).to_be_visible()
    around = page.locator("#lb-around p")
    await expect(around).to_have_text("You have no ranked result on this day.")

    # Switching language redraws the message in the new language, and back again.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#lb-around-title")).to_have_text("我的附近")
    await expect(around).to_have_text("你在這一天沒有計分的成績。")
    await page.select_option("#lang-select", "en")
    await expect(around).to_have_text("You have no ranked result on this day.")

    # The day before had no daily: that notice follows the language too.
    await page.click("#lb-prev")
    info = page.locator("#lb-info")
    await expect(info).to_have_text("There was no daily challenge on this day.")
    await page.select_option("#lang-select", "zh-Hant")
    await expect(info).to_have_text("這一天沒有每日挑戰。")
    await expect(around).to_have_text("你在這一天沒有計分的成績。")

    await context.close()
    assert page_errors == []
