"""Game codes in the page: typing a TP2 code (28 letters, with or without the hyphens between its
groups, any case), a refused code, and the grouped code with its copy button at the end of a
free game on a 390-px phone; the fields' placeholders fit them and look like no code."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.engine import GameCode
from tests.browser.support import (
    DESKTOP,
    PHONE,
    game_state,
    no_overflow,
    open_page,
    record_texts,
    register,
    shown,
)
from tests.conftest import ServerFactory

TP2 = "TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA"
TYPED = "tp2-e-" + "a" * 28  # no group hyphens, lower case


async def test_a_tp2_code_is_typed_shown_in_groups_and_copied_on_a_phone(
    browser: Browser, make_server: ServerFactory, page_errors: list[str], tmp_path: Path
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, viewport=PHONE)
    await register(page, "Tess")

    # The field takes a whole TP2 code; the help names both forms.
    assert await page.eval_on_selector("#free-code", "el => el.maxLength") >= 64
    await expect(page.locator("#free-code-help")).to_contain_text("TP2")
    await expect(page.locator("#free-code")).to_have_attribute("placeholder", "TP1-… or TP2-… code")

    # A code the server refuses: a clear message under the field, and the menu stays.
    await page.fill("#free-code", "TP2-E-AAAAAAA-AAAA")
    await page.click("#btn-play-code")
    error = page.locator("#free-code-error")
    await expect(error).to_contain_text("That is not a valid game code.")
    await expect(error).to_contain_text("TP2-E-")
    await expect(page.locator("#free-code")).to_have_attribute("aria-invalid", "true")
    await expect(page.locator("#view-home")).to_be_visible()
    await no_overflow(page)
    # The same for a race on a typed code.
    await page.click(".race-create summary")
    await page.fill("#race-code", "TP2-E-" + "A" * 27)
    await page.click("#btn-race-create")
    await expect(page.locator("#race-code-error")).to_contain_text("That is not a valid game code.")
    await expect(page.locator("#view-home")).to_be_visible()

    # 28 letters without the group hyphens, in lower case: the server deals the TP2 game.
    await page.fill("#free-code", TYPED)
    assert await page.input_value("#free-code") == TYPED
    await expect(error).to_have_text("")  # editing clears the error
    await page.click("#btn-play-code")
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_have_text(f"Free play · {TP2} · Easy rules")
    state = await game_state(page)
    deal = GameCode.parse(TP2).deal()
    assert state["code"] == TP2
    assert state["tableau"][18:] == [str(c) for c in deal.tableau[18:]]
    assert state["waste"] == str(deal.waste)
    await no_overflow(page)

    # The end of the game shows the code in its four groups, with a copy button.
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-title")).to_have_text("You gave up this game")
    await expect(page.locator("#end-note")).to_have_text(f"Game code: {TP2}")
    chunks = await page.locator("#end-code .code-chunk").all_inner_texts()
    assert chunks == ["TP2-E-AAAAAAA-", "AAAAAAA-", "AAAAAAA-", "AAAAAAA"]
    family = await page.eval_on_selector("#end-code", "el => getComputedStyle(el).fontFamily")
    assert "monospace" in family
    await no_overflow(page)
    await page.screenshot(path=str(tmp_path / "end-panel-tp2-phone.png"))

    # Copy with the clipboard API: the code as shown, and a brief "Copied".
    await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    copy = page.locator("#end-copy-code")
    await expect(copy).to_have_text("Copy")
    status = page.locator("#end-copy .copy-status")
    await record_texts(page, "#end-copy .copy-status")  # it shows for a moment only
    await copy.click()
    await shown(page, "#end-copy .copy-status", "Copied")
    await expect(status).to_have_attribute("aria-live", "polite")
    assert await page.evaluate("() => navigator.clipboard.readText()") == TP2
    await expect(status).to_have_text("")  # the confirmation goes away by itself

    # In Traditional Chinese.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(copy).to_have_text("複製")
    await record_texts(page, "#end-copy .copy-status")
    await copy.click()
    await shown(page, "#end-copy .copy-status", "已複製")

    # Without the clipboard API the code's text is selected for the player to copy.
    await page.evaluate(
        """() => Object.defineProperty(navigator, "clipboard",
                                       {value: undefined, configurable: true})"""
    )
    await page.select_option("#lang-select", "en")
    await record_texts(page, "#end-copy .copy-status")
    await copy.click()
    await shown(page, "#end-copy .copy-status", None)  # some word for the player
    assert await page.evaluate("() => window.getSelection().toString()") == TP2

    await context.close()
    assert page_errors == []


async def test_a_tp1_code_gets_the_same_copy_button(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Otto")
    await page.fill("#free-code", "tp1-c-aaaaaab")
    await page.click("#btn-play-code")
    await expect(page.locator("#play-title")).to_have_text(
        "Free play · TP1-C-AAAAAAB · Classic rules"
    )
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-note")).to_have_text("Game code: TP1-C-AAAAAAB")
    await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    await record_texts(page, "#end-copy .copy-status")  # it shows for a moment only
    await page.click("#end-copy-code")
    await shown(page, "#end-copy .copy-status", "Copied")
    assert await page.evaluate("() => navigator.clipboard.readText()") == "TP1-C-AAAAAAB"
    await context.close()
    assert page_errors == []


_PLACEHOLDERS = """() => {
    // Each field's placeholder and whether it fits inside the field (measured in its font).
    const canvas = document.createElement('canvas').getContext('2d');
    return ['#free-code', '#race-code', '#race-invite'].map(sel => {
        const el = document.querySelector(sel);
        const style = getComputedStyle(el);
        canvas.font = style.font;
        const room = el.clientWidth - parseFloat(style.paddingLeft)
            - parseFloat(style.paddingRight);
        return [sel, el.placeholder, canvas.measureText(el.placeholder).width <= room];
    });
}"""


async def test_the_code_fields_placeholders_fit_and_look_like_no_code(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    for name, viewport in (("Dee", DESKTOP), ("Pip", PHONE)):
        context, page = await open_page(browser, base, page_errors, viewport=viewport)
        await register(page, name)
        await page.click(".race-create summary")
        await expect(page.locator("#race-code")).to_be_visible()
        for lang in ("en", "zh-Hant"):
            await page.select_option("#lang-select", lang)
            await expect(page.locator("html")).to_have_attribute("lang", lang)
            fields = await page.evaluate(_PLACEHOLDERS)
            assert all(fits for _, _, fits in fields), (viewport, lang, fields)
            # An invite code is 6 of these letters and digits: the placeholder is none.
            invite = next(text for sel, text, _ in fields if sel == "#race-invite")
            assert not re.fullmatch(r"[34679ACDEFGHJKMNPQRTUVWXY]{6}", invite), invite
        await context.close()
    assert page_errors == []
