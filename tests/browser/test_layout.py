"""The table's layout on a phone and a desktop: real overlapping peaks, legible cards, no
horizontal scrolling, readable contrast. Saves screenshots (set TRIPEAKS_SCREENSHOT_DIR to also
write the README's pictures there: table.png, the desktop and phone views side by side, and
table-phone.png, the phone view alone, as a touch phone shows it)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, FloatRect, Page, expect

from server.engine import COVERED_BY, GameCode
from tests.browser.support import DESKTOP, PHONE, open_page, play_line, register, side_by_side
from tests.conftest import ServerFactory
from tests.helpers import find_winning_line

CODE = GameCode.parse("TP1-E-AAAAAAA")
MIDGAME = 9  # actions of a winning line played before the screenshot


async def _boxes(page: Page) -> dict[int, FloatRect]:
    boxes: dict[int, FloatRect] = {}
    for pos in range(28):
        box = await page.locator(f'#peaks .card[data-pos="{pos}"]').bounding_box()
        assert box is not None, pos
        boxes[pos] = box
    return boxes


def _luminance(rgb: list[float]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: list[float], b: list[float]) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


async def _colours(page: Page, selector: str) -> dict[str, Any]:
    colours: dict[str, Any] = await page.eval_on_selector(
        selector,
        """el => {
            const rgb = s => s.match(/[0-9.]+/g).map(Number);
            const card = el.closest('.card');
            return {fg: rgb(getComputedStyle(el).color),
                    bg: rgb(getComputedStyle(card).backgroundColor),
                    size: parseFloat(getComputedStyle(el).fontSize)};
        }""",
    )
    return colours


async def test_the_table_fits_a_phone_and_a_desktop(
    browser: Browser, make_server: ServerFactory, page_errors: list[str], tmp_path: Path
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    line = find_winning_line(CODE.deal(), CODE.rules)
    assert line is not None
    shots: dict[str, bytes] = {}
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        phone = name == "phone"  # a touch phone
        context, page = await open_page(
            browser, base, page_errors, viewport=viewport, has_touch=phone, is_mobile=phone
        )
        await register(page, f"Player {name}")
        await page.fill("#free-code", str(CODE))
        await page.click("#btn-play-code")
        await expect(page.locator("#board")).to_be_visible()

        # The peaks: every card centred over the two that cover it, each covering half of it.
        boxes = await _boxes(page)
        width = boxes[18]["width"]
        for pos, covers in enumerate(COVERED_BY):
            if not covers:
                continue
            me, left, right = boxes[pos], boxes[covers[0]], boxes[covers[1]]
            centre = me["x"] + me["width"] / 2
            assert abs(centre - (left["x"] + right["x"] + width) / 2) < 1.5, (name, pos)
            assert abs(left["y"] - (me["y"] + me["height"] / 2)) < 1.5, (name, pos)
            assert left["x"] < centre < right["x"] + right["width"]
        row = [boxes[p] for p in range(18, 28)]
        assert all(b["x"] + b["width"] <= a["x"] + 1 for b, a in itertools.pairwise(row))
        # Nothing sticks out sideways; cards stay big enough to read and to tap.
        overflow = await page.evaluate(
            "() => document.documentElement.scrollWidth - window.innerWidth"
        )
        assert overflow <= 0, (name, overflow)
        assert row[0]["x"] >= 0 and row[-1]["x"] + row[-1]["width"] <= viewport["width"]
        assert width >= (34 if name == "phone" else 70), (name, width)
        red = await _colours(page, '#peaks .card[data-pos="20"] .rank')  # 9H
        black = await _colours(page, '#peaks .card[data-pos="18"] .rank')  # 4S
        for colours in (red, black):
            assert _contrast(colours["fg"], colours["bg"]) >= 4.5, (name, colours)
            assert colours["size"] >= 13, (name, colours)

        await play_line(page, line[:MIDGAME])
        await page.evaluate("() => document.activeElement.blur()")
        await page.mouse.move(0, 0)
        # A move still running is shown finished.
        shot = await page.screenshot(full_page=False, animations="disabled")
        (tmp_path / f"table-{name}.png").write_bytes(shot)
        shots[name] = shot
        await context.close()

    target = os.environ.get("TRIPEAKS_SCREENSHOT_DIR")
    if target:
        await side_by_side(browser, shots, Path(target) / "table.png")
        (Path(target) / "table-phone.png").write_bytes(shots["phone"])
    assert page_errors == []
