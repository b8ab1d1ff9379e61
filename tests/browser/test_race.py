"""A race between two browsers: create, share the link, join, countdown, live progress, results."""

from __future__ import annotations

import re

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, expect

from server.engine import Action, GameCode
from server.services.clock import FakeClock
from tests.browser.support import (
    PHONE,
    game_state,
    open_page,
    play_action,
    play_line,
    reconnect,
    register,
)
from tests.conftest import ServerFactory
from tests.helpers import find_winning_line

CODE = GameCode.parse("TP1-E-AAAAAAB")


async def test_two_browsers_race_from_invite_to_results(
    browser: Browser, make_server: ServerFactory, clock: FakeClock, page_errors: list[str]
) -> None:
    server: TestServer = await make_server(race_countdown_s=2.5, race_sweep_s=0.05)
    base = str(server.make_url("")).rstrip("/")
    win = find_winning_line(CODE.deal(), CODE.rules)
    assert win is not None

    # The host creates a race of a known deal.
    host_ctx, host = await open_page(browser, base, page_errors)
    await register(host, "Hana")
    await host.click(".race-create summary")
    await host.fill("#race-code", str(CODE))
    await host.click("#btn-race-create")
    invite_el = host.locator("#race-invite-code")
    await expect(invite_el).to_have_text(re.compile(r"^[0-9A-Z]{6}$"))
    invite = await invite_el.inner_text()
    await expect(host).to_have_url(f"{base}/race/{invite}")
    await expect(host.locator("#race-link")).to_have_value(f"{base}/race/{invite}")
    await expect(host.locator("#race-players li")).to_have_count(1)

    # A friend opens the link on a phone, registers, and lands in the room.
    guest_ctx, guest = await open_page(
        browser, base, page_errors, f"/race/{invite}", viewport=PHONE
    )
    await expect(guest.locator("#register-invite")).to_contain_text(f"join race {invite}")
    await register(guest, "Gus")
    await expect(guest.locator("#race-invite-code")).to_have_text(invite)
    await expect(guest.locator("#race-wait")).to_be_visible()
    await expect(guest.locator("#race-start")).to_have_count(0)
    await expect(host.locator("#race-players li")).to_have_count(2)
    await expect(host.locator("#race-players")).to_contain_text("Gus")

    # The host starts: a countdown on server time, then the same deal for both.
    await host.click("#race-start")
    await expect(guest.locator("#race-countdown")).to_contain_text("The race starts in")
    for page in (host, guest):
        await expect(page.locator("#board")).to_be_visible()
        await expect(page.locator("#stat-score")).to_have_text("500")
    host_game, guest_game = await game_state(host), await game_state(guest)
    assert host_game["mode"] == guest_game["mode"] == "race"
    assert host_game["tableau"] == guest_game["tableau"]
    assert host_game["tableau"][18:] == [str(c) for c in CODE.deal().tableau[18:]]
    # Never highlight in a race, even with "show playable" on.
    await guest.click("#nav-settings")
    await guest.check("#set-show-playable")
    await guest.click("#settings-close")
    assert await guest.locator("#peaks .card.hint").count() == 0
    clock.advance(seconds=3)  # the server's (fake) clock reaches starts_at
    # The guest's connection drops: the page reconnects and follows the race again.
    await reconnect(guest)

    # The guest makes a few moves; the host sees the guest's progress bar move.
    await play_action(guest, Action.draw())
    await play_action(guest, Action.draw())
    guest_row = host.locator("#race-players li", has_text="Gus")
    await expect(guest_row).to_contain_text("score 498")
    # The guest's own row follows the guest's own moves at once, not one move behind.
    await expect(guest.locator("#race-players li.me")).to_contain_text("28 cards left · score 498")
    await expect(guest.locator("#btn-hint")).to_be_hidden()  # no hints in a race

    # The host wins; the guest sees it live, then gives up.
    await play_line(host, win)
    await expect(host.locator("#end-title")).to_have_text("You cleared the peaks!")
    await expect(host.locator("#end-note")).to_have_text("Waiting for the other players…")
    host_row = guest.locator("#race-players li", has_text="Hana")
    await expect(host_row).to_contain_text("0 cards left")
    await expect(host_row).to_contain_text("cleared")
    await expect(host_row.locator("progress")).to_have_attribute("value", "28")
    await guest.click("#btn-resign")
    await guest.click("#resign-yes")

    # Results for both, with the deal's code revealed.
    for page in (host, guest):
        results = page.locator("#race-results tbody tr")
        await expect(results).to_have_count(2)
        await expect(results.nth(0)).to_contain_text("Hana")
        await expect(results.nth(0)).to_contain_text("cleared")
        await expect(results.nth(1)).to_contain_text("Gus")
        await expect(results.nth(1)).to_contain_text("gave up")
        await expect(page.locator("#race-panel")).to_contain_text(str(CODE))

    await host_ctx.close()
    await guest_ctx.close()
    assert page_errors == []
