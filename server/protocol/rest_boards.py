"""REST bodies of the weekly and monthly boards (docs/protocol.md §12.17): what
``GET /api/v1/boards/week/{week}`` and ``/api/v1/boards/month/{month}`` (a page, a window around
a player, the friends' view) send, and a player's standing in a period, which a profile shows.
:data:`server.protocol.rest.Body` includes them; :func:`server.protocol.rest.encode` encodes them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from server.protocol.rest_types import Count, Date, RowId

PeriodKindName = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["week", "month"]},
        description="an ISO week (Monday to Sunday) or a calendar month, of UTC dates",
    ),
]
PeriodName = Annotated[
    str,
    Meta(
        pattern=r"^[0-9]{4}-(W[0-9]{2}|[0-9]{2})$",
        description="the period: YYYY-Www (an ISO week) or YYYY-MM (a month)",
        examples=["2026-W49", "2026-12"],
    ),
]


class PeriodEntry(msgspec.Struct, frozen=True):
    """One row of a weekly or monthly board: the sum of the player's daily scores in the
    period, the days they have a ranked result on, and the sum of those results' times (ms).
    Entries equal on total, days and time share a rank."""

    rank: RowId
    player_id: RowId
    name: str
    total: Count
    days: RowId
    elapsed_ms: Count


class PeriodBoardPage(msgspec.Struct, frozen=True):
    """A keyset page of a period's board; ``next_cursor`` is null on the last page."""

    kind: PeriodKindName
    period: PeriodName
    starts_on: Date
    ends_on: Date
    entries: list[PeriodEntry]
    next_cursor: str | None


class PeriodBoardWindow(msgspec.Struct, frozen=True):
    """The entries around one player's on a period's board: up to ``radius`` either side."""

    kind: PeriodKindName
    period: PeriodName
    starts_on: Date
    ends_on: Date
    player_id: RowId
    entries: list[PeriodEntry]


class PeriodFriendsBoard(msgspec.Struct, frozen=True):
    """The friends' view of a period's board: the caller's entry and those of the players
    they follow, each with its rank on the whole board, in board order."""

    kind: PeriodKindName
    period: PeriodName
    starts_on: Date
    ends_on: Date
    entries: list[PeriodEntry]


class PeriodStanding(msgspec.Struct, frozen=True):
    """A player's place on the board of the current week or month (that of the profile's
    ``today``): ``rank``, ``total`` and ``days`` are null while they have no ranked daily
    result in it."""

    period: PeriodName
    rank: RowId | None
    total: Count | None
    days: RowId | None
