"""The look-alike key of a display name: two players may not have names with the same key.

Look-alike letters come from the Unicode TR39 confusables data (``confusables.txt``) through
ICU's ``SpoofChecker`` skeleton, as bundled with the ``icu`` package.
"""

from __future__ import annotations

import unicodedata

import icu

#: Rounds of upper-case, skeleton and case folding after which a key is returned as it stands.
#: Every single letter, digit or mark settles within three.
_MAX_ROUNDS = 8

_CHECKER = icu.SpoofChecker()

#: Scripts may mix in a name only as TR39's "highly restrictive" level allows (one script, or
#: Han with Hiragana and Katakana, with Hangul, or with Bopomofo; digits and punctuation anywhere).
_MIXED = icu.SpoofChecker()
_MIXED.setChecks(icu.USpoofChecks.RESTRICTION_LEVEL)
_MIXED.setRestrictionLevel(icu.URestrictionLevel.HIGHLY_RESTRICTIVE)

#: Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt): code points that
#: draw nothing where they are not supported — variation selectors (U+FE00–FE0F,
#: U+E0100–E01EF), the combining grapheme joiner (U+034F), tags (U+E0000–E0FFF), zero-width and
#: bidirectional controls, soft hyphen, Hangul fillers (U+115F, U+1160, U+3164, U+FFA0),
#: Mongolian free variation selectors… From the ICU data installed with the ``icu`` package (a
#: Unicode version newer than Python's ``unicodedata``, which lacks the property).
_DEFAULT_IGNORABLE = icu.UnicodeSet("[:Default_Ignorable_Code_Point:]")


def invisible(text: str) -> list[str]:
    """The code points of ``text`` that draw nothing (Unicode's Default_Ignorable_Code_Point),
    in order; a name may hold none of them (two names differing only by one look alike, and a
    name of them would be blank)."""
    return [c for c in text if _DEFAULT_IGNORABLE.contains(c)]


def mixes_scripts(name: str) -> bool:
    """Whether ``name`` mixes letters of scripts that TR39's highly restrictive level keeps
    apart (a Cyrillic ``у`` in a Latin ``Racу``); Japanese and Korean mixes are allowed."""
    return bool(_MIXED.check(name))


def _skeleton(text: str) -> str:
    """The TR39 skeleton of ``text``: NFD, default-ignorable code points removed, every code point
    replaced by its confusables.txt prototype, NFD again."""
    # The skeleton type argument is ignored by ICU since 58 (there is one table).
    return str(_CHECKER.getSkeleton(0, text))


def _round(key: str) -> str:
    """One round: the skeleton of the capitals, case-folded; its skeleton, case-folded."""
    return _skeleton(_skeleton(key.upper()).casefold()).casefold()


def name_key(name: str) -> str:
    """The key that must be unique among players' names; equal keys mean look-alike names.

    What is compared, in order:

    1. the name in NFKC (as :func:`server.services.players.normalize_name` stores it), so
       compatibility forms such as fullwidth ``Ａｄａ`` are ``Ada``;
    2. full Unicode case folding (``str.casefold``: ``Straße`` and ``STRASSE``, ``ΣΑΣ`` and
       ``σας`` fold alike), with ``i`` and a combining dot above (the folding of ``İ``) taken as
       ``i``, as PostgreSQL's ``lower()`` takes ``İ``;
    3. rounds of: upper-case, TR39 skeleton, case folding, TR39 skeleton, case folding, until a
       round changes nothing. The skeleton of the capitals catches capitals that look alike
       (Cyrillic ``Н`` and Greek ``Η`` beside Latin ``H``, ``0`` beside ``O``), the skeleton of
       the small letters catches small ones (Cyrillic ``а`` beside ``a``, ``rn`` beside ``m``).

    Case is ignored before look-alikes are: TR39 takes capital ``I`` for small ``l``, so the
    key takes ``i``, ``l``, ``I`` and ``1`` alike (``Bianca`` and ``Blanca`` share a key).
    Names that ``lower()`` takes as equal always share a key. The key is for comparison only
    (it mixes scripts and is never shown), is idempotent (``name_key(name_key(x))`` is
    ``name_key(x)``), and depends on the confusables data of the installed ICU.
    """
    key = unicodedata.normalize("NFKC", name).casefold().replace("i\u0307", "i")
    for _ in range(_MAX_ROUNDS):
        settled = _round(key)
        if settled == key:
            break
        key = settled
    return key


__all__ = ["invisible", "mixes_scripts", "name_key"]
