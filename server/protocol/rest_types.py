"""The value types the REST bodies share (cards, UTC times and dates, row ids, counts, a game's
mode) and the two small bodies several families embed: :class:`Player` and :class:`LineStep`.
:mod:`server.protocol.rest` holds the bodies of accounts, the daily, leaderboards, game records,
health and errors; :mod:`server.protocol.rest_players` those of profiles and following;
:mod:`server.protocol.rest_replays` those of replays (docs/protocol.md §12).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import msgspec
from msgspec import Meta

from server.engine.actions import ActionKind

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


class Player(msgspec.Struct, frozen=True):
    """A player: id and display name."""

    id: RowId
    name: str


class LineStep(msgspec.Struct, frozen=True):
    """One action of an optimal line: the card removed or drawn (``pos`` for a removal)."""

    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card
