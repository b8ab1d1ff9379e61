"""The ladder in the browser (`/ladder/E`, `/ladder/C`; REST `/api/v1/ladder/{rules}`): 55
players rated under Classic and two under Easy (stored ratings), Ada among the Classic ones.
The ladder shows each rule set by its address and its tabs, page by page with Next and
Previous, Ada's row around her, the friends' view, each row as the REST ladder says it, a
failed read with Try again (never an empty ladder), in English and 繁體中文, on a desktop and a
390-px touch phone with no word broken across lines and nothing scrolling sideways; a visitor
not signed in sees it too."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from playwright.async_api import Browser, Locator, expect
from sqlalchemy import insert

from server.services.clock import FakeClock
from server.storage.models import PlayerRating
from server.web.keys import SERVICES
from tests.backends import PostgresBackend
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

CLASSIC = 55  # players rated under Classic besides Ada: with her, two pages of 50


async def _rate(server: TestServer, rows: list[dict[str, Any]]) -> None:
    async with server.app[SERVICES].db.begin() as conn:
        await conn.execute(insert(PlayerRating), rows)


def _row(player_id: int, rules: str, mu: float, races: int, at: dt.datetime) -> dict[str, Any]:
    return {
        "player_id": player_id,
        "rules": rules,
        "mu": mu,
        "sigma": 2.0,
        "races": races,
        "wins": races // 3,
        "rated_at": at,
    }


def _cells(entry: dict[str, Any], me: int | None) -> list[str]:
    """A ladder entry as the page's row shows it."""
    name = f"{entry['name']} (you)" if entry["player_id"] == me else entry["name"]
    rating = f"{entry['rating']}{'?' if entry['provisional'] else ''}"
    return [str(entry["rank"]), name, rating, str(entry["races"]), str(entry["wins"])]


async def _shows(rows: Locator, entries: list[dict[str, Any]], me: int | None) -> None:
    await expect(rows).to_have_count(len(entries))
    for n, entry in enumerate(entries):
        await expect(rows.nth(n).locator("td")).to_have_text(_cells(entry, me))


async def _json(client: TestClient[Any, Any], path: str) -> Any:
    resp = await client.get(path)
    assert resp.status == 200, (path, resp.status, await resp.text())
    return await resp.json()


async def test_the_ladder_by_rule_set_page_by_page_around_me_and_friends(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    client = await make_client(server)
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, viewport=DESKTOP)
    await register(page, "Ada")
    ada: int = await page.evaluate("() => window.tripeaks.store.player.id")

    names = [f"Racer {n:02d}" for n in range(1, CLASSIC + 1)]
    ids = await PostgresBackend(server.app[SERVICES].db).add_players(names)
    now = clock.now()
    # Classic: the racers from mu 40 down, every third one provisional (fewer than 10 races);
    # Ada between the 47th and the 48th. Easy: the first two only.
    rows = [
        _row(pid, "C", 40 - n * 0.25, 3 if n % 3 == 0 else 12, now) for n, pid in enumerate(ids)
    ]
    rows.append(_row(ada, "C", 40 - 46.5 * 0.25, 12, now))
    rows += [_row(pid, "E", 30 - n, 12, now) for n, pid in enumerate(ids[:2])]
    await _rate(server, rows)
    first = await _json(client, "/api/v1/ladder/C?limit=50")
    second = await _json(client, f"/api/v1/ladder/C?limit=50&cursor={first['next_cursor']}")
    window = await _json(client, f"/api/v1/ladder/C/around/{ada}?radius=3")
    assert [e["name"] for e in first["entries"]][:2] == ["Racer 01", "Racer 02"]
    assert len(first["entries"]) == 50 and len(second["entries"]) == 6
    assert "Ada" in [e["name"] for e in window["entries"]]

    # From the menu's link (the rule set chosen for a quick race), at its own address.
    await page.select_option("#quick-rules", "C")
    await page.click("#home-ladder")
    await expect(page).to_have_url(f"{base}/ladder/C")
    await expect(page.locator("#view-ladder")).to_be_visible()
    await expect(page.locator("#ladder-tab-C")).to_have_attribute("aria-pressed", "true")
    table = page.locator("#ladder-table tbody tr")
    await _shows(table, first["entries"], ada)
    await expect(page.locator("#ladder-table th")).to_have_text(
        ["Rank", "Player", "Rating", "Races", "Wins"]
    )
    await _shows(page.locator("#ladder-around-table tbody tr"), window["entries"], ada)
    await expect(page.locator("#ladder-around-table tr[aria-current=true] td.name")).to_have_text(
        "Ada (you)"
    )
    await expect(page.locator("#ladder-prev")).to_be_disabled()
    await expect(page.locator("#ladder-page")).to_have_text("Page 1")

    # Next and Previous follow the server's cursors.
    await page.click("#ladder-next")
    await _shows(table, second["entries"], ada)
    await expect(page.locator("#ladder-page")).to_have_text("Page 2")
    await expect(page.locator("#ladder-next")).to_be_disabled()
    await page.click("#ladder-prev")
    await _shows(table, first["entries"], ada)
    await expect(page.locator("#ladder-prev")).to_be_disabled()

    # Easy: two racers, Ada not on it; the tab changes the address, Back returns.
    easy = await _json(client, "/api/v1/ladder/E?limit=50")
    await page.click("#ladder-tab-E")
    await expect(page).to_have_url(f"{base}/ladder/E")
    await _shows(table, easy["entries"], ada)
    await expect(page.locator("#ladder-unrated")).to_have_text(
        "You are not on this ladder yet: finish a quick race under these rules."
    )
    await expect(page.locator(".ladder-pages")).to_be_hidden()
    await page.go_back()
    await expect(page).to_have_url(f"{base}/ladder/C")
    await _shows(table, first["entries"], ada)

    # The friends' view: Ada and whom she follows (Racer 02), at their places on the ladder.
    token = await page.evaluate("() => window.tripeaks.store.token")
    await page.evaluate(
        "([token, id]) => fetch(`/api/v1/players/me/following/${id}`, "
        "{method: 'PUT', headers: {Authorization: `Bearer ${token}`}})",
        [token, ids[1]],
    )
    await page.click("#ladder-friends")
    friends = page.locator("#ladder-friends-table tbody tr")
    await expect(friends.locator("td.name")).to_have_text(["Racer 02", "Ada (you)"])
    await expect(friends.locator("td:first-child")).to_have_text(["2", "48"])
    await expect(page.locator(".ladder-around")).to_be_hidden()
    await expect(page.locator(".ladder-pages")).to_be_hidden()
    await page.click("#ladder-everyone")
    await _shows(table, first["entries"], ada)

    # A failed read says so, shows no ladder, and Try again reads it.
    await fail_next(page, "**/api/v1/ladder/E?**")
    await page.click("#ladder-tab-E")
    await expect(page.locator("#ladder-failed")).to_contain_text("The ladder could not be read")
    await expect(page.locator("#ladder-table")).to_have_count(0)
    await expect(page.locator("#ladder-empty")).to_have_count(0)
    await page.click("#ladder-failed button.retry")
    await _shows(table, easy["entries"], ada)

    # A name opens the player's profile.
    await table.nth(0).locator("a.player-link").click()
    await expect(page).to_have_url(f"{base}/players/{ids[0]}")
    await expect(page.locator("#view-profile")).to_be_visible()

    # In Traditional Chinese, on a desktop and on a phone: no word broken, nothing sideways.
    await page.goto(f"{base}/ladder/C")
    await _shows(table, first["entries"], ada)
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#ladder-table th")).to_have_text(
        ["名次", "玩家", "積分", "場數", "勝場"]
    )
    await expect(page.locator("#ladder-tab-C")).to_have_text("經典")
    await fits_desktop_and_phone(page)
    await context.close()

    # A visitor not signed in, on a touch phone: the ladder, no "around me" nor friends.
    context, page = await open_page(
        browser, base, page_errors, "/ladder/C", viewport=PHONE, has_touch=True, is_mobile=True
    )
    await _shows(page.locator("#ladder-table tbody tr"), first["entries"], None)
    await expect(page.locator(".ladder-around")).to_be_hidden()
    await expect(page.locator(".ladder-scope")).to_be_hidden()
    await page.tap("#ladder-next")
    await _shows(page.locator("#ladder-table tbody tr"), second["entries"], None)
    await fits(page, "visitor")
    await context.close()
    assert page_errors == []
