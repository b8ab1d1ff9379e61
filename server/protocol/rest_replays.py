"""REST bodies of a game's replay (docs/protocol.md §12.16): what
``GET /api/v1/games/{game_id}/replay`` sends. :data:`server.protocol.rest.Body` includes
:class:`Replay`; :func:`server.protocol.rest.encode` encodes it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from server.engine.actions import ActionKind, Status
from server.engine.codes import RuleSet
from server.protocol.rest_types import (
    Card,
    Count,
    Date,
    GameModeName,
    LineStep,
    Player,
    RowId,
    Timestamp,
)


class ReplayGame(msgspec.Struct, frozen=True):
    """The replayed game: its player, mode, deal and result (``race_invite`` for a race game,
    else null; ``elapsed_ms`` null for a daily never finished)."""

    id: RowId
    player: Player
    mode: GameModeName
    daily_date: Date | None
    race_invite: str | None
    code: str
    rules: RuleSet
    status: Status
    score: int
    moves: Count
    undos: Count
    elapsed_ms: Count | None
    created_at: Timestamp
    finished_at: Timestamp | None
    hinted: bool


class DealLayout(msgspec.Struct, frozen=True):
    """Every card of a deal: the 28 tableau cards by position (0-27, docs/rules.md §1), the
    waste card dealt face up, and the 23 stock cards in draw order (the first is drawn first)."""

    tableau: Annotated[list[Card], Meta(min_length=28, max_length=28)]
    waste: Card
    stock: Annotated[list[Card], Meta(min_length=23, max_length=23)]


class ReplayAction(msgspec.Struct, frozen=True):
    """One stored action of a replay, as in a game record, with ``undoes`` (for an undo: the
    ``seq`` of the removal or draw it took back, else null) and ``undone`` (whether a later undo
    took this removal or draw back)."""

    seq: RowId
    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card
    score_after: int
    at: Timestamp
    undoes: RowId | None
    undone: bool


class Replay(msgspec.Struct, frozen=True):
    """A finished game whose deal is public, to replay move by move (docs/protocol.md §12.16):
    the deal, every stored action, and the solver's optimal line (``par`` and ``line`` null
    without the solver or when it is too slow); ``diverged_at`` is the index in ``actions`` of
    the first action of the game's effective line after which par was out of reach (null when
    it never was, or without the solver)."""

    game: ReplayGame
    layout: DealLayout
    actions: list[ReplayAction]
    par: int | None
    line: list[LineStep] | None
    diverged_at: Count | None
