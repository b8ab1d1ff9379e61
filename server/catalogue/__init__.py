"""The message catalogue: every text a player reads, one JSON file per language.

``en.json`` and ``zh-Hant.json`` beside this module each map a key to its text. The server reads
them here, once, when this module is first imported (:func:`text`); the page fetches the very same
files from ``/i18n/<locale>.json`` (``server/web/static/js/i18n.js``). To change a wording, edit
the JSON; nothing else needs to change.

What a newcomer needs to know:

- Both files hold the same keys, and a key's text names the same placeholders in both
  (``tests/test_catalogue.py`` checks it, and that every key the server or the page uses exists).
- A placeholder is a name in braces, ``{name}``, filled in from the named parameters; one with no
  parameter of its name is left as it stands.
- A counted text has one key per plural form: ``<key>.one`` and ``<key>.other`` (the page picks
  the form with ``Intl.PluralRules``; a language with one form repeats it in both).
- The keys the server sends players are listed in :class:`server.protocol.server.PlayerText`
  (``state.…``: the notice of a game's state; ``rejected.<code>``: why an action was refused).
  Every other key is the page's.

The engine knows nothing of this: it speaks in codes (:class:`server.engine.errors.Rejection`),
and the layers above turn a code into a text in the player's :class:`Locale`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Final

__all__ = ["CATALOGUE_DIR", "Locale", "has", "path", "placeholders", "table", "text"]

#: The directory holding one ``<locale>.json`` per :class:`Locale`.
CATALOGUE_DIR: Final = Path(__file__).resolve().parent

_PLACEHOLDER: Final = re.compile(r"\{(\w+)\}")


class Locale(StrEnum):
    """The languages player texts exist in (docs/rules.md §2); the value names the catalogue."""

    EN = "en"
    ZH_HANT = "zh-Hant"

    @classmethod
    def parse(cls, text: str | None) -> Locale:
        """Read a locale tag leniently; anything unknown falls back to English.

        Args:
            text: a BCP 47 tag such as ``"en"``, ``"zh-Hant"``, ``"zh-TW"``, ``"zh-HK"`` (case and
                ``_``/``-`` do not matter; an Accept-Language list is read by its first tag), or
                ``None``.

        Returns:
            :attr:`ZH_HANT` for Traditional Chinese tags, :attr:`EN` otherwise. Never raises.

        >>> Locale.parse("zh-tw")
        <Locale.ZH_HANT: 'zh-Hant'>
        >>> Locale.parse(None)
        <Locale.EN: 'en'>
        """
        if not isinstance(text, str):
            return cls.EN
        tag = text.split(",", 1)[0].split(";", 1)[0].strip().lower().replace("_", "-")
        if tag == "zh-hant" or tag.startswith("zh-hant-") or tag in _HANT_REGIONS:
            return cls.ZH_HANT
        return cls.EN


_HANT_REGIONS: Final = frozenset({"zh-tw", "zh-hk", "zh-mo"})


def path(locale: Locale) -> Path:
    """The catalogue file of ``locale`` (``server/catalogue/zh-Hant.json``)."""
    return CATALOGUE_DIR / f"{Locale(locale).value}.json"


def _load(locale: Locale) -> Mapping[str, str]:
    """Read and check one catalogue: a JSON object of distinct keys whose every value is a
    non-empty string.

    Raises:
        ValueError: the file is not such an object; the message names the file and the key.
    """
    file = path(locale)

    def unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
        keys = [key for key, _ in pairs]
        twice = sorted({key for key in keys if keys.count(key) > 1})
        if twice:
            raise ValueError(f"{file}: {', '.join(map(repr, twice))} written more than once")
        return dict(pairs)

    entries = json.loads(file.read_text(encoding="utf-8"), object_pairs_hook=unique)
    if not isinstance(entries, dict):
        raise ValueError(f"{file}: the catalogue must be a JSON object of key to text")
    for key, value in entries.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"{file}: the text of {key!r} must be a non-empty string")
    return MappingProxyType(entries)


_TABLES: Final[Mapping[Locale, Mapping[str, str]]] = {locale: _load(locale) for locale in Locale}


def table(locale: Locale) -> Mapping[str, str]:
    """Every key of ``locale``'s catalogue and its text (read-only, in the file's order)."""
    return _TABLES[Locale(locale)]


def has(key: str) -> bool:
    """Whether ``key`` is in the catalogue (the English one, which every language matches).

    >>> has("rejected.blocked"), has("rejected.no_card")
    (True, False)
    """
    return key in _TABLES[Locale.EN]


def text(key: str, locale: Locale, /, **params: object) -> str:
    """The text of ``key`` in ``locale``, its ``{name}`` placeholders filled from ``params``.

    Args:
        key: a catalogue key, such as ``"rejected.blocked"``.
        locale: the player's language; a key missing there is read in English (as the page does).
        **params: a value for each placeholder (written with ``str``); a placeholder without one
            is left as it stands.

    Returns:
        The text.

    Raises:
        KeyError: ``key`` is in no catalogue.

    >>> text("rejected.blocked", Locale.ZH_HANT)
    '這張牌被擋住了'
    """
    template = _TABLES[Locale(locale)].get(key)
    if template is None:
        template = _TABLES[Locale.EN][key]
    if not params:
        return template
    return _PLACEHOLDER.sub(
        lambda m: str(params[m[1]]) if m[1] in params else m[0],
        template,
    )


def placeholders(template: str) -> frozenset[str]:
    """The placeholder names in a text.

    >>> sorted(placeholders("Score {score} · Moves {moves}"))
    ['moves', 'score']
    """
    return frozenset(_PLACEHOLDER.findall(template))
