"""Rule sets and game codes (docs/rules.md §3 "Grammar", "Input leniency", "The number"); the
``TP1`` and ``TP2`` deal algorithms a code names are :mod:`server.engine.deals`' (their names
stay importable from here).

``TP1`` codes (7 letters, 26⁷ ≈ 2³³ deals) are for free play and codes players share: the 11
cards visible at the start identify one by brute force in minutes. ``TP2`` codes (28 letters,
26²⁸ ≈ 2¹³¹·⁶ deals) are for deals that must stay secret (the daily, races on a random deal):
their space cannot be searched. Both shuffle and deal the same way; only the random words differ.

>>> code = GameCode.parse(" tp1-n-aaaaaab ")
>>> str(code), code.rules, code.number, code.version
('TP1-E-AAAAAAB', <RuleSet.EASY: 'E'>, 1, <DealVersion.TP1: 'TP1'>)
>>> deal = GameCode.parse("TP1-E-AAAAAAA").deal()
>>> str(deal.tableau[0]), str(deal.waste), str(deal.stock[0])
('3H', '4H', 'KH')
>>> sealed = GameCode.parse("tp2-e-aaaaaaaaaaaaaaaaaaaaaaaaaaab")
>>> str(sealed), sealed.number
('TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAB', 1)
>>> str(GameCode.parse("TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA").deal().waste)
'QD'
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from server.engine.deals import (
    STOCK_SIZE,
    Deal,
    DealVersion,
    check_number,
    deal_tp1,
    deal_tp2,
    deal_words,
    tp1_shuffle,
    tp1_words,
)
from server.engine.errors import InvalidGameCodeError, InvalidRuleSetError, shown

__all__ = [
    "CODE_LENGTH",
    "CODE_SPACE",
    "DEAL_ALGORITHM",
    "STOCK_SIZE",
    "TP2_CODE_LENGTH",
    "TP2_CODE_SPACE",
    "TP2_GROUP",
    "Deal",
    "DealVersion",
    "GameCode",
    "RuleSet",
    "deal_tp1",
    "deal_tp2",
    "deal_words",
    "tp1_shuffle",
    "tp1_words",
]


DEAL_ALGORITHM: Final = DealVersion.TP1
"""The deal algorithm of free play and of codes players type (docs/rules.md §3); secret deals use
TP2."""

CODE_LENGTH: Final = DealVersion.TP1.letters
"""Letters in a TP1 code's number part."""

CODE_SPACE: Final = DealVersion.TP1.space
"""Number of distinct deals a TP1 code can name: ``0 <= number < CODE_SPACE``."""

TP2_CODE_LENGTH: Final = DealVersion.TP2.letters
"""Letters in a TP2 code's number part (shown as four groups of :data:`TP2_GROUP`)."""

TP2_CODE_SPACE: Final = DealVersion.TP2.space
"""Number of distinct deals a TP2 code can name (26²⁸ ≈ 2¹³¹·⁶)."""

TP2_GROUP: Final = 7
"""Letters per group when a TP2 code is shown (``TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB``)."""

_LETTERS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class RuleSet(StrEnum):
    """The two rule sets; the value is the letter shown in codes (docs/rules.md §2, §3)."""

    EASY = "E"
    CLASSIC = "C"

    @classmethod
    def parse(cls, text: str) -> RuleSet:
        """Read a rule-set letter.

        Args:
            text: ``"E"``, ``"C"`` or the legacy ``"N"`` (read as Easy); case-insensitive,
                surrounding whitespace ignored.

        Returns:
            The :class:`RuleSet`.

        Raises:
            InvalidRuleSetError: (an :class:`InvalidGameCodeError`) for anything else, naming it.
        """
        letter = text.strip().upper() if isinstance(text, str) else None
        if letter == "N":
            return cls.EASY
        for rules in cls:
            if rules.value == letter:
                return rules
        raise InvalidRuleSetError(
            f"invalid rule set {shown(text)}: expected E (Easy), C (Classic) or legacy N"
        )

    @property
    def wraps(self) -> bool:
        """``True`` when King and Ace are neighbours both ways (Easy), ``False`` for Classic."""
        return self is RuleSet.EASY


def _letters_to_number(letters: str) -> int:
    number = 0
    for letter in letters:
        number = number * 26 + _LETTERS.index(letter)
    return number


def _is_code_letters(text: str, count: int) -> bool:
    return len(text) == count and all(letter in _LETTERS for letter in text)


#: Longest quote of a bad code in an error: a whole TP2 code and a little more.
_CODE_SHOWN: Final = 60

_FORMS: Final = {
    DealVersion.TP1: "TP1-<E|C>-<7 letters A-Z>, e.g. TP1-E-HELLOAB",
    DealVersion.TP2: "TP2-<E|C>-<28 letters A-Z, in four groups of 7 or one>, "
    "e.g. TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB",
}


def _code_problem(parts: list[str]) -> str | None:
    """What is wrong with an upper-cased code split at its hyphens, or None."""
    versions = {version.value: version for version in DealVersion}
    if len(parts) < 3:
        named = versions.get(parts[0])
        if named is not None:
            return f"expected the form {_FORMS[named]}"
        return f"expected the form {_FORMS[DealVersion.TP1]}, or {_FORMS[DealVersion.TP2]}"
    version = versions.get(parts[0])
    if version is None:
        return f"unknown deal algorithm {shown(parts[0])}, expected TP1 or TP2"
    groups = parts[2:]
    group_counts = (1,) if version is DealVersion.TP1 else (1, TP2_CODE_LENGTH // TP2_GROUP)
    if len(groups) not in group_counts:
        return f"expected the form {_FORMS[version]}"
    if parts[1] not in ("E", "C", "N"):
        return f"unknown rule set {shown(parts[1])}, expected E, C or N"
    if len(groups) == 1:
        if not _is_code_letters(groups[0], version.letters):
            count = version.letters
            return f"the deal part {shown(groups[0])} must be exactly {count} letters A-Z"
        return None
    for index, group in enumerate(groups, start=1):
        if not _is_code_letters(group, TP2_GROUP):
            return f"group {index} of the deal part, {shown(group)}, must be exactly 7 letters A-Z"
    return None


@dataclass(frozen=True, slots=True)
class GameCode:
    """A game code: a rule set, a deal number and the deal algorithm (docs/rules.md §3).

    ``TP1-<R>-<7 letters>`` or ``TP2-<R>-<28 letters>`` (shown as four groups of 7).

    Attributes:
        rules: the :class:`RuleSet`.
        number: ``0 <= number < version.space``; the same number deals the same cards under any
            rules.
        version: the :class:`DealVersion` (``TP1`` unless given).

    Raises:
        InvalidGameCodeError: on construction, when ``number`` is out of range or ``rules`` is not
            a :class:`RuleSet`.
    """

    rules: RuleSet
    number: int
    version: DealVersion = DealVersion.TP1
    #: The code as written (``str(code)``), spelled once: every STATE names it.
    _text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.rules, RuleSet):
            raise InvalidGameCodeError(f"invalid rule set {shown(self.rules)}: expected a RuleSet")
        if not isinstance(self.version, DealVersion):
            raise InvalidGameCodeError(
                f"invalid deal algorithm {shown(self.version)}: expected a DealVersion"
            )
        check_number(self.number, self.version)
        object.__setattr__(self, "_text", self._spelled())

    @classmethod
    def parse(cls, text: str) -> GameCode:
        """Read a game code (docs/rules.md §3 "Grammar", "TP2").

        Args:
            text: e.g. ``"TP1-E-HELLOAB"`` or ``"TP2-C-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB"`` (a TP2
                code's hyphens between its groups may be left out); case-insensitive,
                surrounding whitespace stripped; the legacy rule letter ``N`` is read as ``E``.

        Returns:
            The :class:`GameCode`.

        Raises:
            InvalidGameCodeError: the text is not a code; the message names it and what is wrong.
        """
        if not isinstance(text, str):
            raise InvalidGameCodeError(f"invalid game code {shown(text)}: not a string")
        parts = text.strip().upper().split("-")
        if not text.isascii():  # "ı".upper() is "I": only the letters A-Z themselves count
            problem: str | None = (
                "only ASCII may appear: the deal part is 7 letters A-Z (TP1) or 28 (TP2)"
            )
        else:
            problem = _code_problem(parts)
        if problem is not None:
            raise InvalidGameCodeError(f"invalid game code {shown(text, _CODE_SHOWN)}: {problem}")
        version = DealVersion(parts[0])
        return cls(RuleSet.parse(parts[1]), _letters_to_number("".join(parts[2:])), version)

    @classmethod
    def from_letters(
        cls, letters: str, rules: RuleSet = RuleSet.EASY, version: DealVersion = DealVersion.TP1
    ) -> GameCode:
        """Build a code from its letters.

        Args:
            letters: ``version.letters`` letters A–Z (case-insensitive), the base-26 number,
                most significant first.
            rules: the rule set.
            version: the deal algorithm (TP1 unless given).

        Returns:
            The :class:`GameCode`.

        Raises:
            InvalidGameCodeError: ``letters`` is not the right number of letters A–Z.
        """
        upper = letters.upper() if isinstance(letters, str) else ""
        if not _is_code_letters(upper, version.letters):
            raise InvalidGameCodeError(
                f"invalid game code letters {shown(letters)}: "
                f"expected exactly {version.letters} letters A-Z"
            )
        return cls(rules, _letters_to_number(upper), version)

    @classmethod
    def random(
        cls, rules: RuleSet = RuleSet.EASY, version: DealVersion = DealVersion.TP1
    ) -> GameCode:
        """A code with a uniformly random number from a cryptographic source (docs/rules.md §3).

        Args:
            rules: the rule set.
            version: ``TP1`` (free play) or ``TP2`` (a deal that must stay secret).

        Returns:
            A new :class:`GameCode`.
        """
        return cls(rules, secrets.randbelow(version.space), version)

    @property
    def sealed(self) -> bool:
        """Whether the code is a ``TP2`` code, whose deal cannot be recovered from its cards."""
        return self.version is DealVersion.TP2

    @property
    def letters(self) -> str:
        """The upper-case letters naming :attr:`number` in base 26 (A = 0), without group
        hyphens: 7 for TP1 (``"AAAAAAB"``), 28 for TP2."""
        digits = []
        number = self.number
        for _ in range(self.version.letters):
            number, digit = divmod(number, 26)
            digits.append(_LETTERS[digit])
        return "".join(reversed(digits))

    def deal(self) -> Deal:
        """The cards of this code, by its deal algorithm (depends on :attr:`number` and
        :attr:`version` only, never on the rules).

        Returns:
            The :class:`Deal`.
        """
        if self.version is DealVersion.TP2:
            return deal_tp2(self.number)
        return deal_tp1(self.number)

    def __str__(self) -> str:
        return self._text

    def _spelled(self) -> str:
        letters = self.letters
        if self.version is DealVersion.TP2:
            letters = "-".join(
                letters[i : i + TP2_GROUP] for i in range(0, len(letters), TP2_GROUP)
            )
        return f"{self.version.value}-{self.rules.value}-{letters}"
