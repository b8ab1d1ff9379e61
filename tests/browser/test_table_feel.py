"""How the table feels: cards move between STATEs (and never under reduced motion), a cleared
peak and a won game are shown and said, the end panel can be put aside and brought back and
explains par, the settings leave the table in view, and a phone gets the biggest cards its
width allows, tap targets of 44 px and no keyboard help."""

from __future__ import annotations

import re
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, ViewportSize, expect

from server.engine import GameCode
from tests.browser.support import (
    PHONE,
    open_page,
    play_line,
    record_texts,
    register,
    shown,
)
from tests.conftest import ServerFactory
from tests.helpers import find_winning_line

# TP1-E-AAAAAAA: waste 4H, bottom row 4S 7S 9H TS 9D TD 5H TH 6D QS; stock KH 7C 9C … 2S.
CODE = "TP1-E-AAAAAAA"
SCREEN: ViewportSize = {"width": 1280, "height": 800}

_RECORD_MOVES = """() => {
    // From now on, note every move a card starts (views/motion.js animates it with
    // Element.animate) with the animations then running on it, and every moment shown (the
    // class a cleared peak's glow or the won table gets) with the animations it started.
    window.__moves = [];
    window.__moments = [];
    const name = el => el.id || `pos ${el.dataset.pos}`;
    const animate = Element.prototype.animate;
    Element.prototype.animate = function (...args) {
        const animation = animate.apply(this, args);
        window.__moves.push({el: name(this), running: this.getAnimations()
            .filter(a => a.playState === "running").length});
        return animation;
    };
    new MutationObserver(records => {
        // A record's new class is the next record's old one (for the same element), or the
        // element's class now.
        records.forEach((r, i) => {
            const next = records.slice(i + 1).find(n => n.target === r.target);
            const now = (next ? next.oldValue : r.target.className) || "";
            for (const cls of ["shown", "won-moment"]) {
                const was = (r.oldValue || "").split(" ").includes(cls);
                if (now.split(" ").includes(cls) && !was) {
                    window.__moments.push({cls, animations: r.target.getAnimations({subtree: true})
                        .length});
                }
            }
        });
    }).observe(document.documentElement, {subtree: true, attributes: true,
                                          attributeFilter: ["class"], attributeOldValue: true});
}"""


async def _start(page: Page, name: str) -> None:
    await register(page, name)
    await page.fill("#free-code", CODE)
    await page.click("#btn-play-code")
    await expect(page.locator("#board")).to_be_visible()


async def _moves_seen(page: Page, count: int) -> list[dict[str, Any]]:
    """The moves noted since _RECORD_MOVES, once there are ``count`` of them."""
    await page.wait_for_function(f"() => window.__moves.length >= {count}", polling=50)
    moves: list[dict[str, Any]] = await page.evaluate("() => window.__moves")
    return moves


async def test_removal_draw_and_undo_move_the_cards(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, reduced_motion="no-preference")
    await _start(page, "Mo")
    await page.evaluate(_RECORD_MOVES)

    # A removal: the waste card flies in from the removed card's place.
    await page.click('#peaks .card[data-pos="24"]')  # 5H onto 4H
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "5H")
    assert (await _moves_seen(page, 1))[0] == {"el": "waste-card", "running": 1}
    # A draw: the waste card turns over on its way from the stock.
    await page.click("#stock")
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "KH")
    assert (await _moves_seen(page, 2))[1] == {"el": "waste-card", "running": 1}
    # Undo the draw: the stock's card comes back from the waste; undo the removal: 5H goes
    # back to its place in the peaks.
    await page.click("#btn-undo")
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "5H")
    moves = await _moves_seen(page, 3)
    assert moves[2] == {"el": "stock-card", "running": 1}, moves
    await page.click("#btn-undo")
    await expect(page.locator('#peaks .card[data-pos="24"]')).to_be_visible()
    assert (await _moves_seen(page, 4))[3] == {"el": "pos 24", "running": 1}

    # Nothing waits for a move to end: two draws clicked at once are both sent and applied,
    # and the table shows the server's STATE whatever moves are still running.
    await page.evaluate(
        "() => { const s = document.querySelector('#stock'); s.click(); s.click(); }"
    )
    await expect(page.locator("#stat-moves")).to_have_text("4")
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "7C")
    await expect(page.locator("#stock-count")).to_have_text("21")
    await context.close()
    assert page_errors == []


async def test_reduced_motion_runs_no_animation(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, reduced_motion="reduce")
    await _start(page, "Ru")
    await page.evaluate(_RECORD_MOVES)
    await page.evaluate(
        """() => { window.__animations = 0;
                   document.addEventListener("animationstart", () => window.__animations++);
                   document.addEventListener("transitionrun", () => window.__animations++); }"""
    )
    none_running = "() => document.getAnimations().length === 0"
    await page.click('#peaks .card[data-pos="24"]')  # a removal that turns 9D's neighbour up
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "5H")
    assert await page.evaluate(none_running)
    await page.click("#stock")
    await expect(page.locator("#waste-card")).to_have_attribute("data-card", "KH")
    assert await page.evaluate(none_running)
    await page.click("#btn-undo")
    await page.click("#btn-undo")
    await expect(page.locator("#stat-moves")).to_have_text("2")
    await expect(page.locator('#peaks .card[data-pos="24"]')).to_be_visible()
    assert await page.evaluate(none_running)
    await page.hover('#peaks .card[data-pos="18"]')
    assert await page.evaluate("() => [window.__moves.length, window.__animations]") == [0, 0]
    duration = await page.eval_on_selector(
        '#peaks .card[data-pos="18"]', "el => getComputedStyle(el).transitionDuration"
    )
    assert duration == "0s"

    # The moments are shown still: each cleared peak and the won table, the end panel too.
    code = GameCode.parse(CODE)
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    await record_texts(page, "#table-moment")
    await play_line(page, line)  # from the deal: the two undos brought the table back to it
    await expect(page.locator("#end-panel")).to_be_visible()
    await shown(page, "#table-moment", "Every peak is cleared: you won!", contains=True)
    moments = await page.evaluate("() => window.__moments")
    assert [m["cls"] for m in moments] == ["shown", "shown", "shown", "won-moment"], moments
    assert all(m["animations"] == 0 for m in moments), moments
    assert await page.evaluate(none_running)
    assert await page.evaluate("() => [window.__moves.length, window.__animations]") == [0, 0]
    await context.close()
    assert page_errors == []


async def test_a_won_game_shows_its_moments_and_the_end_panel_steps_aside(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    code = GameCode.parse(CODE)
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    context, page = await open_page(browser, base, page_errors, viewport=SCREEN)
    await _start(page, "Win")
    # The clock is the server's count of the game's time, and says so.
    clock = page.locator("#stats .stat-time")
    await expect(clock.locator("dt")).to_have_text("Game time")
    await expect(clock).to_have_attribute(
        "title",
        re.compile(r"^The game's time as the server counts it: from the deal .* included\.$"),
    )

    await page.evaluate(_RECORD_MOVES)
    await record_texts(page, "#table-moment")
    await play_line(page, line)

    # Each cleared peak glowed (animated) with its bonus and was said; then the won table.
    moments = await page.evaluate("() => window.__moments")
    assert [m["cls"] for m in moments] == ["shown", "shown", "shown", "won-moment"], moments
    assert all(m["animations"] > 0 for m in moments), moments
    await shown(page, "#table-moment", "Peak cleared: 100 bonus points.")
    await shown(page, "#table-moment", "Every peak is cleared: you won!", contains=True)

    # The end panel explains par; Escape puts it aside to show the final table, a button
    # brings it back, and its × puts it aside again.
    panel = page.locator("#end-panel")
    await expect(panel).to_be_visible()
    await expect(page.locator("#end-title")).to_have_text("You cleared the peaks!")
    # …and a screen reader hears how the game ended (the waste card is not said over it).
    await expect(page.locator("#announce")).to_contain_text("You cleared the peaks!")
    explain = page.locator("#end-par-explain")
    await expect(explain).to_contain_text(
        "Par is the best final score perfect play reaches on this deal"
    )
    await page.keyboard.press("Escape")
    await expect(panel).to_be_hidden()
    again = page.locator("#btn-show-end")
    await expect(again).to_be_focused()
    for selector in ("#waste-card", "#stock", "#peaks"):
        await expect(page.locator(selector)).to_be_in_viewport(ratio=1)
    await again.click()
    await expect(panel).to_be_visible()
    await expect(again).to_be_hidden()
    await page.click("#end-close")
    await expect(panel).to_be_hidden()
    await expect(again).to_be_visible()
    await again.click()

    # In Traditional Chinese too.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(explain).to_contain_text("標準分是完美玩法在這副牌能達到的最高最終分數")
    await expect(page.locator("#end-close")).to_have_attribute(
        "aria-label", "關閉結果以查看牌桌（Esc）"
    )
    await expect(clock.locator("dt")).to_have_text("遊戲時間")
    await context.close()
    assert page_errors == []


_WATCH_GLOWS = """() => {
    // From now on, at every frame while a cleared peak's glow shows, note how far its label
    // sticks out of the peaks on either side and how far the page is wider than the screen
    // (px; 0 or less: inside).
    window.__glows = [];
    const frame = () => {
        const peaks = document.querySelector('#peaks').getBoundingClientRect();
        for (const label of document.querySelectorAll('.peak-glow.shown .peak-glow-label')) {
            const box = label.getBoundingClientRect();
            window.__glows.push({text: label.textContent, left: peaks.left - box.left,
                                 right: box.right - peaks.right,
                                 page: document.documentElement.scrollWidth - window.innerWidth});
        }
        requestAnimationFrame(frame);
    };
    requestAnimationFrame(frame);
}"""


async def test_on_a_phone_a_cleared_peaks_bonus_stays_on_the_table(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    """Each peak's glow is as wide as the peak; its label (the bonus) fits inside the peaks
    on a phone, in both languages, and never makes the page wider than the screen."""
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    code = GameCode.parse(CODE)
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    for lang, label in (("en", "Peak cleared · +100"), ("zh-Hant", "清空山峰 · +100")):
        context, page = await open_page(
            browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True
        )
        await page.select_option("#lang-select", lang)
        await _start(page, f"Glow {lang}")
        await page.evaluate(_WATCH_GLOWS)
        await play_line(page, line)
        await expect(page.locator("#end-panel")).to_be_visible()
        # Until the last glow has gone out.
        await page.wait_for_function(
            "() => !document.querySelector('.peak-glow.shown')", polling=50
        )
        glows: list[dict[str, Any]] = await page.evaluate("() => window.__glows")
        assert {g["text"] for g in glows} == {label}, glows
        outside = [g for g in glows if max(g["left"], g["right"], g["page"]) > 0]
        assert outside == [], outside[:5]
        await context.close()
    assert page_errors == []


async def test_settings_open_over_the_page_and_keep_the_table_in_view(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, viewport=SCREEN)
    await _start(page, "Sam")
    await page.click("#nav-settings")
    await expect(page.locator("#settings")).to_be_visible()
    outside = await page.evaluate(
        """() => [...document.querySelectorAll('#peaks .card, #stock, #waste-card')]
            .filter(el => {
                const r = el.getBoundingClientRect();
                return r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth;
            }).map(el => el.id || el.dataset.pos)"""
    )
    assert outside == []
    assert await page.evaluate("() => window.scrollY") == 0
    await page.keyboard.press("Escape")
    await expect(page.locator("#settings")).to_be_hidden()
    await expect(page.locator("#nav-settings")).to_be_focused()
    await context.close()
    assert page_errors == []


async def test_a_phone_gets_big_cards_big_buttons_and_no_keyboard_help(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True
    )
    await _start(page, "Pip")
    await expect(page.locator(".keys")).to_be_hidden()

    # Ten cards across the bottom row fill the width, with a hairline between them (a card
    # at least a tenth of the width less 3 px) and at least 44 px tall.
    width = await page.evaluate("() => window.innerWidth")
    minimum = width / 10 - 3
    for pos in (18, 27):
        box = await page.locator(f'#peaks .card[data-pos="{pos}"]').bounding_box()
        assert box is not None
        assert box["width"] >= minimum and box["height"] >= 44, (pos, box, minimum)

    async def small_buttons() -> list[Any]:
        # Measured at rest: a panel coming in is scaled while it does.
        await page.wait_for_function(
            "() => document.getAnimations().every(a => a.playState !== 'running')"
        )
        small: list[Any] = await page.evaluate(
            """() => [...document.querySelectorAll('button:not(.card)')]
                .filter(b => b.checkVisibility())
                .map(b => [b.id || b.textContent.trim(), b.getBoundingClientRect()])
                .filter(([, r]) => r.width < 44 || r.height < 44)
                .map(([name, r]) => [name, r.width, r.height])"""
        )
        return small

    assert await small_buttons() == []
    await page.tap("#btn-resign")
    await expect(page.locator("#resign-confirm")).to_be_visible()
    assert await small_buttons() == []
    await page.tap("#resign-yes")
    await expect(page.locator("#end-panel")).to_be_visible()
    await expect(page.locator("#end-copy-code")).to_be_visible()
    assert await small_buttons() == []
    await page.tap("#end-close")
    await expect(page.locator("#btn-show-end")).to_be_visible()
    assert await small_buttons() == []

    # A desktop browser of the same size still shows the keys.
    desktop, other = await open_page(browser, base, page_errors, viewport=PHONE)
    await _start(other, "Kip")
    await expect(other.locator(".keys")).to_be_visible()
    await desktop.close()
    await context.close()
    assert page_errors == []
