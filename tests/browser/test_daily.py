"""A player's whole day in the browser: register, play the daily (rejected moves, an undo it
does not take), finish it, and find themselves on the leaderboard."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.config import Settings
from server.engine import RuleSet
from server.services.clock import FakeClock
from tests.browser.support import (
    game_state,
    identify_daily,
    open_page,
    play_action,
    play_line,
    record_texts,
    register,
    shown,
    tableau,
    waste,
)
from tests.conftest import ServerFactory
from tests.helpers import blocking_line, find_winning_line


async def test_register_play_the_daily_and_see_the_leaderboard(
    browser: Browser,
    make_server: ServerFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)

    # Registration keeps the token in local storage.
    await register(page, "Ada")
    token = await page.evaluate("() => JSON.parse(localStorage.getItem('tripeaks.token'))")
    assert isinstance(token, str) and len(token) > 20
    await expect(page.locator("#daily-info")).to_contain_text("2026-03-14")
    # While the day is open the tile shows the deal's par and its level (a Saturday's).
    await expect(page.locator("#daily-info")).to_contain_text(
        re.compile(r"· Par \d+ · Difficulty: Expert$")
    )

    # "Show playable" is on, but a daily game never highlights playable cards.
    await page.click("#nav-settings")
    await page.check("#set-show-playable")
    await page.click("#settings-close")

    await expect(page.locator("#btn-daily")).to_have_text("Play today's daily")
    await page.click("#btn-daily")
    await expect(page.locator("#board")).to_be_visible()
    await expect(page.locator("#play-title")).to_contain_text("2026-03-14")
    await expect(page.locator("#stat-score")).to_have_text("500")
    await expect(page.locator("#stock")).to_have_attribute(
        "aria-label", "Stock: 23 cards. Draw a card"
    )
    cells = await tableau(page)
    assert cells[:18] == ["down"] * 18 and None not in cells
    assert await page.locator("#peaks .card.hint").count() == 0

    code = await identify_daily(page, settings.daily_secret or "", clock.now().date(), RuleSet.EASY)
    deal = code.deal()
    label = await page.get_attribute('#peaks .card[data-pos="18"]', "aria-label")
    assert label and label.split(" of ")[1] in {"clubs", "diamonds", "hearts", "spades"}

    # A rejected move: a covered card, with its message from docs/rules.md §2 (error help is on by
    # default).
    await record_texts(page, "#message")  # a message shows for a few seconds only
    await page.click('#peaks .card[data-pos="0"]')
    await shown(page, "#message", "This card is blocked.")
    # A face-up card that does not neighbour the waste card.
    top = await waste(page)
    wrong = next(p for p in range(18, 28) if not _neighbours(str(deal.tableau[p]), top))
    await record_texts(page, "#message")
    await page.click(f'#peaks .card[data-pos="{wrong}"]')
    await shown(page, "#message", "Must be one rank higher or lower")
    assert (await game_state(page))["moves"] == 0  # rejections are not moves

    # Finish: win when the deal allows it, otherwise play into a block. A ranked game has no
    # Undo button, and U after the first move says why it does nothing (docs/rules.md §4
    # "Ranked play"); the move stands.
    line = find_winning_line(deal, code.rules) or blocking_line(deal, code.rules)
    assert line is not None
    await expect(page.locator("#btn-undo")).to_be_hidden()
    await play_action(page, line[0])
    await record_texts(page, "#message")
    await page.keyboard.press("u")
    await shown(page, "#message", "Ranked games have no undo: what you have seen cannot be unseen.")
    await expect(page.locator("#stat-score")).to_have_text("499")
    state = await game_state(page)
    assert (state["moves"], state["undos"], state["seq"]) == (1, 0, 1)
    await expect(page.locator("#btn-undo")).to_be_hidden()
    await play_line(page, line[1:])
    final = await game_state(page)
    assert final["status"] in ("won", "blocked")
    assert await page.locator("#peaks .card.hint").count() == 0
    panel = page.locator("#end-panel")
    await expect(panel).to_be_visible()
    if final["status"] == "won":
        await expect(page.locator("#end-title")).to_have_text("You cleared the peaks!")
    else:
        await expect(page.locator("#end-title")).to_have_text("Blocked: no more moves.")
    await expect(page.locator("#end-note")).to_contain_text("2026-03-14")
    await expect(page.locator("#end-par")).to_have_text(
        re.compile(rf"^Par \d+ · your score {final['score']} \(\d+%\)$")
    )
    await expect(page.locator("#btn-hint")).to_be_hidden()  # no hints in a daily

    # The leaderboard: my row, highlighted, and the window around me.
    await page.get_by_role("button", name="See the leaderboard").click()
    await expect(page.locator("#view-leaderboard")).to_be_visible()
    row = page.locator("#lb-table tr.me")
    await expect(row).to_have_count(1)
    await expect(page.locator("#lb-info")).to_contain_text("1 player · 1 ranked")  # singular
    await expect(row).to_contain_text("Ada")
    await expect(row.locator("td").nth(0)).to_have_text("1")
    await expect(row.locator("td").nth(2)).to_have_text(str(final["score"]))
    await expect(page.locator("#lb-around-table tr.me")).to_contain_text("Ada")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-14")

    # Yesterday had no daily; today's date is still one click away.
    await page.click("#lb-prev")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-13")
    await expect(page.locator("#lb-info")).to_have_text("There was no daily challenge on this day.")
    await page.click("#lb-today")
    await expect(page.locator("#lb-table tr.me")).to_have_count(1)
    await expect(page.locator("#lb-table tr.me a.player-link")).to_have_text("Ada (you)")

    # Back at the menu, today's daily is done: its button offers the result, not a game.
    await page.click("#nav-home")
    await expect(page.locator("#btn-daily")).to_have_text("See your daily result")
    await page.click("#btn-daily")
    await expect(page.locator("#end-panel")).to_be_visible()
    await page.click("#nav-leaderboard")

    # The next day the code of 2026-03-14 is published, and the page offers to replay it.
    clock.advance(days=1)
    await page.click("#lb-today")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-15")
    await page.click("#lb-prev")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-14")
    await expect(page.locator("#lb-code")).to_contain_text(str(code))
    await expect(page.locator("#lb-code-shown")).to_have_text(str(code))
    await expect(page.locator("#lb-copy-code")).to_have_text("Copy")
    await page.click("#lb-replay")
    await expect(page.locator("#play-title")).to_contain_text(str(code))
    assert (await tableau(page))[18:] == [str(c) for c in deal.tableau[18:]]

    await context.close()
    assert page_errors == []


async def test_the_days_level_shows_before_play_and_the_baselines_once_the_date_is_over(
    browser: Browser,
    make_server: ServerFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Lev")
    # 2026-03-14 is a Saturday: an expert day, said before anyone plays.
    level = page.locator("#daily-level")
    await expect(level).to_have_text("Difficulty: Expert")
    await expect(level).to_have_attribute("data-level", "expert")
    await page.click("#nav-leaderboard")
    await expect(page.locator("#lb-level")).to_have_text("Difficulty: Expert")
    await expect(page.locator("#lb-par")).to_have_text(re.compile(r"^Par \d+$"))  # no baselines

    # Once the date is over its board shows the baselines beside par.
    clock.advance(days=2)  # Monday 2026-03-16: an easy day
    await page.click("#nav-home")
    await expect(level).to_have_text("Difficulty: Easy")
    past = await (await context.request.get(f"{base}/api/v1/daily/2026-03-14")).json()
    greedy, random = past["baselines"]["greedy"], past["baselines"]["random"]
    said = "won with" if greedy["status"] == "won" else "blocked at"
    percent = round(random["win_rate"] * 100)
    await page.click("#nav-leaderboard")
    await page.fill("#lb-date", "2026-03-14")
    await page.dispatch_event("#lb-date", "change")
    await expect(page.locator("#lb-level")).to_have_text("Difficulty: Expert")
    await expect(page.locator("#lb-par")).to_have_text(
        f"Par {past['par']} · Greedy play: {said} {greedy['score']} · "
        f"Random play: {percent}% won, median {random['median_score']}"
    )

    # In Traditional Chinese.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#lb-level")).to_have_text("難度：專家")
    said = "以 {} 分獲勝" if greedy["status"] == "won" else "{} 分時陷入僵局"
    await expect(page.locator("#lb-par")).to_contain_text(
        f"貪婪走法：{said.format(greedy['score'])} · 隨機走法：勝率 {percent}%，"
        f"中位數 {random['median_score']} 分"
    )
    await page.click("#nav-home")
    await expect(level).to_have_text("難度：輕鬆")
    await context.close()
    assert page_errors == []


def _neighbours(a: str, b: str) -> bool:
    ranks = "A23456789TJQK"
    d = abs(ranks.index(a[0]) - ranks.index(b[0]))
    return d in (1, 12)
