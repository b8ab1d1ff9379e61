"""The client → server message parser (server/protocol/client.py): every type, every bound, every
error code, the request id in errors, the JSON Schema, and property tests over arbitrary JSON."""

from __future__ import annotations

import doctest
import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.engine.codes import DealVersion, GameCode, RuleSet
from server.engine.game import Action
from server.protocol import client
from server.protocol.client import (
    MAX_ID,
    MESSAGE_TYPES,
    ActionRequest,
    ClientMessage,
    Hello,
    Hint,
    InviteToRace,
    JoinDaily,
    NewGame,
    Ping,
    ProtocolError,
    QueueCancel,
    QueueJoin,
    RaceCreate,
    RaceJoin,
    RaceLeave,
    RaceStart,
    Resign,
    Resume,
    client_message_schema,
    parse_client_message,
    peek_request_id,
)

CLASSES: dict[str, type[Any]] = {
    "hello": Hello,
    "new_game": NewGame,
    "join_daily": JoinDaily,
    "resume": Resume,
    "action": ActionRequest,
    "resign": Resign,
    "race_create": RaceCreate,
    "race_join": RaceJoin,
    "race_leave": RaceLeave,
    "race_start": RaceStart,
    "invite_to_race": InviteToRace,
    "queue_join": QueueJoin,
    "queue_cancel": QueueCancel,
    "hint": Hint,
    "ping": Ping,
}

#: The smallest valid message of each type.
MINIMAL: dict[str, dict[str, Any]] = {
    "hello": {"type": "hello", "token": "t"},
    "new_game": {"type": "new_game"},
    "join_daily": {"type": "join_daily"},
    "resume": {"type": "resume", "game_id": 1},
    "action": {"type": "action", "game_id": 1, "seq": 0, "action": "draw"},
    "resign": {"type": "resign", "game_id": 1},
    "race_create": {"type": "race_create"},
    "race_join": {"type": "race_join", "invite": "ACDEFG"},
    "race_leave": {"type": "race_leave", "invite": "ACDEFG"},
    "race_start": {"type": "race_start", "invite": "ACDEFG"},
    "invite_to_race": {"type": "invite_to_race", "invite": "ACDEFG", "player_id": 1},
    "queue_join": {"type": "queue_join"},
    "queue_cancel": {"type": "queue_cancel"},
    "hint": {"type": "hint", "game_id": 1},
    "ping": {"type": "ping"},
}

#: Each type with every optional member given.
MAXIMAL: dict[str, dict[str, Any]] = {
    "hello": {
        "type": "hello",
        "id": 1,
        "token": "t" * 200,
        "locale": "zh-Hant",
        "error_help": False,
        "games": [{"game_id": MAX_ID, "seq": 0}] * 20,
    },
    "new_game": {"type": "new_game", "id": "n", "code": "TP1-C-AAAAAAB", "rules": "c"},
    "join_daily": {"type": "join_daily", "id": 2},
    "resume": {"type": "resume", "id": 3, "game_id": MAX_ID, "seq": 10**6},
    "action": {
        "type": "action",
        "id": 4,
        "game_id": MAX_ID,
        "seq": 10**6,
        "action": "remove",
        "pos": 27,
    },
    "resign": {"type": "resign", "id": 5, "game_id": MAX_ID},
    "race_create": {
        "type": "race_create",
        "id": 6,
        "code": "TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAB",
        "rules": "C",
        "time_limit_s": 86_400,
        "rated": False,
    },
    "race_join": {"type": "race_join", "id": 7, "invite": "A" * 20, "watch": True, "rated": True},
    "race_leave": {"type": "race_leave", "id": 8, "invite": "A" * 20},
    "race_start": {"type": "race_start", "id": 9, "invite": "A" * 20},
    "invite_to_race": {
        "type": "invite_to_race",
        "id": 11,
        "invite": "A" * 20,
        "player_id": MAX_ID,
    },
    "queue_join": {"type": "queue_join", "id": 12, "rules": "c"},
    "queue_cancel": {"type": "queue_cancel", "id": 13},
    "hint": {"type": "hint", "id": 10, "game_id": MAX_ID},
    "ping": {"type": "ping", "id": "x" * 64},
}


def _frame(message: dict[str, Any]) -> str:
    return json.dumps(message)


def _error(raw: str | bytes) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        parse_client_message(raw)
    return caught.value


def _with(kind: str, **members: Any) -> dict[str, Any]:
    return {**MINIMAL[kind], **members}


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(client, verbose=False).failed == 0


def test_the_message_types_are_the_fifteen_classes() -> None:
    assert set(MESSAGE_TYPES) == set(CLASSES) == set(MINIMAL) == set(MAXIMAL)
    assert len(MESSAGE_TYPES) == 15
    for kind, cls in CLASSES.items():
        assert cls.__struct_config__.tag == kind


@pytest.mark.parametrize("kind", MESSAGE_TYPES)
def test_every_type_parses_minimal(kind: str) -> None:
    message = parse_client_message(_frame(MINIMAL[kind]))
    assert type(message) is CLASSES[kind]
    assert message.id is None


@pytest.mark.parametrize("kind", MESSAGE_TYPES)
def test_every_type_parses_maximal(kind: str) -> None:
    wire = MAXIMAL[kind]
    message = parse_client_message(_frame(wire))
    assert type(message) is CLASSES[kind]
    assert message.id == wire["id"]
    for name, value in wire.items():
        if name not in ("type", "id", "code", "rules", "action"):
            assert msgspec.to_builtins(getattr(message, name)) == value, name


def test_bytes_frames_parse_too() -> None:
    assert isinstance(parse_client_message(b'{"type": "ping", "id": 1}'), Ping)


def test_the_type_member_may_come_anywhere() -> None:
    message = parse_client_message('{"game_id": 9, "id": "x", "type": "resume"}')
    assert isinstance(message, Resume) and (message.game_id, message.id) == (9, "x")


def test_defaults() -> None:
    hello = parse_client_message(_frame(MINIMAL["hello"]))
    assert isinstance(hello, Hello) and (hello.locale, hello.error_help) == (None, True)
    join = parse_client_message(_frame(MINIMAL["race_join"]))
    assert isinstance(join, RaceJoin) and join.watch is False
    race = parse_client_message(_frame(MINIMAL["race_create"]))
    assert isinstance(race, RaceCreate)
    assert (race.code, race.rules, race.time_limit_s) == (None, RuleSet.EASY, None)


# --- engine values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ({"action": "remove", "pos": 0}, Action.remove(0)),
        ({"action": "remove", "pos": 27}, Action.remove(27)),
        ({"action": "draw"}, Action.draw()),
        ({"action": "undo"}, Action.undo()),
        ({"action": "draw", "pos": None}, Action.draw()),
        ({"action": "undo", "pos": None}, Action.undo()),
    ],
)
def test_actions_become_engine_actions(wire: dict[str, Any], expected: Action) -> None:
    message = parse_client_message(_frame(_with("action", **wire)))
    assert isinstance(message, ActionRequest)
    assert message.action == expected
    assert message.pos == expected.pos


@pytest.mark.parametrize("kind", ["new_game", "race_create"])
@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (None, RuleSet.EASY),
        ("E", RuleSet.EASY),
        ("e", RuleSet.EASY),
        ("C", RuleSet.CLASSIC),
        ("c", RuleSet.CLASSIC),
    ],
)
def test_rules_become_a_rule_set(kind: str, rules: str | None, expected: RuleSet) -> None:
    wire = _with(kind, rules=rules)
    for frame in (_frame(wire), _frame({k: v for k, v in wire.items() if v is not None})):
        message = parse_client_message(frame)
        assert isinstance(message, NewGame | RaceCreate)
        assert message.rules is expected and message.code is None


@pytest.mark.parametrize("kind", ["new_game", "race_create"])
def test_codes_become_game_codes_keeping_their_own_rule_set(kind: str) -> None:
    message = parse_client_message(_frame(_with(kind, code=" tp1-c-aaaaaab ", rules="E")))
    assert isinstance(message, NewGame | RaceCreate)
    assert message.code == GameCode(RuleSet.CLASSIC, 1)
    assert message.rules is RuleSet.EASY  # for a random deal only; the code says Classic
    legacy = parse_client_message(_frame(_with(kind, code="tp1-n-aaaaaaa", rules="c")))
    assert isinstance(legacy, NewGame | RaceCreate)
    assert legacy.code == GameCode(RuleSet.EASY, 0) and legacy.rules is RuleSet.CLASSIC
    sealed = parse_client_message(_frame(_with(kind, code="tp2-e-" + "a" * 27 + "b")))
    assert isinstance(sealed, NewGame | RaceCreate)
    assert sealed.code == GameCode(RuleSet.EASY, 1, DealVersion.TP2)


def test_messages_built_in_code_hold_engine_values() -> None:
    remove = ActionRequest(game_id=1, seq=0, action=Action.remove(5))
    assert (remove.action, remove.pos) == (Action.remove(5), 5)
    draw = ActionRequest(game_id=1, seq=0, action=Action.draw())
    assert (draw.action, draw.pos) == (Action.draw(), None)
    code = GameCode(RuleSet.CLASSIC, 3)
    new = NewGame(code=code, rules=RuleSet.CLASSIC)
    assert (new.code, new.rules) == (code, RuleSet.CLASSIC)
    assert RaceCreate().rules is RuleSet.EASY
    with pytest.raises(ProtocolError) as caught:
        ActionRequest(game_id=1, seq=0, action=Action.remove(5), pos=6)
    assert caught.value.code == "invalid_message"


def test_messages_are_frozen_and_hashable() -> None:
    message = parse_client_message(_frame(MAXIMAL["action"]))
    assert isinstance(message, ActionRequest)
    with pytest.raises(AttributeError):
        message.seq = 3  # type: ignore[misc]
    assert hash(message) == hash(parse_client_message(_frame(MAXIMAL["action"])))


# --- bounds and types ------------------------------------------------------------------------

GAME_ID_GOOD = [1, 2, MAX_ID]
GAME_ID_BAD = [0, -1, MAX_ID + 1, "1", 1.0, True, None, [1], {"id": 1}]

#: (type, member, accepted values, refused values): refused ones give ``invalid_message``.
BOUNDS: list[tuple[str, str, list[Any], list[Any]]] = [
    ("ping", "id", [0, -1, 2**63, 10**30, "", "x" * 64, None], ["x" * 65, True, 1.0, [], {}]),
    ("hello", "token", ["t", "t" * 200], ["", "t" * 201, 1, None, True, ["t"]]),
    ("hello", "locale", [None, "", "x" * 20], ["x" * 21, 1, False]),
    ("hello", "error_help", [True, False], [1, 0, "true", None]),
    ("new_game", "code", [None, "TP1-E-AAAAAAA", " TP1-E-AAAAAAA" + " " * 50], ["x" * 65, 12]),
    ("new_game", "rules", [None, "E", "C", "e", "c"], ["X", "N", "n", "", "EC", 1, True]),
    ("resume", "game_id", GAME_ID_GOOD, GAME_ID_BAD),
    ("resume", "seq", [None, 0, 1, 2**63], [-1, "0", 0.0, False, 1.5]),
    ("resign", "game_id", GAME_ID_GOOD, GAME_ID_BAD),
    ("hint", "game_id", GAME_ID_GOOD, GAME_ID_BAD),
    ("action", "game_id", GAME_ID_GOOD, GAME_ID_BAD),
    ("action", "seq", [0, 1, 2**63, 10**30], [-1, "0", 0.0, False, None, 1.5]),
    ("action", "action", ["draw", "undo"], ["fly", "Draw", "DRAW", "", 1, None, True]),
    ("race_create", "code", [None, "tp1-e-aaaaaaa"], ["x" * 65, 5, True]),
    ("race_create", "rules", [None, "E", "C", "e", "c"], ["X", "", 0]),
    ("race_create", "time_limit_s", [None, 1, 86_400], [0, -1, 86_401, "60", 60.5, True]),
    ("race_join", "invite", ["A", "A" * 20], ["", "A" * 21, 123, None, ["ACDEFG"]]),
    ("race_join", "watch", [True, False], [1, "yes", None]),
    ("race_create", "rated", [True, False], [1, "yes", None]),
    ("race_join", "rated", [True, False], [0, "true", None]),
    ("race_leave", "invite", ["A", "A" * 20], ["", "A" * 21, 123, None]),
    ("race_start", "invite", ["A", "A" * 20], ["", "A" * 21, 123, None]),
]


def _bound_cases(good: bool) -> list[Any]:
    cases = []
    for kind, member, accepted, refused in BOUNDS:
        for value in accepted if good else refused:
            cases.append(pytest.param(kind, member, value, id=f"{kind}.{member}={value!r:.20}"))
    return cases


@pytest.mark.parametrize(("kind", "member", "value"), _bound_cases(good=True))
def test_values_at_the_edges_are_accepted(kind: str, member: str, value: Any) -> None:
    message = parse_client_message(_frame(_with(kind, **{member: value})))
    assert type(message) is CLASSES[kind]
    if member not in ("code", "rules", "action"):
        assert getattr(message, member) == value


@pytest.mark.parametrize(("kind", "member", "value"), _bound_cases(good=False))
def test_values_past_the_edges_are_invalid_messages_naming_the_member(
    kind: str, member: str, value: Any
) -> None:
    wire = {**_with(kind, id="r"), member: value}
    error = _error(_frame(wire))
    assert error.code == "invalid_message", error.message
    assert error.message.startswith(f"{kind}: {member}: "), error.message
    assert error.request_id == ("r" if member != "id" else None)


@pytest.mark.parametrize("pos", [0, 13, 27])
def test_remove_positions_at_the_edges(pos: int) -> None:
    message = parse_client_message(_frame(_with("action", action="remove", pos=pos)))
    assert isinstance(message, ActionRequest) and message.action == Action.remove(pos)


@pytest.mark.parametrize("pos", [-1, 28, 100, "1", 1.0, True, [1]])
def test_remove_positions_past_the_edges(pos: Any) -> None:
    error = _error(_frame(_with("action", action="remove", pos=pos, id=19)))
    assert (error.code, error.request_id) == ("invalid_message", 19)
    assert error.message.startswith("action: pos: "), error.message


def test_messages_name_what_was_wrong() -> None:
    cases = {
        '{"type": "action", "game_id": "1", "seq": 0, "action": "draw"}': (
            "action: game_id: Expected `int`, got `str`"
        ),
        '{"type": "resume", "game_id": 0}': "resume: game_id: Expected `int` >= 1",
        '{"type": "action", "game_id": 1, "seq": 0, "action": "remove", "pos": 28}': (
            "action: pos: Expected `int` <= 27"
        ),
        '{"type": "action", "game_id": 1, "seq": 0, "action": "fly"}': (
            "action: action: Invalid enum value 'fly', expected 'remove', 'draw' or 'undo'"
        ),
        '{"type": "new_game", "rules": "X"}': (
            "new_game: rules: Invalid enum value 'X', expected 'E', 'C', 'e' or 'c'"
        ),
        '{"type": "resume"}': "resume: game_id: required field missing",
        '{"type": "ping", "extra": 1}': "ping: extra: unknown field, not allowed",
        '{"type": "ping", "id": true}': "ping: id: Expected `int | str | null`, got `bool`",
        '{"type": "ping", "id": "' + "x" * 65 + '"}': "ping: id: Expected `str` of length <= 64",
        '{"type": "hello", "token": ""}': "hello: token: Expected `str` of length >= 1",
        # A member of a member is named by its path.
        '{"type": "hello", "token": "t", "games": [{"game_id": 1}]}': (
            "hello: games[0].seq: required field missing"
        ),
        '{"type": "hello", "token": "t", "games": [{"game_id": 1, "seq": 0, "x": 1}]}': (
            "hello: games[0].x: unknown field, not allowed"
        ),
        '{"type": "hello", "token": "t", "games": [{"game_id": 0, "seq": 0}]}': (
            "hello: games[0].game_id: Expected `int` >= 1"
        ),
    }
    for frame, message in cases.items():
        error = _error(frame)
        assert (error.code, error.message) == ("invalid_message", message), frame


@pytest.mark.parametrize("kind", MESSAGE_TYPES)
def test_extra_members_are_refused(kind: str) -> None:
    error = _error(_frame({**MAXIMAL[kind], "extra": 1}))
    assert error.code == "invalid_message"
    assert error.message == f"{kind}: extra: unknown field, not allowed"
    assert error.request_id == MAXIMAL[kind]["id"]


@pytest.mark.parametrize("kind", [k for k in MESSAGE_TYPES if len(MINIMAL[k]) > 1])
def test_each_required_member_is_required(kind: str) -> None:
    for member in MINIMAL[kind]:
        if member == "type":
            continue
        wire = {k: v for k, v in MINIMAL[kind].items() if k != member}
        error = _error(_frame({**wire, "id": 7}))
        assert (error.code, error.request_id) == ("invalid_message", 7)
        assert error.message == f"{kind}: {member}: required field missing"


def test_remove_needs_pos_and_draw_and_undo_take_none() -> None:
    error = _error(_frame(_with("action", action="remove", id=17)))
    assert (error.code, error.message, error.request_id) == (
        "invalid_message",
        "action 'remove' needs 'pos' (0..27)",
        17,
    )
    error = _error(_frame(_with("action", action="remove", pos=None, id=17)))
    assert error.message == "action 'remove' needs 'pos' (0..27)"
    for action in ("draw", "undo"):
        error = _error(_frame(_with("action", action=action, pos=3, id="d")))
        assert (error.code, error.message, error.request_id) == (
            "invalid_message",
            f"action {action!r} takes no 'pos'",
            "d",
        )


# --- bad codes -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["new_game", "race_create"])
@pytest.mark.parametrize(
    "code",
    ["TP1-X-AAAAAAA", "hello", "TP1-E-AAAA", "TP2-E-AAAAAAA", "TP1-E-AAAAAAı", "", "x" * 64],
)
def test_bad_codes_are_bad_code_quoting_the_engine(kind: str, code: str) -> None:
    error = _error(_frame(_with(kind, code=code, id=24)))
    assert (error.code, error.request_id) == ("bad_code", 24)
    with pytest.raises(ValueError) as engine:
        GameCode.parse(code)
    assert error.message == str(engine.value)


def test_a_bad_code_in_an_otherwise_invalid_message_is_an_invalid_message() -> None:
    error = _error(_frame(_with("new_game", code="nope", extra=1)))
    assert error.code == "invalid_message"
    assert _error('{"type": "new_game", "code": "nope"} x').code == "bad_json"


# --- malformed frames ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        "{not json",
        "",
        "   ",
        "{",
        '{"type": "ping"',
        '{"type": "ping"} x',
        "[1, 2",
        "nul",
        '{"type": "ping",}',
        "{'type': 'ping'}",
        '\ufeff{"type": "ping"}',
        "[" * 100_000,
        '{"type": "ping", "id": ' + "9" * 5000 + "}",
        b'{"type": "ping", "id": "\xff"}',
    ],
)
def test_frames_that_are_not_json_are_bad_json(frame: str | bytes) -> None:
    error = _error(frame)
    assert error.code == "bad_json" and error.request_id is None
    assert error.message.startswith("message is not valid JSON: ")


def test_bad_json_quotes_the_standard_library() -> None:
    assert _error("{not json").message == (
        "message is not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )


@pytest.mark.parametrize("frame", ["[1, 2]", "[]", '"ping"', "1", "1.5", "null", "true", "[{}]"])
def test_json_that_is_not_an_object_is_not_an_object(frame: str) -> None:
    error = _error(frame)
    assert (error.code, error.request_id) == ("not_an_object", None)
    assert error.message == "message must be a JSON object with a 'type'"


@pytest.mark.parametrize(
    ("frame", "what", "request_id"),
    [
        ('{"type": "teleport", "id": 30}', "unknown message type 'teleport'", 30),
        ('{"id": 31}', "missing message 'type'", 31),
        ("{}", "missing message 'type'", None),
        ('{"type": 5, "id": "a"}', "missing message 'type'", "a"),
        ('{"type": null}', "missing message 'type'", None),
        ('{"type": "PING"}', "unknown message type 'PING'", None),
        ('{"type": "' + "x" * 41 + '"}', "missing message 'type'", None),
        ('{"type": ["ping"], "id": true}', "missing message 'type'", None),
    ],
)
def test_unknown_or_missing_types_list_the_types(
    frame: str, what: str, request_id: int | str | None
) -> None:
    error = _error(frame)
    assert error.code == "unknown_type"
    assert error.message == f"{what}; expected one of {', '.join(MESSAGE_TYPES)}"
    assert error.request_id == request_id


def test_an_unknown_type_wins_over_extra_members() -> None:
    assert _error('{"type": "fly", "extra": 1}').code == "unknown_type"


# --- the id in errors ------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [0, -5, 2**63, 10**30, "", "abc", "x" * 64, "小明"])
def test_errors_echo_a_valid_id(request_id: int | str) -> None:
    for frame in (
        {"type": "resume", "game_id": "1", "id": request_id},
        {"type": "ping", "id": request_id, "x": None},
        {"type": "fly", "id": request_id},
        {"type": "new_game", "code": "bad", "id": request_id},
    ):
        error = _error(json.dumps(frame, ensure_ascii=False))
        assert error.request_id == request_id, frame
        assert peek_request_id(json.dumps(frame)) == request_id


@pytest.mark.parametrize("request_id", [True, False, 1.0, None, [1], {"a": 1}, "x" * 65])
def test_errors_do_not_echo_an_invalid_id(request_id: Any) -> None:
    error = _error(_frame({"type": "resume", "game_id": 0, "id": request_id}))
    assert (error.code, error.request_id) == ("invalid_message", None)
    assert peek_request_id(_frame({"type": "ping", "id": request_id})) is None


def test_a_lone_surrogate_is_refused_but_the_id_is_echoed() -> None:
    error = _error('{"type": "ping", "id": "\\ud800"}')
    assert (error.code, error.request_id) == ("invalid_message", "\ud800")
    assert error.message == "ping: id: a string is not valid Unicode (a lone surrogate)"
    assert peek_request_id('{"type": "ping", "id": "\\ud800"}') == "\ud800"
    for frame in (
        '{"type": "hello", "token": "\\udc00x", "id": 3}',
        '{"type": "race_join", "invite": "a\\ud800", "id": 3}',
        '{"type": "new_game", "code": "\\ud800", "id": 3}',
    ):
        error = _error(frame)
        assert (error.code, error.request_id) == ("invalid_message", 3), frame
        assert "a string is not valid Unicode" in error.message
    raw = _error('{"type": "ping", "id": "\ud800"}')  # the character itself, not its escape
    assert (raw.code, raw.request_id) == ("invalid_message", "\ud800")


def test_surrogate_pairs_are_fine() -> None:
    message = parse_client_message('{"type": "ping", "id": "\\ud83d\\ude00"}')
    assert message.id == "😀"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_invalid_messages(number: str) -> None:
    error = _error('{"type": "resume", "id": 1, "game_id": ' + number + "}")
    assert (error.code, error.request_id) == ("invalid_message", 1)
    assert error.message == "resume: game_id: NaN and Infinity are not JSON numbers"


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1e5", "1.0", "1E2", "0.5"])
def test_floats_are_never_ints(number: str) -> None:
    error = _error('{"type": "resume", "id": 1, "game_id": ' + number + "}")
    assert (error.code, error.request_id) == ("invalid_message", 1)
    assert error.message.startswith("resume: game_id: ")


def test_deep_nesting_in_a_member_is_refused_without_a_crash() -> None:
    deep = "[" * 50_000 + "]" * 50_000
    for frame in (
        '{"type": "ping", "id": ' + deep + "}",
        '{"type": "ping", "x": ' + deep + "}",
        '{"x": ' + deep + ', "type": "ping"}',
    ):
        assert _error(frame).code in ("bad_json", "invalid_message")
        assert peek_request_id(frame) is None


def test_duplicate_members_keep_the_last() -> None:
    message = parse_client_message('{"type": "ping", "id": 1, "id": "b"}')
    assert message.id == "b"


def test_peek_request_id() -> None:
    assert peek_request_id('{"type": "action", "id": 5, "pos": "junk"}') == 5
    assert peek_request_id('{"id": "a", "whatever": [1, {"b": NaN}]}') == "a"
    assert peek_request_id('{"whatever": 1}') is None
    assert peek_request_id("[1]") is None
    assert peek_request_id("{not json") is None
    assert peek_request_id(b'{"id": 2}') == 2
    assert peek_request_id('{"id": "\ud800"}') == "\ud800"


# --- the JSON Schema -------------------------------------------------------------------------


def _conforms(schema: dict[str, Any], value: Any, defs: dict[str, Any]) -> bool:
    """Whether ``value`` (parsed JSON) conforms to ``schema``: the keywords msgspec emits."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return _conforms(defs[name], value, defs)
    if "anyOf" in schema and not any(_conforms(s, value, defs) for s in schema["anyOf"]):
        return False
    kind = schema.get("type")
    checks = {
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "null": value is None,
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
    }
    if kind is not None and not checks[kind]:
        return False
    if checks["array"] and (
        not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value))
        or not all(_conforms(schema.get("items", {}), item, defs) for item in value)
    ):
        return False
    if "enum" in schema and not any(value == e and type(value) is type(e) for e in schema["enum"]):
        return False
    if "const" in schema and not (value == schema["const"] and type(value) is str):
        return False
    if checks["integer"] and not schema.get("minimum", value) <= value <= schema.get(
        "maximum", value
    ):
        return False
    if checks["string"] and not (
        schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
    ):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", ())):
            return False
        if schema.get("additionalProperties") is False and set(value) - set(properties):
            return False
        for name, member in value.items():
            if name in properties and not _conforms(properties[name], member, defs):
                return False
        if "if" in schema:
            branch = "then" if _conforms(schema["if"], value, defs) else "else"
            if branch in schema and not _conforms(schema[branch], value, defs):
                return False
    return True


def _parses(message: dict[str, Any]) -> bool:
    try:
        parse_client_message(json.dumps(message))
    except ProtocolError as exc:
        assert exc.code in ("invalid_message", "unknown_type", "not_an_object"), exc.code
        return False
    return True


def test_the_schema_lists_every_message_type() -> None:
    schema = client_message_schema()
    assert schema["discriminator"]["propertyName"] == "type"
    mapping = schema["discriminator"]["mapping"]
    assert set(mapping) == set(MESSAGE_TYPES)
    assert len(schema["anyOf"]) == len(MESSAGE_TYPES)
    defs = schema["$defs"]
    for kind, cls in CLASSES.items():
        assert mapping[kind] == f"#/$defs/{cls.__name__}"
        definition = defs[cls.__name__]
        assert definition["properties"]["type"] == {"enum": [kind]}
        assert definition["additionalProperties"] is False
        assert "type" in definition["required"]
        assert definition["description"]
        assert set(definition["properties"]) == {"type", "id"} | set(MAXIMAL[kind])
    json.dumps(schema)  # plain JSON


EXAMPLES: list[Any] = [
    *MINIMAL.values(),
    *MAXIMAL.values(),
    _with("action", action="remove", pos=3),
    _with("action", action="remove"),
    _with("action", action="remove", pos=None),
    _with("action", action="draw", pos=3),
    _with("action", action="undo", pos=None),
    _with("action", seq=-1),
    _with("action", game_id=True),
    _with("resume", game_id=MAX_ID + 1),
    _with("hello", token=""),
    _with("hello", locale="x" * 21),
    _with("race_create", time_limit_s=0),
    _with("race_create", rules="x"),
    _with("race_join", watch=None),
    _with("ping", id=1.5),
    _with("ping", id="x" * 65),
    _with("ping", extra=1),
    _with("join_daily", id=None),
    {"type": "fly"},
    {"id": 1},
    [1, 2],
]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: json.dumps(e)[:60])
def test_the_schema_agrees_with_the_parser(example: Any) -> None:
    schema = client_message_schema()
    assert _conforms(schema, example, schema["$defs"]) is _parses(example)


# --- properties ------------------------------------------------------------------------------

#: Text, now and then holding a lone surrogate or a surrogate pair.
TEXT = st.lists(st.text(max_size=8) | st.sampled_from(["\ud800", "\udfff", "\U0001f600"])).map(
    "".join
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.sampled_from(MESSAGE_TYPES),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner),
    max_leaves=20,
)
MEMBER_NAMES = st.sampled_from(
    [
        *("id", "token", "locale", "error_help", "code", "rules", "game_id", "seq"),
        *("action", "pos", "time_limit_s", "invite", "watch", "extra"),
    ]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=30),
    st.sampled_from([MAX_ID, MAX_ID + 1, 86_400, 86_401, 2**64, -(2**63) - 1]),
    st.floats(),
    TEXT,
    st.sampled_from(["remove", "draw", "undo", "E", "C", "c", "TP1-E-AAAAAAA", "x" * 65]),
)
#: A valid minimal message with members taken away, added or changed.
MESSAGE_LIKE = st.builds(
    lambda kind, dropped, members: {
        **{name: value for name, value in MINIMAL[kind].items() if name not in dropped},
        **members,
    },
    st.sampled_from(MESSAGE_TYPES),
    st.sets(MEMBER_NAMES, max_size=2),
    st.dictionaries(MEMBER_NAMES, SCALARS, max_size=3),
)


def _check_outcome(frame: str | bytes) -> None:
    try:
        message = parse_client_message(frame)
    except ProtocolError as exc:
        assert exc.code in (
            "bad_json",
            "not_an_object",
            "unknown_type",
            "invalid_message",
            "bad_code",
        )
        assert exc.message
        if exc.code in ("bad_json", "not_an_object"):
            assert exc.request_id is None
        else:
            assert exc.request_id == peek_request_id(frame)
    else:
        assert isinstance(message, ClientMessage)
        assert message.id == peek_request_id(frame)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON_VALUES | MESSAGE_LIKE, ascii_only=st.booleans())
def test_arbitrary_json_gives_a_message_or_a_protocol_error(value: Any, ascii_only: bool) -> None:
    frame = json.dumps(value, ensure_ascii=ascii_only)
    _check_outcome(frame)
    if ascii_only:
        _check_outcome(frame.encode())


@settings(max_examples=300)
@given(text=TEXT | st.binary(max_size=100))
def test_arbitrary_text_gives_a_message_or_a_protocol_error(text: str | bytes) -> None:
    _check_outcome(text)


@settings(max_examples=300)
@given(message=MESSAGE_LIKE.filter(lambda m: not _surrogates(m)))
def test_the_schema_agrees_with_the_parser_on_generated_messages(message: dict[str, Any]) -> None:
    if isinstance(message.get("code"), str) and len(message["code"]) <= 64:
        message["code"] = "TP1-E-AAAAAAA"  # code validity is the parser's alone
    schema = client_message_schema()
    assert _conforms(schema, message, schema["$defs"]) is _parses(message)


def _surrogates(value: Any) -> bool:
    return re.search("[\ud800-\udfff]", json.dumps(value, ensure_ascii=False)) is not None


ENGINE_ACTIONS = st.one_of(
    st.integers(min_value=0, max_value=27).map(Action.remove),
    st.just(Action.draw()),
    st.just(Action.undo()),
)


@given(
    action=ENGINE_ACTIONS,
    game_id=st.integers(min_value=1, max_value=MAX_ID),
    seq=st.integers(min_value=0, max_value=2**70),
    request_id=st.none() | st.integers() | st.text(max_size=64),
    order=st.randoms(use_true_random=False),
)
def test_valid_actions_round_trip_to_the_engine_action(
    action: Action, game_id: int, seq: int, request_id: int | str | None, order: Any
) -> None:
    wire: dict[str, Any] = {"type": "action", "game_id": game_id, "seq": seq}
    wire["action"] = action.kind.value
    if action.pos is not None:
        wire["pos"] = action.pos
    if request_id is not None:
        wire["id"] = request_id
    items = list(wire.items())
    order.shuffle(items)
    message = parse_client_message(json.dumps(dict(items)))
    assert isinstance(message, ActionRequest)
    assert message.action == action
    assert (message.game_id, message.seq, message.pos, message.id) == (
        game_id,
        seq,
        action.pos,
        request_id,
    )
