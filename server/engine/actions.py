"""Value types of a game: status, actions, the record of an applied action, the player's view.

These value types are re-exported by :mod:`server.engine.game`, where most callers import them.

>>> Action.remove(5)
Action(kind=<ActionKind.REMOVE: 'remove'>, pos=5)
>>> str(Action.draw()), Action.parse("remove 27").pos
('draw', 27)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from server.engine.cards import Card
from server.engine.errors import InvalidActionError, InvalidPositionError, shown
from server.engine.layout import POSITION_COUNT

__all__ = [
    "FACE_DOWN",
    "Action",
    "ActionKind",
    "AppliedAction",
    "GameView",
    "Status",
    "check_position",
]

FACE_DOWN: Final[str] = "down"
"""Stands in a :class:`GameView` for a card the player may not see."""


class Status(StrEnum):
    """Where a game stands (docs/rules.md §2 "Won", "Blocked"; §4 "Ranked play")."""

    PLAYING = "playing"
    WON = "won"
    BLOCKED = "blocked"
    RESIGNED = "resigned"


class ActionKind(StrEnum):
    """The three player actions; the value is the wire name (docs/rules.md §2, §6)."""

    REMOVE = "remove"
    DRAW = "draw"
    UNDO = "undo"


def check_position(pos: object) -> int:
    """Validate a layout position.

    Args:
        pos: the candidate position.

    Returns:
        ``pos`` itself, when it is an ``int`` (not a ``bool``) in ``0..27``.

    Raises:
        InvalidPositionError: otherwise, naming the value.
    """
    if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < POSITION_COUNT:
        raise InvalidPositionError(
            f"invalid position {shown(pos)}: expected an int in 0..{POSITION_COUNT - 1}"
        )
    return pos


@dataclass(frozen=True, slots=True)
class Action:
    """One player action: ``remove`` at ``pos``, ``draw`` or ``undo``.

    Attributes:
        kind: the :class:`ActionKind` (a matching string such as ``"draw"`` is converted).
        pos: the layout position for ``remove`` (``0..27``); ``None`` for ``draw`` and ``undo``.

    Raises:
        InvalidPositionError: ``remove`` without a valid position.
        InvalidActionError: an unknown kind, or a position given to ``draw``/``undo``.
    """

    kind: ActionKind
    pos: int | None = None

    def __post_init__(self) -> None:
        try:
            kind = ActionKind(self.kind)
        except (ValueError, TypeError):
            raise InvalidActionError(
                f"invalid action kind {shown(self.kind)}: expected remove, draw or undo"
            ) from None
        object.__setattr__(self, "kind", kind)
        if kind is ActionKind.REMOVE:
            check_position(self.pos)
        elif self.pos is not None:
            raise InvalidActionError(f"{kind.value} takes no position, got {shown(self.pos)}")

    @classmethod
    def remove(cls, pos: int) -> Action:
        """The action removing the card at ``pos`` (``0..27``).

        Raises:
            InvalidPositionError: ``pos`` is not an int in ``0..27``.
        """
        return cls(ActionKind.REMOVE, pos)

    @classmethod
    def draw(cls) -> Action:
        """The action drawing the top stock card onto the waste."""
        return cls(ActionKind.DRAW)

    @classmethod
    def undo(cls) -> Action:
        """The action reverting the most recent not-yet-undone removal or draw."""
        return cls(ActionKind.UNDO)

    @classmethod
    def from_record(cls, kind: str, pos: int | None) -> Action:
        """The action an :class:`AppliedAction` record stands for (docs/rules.md §5 replay).

        A record keeps the position a card moved from or back to; only a removal's position
        is part of the action (an undone removal's record names where the card went back).

        Raises:
            InvalidActionError: ``kind`` is not ``remove``, ``draw`` or ``undo``, or a
                removal's ``pos`` is not in ``0..27``.
        """
        return cls(kind, pos if kind == ActionKind.REMOVE.value else None)  # type: ignore[arg-type]

    @classmethod
    def parse(cls, text: str) -> Action:
        """Read the text form produced by ``str(action)``.

        Args:
            text: ``"remove <pos>"``, ``"draw"`` or ``"undo"`` (case-insensitive, whitespace-split).

        Returns:
            The :class:`Action`.

        Raises:
            InvalidActionError: the text is not an action (``InvalidPositionError`` for a bad pos).
        """
        words = text.lower().split() if isinstance(text, str) else []
        if len(words) == 2 and words[0] == ActionKind.REMOVE and words[1].isdecimal():
            return cls.remove(int(words[1]))
        if len(words) == 1 and words[0] in (ActionKind.DRAW, ActionKind.UNDO):
            return cls(ActionKind(words[0]))
        raise InvalidActionError(
            f"invalid action {shown(text)}: expected 'remove <0..27>', 'draw' or 'undo'"
        )

    def __str__(self) -> str:
        if self.kind is ActionKind.REMOVE:
            return f"{self.kind.value} {self.pos}"
        return self.kind.value


@dataclass(frozen=True, slots=True)
class AppliedAction:
    """What an accepted action did, as stored in the action log (docs/rules.md §5) and sent to
    players.

    Attributes:
        kind: the kind of the action applied.
        pos: for ``remove``, the position emptied; for an ``undo`` reverting a removal, the position
            the card went back to; ``None`` for ``draw`` and for an ``undo`` reverting a draw.
        card: the removed card (``remove``), the drawn card (``draw``), or the card the undo moved
            back to the tableau or onto the stock (``undo``).
        score_after: the score once the action was applied.
        status_after: the status once the action was applied.
    """

    kind: ActionKind
    pos: int | None
    card: Card
    score_after: int
    status_after: Status

    @property
    def action(self) -> Action:
        """The :class:`Action` that was applied (for ``undo``, plain ``Action.undo()``)."""
        if self.kind is ActionKind.REMOVE and self.pos is not None:
            return Action.remove(self.pos)
        return Action(self.kind)


@dataclass(frozen=True, slots=True)
class GameView:
    """What the player of a game may see (docs/rules.md §1 "Hidden information", §6): never a
    face-down card, never the stock order.

    Attributes:
        tableau: 28 entries in position order: the :class:`Card` when face up, :data:`FACE_DOWN`
            when face down, ``None`` when removed.
        waste: the waste card.
        stock_count: cards left in the stock.
        score: the current score.
        moves: removals and draws made (undone ones included).
        undos: undos used.
        status: the game's :class:`Status`.
        can_undo: whether an undo would be accepted now.
        cards_left: tableau cards still present.
    """

    tableau: tuple[Card | str | None, ...]
    waste: Card
    stock_count: int
    score: int
    moves: int
    undos: int
    status: Status
    can_undo: bool
    cards_left: int
