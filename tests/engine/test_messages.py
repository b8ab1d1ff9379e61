"""Errors, rejection codes, locales and player messages (docs/rules.md §2 rejection table)."""

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
    Locale,
    Rejection,
    blocked_notice,
    rejection_message,
)


def test_rejection_codes_have_their_wire_values() -> None:
    assert {code.name: code.value for code in Rejection} == {
        "NOT_ADJACENT": "not_adjacent",
        "BLOCKED": "blocked",
        "NO_CARD": "no_card",
        "STOCK_EMPTY": "stock_empty",
        "NOTHING_TO_UNDO": "nothing_to_undo",
        "GAME_OVER": "game_over",
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


@pytest.mark.parametrize(
    ("code", "locale", "text"),
    [
        (Rejection.NOT_ADJACENT, Locale.EN, "Must be one rank higher or lower"),
        (Rejection.NOT_ADJACENT, Locale.ZH_HANT, "點數必須大一級或小一級"),
        (Rejection.BLOCKED, Locale.EN, "This card is blocked."),
        (Rejection.BLOCKED, Locale.ZH_HANT, "這張牌被擋住了"),
    ],
)
def test_rejection_messages_match_the_rules_table(
    code: Rejection, locale: Locale, text: str
) -> None:
    assert rejection_message(code, locale) == text


@pytest.mark.parametrize(
    "code",
    [Rejection.NO_CARD, Rejection.STOCK_EMPTY, Rejection.NOTHING_TO_UNDO, Rejection.GAME_OVER],
)
@pytest.mark.parametrize("locale", list(Locale))
def test_other_rejections_have_no_message(code: Rejection, locale: Locale) -> None:
    assert rejection_message(code, locale) is None


def test_blocked_notice_in_both_languages() -> None:
    assert blocked_notice(Locale.EN) == "No more moves available."
    assert blocked_notice(Locale.ZH_HANT) == "已無可走的步驟"


def test_locale_values() -> None:
    assert Locale.EN.value == "en" and Locale.ZH_HANT.value == "zh-Hant"


@pytest.mark.parametrize(
    "text",
    [
        "zh-Hant",
        "zh-hant",
        "ZH-HANT",
        "zh-TW",
        "zh-tw",
        "zh-HK",
        "zh_TW",
        "zh-Hant-TW",
        "zh-MO",
        "zh-TW,zh;q=0.9,en;q=0.8",
    ],
)
def test_traditional_chinese_tags_parse_to_zh_hant(text: str) -> None:
    assert Locale.parse(text) is Locale.ZH_HANT


@pytest.mark.parametrize(
    "text", [None, "", "en", "EN", "en-US", "fr", "zh", "zh-Hans", "zh-CN", "xx-TW", "garbage!"]
)
def test_other_or_missing_tags_fall_back_to_english(text: str | None) -> None:
    assert Locale.parse(text) is Locale.EN
