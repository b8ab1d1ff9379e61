"""A finished daily replayed in the browser once its date is over: opened from its leaderboard
row, stepped with the keyboard and the buttons, jumped with the list of moves and the slider, to
the end, with the move that left every optimal line marked (docs/rules.md §4 "Replays"); today's
daily offers no replay; a finished race's results link to each racer's replay."""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser, Page, expect

from server.config import Settings
from server.engine import START_SCORE, Action, ActionKind, Game, GameCode, RuleSet
from server.engine.solver import solve, solve_game
from server.services.clock import FakeClock
from tests.browser.support import open_page, register
from tests.conftest import ClientFactory, ServerFactory
from tests.helpers import WsPlayer, daily_code
from tests.helpers import register as register_over_rest

DATE = dt.date(2026, 3, 14)


def _line_with_detour(code: GameCode) -> tuple[list[Action], int]:
    """An optimal line that leaves every optimal path once (at the index returned), then plays
    the best from there."""
    par = solve(code.deal(), code.rules).par
    line = list(solve(code.deal(), code.rules).line)
    game = Game.new(code, ranked=True)
    for k, next_action in enumerate(line):
        for action in game.legal_actions():
            if action.kind is ActionKind.UNDO:
                continue
            trial = game.copy()
            trial.apply(action)
            if solve_game(trial).par < par and not trial.is_over:
                return [*line[:k], action, *solve_game(trial).line], k
        game.apply(next_action)
    raise AssertionError("no detour on this deal")


async def _replay_cells(page: Page) -> list[str | None]:
    cells: list[str | None] = await page.eval_on_selector_all(
        "#replay-peaks .card",
        """buttons => buttons.map(b => b.hidden ? null
            : b.dataset.state === "down" ? "down" : b.dataset.card)""",
    )
    return cells


async def _at_step(page: Page, game: Game, step: int, total: int) -> None:
    """The replay shows the table of ``game`` (the engine's, after ``step`` actions)."""
    await expect(page.locator("#replay-step")).to_have_text(f"Move {step} of {total}")
    view = game.view()
    expected = [c if c is None or isinstance(c, str) else str(c) for c in view.tableau]
    assert await _replay_cells(page) == expected
    assert await page.get_attribute("#replay-waste", "data-card") == str(view.waste)
    assert await page.text_content("#replay-stock-count") == str(view.stock_count)


async def test_a_finished_daily_is_replayed_from_its_leaderboard_row(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line, diverged = _line_with_detour(code)
    client = await make_client(server)
    ada = await register_over_rest(client, "Ada")
    ws, _ = await WsPlayer.connect(client, ada["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    clock.advance(seconds=95)
    final = await ws.play(game, line)
    assert final["status"] in ("won", "blocked")
    await ws.close()
    clock.set(dt.datetime(2026, 3, 15, 0, 5, tzinfo=dt.UTC))  # the date is over

    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Bea")
    await page.click("#btn-leaderboard")
    await page.click("#lb-prev")
    await expect(page.locator("#lb-date")).to_have_value("2026-03-14")
    row = page.locator("#lb-table tbody tr").first
    await expect(row).to_contain_text("Ada")
    await row.locator("a.replay-link").click()

    await expect(page.locator("#view-replay")).to_be_visible()
    assert page.url == f"{base}/replay/{game['game_id']}"
    await expect(page.locator("#replay-title")).to_contain_text("2026-03-14")
    await expect(page.locator("#replay-title")).to_contain_text("Ada")
    total = len(line)
    engine = Game.new(code, ranked=True)
    await _at_step(page, engine, 0, total)
    # Before the first move the score is the one every game starts at, as at the table.
    await expect(page.locator("#replay-score")).to_have_text(str(START_SCORE))
    await expect(page.locator("#replay-moves li")).to_have_count(total)
    await expect(page.locator("#replay-line li")).to_have_count(
        len(solve(code.deal(), code.rules).line)
    )

    # The first move that left every optimal line is marked, in the list and in words.
    marked = page.locator("#replay-moves li.diverged")
    await expect(marked).to_have_count(1)
    assert await marked.get_attribute("data-step") == str(diverged + 1)
    await expect(marked).to_contain_text("left the optimal line")
    await expect(page.locator("#replay-divergence")).to_have_text(
        f"Move {diverged + 1} left every optimal line: par was out of reach after it."
    )

    # Arrow keys step forward and back; the buttons too.
    await page.keyboard.press("ArrowRight")
    await page.keyboard.press("ArrowRight")
    engine.apply(line[0])
    engine.apply(line[1])
    await _at_step(page, engine, 2, total)
    await page.keyboard.press("ArrowLeft")
    await _at_step(page, Game.replay(code.deal(), code.rules, line[:1], ranked=True), 1, total)
    await page.click("#replay-forward")
    await _at_step(page, engine, 2, total)

    # Jump to the marked move from the list, then with the slider.
    await marked.locator("button").click()
    at_mark = Game.replay(code.deal(), code.rules, line[: diverged + 1], ranked=True)
    await _at_step(page, at_mark, diverged + 1, total)
    await expect(marked).to_have_attribute("aria-current", "step")
    middle = (diverged + 1 + total) // 2
    await page.locator("#replay-slider").evaluate(
        "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }", middle
    )
    await _at_step(
        page, Game.replay(code.deal(), code.rules, line[:middle], ranked=True), middle, total
    )

    # To the end: the table as the game ended.
    await page.keyboard.press("End")
    end = Game.replay(code.deal(), code.rules, line, ranked=True)
    await _at_step(page, end, total, total)
    await expect(page.locator("#replay-score")).to_have_text(str(final["score"]))
    await expect(page.locator("#replay-forward")).to_be_disabled()

    # Play runs from the start, and pause stops it where it is.
    await page.click("#replay-play")
    await expect(page.locator("#replay-play")).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#replay-step")).not_to_have_text(f"Move 0 of {total}")
    await page.click("#replay-play")
    await expect(page.locator("#replay-play")).to_have_attribute("aria-pressed", "false")
    stopped = await page.text_content("#replay-step")
    await expect(page.locator("#replay-step")).to_have_text(stopped or "")

    # In Chinese too.
    await page.select_option("#lang-select", "zh-Hant")
    await expect(page.locator("#replay-title")).to_contain_text("每日挑戰")
    await context.close()
    assert not page_errors, page_errors


async def test_todays_daily_has_no_replay_link_and_its_address_says_why(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    settings: Settings,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server()
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line, _ = _line_with_detour(code)
    client = await make_client(server)
    ada = await register_over_rest(client, "Ada")
    ws, _ = await WsPlayer.connect(client, ada["token"])
    game: dict[str, Any] = (await ws.request({"type": "join_daily"}))["game"]
    await ws.play(game, line)
    await ws.close()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    await register(page, "Bea")
    await page.click("#btn-leaderboard")
    row = page.locator("#lb-table tbody tr").first
    await expect(row).to_contain_text("Ada")
    await expect(row.locator("a.replay-link")).to_have_count(0)
    await page.goto(f"{base}/replay/{game['game_id']}")
    await expect(page.locator("#replay-error")).to_contain_text("cannot be replayed yet")
    await expect(page.locator("#replay-body")).to_be_hidden()
    await context.close()
    assert not [e for e in page_errors if "409" not in e], page_errors


async def test_a_finished_races_results_link_to_each_racers_replay(
    browser: Browser,
    make_server: ServerFactory,
    make_client: ClientFactory,
    clock: FakeClock,
    page_errors: list[str],
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    client = await make_client(server)
    host_info = await register_over_rest(client, "Host")
    host, _ = await WsPlayer.connect(client, host_info["token"])
    created = await host.request({"type": "race_create", "rules": "E", "time_limit_s": 60})
    invite = created["race"]["invite"]
    await host.request({"type": "race_start", "invite": invite})
    game = (await host.until("race_go", invite=invite))["game"]
    clock.advance(seconds=1)
    game = (await host.act(game, "draw"))["game"]
    await host.request({"type": "resign", "game_id": game["game_id"]})
    code = GameCode.parse((await host.until("race_results"))["race"]["code"])
    await host.close()

    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors, f"/race/{invite}")
    await register(page, "Bea")
    await page.click("#invite-watch")
    results = page.locator("#race-results tbody tr")
    await expect(results).to_have_count(1)
    await results.first.locator("a.replay-link").click()
    await expect(page.locator("#view-replay")).to_be_visible()
    assert page.url == f"{base}/replay/{game['game_id']}"
    await expect(page.locator("#replay-title")).to_contain_text(invite)
    await expect(page.locator("#replay-moves li")).to_have_count(1)
    await page.keyboard.press("ArrowRight")
    drawn = Game.new(code, ranked=True)
    drawn.apply(Action.draw())
    await _at_step(page, drawn, 1, 1)
    await context.close()
    assert not page_errors, page_errors
