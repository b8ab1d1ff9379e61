"""The route table's entries of the ladder (tag ``ladder``). :mod:`server.web.routes`
assembles them into :data:`server.web.routes.ROUTES`."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from server.errors import ErrorCode
from server.protocol.openapi import Answer, Auth, Parameter, errors
from server.protocol.rest_ladder import LadderFriends, LadderPage, LadderWindow
from server.web.api_ladder import ladder_around, ladder_friends, ladder_page
from server.web.routing import AROUND, PAGE, UNAUTHORIZED, Route, api_route

RulesParam = Annotated[str, Meta(pattern="^[EC]$", examples=["C"])]
_RULES = Parameter("rules", "path", RulesParam, "the rule set: E (Easy) or C (Classic)")

#: The routes under ``/api/v1/ladder``, in registration order.
LADDER_ROUTES: tuple[Route, ...] = (
    api_route(
        "GET",
        "/ladder/{rules}",
        ladder_page,
        "A page of a rule set's ladder",
        "ladder",
        Answer(200, "a page of entries", LadderPage),
        errors(400, ErrorCode.BAD_RULES, ErrorCode.BAD_LIMIT, ErrorCode.BAD_CURSOR),
        parameters=(_RULES, *PAGE),
    ),
    api_route(
        "GET",
        "/ladder/{rules}/friends",
        ladder_friends,
        "The friends' view of a rule set's ladder",
        "ladder",
        Answer(200, "the caller's entry and those of the players they follow", LadderFriends),
        errors(400, ErrorCode.BAD_RULES),
        UNAUTHORIZED,
        parameters=(_RULES,),
        auth=Auth.BEARER,
    ),
    api_route(
        "GET",
        "/ladder/{rules}/around/{player_id}",
        ladder_around,
        "A rule set's ladder around a player",
        "ladder",
        Answer(200, "the entries around the player's", LadderWindow),
        errors(400, ErrorCode.BAD_RULES, ErrorCode.BAD_PLAYER_ID, ErrorCode.BAD_RADIUS),
        errors(404, ErrorCode.NOT_RANKED),
        parameters=(_RULES, *AROUND),
    ),
)
