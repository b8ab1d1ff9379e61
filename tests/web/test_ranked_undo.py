"""Ranked play takes no undo (docs/rules.md §4 "Ranked play"): in the daily and in a race game an
undo after a draw, and after a removal that turned a card face up, is refused with
``ranked_no_undo`` — nothing stored, the state unchanged, the game going on; in free play the
same undos are accepted. Real servers, real PostgreSQL, real websocket clients."""

from __future__ import annotations

from typing import Any

import asyncpg
from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import FACE_DOWN, Action, ActionKind, Game, GameCode, RuleSet
from server.services.clock import FakeClock
from tests.conftest import ServerFactory
from tests.helpers import (
    WsPlayer,
    blocking_line,
    daily_code,
    find_winning_line,
    register,
)

Client = TestClient[Any, Any]
CODE = GameCode.parse("TP1-E-AAAAAAB")
NO_UNDO = {
    "en": "Ranked games have no undo: what you have seen cannot be unseen.",
    "zh-Hant": "排名賽不能還原：看過的牌就無法當作沒看過。",
}


def _face_down(game: Game) -> int:
    return sum(entry == FACE_DOWN for entry in game.view().tableau)


def uncovering_line(game: Game, depth: int = 12) -> list[Action]:
    """Legal actions from ``game`` whose last is a removal that turns a face-down card face up
    (removals tried before the draw, depth first)."""

    def search(at: Game, line: list[Action]) -> list[Action] | None:
        if len(line) >= depth:
            return None
        for action in at.legal_actions():
            if action.kind is ActionKind.UNDO:
                continue
            after = at.copy()
            after.apply(action)
            if action.kind is ActionKind.REMOVE and _face_down(after) < _face_down(at):
                return [*line, action]
            found = search(after, [*line, action])
            if found is not None:
                return found
        return None

    found = search(game, [])
    assert found is not None, "no removal within reach turns a card face up"
    return found


async def _stored(database_url: str, game_id: int) -> tuple[Any, ...]:
    """The game's row and its action log, as PostgreSQL holds them."""
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT seq, status, score, moves, undos, cards_left FROM games WHERE id = $1", game_id
        )
        log = await conn.fetch(
            "SELECT seq, kind, pos, card FROM game_actions WHERE game_id = $1 ORDER BY seq",
            game_id,
        )
    finally:
        await conn.close()
    assert row is not None
    return tuple(row), [tuple(entry) for entry in log]


async def _refused_then_goes_on(
    ws: WsPlayer, state: dict[str, Any], engine: Game, database_url: str, locale: str
) -> dict[str, Any]:
    """An undo now is refused and changes nothing, stored or shown; the game then goes on with
    the same ``seq``."""
    before = await _stored(database_url, state["game_id"])
    reply = await ws.act(state, "undo")
    assert reply["type"] == "rejected" and reply["code"] == "ranked_no_undo", reply
    assert reply["message"] == NO_UNDO[locale]
    assert reply["game"] == state and state["can_undo"] is False
    assert await _stored(database_url, state["game_id"]) == before
    resumed = await ws.request({"type": "resume", "game_id": state["game_id"]})
    assert resumed["game"] == state
    # The game goes on from the same seq; undos stay 0.
    line = uncovering_line(engine)
    for action in line:
        engine.apply(action)
    after = await ws.play(state, line)
    assert (after["seq"], after["undos"]) == (state["seq"] + len(line), 0)
    return after


async def _undo_twice_in_a_ranked_game(
    ws: WsPlayer, state: dict[str, Any], code: GameCode, database_url: str, locale: str
) -> None:
    engine = Game.new(code, ranked=True)
    # After a draw: the drawn card is seen, and stays so.
    drawn = await ws.act(state, "draw")
    assert drawn["type"] == "accepted"
    engine.draw()
    state = await _refused_then_goes_on(ws, drawn["game"], engine, database_url, locale)
    # After a removal that turned a card face up (the last of the line just played).
    assert sum(cell == "down" for cell in state["tableau"]) == _face_down(engine)
    final = await _refused_then_goes_on(ws, state, engine, database_url, locale)
    assert final["tableau"] == [
        None if cell is None else str(cell) for cell in engine.view().tableau
    ]


async def test_the_daily_refuses_undo_after_a_draw_and_after_an_uncovering_removal(
    client: Client, settings: Settings, clock: FakeClock, database_url: str
) -> None:
    assert settings.daily_secret
    code = daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)
    info = await register(client, "Dana")
    ws, _ = await WsPlayer.connect(client, info["token"], locale="zh-Hant")
    state = (await ws.request({"type": "join_daily"}))["game"]
    assert state["mode"] == "daily" and state["can_undo"] is False
    await _undo_twice_in_a_ranked_game(ws, state, code, database_url, "zh-Hant")
    # Undo stays refused, with error help off too (the code, without the text).
    quiet, _ = await WsPlayer.connect(client, info["token"], error_help=False)
    current = (await quiet.request({"type": "join_daily"}))["game"]
    reply = await quiet.act(current, "undo")
    assert reply["code"] == "ranked_no_undo" and "message" not in reply


async def test_a_race_game_refuses_undo_and_free_play_on_the_same_deal_takes_it(
    make_server: ServerFactory, clock: FakeClock, database_url: str
) -> None:
    server = await make_server(race_countdown_s=0.05, race_sweep_s=0.05)
    async with TestClient(server) as client:
        host_info, racer_info = await register(client, "Host"), await register(client, "Rae")
        host, _ = await WsPlayer.connect(client, host_info["token"])
        racer, _ = await WsPlayer.connect(client, racer_info["token"])
        invite = (await host.request({"type": "race_create", "code": str(CODE)}))["race"]["invite"]
        assert (await racer.request({"type": "race_join", "invite": invite}))["role"] == "racer"
        started = await host.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running"
        state = (await racer.until("race_go", invite=invite))["game"]
        clock.advance(seconds=1)
        assert state["mode"] == "race" and state["can_undo"] is False
        await _undo_twice_in_a_ranked_game(racer, state, CODE, database_url, "en")

        # Free play on the same deal: the same undos are accepted, as before.
        free = (await racer.request({"type": "new_game", "code": str(CODE)}))["game"]
        engine = Game.new(CODE)
        drawn = (await racer.act(free, "draw"))["game"]
        undone = await racer.act(drawn, "undo")
        assert undone["type"] == "accepted"
        assert (undone["game"]["undos"], undone["game"]["stock_count"]) == (1, 23)
        line = uncovering_line(engine)
        played = await racer.play(undone["game"], line)
        back = await racer.act(played, "undo")
        assert back["type"] == "accepted" and back["game"]["undos"] == 2
        assert sum(c == "down" for c in back["game"]["tableau"]) > sum(
            c == "down" for c in played["tableau"]
        )
        stored, log = await _stored(database_url, free["game_id"])
        assert stored[4] == 2 and [entry[1] for entry in log].count("undo") == 2


async def test_a_daily_stored_with_an_undo_before_the_rule_resumes_finishes_and_ranks(
    make_server: ServerFactory, settings: Settings, clock: FakeClock, database_url: str
) -> None:
    assert settings.daily_secret
    code = daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)
    first = await make_server()
    async with TestClient(first) as client:
        info = await register(client, "Olde")
        ws, _ = await WsPlayer.connect(client, info["token"])
        state = (await ws.request({"type": "join_daily"}))["game"]
        drawn = (await ws.act(state, "draw"))["game"]
    # Stored as a daily played before ranked play refused undo: the draw, then its undo.
    game_id = drawn["game_id"]
    engine = Game.new(code)
    card = engine.draw().card
    engine.undo()
    conn = await asyncpg.connect(database_url)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO game_actions (game_id, seq, kind, pos, card, score_after, created_at)"
                " SELECT id, 2, 'undo', NULL, $2, 500, created_at FROM games WHERE id = $1",
                game_id,
                str(card),
            )
            await conn.execute(
                "UPDATE games SET seq = 2, undos = 1, score = 500 WHERE id = $1", game_id
            )
    finally:
        await conn.close()

    # Another server process rebuilds it from its log: the undo stands, a new one is refused.
    second = await make_server()
    async with TestClient(second) as client:
        ws, welcome = await WsPlayer.connect(client, info["token"])
        resumed = next(g for g in welcome["games"] if g["game_id"] == game_id)
        assert (resumed["seq"], resumed["undos"], resumed["moves"], resumed["score"]) == (
            2,
            1,
            1,
            500,
        )
        assert resumed["stock_count"] == 23 and resumed["can_undo"] is False
        refused = await ws.act(resumed, "undo")
        assert refused["code"] == "ranked_no_undo" and refused["game"] == resumed
        # Not even as a resent copy of the stored undo: that is no repeat to acknowledge.
        resent = await ws.act(resumed | {"seq": 1}, "undo")
        assert resent["code"] == "stale_seq" and resent["game"] == resumed
        # The undo put the deal back as dealt: a line from the deal finishes it.
        line = find_winning_line(code.deal(), code.rules) or blocking_line(code.deal(), code.rules)
        assert line is not None
        final = await ws.play(resumed, line)
        assert final["status"] in ("won", "blocked") and final["undos"] == 1
        assert final["moves"] == 1 + len(line)
        today = clock.now().date().isoformat()
        board = await (await client.get(f"/api/v1/daily/{today}/leaderboard")).json()
        assert [(e["name"], e["rank"], e["undos"]) for e in board["entries"]] == [("Olde", 1, 1)]
