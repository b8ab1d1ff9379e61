"""The REST handlers of the ladder under ``/api/v1/ladder`` (JSON): a page, the window around a
player and the friends' view of ``/ladder/{rules}``. No rules here: :mod:`server.services.ladder`
holds them.

:mod:`server.web.routes_ladder` registers and describes them; the bodies are
:mod:`server.protocol.rest_ladder`'s; errors are ``{"error": {"code", "message"}}`` with a
fitting HTTP status.
"""

from __future__ import annotations

from aiohttp import web

from server.engine.codes import RuleSet
from server.protocol import rest_ladder as rest
from server.services.ladder import LadderEntry, ladder_rules
from server.web.board_params import caller_id, page_query, window_query
from server.web.http import respond
from server.web.keys import SERVICES


def _rules(request: web.Request) -> RuleSet:
    """The rule set of the path.

    Raises:
        InvalidInputError: ``bad_rules``, naming what was wrong.
    """
    return ladder_rules(request.match_info["rules"])


def _entry(entry: LadderEntry) -> rest.LadderEntry:
    return rest.LadderEntry(
        rank=entry.rank,
        player_id=entry.player_id,
        name=entry.name,
        rating=entry.rating,
        provisional=entry.provisional,
        races=entry.races,
        wins=entry.wins,
    )


async def ladder_page(request: web.Request) -> web.Response:
    """A keyset page of a rule set's ladder (rated players by shown rating, best first);
    ``next_cursor`` leads to the next page."""
    rules = _rules(request)
    limit, cursor = page_query(request)
    page = await request.app[SERVICES].ladder.page(rules, limit, cursor)
    return respond(
        rest.LadderPage(
            rules=rules.value,
            entries=[_entry(e) for e in page.entries],
            next_cursor=page.next_cursor,
        )
    )


async def ladder_around(request: web.Request) -> web.Response:
    """A rule set's ladder around one player's entry: up to ``radius`` entries either side."""
    rules = _rules(request)
    player_id, radius = window_query(request)
    entries = await request.app[SERVICES].ladder.around(rules, player_id, radius)
    return respond(
        rest.LadderWindow(
            rules=rules.value, player_id=player_id, entries=[_entry(e) for e in entries]
        )
    )


async def ladder_friends(request: web.Request) -> web.Response:
    """The friends' view of a rule set's ladder: the caller's entry and those of the players
    they follow who have one, each with its rank on the whole ladder, in ladder order."""
    me = await caller_id(request)
    rules = _rules(request)
    entries = await request.app[SERVICES].ladder.friends(rules, me)
    return respond(rest.LadderFriends(rules=rules.value, entries=[_entry(e) for e in entries]))
