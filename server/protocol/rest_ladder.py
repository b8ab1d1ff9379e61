"""REST bodies of the ladder (docs/protocol.md §12.19): what ``GET /api/v1/ladder/{rules}`` (a
page), ``/api/v1/ladder/{rules}/around/{player_id}`` (a window around a player) and
``/api/v1/ladder/{rules}/friends`` (the friends' view) send. :data:`server.protocol.rest.Body`
includes them; :func:`server.protocol.rest.encode` encodes them.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from server.protocol.rest_types import Count, RowId

LadderRules = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["E", "C"]},
        description="the rule set of the ladder: E (Easy) or C (Classic)",
    ),
]


class LadderEntry(msgspec.Struct, frozen=True):
    """One row of a rule set's ladder: the player's shown rating (docs/rules.md §4 "Ratings"),
    whether it is provisional (fewer than 10 rated races: shown with a "?"), and the rated
    races played and won under the rule set. ``rank`` is 1 + the number of entries with a
    higher rating: entries of the same rating share it."""

    rank: RowId
    player_id: RowId
    name: str
    rating: int
    provisional: bool
    races: Count
    wins: Count


class LadderPage(msgspec.Struct, frozen=True):
    """A keyset page of a rule set's ladder; ``next_cursor`` is null on the last page."""

    rules: LadderRules
    entries: list[LadderEntry]
    next_cursor: str | None


class LadderWindow(msgspec.Struct, frozen=True):
    """The entries around one player's on a rule set's ladder: up to ``radius`` either side."""

    rules: LadderRules
    player_id: RowId
    entries: list[LadderEntry]


class LadderFriends(msgspec.Struct, frozen=True):
    """The friends' view of a rule set's ladder: the caller's entry and those of the players
    they follow, each with its rank on the whole ladder, in ladder order."""

    rules: LadderRules
    entries: list[LadderEntry]
