"""The menu at a glance — today's daily as it stands for me, my streak, a strip of my last
weeks, par said in one line, the code syntax only where a code is typed, the players I follow
(online or not) and their results today — and the Following page, Follow on a profile, and a
profile's calendar newest first on a phone."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, ViewportSize, expect

from server.config import Settings
from server.engine import RuleSet
from server.engine.solver import solve
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.backends import PostgresBackend, Seed
from tests.browser.support import (
    DESKTOP,
    PHONE,
    finish_daily_over_ws,
    no_overflow,
    open_page,
    register,
    wrapped_words,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, daily_code
from tests.helpers import register as register_over_rest

DATE = dt.date(2026, 3, 14)  # the test clock's day


@pytest.mark.parametrize(
    ("viewport", "locale"), [(DESKTOP, "en-US"), (PHONE, "zh-TW")], ids=["desktop", "phone"]
)
async def test_the_menu_shows_today_the_streak_the_strip_and_friends(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
    viewport: ViewportSize,
    locale: str,
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    # Bob stays online, having finished today's daily; Cy finished it too, and has gone.
    bob = await register_over_rest(client, "Bob")
    bob_ws, _ = await WsPlayer.connect(client, bob["token"])
    game = (await bob_ws.request({"type": "join_daily"}))["game"]
    bob_final = await bob_ws.play(game, list(solve(code.deal(), code.rules).line))
    await finish_daily_over_ws(client, "Cy", code)
    bob_rank = (
        await (
            await client.get(f"/api/v1/daily/{DATE}/leaderboard/around/{bob['id']}?radius=0")
        ).json()
    )["entries"][0]["rank"]

    phone = viewport == PHONE
    touch: dict[str, Any] = {"has_touch": True, "is_mobile": True} if phone else {}
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser, base, page_errors, viewport=viewport, locale=locale, **touch
    )
    await register(page, "Ada")
    me: Any = await page.evaluate("() => window.tripeaks.store.player")
    token = await page.evaluate("() => JSON.parse(localStorage.getItem('tripeaks.token'))")
    await PostgresBackend(server.app[SERVICES].db).add_games(
        [
            Seed(me["id"], 600, 40, 90_000, clock.now() - dt.timedelta(days=d), daily_date=day)
            for d, day in ((2, dt.date(2026, 3, 12)), (1, dt.date(2026, 3, 13)))
        ]
    )
    follow = await client.put(
        f"/api/v1/players/me/following/{bob['id']}", headers={"Authorization": f"Bearer {token}"}
    )
    assert follow.status == 200
    await page.reload()

    texts = {
        "en-US": {
            "state": "You have not played today's daily yet.",
            "streak": "Streak: 2 days",
            "par": "Par: the best score perfect play reaches on today's deal.",
            "friend": f"Bob: #{bob_rank} · {bob_final['score']}",
            "following": "Following",
            "follow": "Follow",
            "unfollow": "Unfollow",
        },
        "zh-TW": {
            "state": "你今天還沒玩每日挑戰。",
            "streak": "連續：2 天",
            "par": "標準分：完美玩法在今天的牌局能拿到的最高分。",
            "friend": f"Bob：第 {bob_rank} 名 · {bob_final['score']}",
            "following": "追蹤中",
            "follow": "追蹤",
            "unfollow": "取消追蹤",
        },
    }[locale]
    await expect(page.locator("#daily-state")).to_have_text(texts["state"])
    await expect(page.locator("#daily-streak")).to_have_text(texts["streak"])
    await expect(page.locator("#daily-par-explain")).to_have_text(texts["par"])
    strip = page.locator("#daily-strip li")
    await expect(strip).to_have_count(28)
    await expect(strip.last).to_have_attribute("data-date", str(DATE))
    await expect(page.locator('#daily-strip li[data-date="2026-03-13"]')).to_have_class("day won")
    await expect(page.locator('#daily-strip li[data-date="2026-03-11"]')).to_have_class("day none")
    # The code syntax shows where a code is typed, not before.
    await expect(page.locator("#free-code-help")).to_be_hidden()
    await page.focus("#free-code")
    await expect(page.locator("#free-code-help")).to_be_visible()
    # The players I follow, online, and their results today.
    friend = page.locator(f'#home-friends li[data-player="{bob["id"]}"]')
    await expect(friend).to_contain_text(texts["friend"])
    await expect(friend).to_have_class("online")
    await no_overflow(page)

    # The Following page: Bob online, his result; once he has gone, offline.
    await bob_ws.close()
    await page.click("#home-following")
    await expect(page).to_have_url(f"{base}/following")
    await expect(page.locator("#following-title")).to_have_text(texts["following"])
    row = page.locator(f'#following-table tr[data-player="{bob["id"]}"]')
    await expect(row).to_have_class("offline")
    await expect(row.locator("td.today")).to_have_text(
        f"#{bob_rank} · {bob_final['score']}"
        if locale == "en-US"
        else f"第 {bob_rank} 名 · {bob_final['score']}"
    )
    assert await wrapped_words(page) == []
    await no_overflow(page)

    # Follow Cy from her profile; she is on the Following page then, and Unfollow there.
    await page.goto(f"{base}/daily/{DATE}")
    await page.locator("#lb-table a.player-link", has_text="Cy").click()
    follow_button = page.locator("#profile-follow")
    await expect(follow_button).to_have_text(texts["follow"])
    await follow_button.click()
    await expect(follow_button).to_have_text(texts["unfollow"])
    if phone:
        # The calendar on a phone: the newest month on top.
        newest = await page.locator('.profile-month[data-month="2026-03"]').bounding_box()
        oldest = await page.locator('.profile-month[data-month="2026-01"]').bounding_box()
        assert newest is not None and oldest is not None
        assert newest["y"] < oldest["y"]
    await page.go_back()
    await page.goto(f"{base}/following")
    await expect(page.locator("#following-table tbody tr")).to_have_count(2)
    await page.locator(f'#following-table tr[data-player="{bob["id"]}"] .follow-btn').click()
    await expect(page.locator("#following-table tbody tr")).to_have_count(1)
    await expect(page.locator("#following-table tbody tr")).to_contain_text("Cy")
    await context.close()
    assert page_errors == []
