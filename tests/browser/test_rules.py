"""The page's rules are the engine's: static/js/rules.js, loaded in Chromium from a real server,
gives the engine's positions, rows, cover map and neighbour rule for every card pair and rule
set, and finds the same removable and playable cards as the engine in games played to every
end; and no other browser module writes a rule of its own."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestServer
from playwright.async_api import Browser

from server.engine import (
    COVERED_BY,
    FACE_DOWN,
    FULL_DECK,
    PEAKS,
    POSITION_COUNT,
    ROWS,
    START_SCORE,
    Action,
    ActionKind,
    DealVersion,
    Game,
    GameCode,
    RuleSet,
    is_neighbour,
)
from server.web.app import STATIC_DIR
from server.web.page_rules import PATH
from tests.browser.support import open_page
from tests.conftest import ServerFactory
from tests.helpers import find_winning_line

JS = STATIC_DIR / "js"
CARDS = [str(card) for card in FULL_DECK]


def _state(game: Game) -> dict[str, Any]:
    """The parts of a STATE (docs/protocol.md) that the rules read."""
    view = game.view()
    return {
        "status": view.status.value,
        "rules": game.rules.value,
        "waste": str(view.waste),
        "tableau": [c if c is None or c == FACE_DOWN else str(c) for c in view.tableau],
    }


def _expected(game: Game) -> dict[str, list[int]]:
    removable = [a.pos for a in game.legal_actions() if a.kind is ActionKind.REMOVE]
    tableau = game.view().tableau
    cleared = [i for i, peak in enumerate(PEAKS) if all(tableau[p] is None for p in peak)]
    assert len(cleared) == game.cleared_peaks
    return {
        "removable": [p for p in removable if p is not None],
        "playable": list(game.playable_positions()),
        "cleared": cleared,
    }


def _games() -> list[Game]:
    """Games of both rule sets: fresh, part played (undos included), won, resigned, blocked."""
    rng = random.Random(20240601)
    games: list[Game] = []
    for i in range(24):
        rules = RuleSet.EASY if i % 2 == 0 else RuleSet.CLASSIC
        game = Game.new(GameCode(rules, rng.randrange(DealVersion.TP1.space), DealVersion.TP1))
        games.append(game.copy())
        while not game.is_over and game.moves < 80:
            game.apply(rng.choice(game.legal_actions()))
            if rng.random() < 0.3:
                games.append(game.copy())
        games.append(game.copy())  # blocked, or far into the game
    code = GameCode.parse("TP1-E-AAAAAAA")
    won = Game.new(code)
    line = find_winning_line(code.deal(), code.rules)
    assert line is not None
    for action in line:
        won.apply(action)
    resigned = Game.new(GameCode.parse("TP1-C-AAAAAAB"))
    resigned.apply(Action(ActionKind.DRAW))
    resigned.resign()
    games += [won, resigned]
    assert {g.status.value for g in games} >= {"playing", "won", "blocked", "resigned"}
    return games


_READ_RULES = """async ([cards, states]) => {
    const rules = await import('/static/js/rules.js');
    const positions = [...Array(rules.POSITIONS).keys()];
    const neighbours = {};
    for (const set of ["E", "C"]) {
        neighbours[set] = cards.map(a => cards.map(b => rules.isNeighbour(a, b, set)));
    }
    return {
        positions: rules.POSITIONS,
        rows: rules.ROWS.map(row => [...row]),
        rowOf: positions.map(rules.rowOf),
        coveredBy: positions.map(p => [...rules.coveredBy(p)]),
        peaks: rules.peaks().map(peak => [...peak]),
        startScore: rules.START_SCORE,
        neighbours,
        states: states.map(game => ({
            removable: positions.filter(p => rules.canRemove(game, p)),
            playable: positions.filter(p => rules.isPlayable(game, p)),
            cleared: rules.clearedPeaks(game),
        })),
    };
}"""


async def test_the_pages_rules_are_the_engines(
    browser: Browser, make_server: ServerFactory, page_errors: list[str]
) -> None:
    server: TestServer = await make_server()
    base = str(server.make_url("")).rstrip("/")
    context, page = await open_page(browser, base, page_errors)
    games = _games()
    seen = await page.evaluate(_READ_RULES, [CARDS, [_state(g) for g in games]])

    assert seen["positions"] == POSITION_COUNT
    assert seen["rows"] == [list(row) for row in ROWS]
    assert seen["rowOf"] == [next(i for i, row in enumerate(ROWS) if p in row) for p in range(28)]
    assert seen["coveredBy"] == [list(above) for above in COVERED_BY]
    assert seen["peaks"] == [sorted(peak) for peak in PEAKS]
    assert seen["startScore"] == START_SCORE
    for rules in RuleSet:
        expected = [[is_neighbour(a, b, rules) for b in FULL_DECK] for a in FULL_DECK]
        assert seen["neighbours"][rules.value] == expected, rules
    for game, shown in zip(games, seen["states"], strict=True):
        assert shown == _expected(game), _state(game)

    # The module is served like the page's files: revalidated, then answered "not modified".
    first = await context.request.get(base + PATH)
    assert first.ok and first.headers["content-type"].startswith("text/javascript")
    assert first.headers["cache-control"] == "no-cache"
    again = await context.request.get(base + PATH, headers={"If-None-Match": first.headers["etag"]})
    assert again.status == 304
    await context.close()
    assert page_errors == []


#: Rules a browser module might be tempted to write again: the rank order (the neighbour rule
#: counts along it) and the cover map's formulas (docs/rules.md §1), or the layout's size.
_COPIES = [
    re.compile(r"A23456789TJQK"),
    re.compile(r"\b(?:3|4) \+ 2 \*|\b(?:9|10) \+ 3 \*|\b(?:18|19) \+ \("),
    re.compile(r"\b28\b"),
]


def test_no_browser_module_writes_a_rule_of_its_own() -> None:
    modules = sorted(JS.rglob("*.js"))
    assert modules, JS
    readers = []
    for path in modules:
        text = path.read_text(encoding="utf-8")
        comment = ("//", "*", "/*")
        code = "\n".join(x for x in text.splitlines() if not x.lstrip().startswith(comment))
        if "engine-rules.js" in code:
            readers.append(path.relative_to(JS).as_posix())
        if path.name in ("i18n.js", "code.js"):
            continue  # texts, and game codes (28 letters), are not layout rules
        for pattern in _COPIES:
            assert not pattern.search(code), (path.relative_to(JS).as_posix(), pattern.pattern)
    assert readers == ["rules.js"]
    assert not Path(JS / "engine-rules.js").exists()  # served from the engine, never a file
