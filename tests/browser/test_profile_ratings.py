"""A profile's ratings per rule set (REST `/api/v1/players/{id}/ratings`): after three rated
quick races under Classic (played over websockets by Rita, the page's player, and Sam), her
profile shows her rating with "?" while provisional, the rated races played and won, a chart of
her rating over them (an SVG line, newest at the right, with an accessible title) and the last
races with their change; a player never rated says so; a failed read offers to try again; in
English and 繁體中文, on a desktop and a 390-px touch phone."""

from __future__ import annotations

import re
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from playwright.async_api import Browser, expect

from server.services.clock import FakeClock
from tests.browser.support import (
    DESKTOP,
    PHONE,
    fail_next,
    fits,
    fits_desktop_and_phone,
    open_page,
    register,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, race_code
from tests.helpers import register as register_rest

SETTINGS = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}


async def _rated_race(
    server: TestServer, clock: FakeClock, winner: WsPlayer, loser: WsPlayer, rules: str
) -> None:
    """A quick race of two under ``rules``: the winner removes a card (drawing until they
    can) and gives up, the loser gives up at once."""
    for ws in (winner, loser):
        assert (await ws.request({"type": "queue_join", "rules": rules}))["type"] == "queue_waiting"
    clock.advance(seconds=11)  # long enough a wait for a race of two
    invite = (await winner.until("queue_matched"))["invite"]
    assert (await loser.until("queue_matched"))["invite"] == invite
    clock.advance(seconds=1)  # past the countdown
    games = {}
    for ws in (winner, loser):
        joined = await ws.request({"type": "race_join", "invite": invite})
        assert joined["game"] is not None, joined
        games[ws] = joined["game"]
    await winner.remove_a_card(await race_code(server, invite), games[winner])
    await loser.request({"type": "resign", "game_id": games[loser]["game_id"]})
    await winner.request({"type": "resign", "game_id": games[winner]["game_id"]})
    while (await winner.until("race_results"))["race"]["invite"] != invite:
        pass  # an earlier race's
    await loser.request({"type": "race_leave", "invite": invite})
    await winner.request({"type": "race_leave", "invite": invite})


def _signed(change: int) -> str:
    return f"+{change}" if change > 0 else f"\u2212{-change}" if change < 0 else "\u00b10"


async def _ratings(client: TestClient[Any, Any], player_id: int) -> dict[str, Any]:
    resp = await client.get(f"/api/v1/players/{player_id}/ratings")
    assert resp.status == 200
    return {r["rules"]: r for r in (await resp.json())["ratings"]}


async def test_a_profile_shows_the_ratings_per_rule_set_with_a_chart_and_the_last_races(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server(**SETTINGS)
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, viewport=DESKTOP)
    await register(page, "Rita")
    me: Any = await page.evaluate("() => window.tripeaks.store")
    rita_id, token = me["player"]["id"], me["token"]
    rita, _ = await WsPlayer.connect(client, token)
    sam_info = await register_rest(client, "Sam")
    sam, _ = await WsPlayer.connect(client, sam_info["token"])

    # Before any rated race: no ratings.
    await page.click("#menu-profile")
    await expect(page.locator("#profile-unrated")).to_have_text("No rated races yet.")

    # Rita wins twice and loses once under Classic.
    await _rated_race(server, clock, rita, sam, "C")
    await _rated_race(server, clock, sam, rita, "C")
    await _rated_race(server, clock, rita, sam, "C")
    rated = (await _ratings(client, rita_id))["C"]
    assert (rated["races"], rated["wins"], len(rated["history"])) == (3, 2, 3)

    await page.reload()
    section = page.locator("#profile-rating-C")
    await expect(section.locator("h3")).to_have_text("Classic rules")
    await expect(page.locator("#profile-rating-C-value dd")).to_have_text(
        f"{rated['rating']}?"  # provisional: fewer than 10 rated races
    )
    await expect(page.locator("#profile-rating-C-races dd")).to_have_text("3")
    await expect(page.locator("#profile-rating-C-wins dd")).to_have_text("2")
    await expect(page.locator("#profile-rating-E")).to_have_count(0)

    # The chart: the rating before the first race, then after each, the newest at the right.
    history = rated["history"]  # the latest first
    oldest_first = [history[-1]["before"]] + [r["after"] for r in reversed(history)]
    title = page.locator("#profile-rating-C-chart title")
    await expect(title).to_have_text(
        f"Rating over the last 3 rated races: from {oldest_first[0]} to {oldest_first[-1]} "
        f"(lowest {min(oldest_first)}, highest {max(oldest_first)})"
    )
    await expect(page.locator("#profile-rating-C-chart")).to_have_attribute("role", "img")
    points = await page.get_attribute("#profile-rating-C-chart polyline", "points")
    assert points is not None
    xy = [tuple(float(v) for v in p.split(",")) for p in points.split()]
    assert len(xy) == 4 and [x for x, _ in xy] == sorted(x for x, _ in xy)
    # Higher ratings are drawn higher (a smaller y).
    for i in range(len(xy) - 1):
        (_, y1), (_, y2), r1, r2 = xy[i], xy[i + 1], oldest_first[i], oldest_first[i + 1]
        assert (y2 < y1) == (r2 > r1) or r1 == r2, (xy, oldest_first)

    # The last rated races, the latest first, each with its place and change.
    rows = page.locator("#profile-rating-C-races-table tbody tr")
    await expect(rows).to_have_count(3)
    for n, race in enumerate(history):
        await expect(rows.nth(n).locator("td").nth(1)).to_have_text(f"{race['rank']} of 2")
        await expect(rows.nth(n).locator(".rating-change [aria-hidden]")).to_have_text(
            _signed(race["change"])
        )
        await expect(rows.nth(n).locator(".rating-change")).to_have_attribute(
            "title", f"Rating {race['before']} → {race['after']}"
        )
    await expect(rows.locator("td:first-child")).to_have_text([r["rated_at"][:10] for r in history])
    # Each links to its race's room (its results), by the race's invite.
    for n, race in enumerate(history):
        await expect(rows.nth(n).locator("td:first-child a")).to_have_attribute(
            "href", f"/race/{race['invite']}"
        )

    # The ladder's link.
    await page.click("#profile-rating-C-ladder")
    await expect(page).to_have_url(f"{base}/ladder/C")
    await page.go_back()
    await expect(rows).to_have_count(3)

    # In Traditional Chinese, on the desktop and on a phone.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#profile-ratings-title")).to_have_text("積分")
    await expect(section.locator("h3")).to_have_text("經典規則")
    await expect(rows.nth(0).locator("td").nth(1)).to_have_text(re.compile(r"^2 人中第 [12]$"))
    await expect(title).to_contain_text("最近 3 場積分賽的積分")
    await fits_desktop_and_phone(page)
    await context.close()

    # Sam's profile, on a touch phone, signed out; its ratings fail to read once.
    context, page = await open_page(
        browser, base, page_errors, viewport=PHONE, has_touch=True, is_mobile=True
    )
    await fail_next(page, "**/ratings")
    await page.goto(f"{base}/players/{sam_info['id']}")
    await expect(page.locator("#profile-ratings-failed")).to_contain_text(
        "The ratings could not be read"
    )
    await expect(page.locator("#profile-unrated")).to_have_count(0)
    await page.tap("#profile-ratings-failed button.retry")
    sams = (await _ratings(client, sam_info["id"]))["C"]
    await expect(page.locator("#profile-rating-C-value dd")).to_have_text(f"{sams['rating']}?")
    await expect(page.locator("#profile-rating-C-wins dd")).to_have_text("1")
    await fits(page, "signed-out phone")
    await context.close()
    for ws in (rita, sam):
        await ws.close()
    assert page_errors == []
