"""Quick races in the page (docs/protocol.md §11.11): the menu's Quick race with its rule set,
the waiting view (elapsed wait, the player's rating and the gap accepted now, Cancel), leaving
the view cancels, and two players in two browsers (a desktop in English, a touch phone in
Traditional Chinese) are matched into one race and race it to its results."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect
from sqlalchemy import select

from server.services.clock import FakeClock
from server.storage.models import QueuedPlayer
from server.web.keys import SERVICES
from tests.browser.support import (
    DESKTOP,
    PHONE,
    fits,
    no_overflow,
    open_page,
    reconnect,
    register,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, eventually, race_code
from tests.helpers import register as register_rest

SETTINGS = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}


async def _queued(server: TestServer) -> dict[int, str]:
    """The players waiting in the queue, id → rule set."""
    async with server.app[SERVICES].db.connect() as conn:
        rows = await conn.execute(select(QueuedPlayer.player_id, QueuedPlayer.rules))
        return {player_id: str(rules) for player_id, rules in rows}


async def _player_id(page: Page) -> int:
    player_id: int = await page.evaluate("() => window.tripeaks.store.player.id")
    return player_id


async def _ask(page: Page, rules: str) -> None:
    await page.select_option("#quick-rules", rules)
    await page.click("#btn-quick")


async def test_two_players_ask_for_a_quick_race_wait_meet_and_race_to_results(
    browser: Browser, make_server: ServerFactory, clock: FakeClock, page_errors: list[str]
) -> None:
    server: TestServer = await make_server(**SETTINGS)
    base = str(server.make_url("")).rstrip("/")
    quinn_ctx, quinn = await open_page(browser, base, page_errors, viewport=DESKTOP)
    await register(quinn, "Quinn")
    quinn_id = await _player_id(quinn)

    # Quinn asks for a quick Classic race: the waiting view says what is waited for, how long,
    # and the gap accepted now.
    await _ask(quinn, "C")
    await expect(quinn.locator("#view-queue")).to_be_visible()
    await expect(quinn.locator("#queue-rules")).to_have_text("Classic rules · rated race")
    await expect(quinn.locator("#queue-gap")).to_have_text(
        "Your rating 0 · players within 100 points of it can join"
    )
    await expect(quinn.locator("#queue-elapsed")).to_have_text(re.compile(r"^Waiting 0:\d\d$"))
    await eventually(lambda: _in_queue(server, {quinn_id: "C"}), "Quinn to wait under C")

    # Cancel: back to the menu, out of the queue.
    await quinn.click("#queue-cancel")
    await expect(quinn.locator("#view-home")).to_be_visible()
    await eventually(lambda: _in_queue(server, {}), "Quinn to leave the queue on Cancel")

    # Leaving the waiting view another way (the top bar's home) cancels too.
    await _ask(quinn, "C")
    await eventually(lambda: _in_queue(server, {quinn_id: "C"}), "Quinn to wait again")
    await quinn.click("#nav-home")
    await expect(quinn.locator("#view-home")).to_be_visible()
    await eventually(lambda: _in_queue(server, {}), "Quinn to leave the queue with the view")

    # Waiting on: the gap shown widens with the wait (the page asks again every few seconds).
    await _ask(quinn, "C")
    await eventually(lambda: _in_queue(server, {quinn_id: "C"}), "Quinn to wait a third time")
    # His connection drops: the server forgets the wait with the socket, the page asks again.
    await reconnect(quinn)
    await expect(quinn.locator("#view-queue")).to_be_visible()
    await eventually(lambda: _in_queue(server, {quinn_id: "C"}), "Quinn to wait once reconnected")
    clock.advance(seconds=4)
    await expect(quinn.locator("#queue-gap")).to_have_text(
        "Your rating 0 · players within 200 points of it can join"
    )

    # Pia, on a phone in Traditional Chinese, first asks under the other rule set (nobody
    # there: she waits, and the view fits the phone), cancels, then asks under Classic.
    pia_ctx, pia = await open_page(
        browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True
    )
    await register(pia, "Pia")
    pia_id = await _player_id(pia)
    await pia.select_option("#lang-select", "zh-Hant")
    await expect(pia.locator("#btn-quick")).to_have_text("快速競速賽")
    await no_overflow(pia)
    await _ask(pia, "E")
    await expect(pia.locator("#queue-title")).to_have_text("正在等待快速競速賽")
    await expect(pia.locator("#queue-rules")).to_have_text("簡單規則 · 積分賽")
    await expect(pia.locator("#queue-gap")).to_have_text(
        "你的積分 0 · 相差 100 分以內的玩家可以加入"
    )
    await expect(pia.locator("#queue-elapsed")).to_have_text(re.compile(r"^已等待 0:\d\d$"))
    await fits(pia, "the waiting view in Chinese")
    await eventually(lambda: _in_queue(server, {quinn_id: "C", pia_id: "E"}), "Pia to wait under E")
    await pia.tap("#queue-cancel")
    await expect(pia.locator("#view-home")).to_be_visible()
    await eventually(lambda: _in_queue(server, {quinn_id: "C"}), "Pia to leave the queue")

    # Quinn has waited past the time a race of two starts: Pia's ask meets him.
    clock.advance(seconds=7)
    await _ask(pia, "C")
    for page in (quinn, pia):
        await expect(page.locator("#view-play")).to_be_visible()
        await expect(page).to_have_url(re.compile(re.escape(base) + r"/race/[0-9A-Z]{6}$"))
    assert quinn.url == pia.url  # one race
    await eventually(lambda: _in_queue(server, {}), "the matched players to leave the queue")
    await expect(quinn.locator("#race-players li")).to_have_count(2)

    # The countdown ends; both play the same sealed deal, give up, and see the results.
    clock.advance(seconds=1)
    for page in (quinn, pia):
        await expect(page.locator("#board")).to_be_visible()
    quinn_game = await quinn.evaluate("() => window.tripeaks.store.game")
    pia_game = await pia.evaluate("() => window.tripeaks.store.game")
    assert quinn_game["mode"] == pia_game["mode"] == "race"
    assert quinn_game["rules"] == "C" and quinn_game["tableau"] == pia_game["tableau"]
    await quinn.click("#btn-resign")
    await quinn.click("#resign-yes")
    await pia.tap("#btn-resign")
    await pia.tap("#resign-yes")
    for page in (quinn, pia):
        results = page.locator("#race-results tbody tr")
        await expect(results).to_have_count(2)
        names = await page.locator("#race-results td.name").all_inner_texts()
        assert sorted(names) == ["Pia", "Quinn"]
    await expect(quinn.locator("#race-results")).to_contain_text("gave up")
    await expect(pia.locator("#race-results")).to_contain_text("放棄")
    await no_overflow(pia)

    await quinn_ctx.close()
    await pia_ctx.close()
    assert page_errors == []


async def _in_queue(server: TestServer, expected: dict[int, str]) -> bool:
    return await _queued(server) == expected


def _signed(change: int, provisional: bool) -> str:
    """A rating change as the page writes it (views/rating.js)."""
    sign = f"+{change}" if change > 0 else f"\u2212{-change}" if change < 0 else "\u00b10"
    return sign + ("?" if provisional else "")


async def test_a_quick_race_s_results_show_each_racer_s_rating_change(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    """A quick race is rated: its results say so and show each racer's rating change (here
    both new players, so provisional "?"), the same changes the player's ratings list."""
    server: TestServer = await make_server(**SETTINGS)
    client = await make_client(server)
    wren_info = await register_rest(client, "Wren")
    wren, _ = await WsPlayer.connect(client, wren_info["token"])
    assert (await wren.request({"type": "queue_join", "rules": "E"}))["type"] == "queue_waiting"
    clock.advance(seconds=11)  # long enough a wait for a race of two

    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, viewport=PHONE, has_touch=True)
    await register(page, "Rory")
    rory_id = await _player_id(page)
    await _ask(page, "E")
    invite = (await wren.until("queue_matched"))["invite"]
    await expect(page).to_have_url(f"{base}/race/{invite}")
    clock.advance(seconds=1)
    joined = await wren.request({"type": "race_join", "invite": invite})
    game = joined["game"]
    assert game is not None, joined
    await expect(page.locator("#board")).to_be_visible()

    # Wren removes a card (drawing until she can) and gives up; Rory gives up at once, having
    # removed nothing: second.
    await wren.remove_a_card(await race_code(server, invite), game)
    await wren.request({"type": "resign", "game_id": game["game_id"]})
    await page.tap("#btn-resign")
    await page.tap("#resign-yes")
    results = page.locator("#race-results tbody tr")
    await expect(results).to_have_count(2)
    await expect(results.locator("td.name")).to_have_text(["Wren", "Rory"])
    resp = await client.get(f"/api/v1/players/{rory_id}/ratings")
    ratings = {r["rules"]: r for r in (await resp.json())["ratings"]}
    mine = ratings["E"]["history"][0]
    assert mine["rank"] == 2
    await expect(page.locator("#race-rated")).to_be_visible()
    changes = page.locator("#race-results .rating-change")
    await expect(changes).to_have_count(2)

    shown = _signed(mine["change"], ratings["E"]["provisional"])
    await expect(results.nth(1).locator(".rating-change [aria-hidden]")).to_have_text(shown)
    await expect(results.nth(1).locator(".rating-change")).to_have_attribute(
        "title", f"Rating {mine['before']} → {mine['after']} (provisional)"
    )
    await expect(results.nth(0).locator(".rating-change [aria-hidden]")).to_have_text(
        re.compile(r"^[+\u2212\u00b1]\d+\?$")
    )
    await no_overflow(page)

    await wren.close()
    await context.close()
    assert page_errors == []
