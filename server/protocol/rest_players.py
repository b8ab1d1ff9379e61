"""REST bodies of players' profiles and following (docs/protocol.md §12.15): what
``GET /api/v1/players/{player_id}`` and ``/api/v1/players/me/following`` send and read.
:data:`server.protocol.rest.Body` includes them; :func:`server.protocol.rest.encode` encodes them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from server.protocol.rest_boards import PeriodStanding
from server.protocol.rest_types import Count, Date, RowId, Timestamp


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


class RatedRace(msgspec.Struct, frozen=True):
    """One rated race in a player's rating history: its invite code (the finished room and
    its results, ``GET /api/v1/races/{invite}``, the page's ``/race/{invite}``), the player's
    rank among ``racers`` and their shown rating before and after it (docs/rules.md §4
    "Ratings")."""

    race_id: RowId
    invite: str
    rated_at: Timestamp
    rank: RowId
    racers: RowId
    before: int
    after: int
    change: int


class RuleSetRating(msgspec.Struct, frozen=True):
    """A player's rating under one rule set (``E`` or ``C``): the rating shown
    (``rating``, 40 × (mu − 3 sigma) rounded), whether it is provisional (fewer than 10 rated
    races: shown with a "?"), the library's ``mu`` and ``sigma``, rated races played and won,
    when the last one ended, and the last 100 rated races, the latest first."""

    rules: Annotated[str, Meta(extra_json_schema={"enum": ["E", "C"]})]
    rating: int
    provisional: bool
    mu: float
    sigma: float
    races: Count
    wins: Count
    rated_at: Timestamp
    history: list[RatedRace]


class PlayerRatings(msgspec.Struct, frozen=True):
    """A player's ratings by rule set (none before their first rated race)."""

    player_id: RowId
    ratings: list[RuleSetRating]


class PlayerProfile(msgspec.Struct, frozen=True):
    """A player's public profile (docs/protocol.md §12.15): the daily history by date,
    streaks and figures, their races, and their places on the boards of the current week and
    month (§12.17). No deal's code and no card."""

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
    week: PeriodStanding
    month: PeriodStanding
