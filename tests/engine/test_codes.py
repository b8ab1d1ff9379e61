"""Game codes and rule sets: grammar, normalisation, range, random codes (docs/rules.md §3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.engine import CODE_SPACE, DEAL_ALGORITHM, GameCode, InvalidGameCodeError, RuleSet
from server.engine.codes import CODE_LENGTH
from server.engine.errors import InvalidRuleSetError


def test_code_space_is_26_to_the_7th_and_algorithm_is_tp1() -> None:
    assert CODE_SPACE == 26**7 == 8_031_810_176
    assert CODE_LENGTH == 7
    assert DEAL_ALGORITHM == "TP1"


@pytest.mark.parametrize(
    ("text", "rules", "number"),
    [
        ("TP1-E-AAAAAAA", RuleSet.EASY, 0),
        ("TP1-E-AAAAAAB", RuleSet.EASY, 1),
        ("TP1-C-AAAAABA", RuleSet.CLASSIC, 26),
        ("TP1-C-BAAAAAA", RuleSet.CLASSIC, 26**6),
        ("TP1-E-ZZZZZZZ", RuleSet.EASY, 26**7 - 1),
        # H E L L O A B = 7 4 11 11 14 0 1 in base 26
        ("TP1-E-HELLOAB", RuleSet.EASY, 2_215_165_473),
    ],
)
def test_good_codes_parse_to_rules_and_base_26_number(
    text: str, rules: RuleSet, number: int
) -> None:
    code = GameCode.parse(text)
    assert code.rules is rules
    assert code.number == number
    assert str(code) == text


def test_parse_is_case_insensitive_and_shows_upper_case() -> None:
    code = GameCode.parse("tp1-c-helloab")
    assert code == GameCode.parse("TP1-C-HELLOAB")
    assert str(code) == "TP1-C-HELLOAB"
    assert str(GameCode.parse("Tp1-e-HeLlOaB")) == "TP1-E-HELLOAB"


def test_parse_strips_surrounding_whitespace() -> None:
    assert str(GameCode.parse("  TP1-E-AAAAAAB\n\t")) == "TP1-E-AAAAAAB"


@pytest.mark.parametrize("text", ["TP1-N-AAAAAAB", "tp1-n-aaaaaab"])
def test_legacy_n_is_read_as_easy_and_shown_as_e(text: str) -> None:
    code = GameCode.parse(text)
    assert code.rules is RuleSet.EASY
    assert str(code) == "TP1-E-AAAAAAB"
    assert code == GameCode.parse("TP1-E-AAAAAAB")


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "form"),
        ("TP1", "form"),
        ("TP1-E", "form"),
        ("TP1EAAAAAAA", "form"),
        ("TP1-E-AAAA-AAA", "form"),
        ("TP1--E-AAAAAAA", "form"),
        ("TP3-E-AAAAAAA", "algorithm"),
        ("TP0-E-AAAAAAA", "algorithm"),
        ("TP-E-AAAAAAA", "algorithm"),
        ("XX1-E-AAAAAAA", "algorithm"),
        (" TP1 -E-AAAAAAA", "algorithm"),
        ("TP1-X-AAAAAAA", "rule set"),
        ("TP1-EE-AAAAAAA", "rule set"),
        ("TP1--AAAAAAA", "rule set"),
        ("TP1-1-AAAAAAA", "rule set"),
        ("TP1-E-AAAAAA", "7 letters"),
        ("TP1-E-AAAAAAAA", "7 letters"),
        ("TP1-E-", "7 letters"),
        ("TP1-E-AAAAAA1", "7 letters"),
        ("TP1-E-1234567", "7 letters"),
        ("TP1-E-AAA AAA", "7 letters"),
        ("TP1-E-ÀAAAAAA", "7 letters"),
        ("TP1-E-AAAAAA_", "7 letters"),
    ],
)
def test_bad_codes_are_rejected_naming_the_code_and_the_problem(text: str, complaint: str) -> None:
    with pytest.raises(InvalidGameCodeError) as raised:
        GameCode.parse(text)
    message = str(raised.value)
    assert repr(text) in message
    assert complaint in message


def test_error_message_for_a_huge_input_stays_short() -> None:
    with pytest.raises(InvalidGameCodeError) as raised:
        GameCode.parse("X" * 100_000)
    assert len(str(raised.value)) < 300


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidGameCodeError):
        GameCode.parse(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("number", [-1, CODE_SPACE, CODE_SPACE + 1, 2**64, True, 1.5, "3"])
def test_out_of_range_or_non_int_numbers_are_rejected(number: object) -> None:
    with pytest.raises(InvalidGameCodeError) as raised:
        GameCode(RuleSet.EASY, number)  # type: ignore[arg-type]
    assert repr(number) in str(raised.value)


def test_code_needs_a_rule_set_value() -> None:
    with pytest.raises(InvalidGameCodeError):
        GameCode("E", 0)  # type: ignore[arg-type]


def test_letters_are_seven_upper_case_base_26_digits() -> None:
    assert GameCode(RuleSet.EASY, 0).letters == "AAAAAAA"
    assert GameCode(RuleSet.EASY, 1).letters == "AAAAAAB"
    assert GameCode(RuleSet.EASY, 27).letters == "AAAAABB"
    assert GameCode(RuleSet.EASY, CODE_SPACE - 1).letters == "ZZZZZZZ"


def test_from_letters_builds_the_same_code_as_parse() -> None:
    assert GameCode.from_letters("HELLOAB") == GameCode.parse("TP1-E-HELLOAB")
    assert GameCode.from_letters("helloab", RuleSet.CLASSIC) == GameCode.parse("TP1-C-HELLOAB")


@pytest.mark.parametrize("letters", ["", "ABC", "ABCDEFGH", "ABCDEF1", "ABC-DEF"])
def test_from_letters_rejects_anything_but_seven_letters(letters: str) -> None:
    with pytest.raises(InvalidGameCodeError):
        GameCode.from_letters(letters)


@settings(deadline=None)  # a busy machine may be slow: no time limit per example
@given(st.integers(0, CODE_SPACE - 1), st.sampled_from(RuleSet))
def test_str_and_parse_round_trip_for_any_code(number: int, rules: RuleSet) -> None:
    code = GameCode(rules, number)
    text = str(code)
    assert text == f"TP1-{rules.value}-{code.letters}"
    assert GameCode.parse(text) == code
    assert GameCode.parse(text.lower()) == code
    assert GameCode.from_letters(code.letters, rules) == code


def test_random_codes_are_valid_and_vary() -> None:
    codes = [GameCode.random() for _ in range(50)]
    assert all(code.rules is RuleSet.EASY for code in codes)
    assert all(0 <= code.number < CODE_SPACE for code in codes)
    assert all(GameCode.parse(str(code)) == code for code in codes)
    assert len({code.number for code in codes}) > 45
    assert GameCode.random(RuleSet.CLASSIC).rules is RuleSet.CLASSIC


def test_random_uses_secrets_randbelow_over_the_whole_code_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []

    def fake_randbelow(bound: int) -> int:
        seen.append(bound)
        return bound - 1

    monkeypatch.setattr("server.engine.codes.secrets.randbelow", fake_randbelow)
    assert GameCode.random() == GameCode(RuleSet.EASY, CODE_SPACE - 1)
    assert seen == [CODE_SPACE]


@pytest.mark.parametrize(
    ("text", "rules"),
    [
        ("E", RuleSet.EASY),
        ("e", RuleSet.EASY),
        ("C", RuleSet.CLASSIC),
        ("c", RuleSet.CLASSIC),
        ("N", RuleSet.EASY),
        ("n", RuleSet.EASY),
    ],
)
def test_rule_set_parse_accepts_e_c_and_legacy_n(text: str, rules: RuleSet) -> None:
    assert RuleSet.parse(text) is rules


@pytest.mark.parametrize("text", ["", "X", "EC", "easy", "1", "Ｅ"])
def test_rule_set_parse_rejects_other_letters_naming_them(text: str) -> None:
    with pytest.raises(InvalidRuleSetError) as raised:
        RuleSet.parse(text)
    assert repr(text) in str(raised.value)
    assert isinstance(raised.value, InvalidGameCodeError)


def test_rule_set_values_and_wrapping() -> None:
    assert RuleSet.EASY.value == "E" and RuleSet.CLASSIC.value == "C"
    assert RuleSet.EASY.wraps is True
    assert RuleSet.CLASSIC.wraps is False


def test_codes_are_hashable_immutable_values() -> None:
    code = GameCode.parse("TP1-E-AAAAAAB")
    assert {code, GameCode.parse("tp1-n-aaaaaab")} == {code}
    with pytest.raises(AttributeError):
        code.number = 5  # type: ignore[misc]
