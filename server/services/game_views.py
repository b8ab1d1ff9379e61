"""What the game service answers with: a game's snapshot for its player, the outcome of an
action, and a stored game's summary for the REST API (times UTC, durations in ms)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from server.engine.codes import GameCode
from server.engine.game import AppliedAction, GameView, Status
from server.storage.games import GameMode, StoredAction


class Outcome(StrEnum):
    """What became of an action request."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class GameSnapshot:
    """What a player may see of one of their games at one moment.

    Attributes:
        code_visible: False for a daily whose date is still open and for a race game until the
            race's time is over (the code would reveal every hidden card; a finished race also
            shows it in its results).
        elapsed_ms: ms from the deal being sent to the end of the game (or to now, if going on).
        race_id: the race of a race game, else None.
    """

    id: int
    player_id: int
    mode: GameMode
    code: GameCode
    code_visible: bool
    daily_date: dt.date | None
    seq: int
    view: GameView
    elapsed_ms: int
    created_at: dt.datetime
    finished_at: dt.datetime | None
    race_id: int | None = None

    @property
    def rules(self) -> str:
        """The rule set letter (``E`` or ``C``)."""
        return self.code.rules.value


@dataclass(frozen=True, slots=True)
class ActionResult:
    """The answer to an action request.

    Attributes:
        outcome: accepted (applied and committed, or an exact repeat of the last action) or
            rejected (nothing changed).
        code: for a rejection, the engine's rejection code, ``stale_seq`` or ``daily_closed``.
        snapshot: the game's state after the request.
        applied: the action applied now (None for a repeat or a rejection).
    """

    outcome: Outcome
    snapshot: GameSnapshot
    code: str | None = None
    applied: AppliedAction | None = None


@dataclass(frozen=True, slots=True)
class GameSummary:
    """A stored game as the public REST API shows it.

    Attributes:
        revealed: whether ``code`` may be shown (a daily's only once its date is over).
        actions: the action log, or None when the viewer may not see it (it names only cards
            the player has seen, so its owner always may).
        hinted: the player asked for hints (free play only).
        par: the best score perfect play reaches on this deal, once the game has ended and
            its code may be revealed (None before, or without a solver).
    """

    id: int
    player_id: int
    player_name: str
    mode: GameMode
    code: GameCode
    revealed: bool
    daily_date: dt.date | None
    status: Status
    score: int
    moves: int
    undos: int
    seq: int
    elapsed_ms: int | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    actions: tuple[StoredAction, ...] | None
    hinted: bool = False
    par: int | None = None
