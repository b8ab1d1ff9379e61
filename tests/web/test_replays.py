"""Replays over a real server: ``GET /api/v1/games/{id}/replay`` of a finished free game, of a
daily once its date is over, its refusal while a deal is not public (today's daily, a running
race, a game still being played) with nothing of the deal in the refusal, and the first action
that left every optimal path on constructed games (docs/rules.md §4 "Replays")."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import Action, ActionKind, Game, GameCode, RuleSet
from server.engine.solver import Position, solve, solve_game, solve_position
from server.services.clock import FakeClock
from tests.helpers import WsPlayer, blocking_line, daily_code, register

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
RACE_SETTINGS: dict[str, Any] = {"race_countdown_s": 0.05, "race_sweep_s": 0.05}
REPLAY_FIELDS = {"game", "layout", "actions", "par", "line", "diverged_at"}
GAME_FIELDS = {
    "id",
    "player",
    "mode",
    "daily_date",
    "race_invite",
    "code",
    "rules",
    "status",
    "score",
    "moves",
    "undos",
    "elapsed_ms",
    "created_at",
    "finished_at",
    "hinted",
}


async def _replay(client: Client, game_id: int) -> dict[str, Any]:
    resp = await client.get(f"/api/v1/games/{game_id}/replay")
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    assert set(body) == REPLAY_FIELDS and set(body["game"]) == GAME_FIELDS
    return body


async def _refused(client: Client, game_id: int, status: int, code: str) -> str:
    resp = await client.get(f"/api/v1/games/{game_id}/replay")
    text = await resp.text()
    assert resp.status == status, text
    body = await resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    assert body["error"]["message"]
    return text


def _reveals_nothing(text: str, code: GameCode, seen: set[str]) -> None:
    """Fail if a refusal names the deal's code (or any of its letter groups) or a card of the
    deal its player has not seen (face down or in the stock)."""
    assert str(code) not in text
    for part in str(code).split("-")[2:]:
        assert part not in text, part
    deal = code.deal()
    unseen = {str(c) for c in (*deal.tableau, *deal.stock)} - seen
    named = set(re.findall(r"(?<![A-Za-z0-9])[A2-9TJQK][CDHS](?![A-Za-z0-9])", text))
    assert not named & unseen, named & unseen


def _optimal(code: GameCode) -> list[Action]:
    return list(solve(code.deal(), code.rules).line)


def _first_divergence(code: GameCode, line: list[Action]) -> int | None:
    """Independently of the server: the first action of ``line`` after which the best final
    score reachable is below par, by solving after every action in turn."""
    par = solve(code.deal(), code.rules).par
    game = Game.new(code)
    for index, action in enumerate(line):
        game.apply(action)
        if solve_position(Position.of_game(game)).par < par:
            return index
    return None


def _detour(code: GameCode, line: list[Action], start: int) -> tuple[int, Action]:
    """The first ``k >= start`` at which, after ``line[:k]``, a removal or draw puts par out of
    reach, and that action."""
    par = solve(code.deal(), code.rules).par
    game = Game.new(code)
    for k, next_action in enumerate(line):
        for action in game.legal_actions() if k >= start else ():
            if action.kind is ActionKind.UNDO:
                continue
            trial = game.copy()
            trial.apply(action)
            if solve_game(trial).par < par:
                return k, action
        game.apply(next_action)
    raise AssertionError(f"no detour from action {start} on")


def _finish_best(code: GameCode, line: list[Action]) -> list[Action]:
    """``line`` followed by an optimal line from where it ends."""
    game = Game.new(code)
    for action in line:
        game.apply(action)
    return [*line, *solve_game(game).line]


async def _free_game(client: Client, name: str, code: GameCode) -> tuple[WsPlayer, dict[str, Any]]:
    player = await register(client, name)
    ws, _ = await WsPlayer.connect(client, player["token"])
    game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
    return ws, game


async def test_a_finished_free_game_is_replayed_with_its_deal_actions_and_optimal_line(
    client: Client, clock: FakeClock
) -> None:
    ws, game = await _free_game(client, "Alice", CODE)
    line = _optimal(CODE)
    k, detour = _detour(CODE, line, 0)
    game = await ws.play(game, line[:k])
    clock.advance(ms=700)
    game = await ws.play(game, [detour, Action.undo()])
    clock.advance(ms=300)
    final = await ws.play(game, line[k:])
    assert final["status"] == "won"

    body = await _replay(client, game["game_id"])
    deal = CODE.deal()
    assert body["layout"] == {
        "tableau": [str(c) for c in deal.tableau],
        "waste": str(deal.waste),
        "stock": [str(c) for c in deal.stock],
    }
    record = body["game"]
    assert record["id"] == game["game_id"] and record["player"]["name"] == "Alice"
    assert (record["mode"], record["code"], record["rules"]) == ("free", str(CODE), "E")
    assert (record["daily_date"], record["race_invite"]) == (None, None)
    assert (record["status"], record["score"]) == ("won", final["score"])
    assert (record["moves"], record["undos"]) == (final["moves"], 1)
    assert record["elapsed_ms"] == 1000

    actions = body["actions"]
    played = [*line[:k], detour, Action.undo(), *line[k:]]
    assert [a["seq"] for a in actions] == list(range(1, len(played) + 1))
    assert [(a["action"], a["pos"]) for a in actions] == [
        (a.kind.value, a.pos) for a in played[:k]
    ] + [
        (detour.kind.value, detour.pos),
        ("undo", actions[k + 1]["pos"]),
        *((a.kind.value, a.pos) for a in line[k:]),
    ]
    assert actions[k]["undone"] is True and actions[k]["undoes"] is None
    assert actions[k + 1]["undoes"] == k + 1 and actions[k + 1]["card"] == actions[k]["card"]
    assert not any(a["undone"] for i, a in enumerate(actions) if i != k)
    assert all(a["undoes"] is None for i, a in enumerate(actions) if i != k + 1)
    # Every card each action moved, as the engine moves it.
    check = Game.new(CODE)
    for action, stored in zip(played, actions, strict=True):
        assert str(check.apply(action).card) == stored["card"]

    analysis = solve(deal, CODE.rules)
    assert body["par"] == analysis.par == final["score"]
    assert [(s["action"], s["pos"]) for s in body["line"]] == [
        (a.kind.value, a.pos) for a in analysis.line
    ]
    # Off the path and back by undo: the effective line is optimal, so no mark.
    assert body["diverged_at"] is None
    await ws.close()


async def test_the_first_divergence_is_the_first_effective_action_that_loses_par(
    client: Client,
) -> None:
    line = _optimal(CODE)
    ws, game = await _free_game(client, "Bob", CODE)
    # A detour taken back by undo (neither counts), later one kept, then the best play from
    # there.
    early, undone = _detour(CODE, line, 0)
    k, detour = _detour(CODE, line, early + 1)
    played = _finish_best(CODE, [*line[:k], detour])
    assert _first_divergence(CODE, played) == k
    sent = [*line[:early], undone, Action.undo(), *played[early:]]
    final = await ws.play(game, sent)
    assert final["status"] in ("won", "blocked")
    resigned = final["status"] == "blocked" or (
        await ws.request({"type": "resign", "game_id": game["game_id"]})
    )
    assert resigned

    body = await _replay(client, game["game_id"])
    index = body["diverged_at"]
    assert index == k + 2  # the kept detour, after the taken-back action and its undo
    assert body["actions"][index]["seq"] == k + 3
    assert (body["actions"][index]["action"], body["actions"][index]["pos"]) == (
        detour.kind.value,
        detour.pos,
    )
    assert body["actions"][early]["undone"] is True
    assert body["actions"][early + 1]["undoes"] == early + 1
    assert body["par"] > body["game"]["score"]
    await ws.close()


async def test_unknown_and_malformed_games_are_refused(client: Client) -> None:
    await _refused(client, 999_999, 404, "unknown_game")
    resp = await client.get("/api/v1/games/abc/replay")
    assert resp.status == 400 and (await resp.json())["error"]["code"] == "bad_game_id"


async def test_a_free_game_being_played_is_not_replayable(client: Client) -> None:
    ws, game = await _free_game(client, "Carol", CODE)
    game = await ws.play(game, _optimal(CODE)[:4])
    text = await _refused(client, game["game_id"], 409, "replay_not_public")
    assert "actions" not in text and "layout" not in text
    await ws.close()


async def test_todays_daily_is_refused_without_its_deal_then_replayed_once_the_date_is_over(
    client: Client, clock: FakeClock, settings: Settings
) -> None:
    code = daily_code((settings.daily_secret or "").encode(), dt.date(2026, 3, 14), RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    alice = await register(client, "Alice")
    ws, _ = await WsPlayer.connect(client, alice["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    clock.advance(ms=42_000)
    final = await ws.play(game, line)
    assert final["status"] == "blocked"
    deal = code.deal()
    seen = {str(deal.waste), *(str(c) for c in deal.stock)}
    seen |= {str(deal.tableau[a.pos]) for a in line if a.pos is not None}
    seen |= {c for c in final["tableau"] if c not in (None, "down")}

    text = await _refused(client, game["game_id"], 409, "replay_not_public")
    _reveals_nothing(text, code, seen)
    assert "2026-03-14" in text

    clock.set(dt.datetime(2026, 3, 15, 0, 0, tzinfo=dt.UTC))
    body = await _replay(client, game["game_id"])
    assert body["game"]["code"] == str(code)
    assert body["game"]["daily_date"] == "2026-03-14" and body["game"]["mode"] == "daily"
    assert body["layout"]["stock"] == [str(c) for c in deal.stock]
    assert [(a["action"], a["pos"]) for a in body["actions"]] == [
        (a.kind.value, a.pos) for a in line
    ]
    published = await (await client.get("/api/v1/daily/2026-03-14")).json()
    assert body["par"] == published["par"] and body["line"] == published["line"]
    assert body["diverged_at"] == _first_divergence(code, line)
    await ws.close()


async def test_a_running_races_game_is_refused_without_its_deal_then_replayed(
    make_server: Any, clock: FakeClock
) -> None:
    server = await make_server(**RACE_SETTINGS)
    async with TestClient(server) as client:
        host_info = await register(client, "Host")
        host, _ = await WsPlayer.connect(client, host_info["token"])
        # A random sealed deal: nobody knows its code until the race is over.
        created = await host.request({"type": "race_create", "rules": "E", "time_limit_s": 60})
        assert created["type"] == "race", created
        invite = created["race"]["invite"]
        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running", started
        game = (await host.until("race_go", invite=invite))["game"]
        clock.advance(seconds=1)
        game = (await host.act(game, "draw"))["game"]
        seen = {c for c in game["tableau"] if c not in (None, "down")} | {game["waste"]}

        text = await _refused(client, game["game_id"], 409, "replay_not_public")
        room = await (await client.get(f"/api/v1/races/{invite}")).json()
        assert room["code"] is None

        resigned = await host.request({"type": "resign", "game_id": game["game_id"]})
        assert resigned["game"]["status"] == "resigned", resigned
        results = await host.until("race_results")
        code = GameCode.parse(results["race"]["code"])
        _reveals_nothing(text, code, seen)
        assert results["race"]["results"][0]["game_id"] == game["game_id"]

        body = await _replay(client, game["game_id"])
        assert body["game"]["race_invite"] == invite and body["game"]["code"] == str(code)
        assert body["game"]["status"] == "resigned"
        assert [a["action"] for a in body["actions"]] == ["draw"]
        assert body["diverged_at"] == _first_divergence(code, [Action.draw()])
        await host.close()
