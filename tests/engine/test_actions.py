"""Action values: construction, validation, text form; AppliedAction (docs/rules.md §2, §6)."""

from __future__ import annotations

import pytest

from server.engine import (
    Action,
    ActionKind,
    AppliedAction,
    Card,
    EngineError,
    InvalidActionError,
    InvalidPositionError,
    Status,
)


def test_action_kinds_and_statuses_have_their_wire_values() -> None:
    assert [kind.value for kind in ActionKind] == ["remove", "draw", "undo"]
    assert [status.value for status in Status] == ["playing", "won", "blocked", "resigned"]


def test_constructors_build_the_three_kinds() -> None:
    assert Action.remove(5) == Action(ActionKind.REMOVE, 5)
    assert Action.draw() == Action(ActionKind.DRAW) == Action(ActionKind.DRAW, None)
    assert Action.undo() == Action(ActionKind.UNDO)


@pytest.mark.parametrize("pos", [0, 13, 27])
def test_remove_accepts_positions_0_to_27(pos: int) -> None:
    assert Action.remove(pos).pos == pos


@pytest.mark.parametrize("pos", [-1, 28, 100, None, True, False, 1.0, "3"])
def test_remove_rejects_anything_but_an_int_position_0_to_27(pos: object) -> None:
    with pytest.raises(InvalidPositionError) as raised:
        Action.remove(pos)  # type: ignore[arg-type]
    assert repr(pos) in str(raised.value)
    assert isinstance(raised.value, InvalidActionError)
    assert isinstance(raised.value, EngineError) and isinstance(raised.value, ValueError)


@pytest.mark.parametrize("kind", [ActionKind.DRAW, ActionKind.UNDO])
def test_draw_and_undo_take_no_position(kind: ActionKind) -> None:
    with pytest.raises(InvalidActionError, match="takes no position"):
        Action(kind, 3)


def test_kind_given_as_its_wire_string_is_converted() -> None:
    action = Action("draw")  # type: ignore[arg-type]
    assert action.kind is ActionKind.DRAW and action == Action.draw()


@pytest.mark.parametrize("kind", ["fly", "", None, 3, "REMOVE"])
def test_unknown_kinds_are_rejected(kind: object) -> None:
    with pytest.raises(InvalidActionError):
        Action(kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "action", [Action.remove(0), Action.remove(27), Action.draw(), Action.undo()], ids=str
)
def test_text_form_round_trips(action: Action) -> None:
    assert Action.parse(str(action)) == action
    assert Action.parse(str(action).upper()) == action


def test_text_forms() -> None:
    assert str(Action.remove(7)) == "remove 7"
    assert str(Action.draw()) == "draw" and str(Action.undo()) == "undo"


@pytest.mark.parametrize(
    "text", ["", "remove", "remove 28", "remove -1", "draw 1", "jump", "undo x"]
)
def test_parse_rejects_malformed_text(text: str) -> None:
    with pytest.raises(InvalidActionError):
        Action.parse(text)


def test_actions_are_hashable_immutable_values() -> None:
    assert {Action.remove(1), Action.remove(1), Action.draw()} == {Action.remove(1), Action.draw()}
    with pytest.raises(AttributeError):
        Action.draw().pos = 1  # type: ignore[misc]


def test_applied_action_names_the_action_it_records() -> None:
    card = Card.parse("AS")
    assert AppliedAction(ActionKind.REMOVE, 4, card, 499, Status.PLAYING).action == Action.remove(4)
    assert AppliedAction(ActionKind.DRAW, None, card, 499, Status.PLAYING).action == Action.draw()
    assert AppliedAction(ActionKind.UNDO, 4, card, 500, Status.PLAYING).action == Action.undo()


def test_from_record_keeps_only_a_removals_position() -> None:
    assert Action.from_record("remove", 5) == Action.remove(5)
    assert Action.from_record("undo", 24) == Action.undo()  # where the card went back
    assert Action.from_record("draw", None) == Action.draw()
    with pytest.raises(InvalidActionError):
        Action.from_record("fly", None)
    with pytest.raises(InvalidActionError):
        Action.from_record("remove", 28)
