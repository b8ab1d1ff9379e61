"""Errors and rejection codes (docs/rules.md §2 rejection table); their texts for players are in
the message catalogue (tests/test_catalogue.py)."""

from __future__ import annotations

import pytest

from server.engine import (
    EngineError,
    IllegalActionError,
    InvalidActionError,
    InvalidCardError,
    InvalidDealError,
    InvalidGameCodeError,
    InvalidPositionError,
    InvalidRuleSetError,
    Rejection,
)


def test_rejection_codes_have_their_wire_values() -> None:
    assert {code.name: code.value for code in Rejection} == {
        "NOT_ADJACENT": "not_adjacent",
        "BLOCKED": "blocked",
        "NO_CARD": "no_card",
        "STOCK_EMPTY": "stock_empty",
        "NOTHING_TO_UNDO": "nothing_to_undo",
        "GAME_OVER": "game_over",
        "ACTION_LIMIT": "action_limit",
        "RANKED_NO_UNDO": "ranked_no_undo",
    }


@pytest.mark.parametrize(
    "error",
    [
        IllegalActionError,
        InvalidActionError,
        InvalidCardError,
        InvalidDealError,
        InvalidGameCodeError,
        InvalidPositionError,
        InvalidRuleSetError,
    ],
)
def test_every_engine_error_is_an_engine_error_and_a_value_error(error: type[Exception]) -> None:
    assert issubclass(error, EngineError) and issubclass(error, ValueError)


def test_illegal_action_error_carries_its_code_and_detail() -> None:
    error = IllegalActionError(Rejection.BLOCKED, "position 0 is covered")
    assert error.code is Rejection.BLOCKED and error.detail == "position 0 is covered"
    assert str(error) == "blocked: position 0 is covered"
    assert str(IllegalActionError(Rejection.GAME_OVER)) == "game_over"
