"""The STATE (what a player may see of a game) and the replies about one game: ``game``,
``accepted``, ``rejected`` (with its player text) and ``hint``. The wire format is documented in
``docs/protocol.md``; :mod:`server.protocol.server` gathers every message.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Protocol

import msgspec

from server.catalogue import Locale, text
from server.engine.cards import FULL_DECK, Card
from server.engine.codes import GameCode
from server.engine.errors import Rejection
from server.engine.game import FACE_DOWN, Action, GameView, Status
from server.protocol.messages import Message


class SnapshotView(Protocol):
    """What the encoder reads of a game at one moment: the fields of the one snapshot type,
    :class:`server.services.games.GameSnapshot` (the protocol layer does not import services)."""

    @property
    def id(self) -> int: ...
    @property
    def mode(self) -> StrEnum: ...
    @property
    def code(self) -> GameCode: ...
    @property
    def code_visible(self) -> bool: ...
    @property
    def daily_date(self) -> dt.date | None: ...
    @property
    def seq(self) -> int: ...
    @property
    def view(self) -> GameView: ...
    @property
    def elapsed_ms(self) -> int: ...
    @property
    def race_id(self) -> int | None: ...


class PlayerText(StrEnum):
    """Every catalogue key (``server/catalogue/<locale>.json``) whose text the server sends
    players; the page's own texts are the catalogue's other keys."""

    #: A blocked game's STATE ``message``, whatever the error help setting.
    BLOCKED_NOTICE = "state.blocked"
    #: ``rejected`` ``message`` texts (with error help on), for the engine's rejection codes…
    NOT_ADJACENT = "rejected.not_adjacent"
    BLOCKED = "rejected.blocked"
    ACTION_LIMIT = "rejected.action_limit"
    RANKED_NO_UNDO = "rejected.ranked_no_undo"
    #: … and for those the services add.
    STALE_SEQ = "rejected.stale_seq"
    DAILY_CLOSED = "rejected.daily_closed"
    #: (``race_not_started`` is answered as an ``error`` today, so this text is not sent.)
    RACE_NOT_STARTED = "rejected.race_not_started"
    RACE_OVER = "rejected.race_over"


#: The rejection codes that have a text (the others are sent without ``message``).
_REJECTION_TEXT: dict[str, PlayerText] = {
    Rejection.NOT_ADJACENT: PlayerText.NOT_ADJACENT,
    Rejection.BLOCKED: PlayerText.BLOCKED,
    Rejection.ACTION_LIMIT: PlayerText.ACTION_LIMIT,
    Rejection.RANKED_NO_UNDO: PlayerText.RANKED_NO_UNDO,
    "stale_seq": PlayerText.STALE_SEQ,
    "daily_closed": PlayerText.DAILY_CLOSED,
    "race_not_started": PlayerText.RACE_NOT_STARTED,
    "race_over": PlayerText.RACE_OVER,
}


#: What a STATE's tableau shows for each thing a view holds: a card's two characters, the
#: face-down marker, or null for a removed card.
_SHOWN_TEXT: dict[Card | str | None, str | None] = {
    **{card: str(card) for card in FULL_DECK},
    FACE_DOWN: FACE_DOWN,
    None: None,
}


class GameState(msgspec.Struct, frozen=True, omit_defaults=True):
    """The STATE object: what the player may see of a game (never a face-down or stock card).

    ``code`` is null while the deal is secret (an open daily, a running race); ``tableau`` holds
    28 entries, each a card (``"7H"``), ``"down"`` or null (removed); ``elapsed_ms`` is server
    time; ``message`` (the blocked notice in the player's language) only on a blocked game.
    """

    game_id: int
    mode: str
    code: str | None
    rules: str
    daily_date: str | None
    race_id: int | None
    seq: int
    status: str
    score: int
    moves: int
    undos: int
    stock_count: int
    waste: str | None
    tableau: list[str | None]
    cards_left: int
    can_undo: bool
    elapsed_ms: int
    message: str | None = None


class GameReply(Message, frozen=True, tag="game"):
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""

    game: GameState
    id: int | str | None = None


class Accepted(Message, frozen=True, tag="accepted"):
    """An action was applied and committed (or was an exact repeat of the last one)."""

    game: GameState
    id: int | str | None = None


class Rejected(Message, frozen=True, tag="rejected"):
    """An action was refused; nothing changed. ``message`` only with error help on."""

    code: str
    game: GameState
    message: str | None = None
    id: int | str | None = None


def game_state(snapshot: SnapshotView, locale: Locale) -> GameState:
    """The STATE of ``snapshot`` for a player whose language is ``locale`` (see
    :class:`GameState`)."""
    view = snapshot.view
    return GameState(
        game_id=snapshot.id,
        mode=snapshot.mode.value,
        code=str(snapshot.code) if snapshot.code_visible else None,
        rules=snapshot.code.rules.value,
        daily_date=snapshot.daily_date.isoformat() if snapshot.daily_date else None,
        race_id=snapshot.race_id,
        seq=snapshot.seq,
        status=view.status.value,
        score=view.score,
        moves=view.moves,
        undos=view.undos,
        stock_count=view.stock_count,
        waste=_SHOWN_TEXT[view.waste],
        tableau=[_SHOWN_TEXT[c] for c in view.tableau],
        cards_left=view.cards_left,
        can_undo=view.can_undo,
        elapsed_ms=snapshot.elapsed_ms,
        message=text(PlayerText.BLOCKED_NOTICE, locale) if view.status is Status.BLOCKED else None,
    )


def game(snapshot: SnapshotView, locale: Locale, request_id: int | str | None) -> GameReply:
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""
    return GameReply(game_state(snapshot, locale), request_id)


def accepted(snapshot: SnapshotView, locale: Locale, request_id: int | str | None) -> Accepted:
    """An action was applied and committed (or was an exact repeat of the last one)."""
    return Accepted(game_state(snapshot, locale), request_id)


def rejected(
    snapshot: SnapshotView,
    code: str,
    locale: Locale,
    error_help: bool,
    request_id: int | str | None,
) -> Rejected:
    """An action was refused; nothing changed. ``message`` is sent only with error help on."""
    message = rejection_text(code, locale) if error_help else None
    return Rejected(code, game_state(snapshot, locale), message, request_id)


def rejection_text(code: str, locale: Locale) -> str | None:
    """The player text of a rejection code in ``locale`` (docs/rules.md §2 "Rejections and
    messages"); None for the codes that have none.

    >>> rejection_text("blocked", Locale.EN)
    'This card is blocked.'
    >>> rejection_text("no_card", Locale.EN) is None
    True
    """
    key = _REJECTION_TEXT.get(code)
    return None if key is None else text(key, locale)


class Hint(Message, frozen=True, tag="hint"):
    """Reply to ``hint``: the best next action's kind and position (both null when no action
    is possible; ``pos`` null for a draw or an undo)."""

    game_id: int
    action: str | None
    pos: int | None
    id: int | str | None = None


def hint(game_id: int, action: Action | None, request_id: int | str | None) -> Hint:
    """Reply to ``hint``."""
    return Hint(
        game_id,
        None if action is None else action.kind.value,
        None if action is None else action.pos,
        request_id,
    )


__all__ = [
    "Accepted",
    "GameReply",
    "GameState",
    "Hint",
    "PlayerText",
    "Rejected",
    "SnapshotView",
    "accepted",
    "game",
    "game_state",
    "hint",
    "rejected",
    "rejection_text",
]
