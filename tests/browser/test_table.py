"""The table in free play: keyboard, undo, rejected moves with and without error help,
"show playable", a blocked game, giving up, and reconnecting."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from tests.browser.support import (
    at_free_game,
    game_state,
    open_page,
    reconnect,
    record_texts,
    register,
    shown,
)
from tests.conftest import ServerFactory

# TP1-E-AAAAAAA: waste 4H, bottom row 4S 7S 9H TS 9D TD 5H TH 6D QS; stock KH 7C 9C … 2S.
CODE = "TP1-E-AAAAAAA"


async def _focused_pos(page: Page) -> str | None:
    pos: str | None = await page.evaluate("() => document.activeElement.dataset.pos ?? null")
    return pos


async def _record_suggestions(page: Page) -> None:
    """From now on, note the first highlighted suggestion (``.suggested``) the moment it shows:
    each element's position (None for the stock); it goes away by itself after a while."""
    await page.evaluate(
        """() => {
            window.__suggestions = null;
            const observer = new MutationObserver(() => {
                const shown = document.querySelectorAll(".suggested");
                if (!shown.length) return;
                window.__suggestions = [...shown].map(el => el.dataset.pos ?? null);
                observer.disconnect();
            });
            observer.observe(document.documentElement,
                             {subtree: true, attributes: true, attributeFilter: ["class"]});
        }"""
    )


async def _suggested(page: Page) -> list[str | None]:
    """The suggestion noted since :func:`_record_suggestions` (waiting for it)."""
    handle = await page.wait_for_function("() => window.__suggestions", polling=100)
    suggested: list[str | None] = await handle.json_value()
    return suggested


async def _settled(page: Page) -> None:
    """Wait until the page has no action waiting for the server."""
    await page.wait_for_function("() => !window.tripeaks.store.acting")


async def test_keyboard_play_settings_and_reconnect(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Kim")
    await page.fill("#free-code", CODE)
    await page.press("#free-code", "Enter")
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_have_text(f"Free play · {CODE} · Easy rules")

    # Cards are buttons named like "4 of spades"; face-down cards are not tab stops.
    card = page.locator('#peaks .card[data-pos="18"]')
    await expect(card).to_have_attribute("aria-label", "4 of spades")
    await expect(page.locator('#peaks .card[data-pos="27"]')).to_have_attribute(
        "aria-label", "queen of spades"
    )
    assert await page.get_attribute('#peaks .card[data-pos="0"]', "tabindex") == "-1"
    assert await _focused_pos(page) == "18"  # the first playable card has the focus

    # Arrows move between face-up cards; Enter plays 5H (24) on 4H.
    for _ in range(6):
        await page.keyboard.press("ArrowRight")
    assert await _focused_pos(page) == "24"
    await page.keyboard.press("Enter")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await expect(page.locator('#peaks .card[data-pos="24"]')).to_be_hidden()
    assert await _focused_pos(page) in ("23", "25")  # the focus stays on the table

    # D draws, U undoes.
    await page.keyboard.press("d")
    await expect(page.locator("#stock-count")).to_have_text("22")
    await expect(page.locator("#waste-card")).to_have_attribute(
        "aria-label", "Waste card: king of hearts"
    )
    await page.keyboard.press("u")
    await expect(page.locator("#stock-count")).to_have_text("23")
    await expect(page.locator("#waste-card")).to_have_attribute(
        "aria-label", "Waste card: 5 of hearts"
    )
    await expect(page.locator("#stat-moves")).to_have_text("2")

    # Space plays 4S (18) on 5H.
    await card.focus()
    await page.keyboard.press(" ")
    await expect(page.locator("#stat-moves")).to_have_text("3")
    await expect(page.locator("#stat-score")).to_have_text("498")

    # Error help off: the code still arrives, the text does not.
    await page.click("#nav-settings")
    await page.uncheck("#set-error-help")
    await page.click("#settings-close")
    await page.click('#peaks .card[data-pos="27"]')  # QS on 4S
    await _settled(page)
    await expect(page.locator("#message")).to_have_text("")
    assert (await game_state(page))["moves"] == 3
    await page.click("#nav-settings")
    await page.check("#set-error-help")
    await page.click("#settings-close")
    await record_texts(page, "#message")  # a message shows for a few seconds only
    await page.click('#peaks .card[data-pos="27"]')
    await shown(page, "#message", "Must be one rank higher or lower")

    # "Show playable" marks exactly the face-up neighbours of the waste card (free play only).
    await page.keyboard.press("d")  # KH: QS (27) becomes playable
    await expect(page.locator("#stat-moves")).to_have_text("4")
    assert await page.locator("#peaks .card.hint").count() == 0
    await page.click("#nav-settings")
    await page.check("#set-show-playable")
    await page.click("#settings-close")
    hints = page.locator("#peaks .card.hint")
    await expect(hints).to_have_count(1)
    await expect(hints).to_have_attribute("data-pos", "27")
    await expect(hints).to_have_attribute("aria-label", "queen of spades, playable")

    # The websocket drops: the page says so, reconnects by itself and plays on.
    await reconnect(page)
    await page.click('#peaks .card[data-pos="27"]')
    await expect(page.locator("#stat-moves")).to_have_text("5")
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "QS")

    # An action sent just as the connection drops is sent again and applied once.
    await page.evaluate(
        """() => { document.querySelector('#stock').click();
                   window.tripeaks.connection.drop(); }"""
    )
    await expect(page.locator("#stat-moves")).to_have_text("6")
    await _settled(page)
    state = await game_state(page)
    assert (state["moves"], state["stock_count"], state["seq"]) == (6, 21, 7)

    # Give up: confirm, then the summary with the code and a way to replay.
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-title")).to_have_text("You gave up this game")
    await expect(page.locator("#end-note")).to_have_text(f"Game code: {CODE}")
    await page.get_by_role("button", name="Play this deal again").click()
    await expect(page.locator("#stat-moves")).to_have_text("0")
    await expect(page.locator("#end-panel")).to_be_hidden()

    await context.close()
    assert page_errors == []


async def test_a_blocked_free_game_can_be_undone(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await at_free_game(browser, base, page_errors, "Lee", CODE)
    for n in range(1, 24):  # draw the whole stock: nothing neighbours 2S any more
        await page.click("#stock")
        await expect(page.locator("#stat-moves")).to_have_text(str(n))
    await expect(page.locator("#stock")).to_have_attribute("aria-label", "Stock: empty")
    await expect(page.locator("#end-title")).to_have_text("Blocked: no more moves.")
    await page.locator("#end-actions").get_by_role("button", name="Undo").click()
    await expect(page.locator("#end-panel")).to_be_hidden()
    await expect(page.locator("#stock-count")).to_have_text("1")
    assert (await game_state(page))["status"] == "playing"
    await context.close()
    assert page_errors == []


async def test_a_hint_points_at_a_move_and_the_end_panel_shows_par(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await at_free_game(browser, base, page_errors, "Hal", CODE)
    hint = page.locator("#btn-hint")
    await expect(hint).to_be_visible()
    await expect(hint).to_contain_text("Hint")
    await expect(page.locator("#hint-note")).to_be_hidden()

    # The server suggests a move: the card (or the stock) is highlighted, the game marked.
    # The highlight and the message last a few seconds only: the page notes them as they come.
    await _record_suggestions(page)
    await record_texts(page, "#message")
    await hint.click()
    (pos,) = await _suggested(page)  # one element highlighted: a card's position, or None
    await expect(page.locator("#hint-note")).to_be_visible()
    await expect(page.locator("#hint-note")).to_contain_text("Hinted game")
    await shown(page, "#message", "Hint:", contains=True)
    before = await game_state(page)

    # Playing the suggested move is accepted.
    if pos is not None:
        await page.click(f'#peaks .card[data-pos="{pos}"]')
    else:
        await page.click("#stock")
    await expect(page.locator("#stat-moves")).to_have_text("1")
    await _settled(page)
    after = await game_state(page)
    assert after["seq"] == before["seq"] + 1
    if pos is not None:
        assert after["tableau"][int(pos)] is None
        assert after["waste"] == before["tableau"][int(pos)]
    else:
        assert after["stock_count"] == before["stock_count"] - 1
    await expect(page.locator(".suggested")).to_have_count(0)

    # The H key asks again.
    await page.locator("#stat-moves").click()
    await _record_suggestions(page)
    await page.keyboard.press("h")
    assert len(await _suggested(page)) == 1

    # Give up: the end panel compares the score with the deal's par.
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(page.locator("#end-title")).to_have_text("You gave up this game")
    await expect(hint).to_be_hidden()
    score = after["score"]
    await expect(page.locator("#end-par")).to_have_text(
        re.compile(rf"^Par \d+ · your score {score} \(\d+%\)$")
    )
    # The same panel in Traditional Chinese.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#end-par")).to_contain_text("標準分")
    await expect(page.locator("#btn-hint")).to_contain_text("提示")

    await context.close()
    assert page_errors == []
