"""REST bodies: every body the REST API sends or reads is a msgspec Struct here (the race room
is the ROOM of :mod:`server.protocol.server`); the web layer builds them and encodes them with
:func:`encode`. :mod:`server.protocol.openapi` describes them in the API's OpenAPI document.
The wire format is documented in ``docs/protocol.md`` §12.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from server.engine.actions import ActionKind, Status
from server.engine.codes import DealVersion, RuleSet
from server.errors import ErrorCode
from server.protocol.server import RoomState

# ------------------------------------------------------------------------------ value types

Card = Annotated[
    str,
    Meta(pattern="^[A2-9TJQK][CDHS]$", description="a card: rank (A 2-9 T J Q K), then suit"),
]
Timestamp = Annotated[
    dt.datetime,
    Meta(
        tz=True,
        extra_json_schema={"pattern": "Z$"},
        description="a UTC time, ISO 8601 with a Z (2026-11-29T14:51:06.833656Z)",
    ),
]
Date = Annotated[dt.date, Meta(description="a UTC date, YYYY-MM-DD")]
RowId = Annotated[int, Meta(ge=1)]
Count = Annotated[int, Meta(ge=0)]
GameModeName = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["free", "daily", "race"]},
        description="free play, the daily challenge, or a race",
    ),
]
RankedStatus = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["won", "blocked"]},
        description="how the game ended (only won and blocked games are ranked)",
    ),
]

# ------------------------------------------------------------------------------ bodies


class NewPlayer(msgspec.Struct, frozen=True):
    """``POST /api/v1/players``: the name to register (other members are ignored). The name is
    NFKC-normalised, trimmed and its inner spaces collapsed, and must then be 2-24 letters,
    digits and `` _-.'``, starting with a letter or a digit, not taken nor like a taken one
    (docs/protocol.md §12.2)."""

    name: Annotated[str, Meta(examples=["Alice"])]


Token = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        description="a bearer token (shown only once; the server keeps its SHA-256)",
        examples=["fvu5L_V-ny368EFo9IxOQivENR4Y88TJWugU1xxBN-8"],
    ),
]
RecoveryCode = Annotated[
    str,
    Meta(
        pattern="^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){6}$",
        description="a recovery code: 28 symbols of Crockford's base32 (no I, L, O, U) in "
        "groups of four; shown only once, the server keeps its SHA-256",
        examples=["7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF"],
    ),
]


class PlayerCreated(msgspec.Struct, frozen=True):
    """A new player, their bearer token and their recovery code (both shown only here)."""

    id: RowId
    name: str
    token: Token
    recovery_code: RecoveryCode


class SignIn(msgspec.Struct, frozen=True):
    """``POST /api/v1/sessions``: a player's name (read as registration reads it: any case,
    look-alike letters) and recovery code (any case, hyphens and spaces optional, ``O`` for
    ``0``, ``I`` or ``L`` for ``1``) (docs/protocol.md §12.13)."""

    name: Annotated[str, Meta(max_length=200, examples=["Alice"])]
    recovery_code: Annotated[
        str, Meta(max_length=200, examples=["7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF"])
    ]


class SignedIn(msgspec.Struct, frozen=True):
    """A device signed in with a recovery code: the player and the device's own new token
    (shown only here)."""

    id: RowId
    name: str
    token: Token


class NewToken(msgspec.Struct, frozen=True):
    """The caller's new bearer token (shown only here); the one it replaces no longer works."""

    token: Token


class NewRecoveryCode(msgspec.Struct, frozen=True):
    """The player's new recovery code (shown only here); the one it replaces no longer
    works."""

    recovery_code: RecoveryCode


class SignedOut(msgspec.Struct, frozen=True):
    """How many of the player's devices (bearer tokens) were signed out."""

    signed_out: Count


class Player(msgspec.Struct, frozen=True):
    """A player: id and display name."""

    id: RowId
    name: str


class FollowName(msgspec.Struct, frozen=True):
    """``POST /api/v1/players/me/following``: the name of the player to follow, read as
    registration reads it (any case, look-alike letters) (docs/protocol.md §12.15)."""

    name: Annotated[str, Meta(max_length=200, examples=["Alice"])]


class FollowedPlayer(msgspec.Struct, frozen=True):
    """A player the caller follows: since when, and whether they have a websocket open now."""

    id: RowId
    name: str
    since: Timestamp
    online: bool


class Following(msgspec.Struct, frozen=True):
    """The players the caller follows, the earliest followed first, and how many one may
    follow."""

    players: list[FollowedPlayer]
    limit: RowId


class Unfollowed(msgspec.Struct, frozen=True):
    """The player is no longer followed; ``was_following``: whether they were."""

    player_id: RowId
    was_following: bool


class LineStep(msgspec.Struct, frozen=True):
    """One action of an optimal line: the card removed or drawn (``pos`` for a removal)."""

    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card


class DailyChallenge(msgspec.Struct, frozen=True):
    """A date's daily challenge. ``code`` and ``line`` are null while the date is open;
    ``par`` (the best final score perfect play reaches) is null without the solver."""

    date: Date
    rules: RuleSet
    code: str | None
    is_open: bool
    players: Count
    ranked: Count
    closes_at: Timestamp
    par: int | None
    line: list[LineStep] | None


class LeaderboardEntry(msgspec.Struct, frozen=True):
    """One row of a daily leaderboard; entries equal on score, moves and elapsed time share a
    rank. ``game_id`` is the daily game's id; ``replayable`` says whether its replay is served
    (``GET /api/v1/games/{game_id}/replay``: once the date is over)."""

    rank: RowId
    player_id: RowId
    name: str
    score: int
    moves: Count
    undos: Count
    elapsed_ms: Count
    status: RankedStatus
    finished_at: Timestamp
    game_id: RowId
    replayable: bool


class LeaderboardPage(msgspec.Struct, frozen=True):
    """A keyset page of a date's leaderboard; ``next_cursor`` is null on the last page."""

    date: Date
    entries: list[LeaderboardEntry]
    next_cursor: str | None


class LeaderboardWindow(msgspec.Struct, frozen=True):
    """The entries around one player's: up to ``radius`` either side."""

    date: Date
    player_id: RowId
    entries: list[LeaderboardEntry]


class FriendsBoard(msgspec.Struct, frozen=True):
    """The friends' view of a date's leaderboard: the caller's entry and those of the players
    they follow, each with its rank on the whole board, in board order."""

    date: Date
    entries: list[LeaderboardEntry]


DailyOutcome = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["playing", "won", "blocked", "resigned"]},
        description="how the date's daily game went: won or blocked (ranked), resigned, or "
        "playing (not ended: the date still open, or left unfinished when it closed)",
    ),
]
ParShare = Annotated[float, Meta(ge=0, description="score / par, rounded to 4 decimals")]


class ProfileDay(msgspec.Struct, frozen=True):
    """One UTC date on which the player played the daily: the result, never the deal."""

    date: Date
    status: DailyOutcome
    score: Count
    rank: RowId | None
    par: int | None
    par_share: ParShare | None


class Streak(msgspec.Struct, frozen=True):
    """Runs of consecutive UTC dates with a ranked daily result (docs/rules.md §4)."""

    current: Count
    best: Count


class PlayerProfile(msgspec.Struct, frozen=True):
    """A player's public profile (docs/protocol.md §12.15): the daily history by date,
    streaks and figures, and their races. No deal's code and no card."""

    id: RowId
    name: str
    member_since: Date
    today: Date
    streak: Streak
    best_score: Count | None
    average_par_share: ParShare | None
    ranked_days: Count
    races_played: Count
    races_won: Count
    days: list[ProfileDay]


class GameRecordAction(msgspec.Struct, frozen=True):
    """One row of a game's action log: the card removed, drawn or put back, and the score
    after."""

    seq: RowId
    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card
    score_after: int
    at: Timestamp


class GameRecord(msgspec.Struct, frozen=True):
    """A stored game. ``code`` is null and ``actions`` absent while they are not revealed to
    the viewer (docs/protocol.md §12.7)."""

    id: RowId
    player: Player
    mode: GameModeName
    rules: RuleSet
    code: str | None
    deal_version: DealVersion
    daily_date: Date | None
    status: Status
    score: int
    moves: Count
    undos: Count
    seq: Count
    elapsed_ms: Count | None
    created_at: Timestamp
    finished_at: Timestamp | None
    hinted: bool
    par: int | None
    par_share: float | None
    actions: list[GameRecordAction] | UnsetType = UNSET


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


class Health(msgspec.Struct, frozen=True):
    """``/healthz`` (200 while the process serves) and ``/readyz`` (503 while the database
    does not answer): the process's and the database's state."""

    status: Annotated[str, Meta(extra_json_schema={"enum": ["ok", "unavailable"]})]
    database: Annotated[str, Meta(extra_json_schema={"enum": ["ok", "unreachable"]})]


class ErrorDetail(msgspec.Struct, frozen=True):
    """What went wrong: a stable machine-readable ``code`` and an English ``message`` naming
    what was wrong."""

    code: ErrorCode
    message: str


class ErrorBody(msgspec.Struct, frozen=True):
    """Every REST error (docs/protocol.md §12.1)."""

    error: ErrorDetail


def error_body(code: ErrorCode, message: str) -> ErrorBody:
    """The body of an error answer."""
    return ErrorBody(ErrorDetail(code, message))


#: Every body the REST API sends.
Body = (
    PlayerCreated
    | SignedIn
    | NewToken
    | NewRecoveryCode
    | SignedOut
    | Player
    | FollowedPlayer
    | Following
    | Unfollowed
    | FriendsBoard
    | DailyChallenge
    | LeaderboardPage
    | LeaderboardWindow
    | GameRecord
    | Replay
    | PlayerProfile
    | RoomState
    | Health
    | ErrorBody
)


def encode(body: Body) -> bytes:
    """A body's JSON as the REST API sends it: on one line, with ``", "`` and ``": "``
    separators and every non-ASCII character escaped (docs/protocol.md §12.1). msgspec turns
    the Struct into JSON values (dates, times, enums, absent members); the standard library
    lays them out."""
    return json.dumps(msgspec.to_builtins(body)).encode()
