"""Helpers for driving the page like a player: register, read the table, play lines."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from playwright.async_api import Browser, BrowserContext, Page, Route, ViewportSize, expect
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from server.engine import Action, GameCode, RuleSet
from server.engine.solver import solve
from server.errors import ErrorCode
from server.services.daily import MAX_CANDIDATES, derive_daily_code
from tests.browser.conftest import WAIT_MS, watch
from tests.helpers import WsPlayer, blocking_line, find_winning_line
from tests.helpers import register as register_over_rest

PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 860}


async def open_page(
    browser: Browser,
    base_url: str,
    errors: list[str],
    path: str = "/",
    *,
    viewport: ViewportSize | None = None,
    locale: str = "en-US",
    ranked_note_read: bool = True,
    **context_options: Any,
) -> tuple[BrowserContext, Page]:
    """A fresh browser profile (its own local storage) on the app; ``context_options`` go to
    Playwright's ``new_context`` (``reduced_motion="reduce"``, ``has_touch=True``, …).

    ``ranked_note_read``: the profile has already read the one-time note that ranked games have
    no undo (so a daily or race starts at one click); ``False`` for a profile that never saw it.
    """
    context = await browser.new_context(
        viewport=viewport or DESKTOP, locale=locale, **context_options
    )
    if ranked_note_read:
        await context.add_init_script(
            "try { localStorage.setItem('tripeaks.rankedNoteSeen', 'true'); } catch (e) {}"
        )
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    watch(page, errors, base_url)
    await page.goto(base_url + path)
    return context, page


async def finish_daily_over_ws(client: TestClient[Any, Any], name: str, code: GameCode) -> int:
    """A new player ``name`` finishes today's daily (``code``) by the solver's line over a
    websocket of their own; the game's id."""
    player = await register_over_rest(client, name)
    ws, _ = await WsPlayer.connect(client, player["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    final = await ws.play(game, list(solve(code.deal(), code.rules).line))
    assert final["status"] in ("won", "blocked")
    await ws.close()
    game_id: int = game["game_id"]
    return game_id


async def register(page: Page, name: str, *, keep_recovery_code: bool = False) -> None:
    """Register from the welcome form; the menu (or the race behind a link) opens, under the
    panel showing the recovery code, which is closed ("I have saved it") unless
    ``keep_recovery_code``."""
    await expect(page.locator("#view-register")).to_be_visible()
    await page.fill("#register-name", name)
    await page.click("#register-submit")
    await expect(page.locator("#view-register")).to_be_hidden()
    await expect(page.locator("#who")).to_contain_text(name)
    await expect(page.locator("#recovery")).to_be_visible()
    if not keep_recovery_code:
        await page.click("#recovery-done")
        await expect(page.locator("#recovery")).to_be_hidden()


async def tableau(page: Page) -> list[str | None]:
    """The 28 positions as the page shows them: a card, "down", or None when removed."""
    cells: list[str | None] = await page.eval_on_selector_all(
        "#peaks .card",
        """buttons => buttons.map(b => b.hidden ? null
            : b.dataset.state === "down" ? "down" : b.dataset.card)""",
    )
    return cells


async def waste(page: Page) -> str:
    card = await page.get_attribute("#waste-card", "data-card")
    assert card is not None
    return card


async def identify_daily(page: Page, secret: str, date: dt.date, rules: RuleSet) -> GameCode:
    """The daily's code, found by matching the visible bottom row and waste card against the
    date's candidate codes (whichever candidate the server chose)."""
    bottom = (await tableau(page))[18:]
    top = await waste(page)
    for candidate in range(MAX_CANDIDATES):
        code = derive_daily_code(secret.encode(), date, rules, candidate)
        deal = code.deal()
        if [str(c) for c in deal.tableau[18:]] == bottom and str(deal.waste) == top:
            return code
    raise AssertionError(f"the daily on the page matches no candidate of {date}")


async def moves(page: Page) -> int:
    return int(await page.inner_text("#stat-moves"))


async def play_action(page: Page, action: Action, *, keyboard: bool = False) -> None:
    """Play one action by click (or keyboard) and wait until the server accepted it."""
    before = await moves(page)
    if action.kind.value == "remove":
        card = page.locator(f'#peaks .card[data-pos="{action.pos}"]')
        if keyboard:
            await card.focus()
            await page.keyboard.press("Enter")
        else:
            await card.click()
    elif action.kind.value == "draw":
        if keyboard:
            await page.keyboard.press("d")
        else:
            await page.click("#stock")
    else:
        raise AssertionError("use undo() for undo")
    await expect(page.locator("#stat-moves")).to_have_text(str(before + 1))


async def play_line(page: Page, line: list[Action]) -> None:
    for i, action in enumerate(line):
        await play_action(page, action, keyboard=i % 3 == 1)


async def finish_the_daily(page: Page, secret: str, date: dt.date) -> Any:
    """From the home view, play the date's daily to its end (won when the deal allows it,
    else blocked) and return the final STATE."""
    await expect(page.locator("#daily-info")).to_contain_text(date.isoformat())
    await page.click("#btn-daily")
    await expect(page.locator("#play-title")).to_contain_text(date.isoformat())
    code = await identify_daily(page, secret, date, RuleSet.EASY)
    line = find_winning_line(code.deal(), code.rules) or blocking_line(code.deal(), code.rules)
    assert line is not None
    await play_line(page, line)
    await expect(page.locator("#end-panel")).to_be_visible()
    return await game_state(page)


async def at_free_game(
    browser: Browser, base_url: str, errors: list[str], name: str, code: str
) -> tuple[BrowserContext, Page]:
    """A fresh page on the app, registered as ``name``, at the free game of ``code``."""
    context, page = await open_page(browser, base_url, errors)
    await register(page, name)
    await page.fill("#free-code", code)
    await page.click("#btn-play-code")
    await expect(page.locator("#board")).to_be_visible()
    return context, page


async def reconnect(page: Page) -> None:
    """Drop the page's websocket and wait until it has reconnected by itself (and said hello)."""
    before = await page.evaluate("() => window.tripeaks.connection.welcomes")
    await page.evaluate("() => window.tripeaks.connection.drop()")
    await page.wait_for_function(f"() => window.tripeaks.connection.welcomes > {before}")
    await expect(page.locator("#conn-banner")).to_be_hidden()


_RECORD_TEXTS = """selector => {
    // From now on, note each text the element at `selector` shows while visible, the moment it
    // changes (a MutationObserver runs before any timer could take the text away again).
    const texts = (window.__shownTexts ??= {});
    const observers = (window.__shownObservers ??= {});
    observers[selector]?.disconnect();
    const seen = (texts[selector] = []);
    const note = () => {
        const el = document.querySelector(selector);
        if (!el || !el.checkVisibility()) return;
        const text = el.textContent.replace(/\\s+/g, " ").trim();
        if (seen[seen.length - 1] !== text) seen.push(text);
    };
    observers[selector] = new MutationObserver(note);
    observers[selector].observe(document.documentElement, {
        subtree: true, childList: true, characterData: true, attributes: true,
    });
}"""


async def record_texts(page: Page, selector: str) -> None:
    """Start noting every text the element at ``selector`` shows from now on (see
    :func:`shown`): a text the page shows only for a moment cannot be missed however slowly
    the test gets round to looking."""
    await page.evaluate(_RECORD_TEXTS, selector)


async def shown(page: Page, selector: str, text: str | None, *, contains: bool = False) -> None:
    """Wait until the element at ``selector`` has shown ``text`` (whitespace normalized; a
    part of its text when ``contains``; any non-empty text when None) since
    :func:`record_texts`, however briefly."""
    check = """([selector, text, contains]) => (window.__shownTexts[selector] ?? []).some(
        t => text === null ? t !== "" : contains ? t.includes(text) : t === text)"""
    try:
        await page.wait_for_function(check, arg=[selector, text, contains], polling=100)
    except PlaywrightTimeoutError:
        seen = await page.evaluate("s => window.__shownTexts[s]", selector)
        raise AssertionError(f"{selector} never showed {text!r}; it showed {seen!r}") from None


async def game_state(page: Page) -> Any:
    """The client's current STATE (read through the page's debug handle)."""
    return await page.evaluate("() => window.tripeaks.store.game")


async def no_overflow(page: Page) -> None:
    """Nothing sticks out sideways, and no shown game code breaks inside a group of letters."""
    report = await page.evaluate(
        """() => ({
            overflow: document.documentElement.scrollWidth - window.innerWidth,
            chunks: [...document.querySelectorAll('.game-code .code-chunk')]
                .filter(c => c.getClientRects().length)
                .map(c => ({lines: c.getClientRects().length,
                            right: c.getBoundingClientRect().right}))
        })"""
    )
    assert report["overflow"] <= 0, report
    width = await page.evaluate("() => window.innerWidth")
    assert all(c["lines"] == 1 and c["right"] <= width for c in report["chunks"]), report


_WRAPPED = """() => {
    // Each visible table cell, button and link-button whose text takes more lines than it has
    // words (a word: what spaces separate, so a Chinese word is its run of characters): the
    // lines are the distinct heights of its text's line boxes (its text nodes' client rects).
    const found = [];
    const els = [...document.querySelectorAll(
        'th, td, button, a.replay-link, a.player-link, summary')]
        .filter(el => el.checkVisibility() && !el.closest('.sr-only'));
    for (const el of els) {
        const text = el.innerText.replace(/\\s+/g, ' ').trim();
        if (!text) continue;
        const size = parseFloat(getComputedStyle(el).fontSize);
        const rects = [];
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (!node.textContent.trim() || node.parentElement.closest('.sr-only')) continue;
            const range = document.createRange();
            range.selectNodeContents(node);
            rects.push(...range.getClientRects());
        }
        const tops = rects.filter(r => r.width > 0 && r.height > 0)
            .map(r => r.bottom).sort((a, b) => a - b);
        let lines = 0, last = -Infinity;
        for (const top of tops) {
            if (top - last > size * 0.6) lines++;
            last = top;
        }
        const words = text.split(' ').length;
        if (lines > words) found.push({text, lines, words, id: el.id || el.className});
    }
    return found;
}"""


async def wrapped_words(page: Page) -> list[dict[str, Any]]:
    """The table cells, buttons and link-buttons shown whose text wraps onto more lines than
    it has words: a word broken across lines (e.g. 名/次 one character a line)."""
    found: list[dict[str, Any]] = await page.evaluate(_WRAPPED)
    return found


async def fits(page: Page, what: str) -> None:
    """The view fits the page's width: nothing scrolls sideways (:func:`no_overflow`) and no
    word is broken across lines (:func:`wrapped_words`); ``what`` names it in a failure."""
    await no_overflow(page)
    assert await wrapped_words(page) == [], what


async def fits_desktop_and_phone(page: Page) -> None:
    """The view :func:`fits` a desktop (:data:`DESKTOP`) and a 390-px phone (:data:`PHONE`),
    as in Traditional Chinese, whose words are runs of characters; the page is left at the
    desktop's size."""
    for what, size in (("desktop", DESKTOP), ("phone", PHONE)):
        await page.set_viewport_size(size)
        await fits(page, what)
    await page.set_viewport_size(DESKTOP)


async def unavailable(route: Route) -> None:
    """The server's answer when its database is away (docs/protocol.md §12.9): 503
    ``unavailable``."""
    body = {"error": {"code": ErrorCode.UNAVAILABLE.value, "message": "the database is away"}}
    await route.fulfill(
        status=503,
        content_type="application/json",
        headers={"Cache-Control": "no-store"},
        body=json.dumps(body),
    )


async def fail_next(page: Page, pattern: str | re.Pattern[str]) -> list[str]:
    """Answer the next request of ``page`` matching ``pattern`` (a glob or a regular
    expression, as Playwright's ``page.route`` takes) with :func:`unavailable`, and let the
    later ones through; the URLs so answered (filled as they are)."""
    failed: list[str] = []

    async def once(route: Route) -> None:
        failed.append(route.request.url)
        await unavailable(route)
        await page.unroute(pattern, once)

    await page.route(pattern, once)
    return failed


async def side_by_side(
    browser: Browser, shots: dict[str, bytes], path: Path, *, phone_from: str = "top"
) -> None:
    """One picture for the README: the desktop view and the phone view next to each other, each
    cut to 700 px from its top (the phone's from its ``phone_from``: "top" or "bottom")."""
    images = {k: base64.b64encode(v).decode() for k, v in shots.items()}
    context = await browser.new_context(viewport={"width": 1754, "height": 740})
    page = await context.new_page()
    top = "object-fit:cover;object-position:top;height:700px"
    phone = f"object-fit:cover;object-position:{phone_from};height:700px"
    await page.set_content(
        f"""<body style="margin:0;background:#0a2416;display:flex;gap:24px;padding:20px">
        <img src="data:image/png;base64,{images["desktop"]}" width="1280"
             style="{top};border-radius:8px">
        <img src="data:image/png;base64,{images["phone"]}" width="390"
             style="{phone};border-radius:18px;outline:3px solid #333"></body>"""
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(path))
    await context.close()


_COVERED = """selectors => {
    // Every card on the table (each card of the peaks still there, the stock, the waste) that a
    // shown panel's rectangle overlaps, and the panels' and cards' extent (px).
    const cards = [...document.querySelectorAll('#peaks .card, #stock, #waste-card')]
        .filter(el => el.checkVisibility());
    const panels = selectors.map(s => document.querySelector(s))
        .filter(el => el && el.checkVisibility());
    const overlaps = (a, b) =>
        a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const covered = [];
    for (const panel of panels) {
        const p = panel.getBoundingClientRect();
        for (const card of cards) {
            const c = card.getBoundingClientRect();
            if (overlaps(p, c)) covered.push([panel.id, card.id || card.dataset.pos]);
        }
    }
    const box = el => el.getBoundingClientRect().toJSON();
    return {cards: cards.length, covered, panels: panels.map(el => [el.id, box(el)]),
            peaks: box(document.querySelector('#peaks')), height: window.innerHeight};
}"""


async def covered_cards(page: Page, *panels: str) -> dict[str, Any]:
    """Which cards on the table (the peaks' cards still there, the stock, the waste) the shown
    ``panels`` (selectors) overlap: ``covered`` ([panel id, card id or position]…), with
    ``cards`` (how many are on the table), ``panels`` ([id, rectangle]… of those shown),
    ``peaks`` (the peaks' rectangle) and ``height`` (the viewport's), in px."""
    report: dict[str, Any] = await page.evaluate(_COVERED, list(panels))
    return report
