"""The menu, the end of a daily, a day's board and a race under way, on a desktop and a touch
phone, as a player with a streak and a friend sees them: nothing sticks out sideways. Set
TRIPEAKS_SCREENSHOT_DIR to write the README's pictures there (each the desktop and the phone side
by side): home.png, end.png, board.png and race.png."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from server.config import Settings
from server.engine import GameCode, RuleSet
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import (
    DESKTOP,
    PHONE,
    finish_daily_over_ws,
    no_overflow,
    open_page,
    play_line,
    register,
    side_by_side,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, daily_code, find_winning_line
from tests.helpers import register as register_over_rest

DATE = dt.date(2026, 3, 14)  # the test clock's day


async def _shot(page: Page) -> bytes:
    await page.evaluate("() => document.activeElement && document.activeElement.blur()")
    await page.mouse.move(0, 0)
    await page.wait_for_function(
        "() => document.getAnimations().every(a => a.playState !== 'running')"
    )
    await no_overflow(page)
    shot: bytes = await page.screenshot(full_page=False, animations="disabled")
    return shot


async def test_the_menu_the_end_of_a_daily_and_a_board_on_a_desktop_and_a_phone(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    for name in ("Bob", "Chen", "Dana"):
        await finish_daily_over_ws(client, name, code)
    race_code = GameCode.parse("TP1-E-AAAAAAB")
    race_line = find_winning_line(race_code.deal(), race_code.rules)
    assert race_line is not None
    shots: dict[str, dict[str, bytes]] = {"home": {}, "end": {}, "board": {}, "race": {}}
    base = str(server.make_url("")).rstrip("/")
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        phone = name == "phone"
        context, page = await open_page(
            browser, base, page_errors, viewport=viewport, has_touch=phone, is_mobile=phone
        )
        await register(page, f"Ada {name}")
        me: Any = await page.evaluate("() => window.tripeaks.store.player")
        token = await page.evaluate("() => JSON.parse(localStorage.getItem('tripeaks.token'))")
        days = [DATE - dt.timedelta(days=d) for d in (1, 2, 3, 5, 6, 9, 10, 11, 12)]
        await PostgresBackend(server.app[SERVICES].db).add_games(
            [
                Seed(me["id"], 560 + 9 * i, 40, 95_000, clock.now(), daily_date=day)
                for i, day in enumerate(days)
            ]
        )
        mine = await (await client.get(f"/api/v1/players/{me['id']}")).json()
        assert mine["streak"]["current"] == 3
        board = await (await client.get(f"/api/v1/daily/{DATE}/leaderboard")).json()
        for entry in board["entries"][:2]:
            followed = await client.put(
                f"/api/v1/players/me/following/{entry['player_id']}",
                headers={"Authorization": f"Bearer {token}"},
            )
            assert followed.status == 200
        await page.reload()
        await expect(page.locator("#home-friends li")).to_have_count(2)
        await expect(page.locator("#daily-strip li")).to_have_count(28)
        shots["home"][name] = await _shot(page)

        await page.click("#btn-daily")
        await expect(page.locator("#board")).to_be_visible()
        clock.advance(seconds=97)  # the player's time on the deal
        await play_line(page, line)
        await expect(page.locator("#end-rank")).to_contain_text("You are #")
        await expect(page.locator("#end-streak")).to_have_text("Streak kept: 4 days in a row")
        await expect(page.locator("#end-countdown")).not_to_be_empty()
        if phone:
            await page.locator("#end-panel").scroll_into_view_if_needed()
        shots["end"][name] = await _shot(page)

        await page.click("#end-actions button.primary")
        await expect(page.locator("#lb-table tr.me")).to_have_count(1)
        shots["board"][name] = await _shot(page)

        # A race under way: Hana ahead by a card; on the phone the panel is one line.
        host_info = await register_over_rest(client, f"Hana {name}")
        host, _ = await WsPlayer.connect(client, host_info["token"])
        created = await host.request({"type": "race_create", "code": str(race_code)})
        invite = created["race"]["invite"]
        await page.goto(f"{base}/race/{invite}")
        await page.click("#invite-join")
        await expect(page.locator("#race-players li")).to_have_count(2)
        await host.request({"type": "race_start", "invite": invite})
        game = (await host.until("race_go", invite=invite))["game"]
        await expect(page.locator("#race-countdown")).to_contain_text("Go!")
        clock.advance(seconds=1)
        await host.play(game, race_line[:4])
        await play_line(page, race_line[:3])
        await expect(page.locator("#race-countdown")).to_be_hidden()
        if phone:
            await expect(page.locator("#race-fold")).to_have_text(
                f"You're #2 of 2 · Hana {name} leads▾"
            )
        else:
            await expect(page.locator("#race-players li.me")).to_contain_text("25 cards left")
        shots["race"][name] = await _shot(page)
        await host.close()
        await context.close()

    target = os.environ.get("TRIPEAKS_SCREENSHOT_DIR")
    if target:
        for view, pair in shots.items():
            # The race's folded panel is at the foot of the phone's screen.
            at = "bottom" if view == "race" else "top"
            await side_by_side(browser, pair, Path(target) / f"{view}.png", phone_from=at)
    assert page_errors == []
