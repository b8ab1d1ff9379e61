"""REST bodies: every body the REST API sends or reads is a msgspec Struct (the race room is
the ROOM of :mod:`server.protocol.server`); the web layer builds them and encodes them with
:func:`encode`. :mod:`server.protocol.openapi` describes them in the API's OpenAPI document.
The wire format is documented in ``docs/protocol.md`` §12.

Here: the bodies of accounts (registration, sign-in, tokens), the daily, leaderboards, game
records, health and errors, with :data:`Body` (every body sent) and :func:`encode`. The value
types and the bodies several families embed are :mod:`server.protocol.rest_types`'s; the bodies
of profiles and following are :mod:`server.protocol.rest_players`'s, of replays
:mod:`server.protocol.rest_replays`'s.
"""

from __future__ import annotations

import json
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from server.engine.actions import ActionKind, Status
from server.engine.codes import DealVersion, RuleSet
from server.engine.difficulty import Level
from server.errors import ErrorCode
from server.protocol.rest_boards import PeriodBoardPage, PeriodBoardWindow, PeriodFriendsBoard
from server.protocol.rest_ladder import LadderFriends, LadderPage, LadderWindow
from server.protocol.rest_players import (
    FollowedPlayer,
    Following,
    PlayerProfile,
    PlayerRatings,
    Unfollowed,
)
from server.protocol.rest_replays import Replay
from server.protocol.rest_types import (
    Card,
    Count,
    Date,
    GameModeName,
    LineStep,
    Player,
    RankedStatus,
    RowId,
    Timestamp,
)
from server.protocol.server import RoomState


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


class GreedyBaseline(msgspec.Struct, frozen=True):
    """The greedy player's one game on a daily's deal (docs/rules.md §4 "Difficulty"): how it
    ended and its final score."""

    status: RankedStatus
    score: int


class RandomBaseline(msgspec.Struct, frozen=True):
    """The random player's playouts on a daily's deal (docs/rules.md §4 "Difficulty"): how
    many, the share won (rounded to 4 decimals) and their median final score (the lower
    median)."""

    playouts: Annotated[int, Meta(ge=1)]
    win_rate: Annotated[float, Meta(ge=0, le=1)]
    median_score: int


class DailyBaselines(msgspec.Struct, frozen=True):
    """What two players who see no face-down card made of a daily's deal."""

    greedy: GreedyBaseline
    random: RandomBaseline


class DailyChallenge(msgspec.Struct, frozen=True):
    """A date's daily challenge. ``code`` and ``line`` are null while the date is open;
    ``par`` (the best final score perfect play reaches) is null without the solver.
    ``difficulty`` (the level the deal was chosen for) is shown from the start, null for a
    date chosen without the solver or before levels; ``baselines`` only once the date is
    over (null before, and whenever ``difficulty`` is). ``server_time`` is the server's clock
    when it answered (UTC): a countdown to ``closes_at`` runs from it."""

    date: Date
    rules: RuleSet
    code: str | None
    is_open: bool
    players: Count
    ranked: Count
    closes_at: Timestamp
    server_time: Timestamp
    par: int | None
    line: list[LineStep] | None
    difficulty: Level | None
    baselines: DailyBaselines | None


class LeaderboardEntry(msgspec.Struct, frozen=True):
    """One row of a daily leaderboard; entries equal on score, moves and elapsed time share a
    rank. ``game_id`` is the daily game's id; ``replayable`` says whether its replay is served
    (``GET /api/v1/games/{game_id}/replay``: once the date is over). ``undos`` is 0 but for a
    game stored before ranked play refused undo (docs/rules.md §4 "Ranked play")."""

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
    | PeriodBoardPage
    | PeriodBoardWindow
    | PeriodFriendsBoard
    | LadderPage
    | LadderWindow
    | LadderFriends
    | GameRecord
    | Replay
    | PlayerProfile
    | PlayerRatings
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
