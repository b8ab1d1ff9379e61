"""A race between two browsers: create, share the link, see the room before joining, join,
countdown, live progress, results; whose deal it is (the host's, or a random sealed one); and
who is there (racers and watchers connected, reconnecting, gone)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from playwright.async_api import Browser, WebSocketRoute, expect

from server.engine import Action, GameCode
from server.services.clock import FakeClock
from tests.browser.support import (
    DESKTOP,
    PHONE,
    covered_cards,
    game_state,
    no_overflow,
    open_page,
    play_action,
    play_line,
    reconnect,
    record_texts,
    register,
    shown,
)
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, find_winning_line
from tests.helpers import register as register_rest

CODE = GameCode.parse("TP1-E-AAAAAAB")
HOST_DEAL = "Host's deal — the host chose this code and may know its cards."
HOST_DEAL_ZH = "主持人指定的牌局 — 主持人選了這個代碼，可能知道牌面。"
RANDOM_DEAL = (
    "Random sealed deal — nobody, not even the host, can know its cards before the race ends."
)
TP2 = re.compile(r"^TP2-E-[A-Z]{7}-[A-Z]{7}-[A-Z]{7}-[A-Z]{7}$")


async def test_two_browsers_race_from_invite_to_results(
    browser: Browser,
    make_server: ServerFactory,
    clock: FakeClock,
    page_errors: list[str],
    tmp_path: Path,
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
    # The host typed the code: the room says so.
    await expect(host.locator("#race-deal")).to_have_text(HOST_DEAL)
    await expect(host.locator(".deal-mark.random")).to_have_count(0)

    # A friend opens the link on a phone and registers: the room is shown before joining —
    # host, players, rules, time limit and the host's-deal marker.
    guest_ctx, guest = await open_page(
        browser, base, page_errors, f"/race/{invite}", viewport=PHONE
    )
    await expect(guest.locator("#register-invite")).to_contain_text(f"join race {invite}")
    await register(guest, "Gus")
    await expect(guest.locator("#view-invite")).to_be_visible()
    await expect(guest).to_have_url(f"{base}/race/{invite}")
    await expect(guest.locator("#invite-title")).to_have_text(f"Race {invite}")
    await expect(guest.locator("#invite-deal")).to_have_text(HOST_DEAL)
    await expect(guest.locator("#invite-host")).to_have_text("Host: Hana")
    await expect(guest.locator("#invite-rules")).to_have_text("Easy rules · time limit 5 min")
    await expect(guest.locator("#invite-players li")).to_have_count(1)
    await expect(guest.locator("#invite-watch")).to_be_visible()
    assert await host.locator("#race-players li").count() == 1  # not seated until asked
    await no_overflow(guest)
    await guest.screenshot(path=str(tmp_path / "invite-host-deal-phone.png"))
    # In Traditional Chinese too.
    await guest.select_option("#lang-select", "zh-Hant")
    await expect(guest.locator("#invite-deal")).to_have_text(HOST_DEAL_ZH)
    await guest.select_option("#lang-select", "en")
    await guest.click("#invite-join")
    await expect(guest.locator("#race-invite-code")).to_have_text(invite)
    await expect(guest.locator("#race-deal")).to_have_text(HOST_DEAL)
    await expect(guest.locator("#race-wait")).to_be_visible()
    await expect(guest.locator("#race-start")).to_have_count(0)
    await expect(host.locator("#race-players li")).to_have_count(2)
    await expect(host.locator("#race-players")).to_contain_text("Gus")

    # The host starts: a countdown on server time, then the same deal for both. (The countdown
    # lasts a moment of real time: the guest's page notes what it shows as it changes.)
    await record_texts(guest, "#race-countdown")
    await host.click("#race-start")
    await shown(guest, "#race-countdown", "The race starts in", contains=True)
    await expect(guest.locator("#race-deal")).to_have_text(HOST_DEAL)
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
        await expect(results.nth(1)).to_contain_text("0 removed")  # two draws, no removal
        await expect(page.locator("#race-panel")).to_contain_text(str(CODE))
        await expect(page.locator("#race-deal")).to_have_text(HOST_DEAL)
        await expect(page.locator("#race-code-shown")).to_have_text(str(CODE))
        await expect(page.locator("#race-copy-code")).to_be_visible()
        # A race on a host's deal is never rated: no rating changes.
        await expect(page.locator("#race-rated")).to_have_count(0)
        await expect(page.locator("#race-results .rating-change")).to_have_count(0)

    await host_ctx.close()
    await guest_ctx.close()
    assert page_errors == []


async def test_a_random_race_is_a_sealed_deal_and_its_code_reads_well_on_a_phone(
    browser: Browser,
    make_server: ServerFactory,
    clock: FakeClock,
    page_errors: list[str],
    tmp_path: Path,
) -> None:
    server: TestServer = await make_server(race_countdown_s=2.5, race_sweep_s=0.05)
    base = str(server.make_url("")).rstrip("/")

    # A race on a random deal: no host's-deal marker anywhere, a "random sealed deal" note.
    host_ctx, host = await open_page(browser, base, page_errors)
    await register(host, "Rae")
    await host.click(".race-create summary")
    await host.click("#btn-race-create")
    invite_el = host.locator("#race-invite-code")
    await expect(invite_el).to_have_text(re.compile(r"^[0-9A-Z]{6}$"))
    invite = await invite_el.inner_text()
    await expect(host.locator("#race-deal")).to_have_text(RANDOM_DEAL)
    await expect(host.locator(".deal-mark.host")).to_have_count(0)

    # A friend types the invite on the menu: the room is shown first, then they watch.
    viewer_ctx, viewer = await open_page(browser, base, page_errors, viewport=PHONE)
    await register(viewer, "Vic")
    await viewer.fill("#race-invite", invite.lower())
    await viewer.click("#btn-race-join")
    await expect(viewer.locator("#invite-host")).to_have_text("Host: Rae")
    await expect(viewer).to_have_url(f"{base}/race/{invite}")
    await expect(viewer.locator("#invite-deal")).to_have_text(RANDOM_DEAL)
    await expect(viewer.locator(".deal-mark.host")).to_have_count(0)
    await viewer.click("#invite-watch")
    await expect(viewer.locator("#race-wait")).to_be_visible()
    await expect(viewer.locator("#race-panel")).to_contain_text("You are watching this race.")
    await expect(viewer.locator("#race-deal")).to_have_text(RANDOM_DEAL)
    await expect(host.locator("#race-players li")).to_have_count(1)  # watching takes no seat

    # The host races alone and gives up; the results publish the TP2 code, in its groups.
    await record_texts(viewer, "#race-countdown")  # it lasts a moment of real time
    await host.click("#race-start")
    await shown(viewer, "#race-countdown", "The race starts in", contains=True)
    await expect(viewer.locator(".deal-mark.host")).to_have_count(0)
    clock.advance(seconds=3)
    await expect(host.locator("#board")).to_be_visible()
    await host.click("#btn-resign")
    await host.click("#resign-yes")
    for page in (host, viewer):
        await expect(page.locator("#race-results tbody tr")).to_have_count(1)
        await expect(page.locator("#race-code-shown")).to_have_text(TP2)
        await expect(page.locator("#race-deal")).to_have_text(RANDOM_DEAL)
        await expect(page.locator(".deal-mark.host")).to_have_count(0)
    code = await viewer.locator("#race-code-shown").inner_text()
    chunks = await viewer.locator("#race-code-shown .code-chunk").all_inner_texts()
    assert chunks == [f"{code[:14]}", code[14:22], code[22:30], code[30:]]
    await expect(viewer.locator("#race-deal-was")).to_have_text(f"The deal was {code}")
    await no_overflow(viewer)
    await viewer.screenshot(path=str(tmp_path / "race-results-tp2-phone.png"), full_page=True)

    # The viewer copies the code (clipboard granted).
    await viewer_ctx.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    await record_texts(viewer, "#race-panel .copy-status")  # "Copied" shows for a moment
    await viewer.click("#race-copy-code")
    await shown(viewer, "#race-panel .copy-status", "Copied")
    assert await viewer.evaluate("() => navigator.clipboard.readText()") == code

    await host_ctx.close()
    await viewer_ctx.close()
    assert page_errors == []


async def test_the_lobby_shows_who_is_reconnecting_gone_or_watching(
    browser: Browser,
    make_server: ServerFactory,
    clock: FakeClock,
    page_errors: list[str],
    tmp_path: Path,
) -> None:
    # The grace period runs on the service's (fake) clock: the test moves it on.
    server: TestServer = await make_server(race_sweep_s=0.05, race_grace_s=30.0)
    base = str(server.make_url("")).rstrip("/")

    host_ctx, host = await open_page(browser, base, page_errors)
    await register(host, "Hana")
    await host.click(".race-create summary")
    await host.click("#btn-race-create")
    invite_el = host.locator("#race-invite-code")
    await expect(invite_el).to_have_text(re.compile(r"^[0-9A-Z]{6}$"))
    invite = await invite_el.inner_text()
    players = host.locator("#race-players li")
    await expect(players.and_(host.locator("[data-presence=connected]"))).to_have_count(1)
    await expect(host.locator("#race-watchers")).to_have_count(0)  # nobody watches yet

    # A racer takes a seat from the link; a watcher follows the room over a websocket.
    racer_ctx, racer = await open_page(browser, base, page_errors, f"/race/{invite}")
    await register(racer, "Gus")
    await racer.click("#invite-join")
    await expect(racer.locator("#race-wait")).to_be_visible()
    gus = host.locator("#race-players li", has_text="Gus")
    await expect(gus).to_have_attribute("data-presence", "connected")
    await expect(gus.locator(".presence")).to_have_count(0)  # connected: only the dot
    async with TestClient(server) as http:
        wes = await register_rest(http, "Wes")
        watcher, _ = await WsPlayer.connect(http, wes["token"])
        reply = await watcher.request({"type": "race_join", "invite": invite, "watch": True})
        assert reply["type"] == "race", reply
        await expect(host.locator("#race-watchers-title")).to_have_text("Watching (1)")
        watching = host.locator("#race-watchers li")
        await expect(watching).to_have_count(1)
        await expect(watching).to_contain_text("Wes")
        await expect(watching).to_have_attribute("data-presence", "connected")
        assert await players.count() == 2  # watching takes no seat

        # The racer's page closes: the host sees them reconnecting, seat kept, counting down
        # the grace period (on server time) second by second.
        await racer_ctx.close()
        reconnecting = host.locator("#race-players li[data-presence=reconnecting]")
        await expect(reconnecting).to_have_count(1)
        await expect(reconnecting).to_contain_text("Gus")
        mark = reconnecting.locator(".presence")
        await expect(mark).to_have_text(re.compile(r"^↻reconnecting — \d+ s left$"))
        left = int(re.sub(r"\D", "", await mark.inner_text()))
        assert 0 < left <= 30
        await host.wait_for_function(
            """n => {
                const el = document.querySelector("#race-players li[data-presence=reconnecting]");
                const m = el && el.textContent.match(/(\\d+) s left/);
                return m !== null && Number(m[1]) < n;
            }""",
            arg=left,
        )
        await expect(mark).to_have_attribute("title", re.compile(r"kept until \d"))
        await host.screenshot(path=str(tmp_path / "race-lobby-reconnecting.png"), full_page=True)
        await expect(host.locator("#race-start-note")).to_have_count(0)  # nobody gone yet

        # The watcher's connection closes too: they are reconnecting in the watchers' list.
        await watcher.ws.close()
        await expect(host.locator("#race-watchers li[data-presence=reconnecting]")).to_contain_text(
            "Wes"
        )

        # The grace period ends without them: gone, since a time of day; the host is told a
        # start leaves the gone racer out.
        clock.advance(seconds=31)
        gone = host.locator("#race-players li[data-presence=gone]")
        await expect(gone).to_have_count(1)
        await expect(gone).to_contain_text("Gus")
        await expect(gone.locator(".presence")).to_have_text(
            re.compile(r"^⊘gone since \d{1,2}:\d{2}(\s?[AP]M)?$")
        )
        await expect(host.locator("#race-start-note")).to_have_text(
            "Gone racers are left out when you start."
        )
        await expect(host.locator("#race-start")).to_have_attribute(
            "aria-describedby", "race-start-note"
        )
        await expect(host.locator("li[data-presence=reconnecting]")).to_have_count(0)
        await host.screenshot(path=str(tmp_path / "race-lobby-presence.png"), full_page=True)

        # In Traditional Chinese too.
        await host.select_option("#lang-select", "zh-Hant")
        await expect(gone.locator(".presence")).to_contain_text("起已離開")
        await expect(host.locator("#race-start-note")).to_have_text(
            "開始時，已離開的玩家不會參加比賽。"
        )
        await host.select_option("#lang-select", "en")

        # Someone who opens the link sees the same on the invite page.
        guest_ctx, guest = await open_page(browser, base, page_errors, f"/race/{invite}")
        await register(guest, "Ivy")
        await expect(guest.locator("#invite-players li")).to_have_count(2)
        await expect(guest.locator("#invite-players li[data-presence=gone]")).to_contain_text("Gus")
        await expect(guest.locator("#invite-players li[data-presence=connected]")).to_contain_text(
            "Hana"
        )
        await expect(guest.locator("#invite-watchers li")).to_contain_text("Wes")
        await guest_ctx.close()

        # The host starts without the gone racer: the server deals them out.
        await host.click("#race-start")
        await expect(host.locator("#race-countdown")).to_be_attached()
        await expect(players).to_have_count(1)
        await expect(players).to_contain_text("Hana")
        await host_ctx.close()  # before the client closes the server (TestClient does)

    assert page_errors == []


async def test_the_results_fit_the_panel_beside_the_table(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    """On a desktop the results sit in the narrow panel beside the table: each row (long names,
    a status over the cards left, the replay link) stays inside it."""
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    host_info = await register_rest(client, "Hostess Maximiliana Q")
    host, _ = await WsPlayer.connect(client, host_info["token"])
    created = await host.request({"type": "race_create", "rules": "E", "time_limit_s": 60})
    invite = created["race"]["invite"]
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, f"/race/{invite}", viewport=DESKTOP)
    await register(page, "Bartholomew Quincy Jones")
    await page.click("#invite-join")
    await expect(page.locator("#race-players")).to_contain_text("Bartholomew Quincy Jones")
    await host.request({"type": "race_start", "invite": invite})
    game = (await host.until("race_go", invite=invite))["game"]
    await expect(page.locator("#race-countdown")).to_contain_text("Go!")
    clock.advance(seconds=1)
    await host.request({"type": "resign", "game_id": game["game_id"]})
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    results = page.locator("#race-results tbody tr")
    await expect(results).to_have_count(2)
    await expect(page.locator("#race-results a.replay-link")).to_have_count(2)
    # Both resigned at once: equal results, one shared rank.
    await expect(results.locator("td:first-child")).to_have_text(["1", "1"])
    await expect(page.locator("#board")).to_be_visible()  # the panel is the one beside it
    outside = await page.evaluate(
        """() => {
            const panel = document.querySelector('#race-panel').getBoundingClientRect();
            return [...document.querySelectorAll('#race-results tr, #race-results a')]
                .map(el => el.getBoundingClientRect())
                .filter(r => r.left < panel.left || r.right > panel.right)
                .map(r => [r.left, r.right, panel.left, panel.right]);
        }"""
    )
    assert outside == []
    await host.close()
    await context.close()
    assert page_errors == []


async def test_the_results_show_shared_ranks_as_they_are_and_the_cards_removed(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    """Two racers remove the same two cards at the same moment and share first place; the
    player on the page resigns at once and is third: the page shows 1, 1, 3, each with the
    cards they removed."""
    win = find_winning_line(CODE.deal(), CODE.rules)
    assert win is not None
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    racers = []
    for name in ("Ada", "Ben"):
        info = await register_rest(client, name)
        racers.append((await WsPlayer.connect(client, info["token"]))[0])
    ada, ben = racers
    created = await ada.request({"type": "race_create", "code": str(CODE), "time_limit_s": 60})
    invite = created["race"]["invite"]
    assert (await ben.request({"type": "race_join", "invite": invite}))["role"] == "racer"
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, f"/race/{invite}", viewport=DESKTOP)
    await register(page, "Cleo")
    await page.click("#invite-join")
    await expect(page.locator("#race-players li")).to_have_count(3)
    await ada.request({"type": "race_start", "invite": invite})
    games = {ws: (await ws.until("race_go", invite=invite))["game"] for ws in racers}
    await expect(page.locator("#race-countdown")).to_contain_text("Go!")
    clock.advance(seconds=1)
    for ws in racers:  # the same two cards at the same moment (the clock stands still)
        await ws.play(games[ws], win[:2])
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    for ws in racers:
        await ws.request({"type": "resign", "game_id": games[ws]["game_id"]})
    results = page.locator("#race-results tbody tr")
    await expect(results).to_have_count(3)
    await expect(results.locator("td:first-child")).to_have_text(["1", "1", "3"])
    await expect(results.locator("td.name")).to_have_text(["Ada", "Ben", "Cleo"])
    for row, removed in enumerate(("2 removed", "2 removed", "0 removed")):
        await expect(results.nth(row)).to_contain_text(removed)
    await expect(results.nth(2)).to_have_class("me")
    for ws in racers:
        await ws.close()
    await context.close()
    assert page_errors == []


async def test_on_a_phone_the_race_panel_folds_to_one_line_while_the_player_plays(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    """On a 390 × 844 touch phone the running race's panel is one line under the table (my
    place, the leader) while I play: the table takes most of the screen and the panel covers
    no card; a tap opens it and another folds it; a desktop shows it whole; it unfolds when my
    game ends, and the results show whole."""
    win = find_winning_line(CODE.deal(), CODE.rules)
    assert win is not None
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    info = await register_rest(client, "Hana")
    host, _ = await WsPlayer.connect(client, info["token"])
    invite = (await host.request({"type": "race_create", "code": str(CODE)}))["race"]["invite"]
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(
        browser,
        base,
        page_errors,
        f"/race/{invite}",
        viewport=PHONE,
        has_touch=True,
        is_mobile=True,
    )
    await register(page, "Cleo")
    await page.click("#invite-join")
    await expect(page.locator("#race-players li")).to_have_count(2)
    await host.request({"type": "race_start", "invite": invite})
    game = (await host.until("race_go", invite=invite))["game"]
    await expect(page.locator("#race-countdown")).to_contain_text("Go!")
    clock.advance(seconds=1)

    fold = page.locator("#race-fold")
    players = page.locator("#race-players")
    # Hana removes two cards: she leads, I am second.
    await host.play(game, win[:2])
    await expect(fold).to_have_text("You're #2 of 2 · Hana leads▾")
    await expect(fold).to_have_attribute("aria-expanded", "false")
    await expect(players).to_be_hidden()
    await expect(page.locator("#race-leave")).to_be_hidden()
    await expect(page.locator("#race-countdown")).to_be_hidden()  # "Go!" shows 1.5 s
    await page.wait_for_function(
        "() => document.getAnimations().every(a => a.playState !== 'running')"
    )
    await no_overflow(page)
    measured = await covered_cards(page, "#race-panel")
    assert measured["cards"] == 30 and measured["covered"] == [], measured
    share: dict[str, float] = await page.evaluate(
        """() => {
            const box = s => document.querySelector(s).getBoundingClientRect();
            const panel = box('#race-panel'), body = box('.play-body'), board = box('#board');
            return {panel: panel.height / innerHeight, fold: box('#race-fold').height,
                    table: (panel.top - body.top) / innerHeight,
                    boardBottom: board.bottom, panelBottom: panel.bottom, height: innerHeight};
        }"""
    )
    assert share["panel"] < 0.08, share  # one line
    assert share["fold"] <= 52, share  # not wrapped
    assert share["table"] > 0.7, share  # the table takes the screen above it
    assert share["boardBottom"] <= share["height"], share
    assert share["panelBottom"] <= share["height"], share

    # I take the lead (three cards); the line follows at once.
    for action in win[:3]:
        await play_action(page, action)
    await expect(fold).to_have_text("You lead · #1 of 2▾")
    # A tap opens the panel, another folds it again.
    await fold.click()
    await expect(fold).to_have_attribute("aria-expanded", "true")
    await expect(players).to_be_visible()
    await expect(page.locator("#race-leave")).to_be_visible()
    await fold.click()
    await expect(players).to_be_hidden()
    # In Chinese, still one line.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(fold).to_have_text("你領先 · 第 1 名（共 2 人）▾")
    await page.wait_for_function(
        """() => { const b = document.querySelector('#race-fold');
                   return b && b.checkVisibility() && b.getBoundingClientRect().height <= 52; }"""
    )
    await page.select_option("#lang-select", "en")
    # A desktop shows the panel whole, with no folded line.
    await page.set_viewport_size(DESKTOP)
    await expect(fold).to_be_hidden()
    await expect(players).to_be_visible()
    await page.set_viewport_size(PHONE)
    await expect(players).to_be_hidden()

    # My game ends: the panel unfolds; the race's end shows the results whole.
    await page.click("#btn-resign")
    await page.click("#resign-yes")
    await expect(fold).to_have_count(0)
    await expect(players).to_be_visible()
    await host.request({"type": "resign", "game_id": game["game_id"]})
    await expect(page.locator("#race-results tbody tr")).to_have_count(2)
    await expect(fold).to_have_count(0)
    measured = await covered_cards(page, "#race-panel", "#end-panel")
    assert measured["covered"] == [], measured
    await host.close()
    await context.close()
    assert page_errors == []


async def test_a_racer_whose_go_was_lost_asks_for_its_game_and_plays(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    """The server's ``race_go`` never reaches the page (it followed the room just as the
    countdown ended, its socket was replaced): once the race has started the page asks for
    the room again, which brings its game, and the player plays."""
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    host_info = await register_rest(client, "Host")
    host, _ = await WsPlayer.connect(client, host_info["token"])
    created = await host.request({"type": "race_create", "code": str(CODE), "time_limit_s": 60})
    invite = created["race"]["invite"]
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, f"/race/{invite}", viewport=DESKTOP)
    dropped: list[str] = []

    def route(ws: WebSocketRoute) -> None:
        """Pass every frame both ways except the server's race_go."""
        server_side = ws.connect_to_server()

        def to_page(message: str | bytes) -> None:
            if isinstance(message, str) and json.loads(message).get("type") == "race_go":
                dropped.append(message)
                return
            ws.send(message)

        server_side.on_message(to_page)
        ws.on_message(server_side.send)

    await page.route_web_socket(re.compile(r"/ws$"), route)
    await page.reload()
    await register(page, "Gus")
    await page.click("#invite-join")
    await expect(page.locator("#race-players li")).to_have_count(2)
    await host.request({"type": "race_start", "invite": invite})
    await host.until("race_go", invite=invite)
    clock.advance(seconds=1)
    await expect(page.locator("#board")).to_be_visible()
    assert len(dropped) == 1
    state = await game_state(page)
    assert state["mode"] == "race" and state["status"] == "playing"
    await page.click("#stock")  # a draw, acknowledged
    await page.wait_for_function("() => window.tripeaks.store.game.seq === 1")
    await host.close()
    await context.close()
    assert page_errors == []
