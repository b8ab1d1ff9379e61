"""Server → client messages: the typed replies encode as docs/protocol.md shows them and agree
with their JSON Schema."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from enum import StrEnum

from server.catalogue import Locale
from server.engine import FACE_DOWN, Game, GameCode, GameView, RuleSet
from server.errors import ErrorCode
from server.protocol import server as out


class _Mode(StrEnum):
    FREE = "free"


@dataclass(frozen=True)
class _Snapshot:
    id: int
    mode: StrEnum
    code: GameCode
    code_visible: bool
    daily_date: dt.date | None
    seq: int
    view: GameView
    elapsed_ms: int
    race_id: int | None


def _snapshot(game: Game, *, visible: bool = True) -> _Snapshot:
    return _Snapshot(
        id=7,
        mode=_Mode.FREE,
        code=GameCode.random(RuleSet.EASY),
        code_visible=visible,
        daily_date=None,
        seq=game.seq,
        view=game.view(),
        elapsed_ms=1234,
        race_id=None,
    )


def test_an_accepted_reply_carries_the_state_with_the_cards_a_player_may_see() -> None:
    code = GameCode.random(RuleSet.EASY)
    game = Game.new(code)
    game.draw()
    frame = json.loads(out.encode(out.accepted(_snapshot(game), Locale.EN, "a1")))
    assert list(frame)[:2] == ["type", "game"] and frame["id"] == "a1"
    state = frame["game"]
    assert state["seq"] == 1 and state["stock_count"] == len(game.stock)
    assert state["waste"] == str(game.waste_top)
    assert state["tableau"][:18] == [FACE_DOWN] * 18
    assert state["tableau"][18:] == [str(game.tableau_card(pos)) for pos in range(18, 28)]
    assert "message" not in state  # only on a blocked game


def test_a_secret_code_is_null_not_missing_and_an_absent_id_is_left_out() -> None:
    frame = json.loads(
        out.encode(
            out.game(
                _snapshot(Game.new(GameCode.random(RuleSet.EASY)), visible=False), Locale.EN, None
            )
        )
    )
    assert frame["game"]["code"] is None and "id" not in frame


def test_errors_carry_retry_after_only_when_busy() -> None:
    assert json.loads(out.encode(out.error(ErrorCode.BAD_JSON, "no", 3))) == {
        "type": "error",
        "code": "bad_json",
        "message": "no",
        "id": 3,
    }
    busy = json.loads(out.encode(out.busy("later", 1.5)))
    assert busy == {
        "type": "error",
        "code": "server_busy",
        "message": "later",
        "retry_after_ms": 1500,
    }


def test_a_lone_surrogate_in_an_id_is_escaped() -> None:
    assert out.encode(out.pong("\ud800")) == '{"type": "pong", "id": "\\ud800"}'.replace(" ", "")


def test_the_schema_names_every_typed_message() -> None:
    schema = out.server_message_schema()
    tags = {
        definition["properties"]["type"]["enum"][0]
        for definition in schema["$defs"].values()
        if "type" in definition.get("properties", {})
    }
    assert tags == {
        "welcome",
        "game",
        "accepted",
        "rejected",
        "error",
        "pong",
        "hint",
        "race",
        "race_left",
        "race_room",
        "race_go",
        "race_progress",
        "race_results",
        "race_invite",
        "invited",
        "queue_waiting",
        "queue_cancelled",
        "queue_matched",
    }
    room = schema["$defs"]["RoomState"]
    assert set(room["required"]) >= {"race_id", "code", "players", "watchers", "results"}
    state = schema["$defs"]["GameState"]
    assert set(state["required"]) >= {"game_id", "code", "tableau", "elapsed_ms"}


def test_a_rejection_carries_its_text_in_the_players_language_only_with_error_help() -> None:
    snapshot = _snapshot(Game.new(GameCode.random(RuleSet.EASY)))
    helped = json.loads(out.encode(out.rejected(snapshot, "blocked", Locale.ZH_HANT, True, 4)))
    assert helped["code"] == "blocked" and helped["message"] == "這張牌被擋住了"
    quiet = json.loads(out.encode(out.rejected(snapshot, "blocked", Locale.EN, False, 4)))
    assert quiet["code"] == "blocked" and "message" not in quiet
    silent = json.loads(out.encode(out.rejected(snapshot, "no_card", Locale.EN, True, 4)))
    assert "message" not in silent
    stale = json.loads(out.encode(out.rejected(snapshot, "stale_seq", Locale.EN, True, None)))
    assert stale["message"] == "The game moved on; here is its current state."


def test_an_invitation_names_its_room_and_who_sent_it() -> None:
    pushed = json.loads(out.encode(out.race_invite("KXR4TW", 1, "Ada")))
    assert pushed == {"type": "race_invite", "invite": "KXR4TW", "from": {"id": 1, "name": "Ada"}}
    reply = json.loads(out.encode(out.invited("KXR4TW", 2, "r7")))
    assert reply == {"type": "invited", "invite": "KXR4TW", "player_id": 2, "id": "r7"}
