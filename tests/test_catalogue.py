"""The message catalogue (server/catalogue/): both languages hold the same keys and placeholders,
every key the server or the page uses exists, and the texts players read are those docs/rules.md
§2 lists."""

from __future__ import annotations

import ast
import doctest
import json
import re
from pathlib import Path

import pytest

import server
from server import catalogue
from server.catalogue import Locale, has, placeholders, table, text
from server.engine import FULL_DECK, Rejection, RuleSet, Status
from server.engine.difficulty import Level
from server.protocol import game_messages
from server.protocol.server import PlayerText, rejection_text
from server.storage.games import GameMode

SERVER_DIR = Path(server.__file__).resolve().parent
STATIC_DIR = SERVER_DIR / "web" / "static"
JS_FILES = sorted((STATIC_DIR / "js").rglob("*.js"))
INDEX = STATIC_DIR / "index.html"

EN = table(Locale.EN)
ZH = table(Locale.ZH_HANT)


# ----------------------------------------------------------------------------- the files


def test_there_is_one_catalogue_per_locale_and_nothing_else() -> None:
    files = sorted(p.name for p in catalogue.CATALOGUE_DIR.glob("*.json"))
    assert files == sorted(f"{locale.value}.json" for locale in Locale)
    for locale in Locale:
        assert json.loads(catalogue.path(locale).read_text(encoding="utf-8")) == dict(table(locale))


def test_both_languages_have_exactly_the_same_keys() -> None:
    assert set(EN) - set(ZH) == set(), "missing in zh-Hant.json"
    assert set(ZH) - set(EN) == set(), "missing in en.json"


@pytest.mark.parametrize("key", list(EN))
def test_a_key_names_the_same_placeholders_in_both_languages(key: str) -> None:
    assert placeholders(EN[key]) == placeholders(ZH[key])


def test_every_text_is_a_non_empty_string() -> None:
    for locale in Locale:
        assert all(isinstance(v, str) and v.strip() for v in table(locale).values()), locale


def test_a_counted_text_has_both_plural_forms() -> None:
    for key in EN:
        base, _, form = key.rpartition(".")
        if form in ("one", "other"):
            assert {f"{base}.one", f"{base}.other"} <= set(EN), key


def test_a_catalogue_that_repeats_a_key_or_holds_no_text_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catalogue, "CATALOGUE_DIR", tmp_path)
    bad = {
        '{"a.b": "x", "a.b": "y"}': "'a.b' written more than once",
        '{"a.b": ""}': "'a.b' must be a non-empty string",
        '{"a.b": {"one": "x"}}': "'a.b' must be a non-empty string",
        '["a.b"]': "must be a JSON object",
    }
    for content, error in bad.items():
        (tmp_path / "en.json").write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=re.escape(error)):
            catalogue._load(Locale.EN)


# ----------------------------------------------------------------------------- reading texts


def test_docstring_examples_hold() -> None:
    assert doctest.testmod(catalogue).failed == 0
    results = doctest.testmod(game_messages)
    assert results.failed == 0 and results.attempted > 0  # rejection_text's examples


def test_placeholders_are_filled_by_name_and_others_left_as_they_stand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(catalogue._TABLES, Locale.EN, {"x.info": "{date} (UTC) · {rules} · {n}"})
    assert text("x.info", Locale.EN, date="2026-03-14", rules="Easy", n=3) == (
        "2026-03-14 (UTC) · Easy · 3"
    )
    assert text("x.info", Locale.EN, date="2026-03-14") == "2026-03-14 (UTC) · {rules} · {n}"
    assert text("x.info", Locale.EN) == "{date} (UTC) · {rules} · {n}"


def test_a_key_missing_in_a_language_is_read_in_english_and_an_unknown_key_raises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(catalogue._TABLES, Locale.ZH_HANT, {})
    assert text("rejected.blocked", Locale.ZH_HANT) == EN["rejected.blocked"]
    with pytest.raises(KeyError):
        text("no.such.key", Locale.EN)
    assert not has("no.such.key")


def test_locale_values_name_the_catalogues() -> None:
    assert Locale.EN.value == "en" and Locale.ZH_HANT.value == "zh-Hant"
    assert catalogue.path(Locale.ZH_HANT).name == "zh-Hant.json"


@pytest.mark.parametrize(
    "tag",
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
def test_traditional_chinese_tags_parse_to_zh_hant(tag: str) -> None:
    assert Locale.parse(tag) is Locale.ZH_HANT


@pytest.mark.parametrize(
    "tag", [None, "", "en", "EN", "en-US", "fr", "zh", "zh-Hans", "zh-CN", "xx-TW", "garbage!"]
)
def test_other_or_missing_tags_fall_back_to_english(tag: str | None) -> None:
    assert Locale.parse(tag) is Locale.EN


# ------------------------------------------------------------------------- what the server sends


@pytest.mark.parametrize(
    ("code", "locale", "expected"),
    [
        (Rejection.NOT_ADJACENT, Locale.EN, "Must be one rank higher or lower"),
        (Rejection.NOT_ADJACENT, Locale.ZH_HANT, "點數必須大一級或小一級"),
        (Rejection.BLOCKED, Locale.EN, "This card is blocked."),
        (Rejection.BLOCKED, Locale.ZH_HANT, "這張牌被擋住了"),
        (
            Rejection.RANKED_NO_UNDO,
            Locale.EN,
            "Ranked games have no undo: what you have seen cannot be unseen.",
        ),
        (Rejection.RANKED_NO_UNDO, Locale.ZH_HANT, "排名賽不能還原：看過的牌就無法當作沒看過。"),
        ("stale_seq", Locale.EN, "The game moved on; here is its current state."),
        ("stale_seq", Locale.ZH_HANT, "牌局已更新，以下是目前的狀態。"),
        ("daily_closed", Locale.EN, "This daily challenge is closed."),
        ("daily_closed", Locale.ZH_HANT, "本日挑戰已結束。"),
        ("race_over", Locale.EN, "The race is over."),
        ("race_over", Locale.ZH_HANT, "比賽已結束。"),
    ],
)
def test_rejection_texts_match_the_rules_table(code: str, locale: Locale, expected: str) -> None:
    assert rejection_text(code, locale) == expected


@pytest.mark.parametrize(
    "code",
    [Rejection.NO_CARD, Rejection.STOCK_EMPTY, Rejection.NOTHING_TO_UNDO, Rejection.GAME_OVER],
)
@pytest.mark.parametrize("locale", list(Locale))
def test_other_rejections_have_no_text(code: Rejection, locale: Locale) -> None:
    assert rejection_text(code, locale) is None


def test_the_blocked_notice_in_both_languages() -> None:
    assert text(PlayerText.BLOCKED_NOTICE, Locale.EN) == "Blocked: no more moves."
    assert text(PlayerText.BLOCKED_NOTICE, Locale.ZH_HANT) == "僵局：已無可走的步驟"


@pytest.mark.parametrize("key", list(PlayerText))
def test_every_key_the_server_sends_is_in_every_catalogue(key: PlayerText) -> None:
    for locale in Locale:
        assert key.value in table(locale), (locale, key)


def _catalogue_calls(path: Path) -> list[tuple[str, ast.expr]]:
    """Each call of the catalogue's ``text``/``has`` in ``path``: the enclosing function and the
    key argument."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "server.catalogue"
        for alias in node.names
        if alias.name in ("text", "has")
    }
    calls: list[tuple[str, ast.expr]] = []
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            direct = isinstance(f, ast.Name) and f.id in imported
            qualified = (
                isinstance(f, ast.Attribute)
                and f.attr in ("text", "has")
                and isinstance(f.value, ast.Name)
                and f.value.id == "catalogue"
            )
            if direct or qualified:
                calls.append((func.name, node.args[0]))
    return calls


def test_every_key_the_server_reads_is_a_literal_or_a_player_text() -> None:
    """A newcomer adding a server text names its key in :class:`PlayerText` (or writes it out):
    then the tests above find it. Only ``rejection_text`` passes a key through a variable, one
    of its table's ``PlayerText`` values."""
    seen = 0
    for path in sorted(SERVER_DIR.rglob("*.py")):
        if path.parent.name == "catalogue":
            continue
        for function, key in _catalogue_calls(path):
            seen += 1
            if isinstance(key, ast.Constant):
                assert isinstance(key.value, str) and has(key.value), (path.name, key.value)
            elif isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name):
                assert key.value.id == "PlayerText", (path.name, ast.unparse(key))
                assert key.attr in PlayerText.__members__, (path.name, key.attr)
            else:
                assert function == "rejection_text", (path.name, function, ast.unparse(key))
    assert seen >= 2


# ----------------------------------------------------------------------------- what the page uses

_CALL_LITERAL = re.compile(r"\b(t|tn|tNodes|has)\(\s*\"([^\"]+)\"")
_CALL_TEMPLATE = re.compile(r"\b(t|tn|tNodes|has)\(\s*`([^`]+)`")
_DOTTED = re.compile(r"[\"']([a-z][A-Za-z]*(?:\.[A-Za-z0-9_]+)+)[\"']")
_DATA_I18N = re.compile(r"data-i18n(?:-placeholder|-aria-label|-title)?=\"([^\"]+)\"")


def _js() -> dict[str, str]:
    assert JS_FILES, STATIC_DIR
    return {path.name: path.read_text(encoding="utf-8") for path in JS_FILES}


def test_the_page_asks_for_every_locale_the_server_has() -> None:
    found = re.search(r"export const LOCALES = (\[[^\]]*\]);", _js()["i18n.js"])
    assert found, "i18n.js names its LOCALES"
    assert json.loads(found[1]) == [locale.value for locale in Locale]
    assert not (STATIC_DIR / "i18n").exists(), "the page's texts live in the catalogue only"


def test_every_literal_key_the_page_uses_exists() -> None:
    used: set[str] = set()
    for name, source in _js().items():
        for fn, key in _CALL_LITERAL.findall(source):
            used.add(key)
            if fn == "tn":
                assert {f"{key}.one", f"{key}.other"} <= set(EN), (name, key)
            else:
                assert key in EN, (name, key)
    assert {"app.title", "count.cardsLeft", "err.generic"} <= used


def test_every_key_the_page_holds_in_a_variable_exists() -> None:
    """Keys chosen before the call (``t(copied ? "code.copied" : "code.selected")``, a key kept
    in a field): any quoted dotted name whose first part is one of the catalogue's."""
    namespaces = {key.split(".", 1)[0] for key in EN}
    for name, source in _js().items():
        for key in _DOTTED.findall(source):
            if key.split(".", 1)[0] not in namespaces:
                continue  # e.g. a local-storage name such as "tripeaks.token"
            plural = {f"{key}.one", f"{key}.other"} <= set(EN)
            assert key in EN or plural, (name, key)


def test_every_built_key_the_page_uses_matches_some_key() -> None:
    for name, source in _js().items():
        for _, template in _CALL_TEMPLATE.findall(source):
            pattern = re.compile(
                "".join(
                    ".+" if part.startswith("${") else re.escape(part)
                    for part in re.split(r"(\$\{[^}]*\})", template)
                    if part
                )
                + r"(\.one|\.other)?"
            )
            assert any(pattern.fullmatch(key) for key in EN), (name, template)


def test_the_values_the_page_builds_keys_from_all_have_a_text() -> None:
    for rules in RuleSet:
        assert {f"rules.{rules.value}", f"rules.short.{rules.value}"} <= set(EN), rules
    for mode in GameMode:
        assert f"mode.{mode.value}" in EN, mode
    for status in Status:
        assert f"race.status.{status.value}" in EN, status
    for status in (Status.WON, Status.BLOCKED):
        assert f"lb.status.{status.value}" in EN, status
    for status in Status:
        assert f"profile.status.{status.value}" in EN, status
    for room in ("lobby", "running", "finished", "closed"):
        assert f"invite.status.{room}" in EN, room
    for level in Level:
        assert f"daily.level.{level.value}" in EN, level
    for status in (Status.WON, Status.BLOCKED):
        assert f"daily.greedy.{status.value}" in EN, status
    for card in map(str, FULL_DECK):
        assert {f"rank.{card[0]}", f"suit.{card[1]}"} <= set(EN), card


def test_every_key_the_page_marks_in_its_html_exists() -> None:
    keys = _DATA_I18N.findall(INDEX.read_text(encoding="utf-8"))
    assert "app.title" in keys
    assert set(keys) - set(EN) == set()
