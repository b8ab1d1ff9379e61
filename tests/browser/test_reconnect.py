"""The page's reconnection: its waits are jittered (pages cut off together do not come back
together) and a hello answered ``server_busy`` waits at least the retry time it was given; a
page turned away while the server sheds comes back by itself once it does not; a page whose
game has not moved on while it was away is not sent it again. Real Chromium, real server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext, Page, expect

from server.web.admission import Admission
from tests.browser.support import game_state, open_page, reconnect, register
from tests.conftest import ServerFactory

CODE = "TP1-E-AAAAAAA"

#: reconnectDelay of the page's connection.js, for given draws of its random number.
_DELAYS = """async () => {
  const { reconnectDelay } = await import("/static/js/connection.js");
  const at = (v) => () => v;
  const draws = Array.from({ length: 200 }, () => reconnectDelay(0));
  return {
    first: [reconnectDelay(0, null, at(0)), reconnectDelay(0, null, at(1))],
    later: [reconnectDelay(3, null, at(0)), reconnectDelay(30, null, at(1))],
    busy: [reconnectDelay(0, 2000, at(0)), reconnectDelay(0, 2000, at(1))],
    busyLate: reconnectDelay(5, 2000, at(0)),
    draws,
  };
}"""


async def _opened(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> tuple[BrowserContext, Page]:
    """A fresh page on a new server."""
    server = await make_server()
    return await open_page(browser, str(server.make_url("")).rstrip("/"), page_errors)


async def test_the_reconnection_waits_are_jittered_and_honour_the_retry_time(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    context, page = await _opened(browser, make_server, page_errors)
    try:
        got: dict[str, Any] = await page.evaluate(_DELAYS)
    finally:
        await context.close()
    assert got["first"] == [250, 125]  # a step, jittered down by up to half of it
    assert got["later"] == [2000, 4000]  # the steps grow to 8 s, jittered
    assert got["busy"] == [2000, 3000]  # never before the retry time, jittered up
    assert got["busyLate"] == 8000  # a later step longer than the retry time wins
    draws = got["draws"]
    assert all(125 <= d <= 250 for d in draws)
    assert len(set(draws)) > 150  # spread, not one moment for every page


async def test_a_page_turned_away_while_the_server_sheds_comes_back_by_itself(
    browser: Browser,
    make_server: ServerFactory,
    page_errors: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    context, page = await _opened(browser, make_server, page_errors)
    try:
        await register(page, "Stormy")
        await page.wait_for_function("() => window.tripeaks.connection.welcomes >= 1")
        turned_away: list[int] = []
        real_turn = Admission.turn

        def shedding_turn(self: Admission, greeting: bool = False) -> Any:
            turned_away.append(1)
            if len(turned_away) <= 2:  # the first two hellos are turned away
                return real_turn(
                    Admission(limit=1, wait_s=0.001, queue=0, greeting_queue=0), greeting
                )
            return real_turn(self, greeting)

        monkeypatch.setattr(Admission, "turn", shedding_turn)
        await page.evaluate("() => window.tripeaks.connection.drop()")
        await expect(page.locator("#conn-banner")).to_be_visible()
        await page.wait_for_function("() => window.tripeaks.connection.welcomes >= 2")
        await expect(page.locator("#conn-banner")).to_be_hidden()
        assert len(turned_away) == 3
    finally:
        await context.close()


async def test_a_page_reconnecting_with_its_game_unchanged_is_not_sent_it_again_and_plays_on(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    context, page = await _opened(browser, make_server, page_errors)
    sent: list[dict[str, Any]] = []
    received: list[dict[str, Any]] = []

    def watch_socket(ws: Any) -> None:
        ws.on("framesent", lambda payload: sent.append(json.loads(payload)))
        ws.on("framereceived", lambda payload: received.append(json.loads(payload)))

    page.on("websocket", watch_socket)
    try:
        await register(page, "Held")
        await page.fill("#free-code", CODE)
        await page.press("#free-code", "Enter")
        await expect(page.locator("#board")).to_be_visible()
        await page.click("#stock")  # a draw: the page holds the STATE at seq 1
        await expect(page.locator("#stat-moves")).to_have_text("1")
        game = await game_state(page)
        sent.clear()
        received.clear()
        await reconnect(page)
        hello = next(m for m in sent if m["type"] == "hello")
        assert hello["games"] == [{"game_id": game["game_id"], "seq": 1}]
        welcome = next(m for m in received if m["type"] == "welcome")
        assert welcome["unchanged"] == [game["game_id"]] and welcome["games"] == []
        await page.click("#stock")  # plays on from the STATE it kept
        await expect(page.locator("#stat-moves")).to_have_text("2")
        assert (await game_state(page))["seq"] == 2
        assert not [m for m in sent if m["type"] == "resume"]  # nothing asked again
        # The menu still lists the game to continue.
        listed = await page.evaluate("() => window.tripeaks.store.welcomeGames")
        assert [g["game_id"] for g in listed] == [game["game_id"]]
    finally:
        await context.close()
