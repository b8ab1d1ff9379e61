"""The route table's entries of the weekly and monthly boards (tag ``boards``).
:mod:`server.web.routes` assembles them into :data:`server.web.routes.ROUTES`."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from server.errors import ErrorCode
from server.protocol.openapi import Answer, Auth, Parameter, errors
from server.protocol.rest_boards import PeriodBoardPage, PeriodBoardWindow, PeriodFriendsBoard
from server.web.api_boards import (
    month_around,
    month_board,
    month_friends,
    week_around,
    week_board,
    week_friends,
)
from server.web.http import Handler
from server.web.routing import AROUND, PAGE, UNAUTHORIZED, Route, api_route

WeekParam = Annotated[str, Meta(pattern="^[0-9]{4}-W[0-9]{2}$", examples=["2026-W49"])]
MonthParam = Annotated[str, Meta(pattern="^[0-9]{4}-[0-9]{2}$", examples=["2026-12"])]

_PERIODS = {
    "week": Parameter(
        "week", "path", WeekParam, "an ISO week of UTC dates, YYYY-Www (W01 to W52 or W53)"
    ),
    "month": Parameter("month", "path", MonthParam, "a month of UTC dates, YYYY-MM"),
}


def _routes(kind: str, page: Handler, around: Handler, friends: Handler) -> tuple[Route, ...]:
    """The three routes of one kind of period: a page, around a player, the friends' view."""
    period = _PERIODS[kind]
    base = f"/boards/{kind}/{{{kind}}}"
    return (
        api_route(
            "GET",
            base,
            page,
            f"A page of a {kind}'s board",
            "boards",
            Answer(200, "a page of entries", PeriodBoardPage),
            errors(400, ErrorCode.BAD_PERIOD, ErrorCode.BAD_LIMIT, ErrorCode.BAD_CURSOR),
            parameters=(period, *PAGE),
        ),
        api_route(
            "GET",
            f"{base}/friends",
            friends,
            f"The friends' view of a {kind}'s board",
            "boards",
            Answer(
                200, "the caller's entry and those of the players they follow", PeriodFriendsBoard
            ),
            errors(400, ErrorCode.BAD_PERIOD),
            UNAUTHORIZED,
            parameters=(period,),
            auth=Auth.BEARER,
        ),
        api_route(
            "GET",
            f"{base}/around/{{player_id}}",
            around,
            f"A {kind}'s board around a player",
            "boards",
            Answer(200, "the entries around the player's", PeriodBoardWindow),
            errors(400, ErrorCode.BAD_PERIOD, ErrorCode.BAD_PLAYER_ID, ErrorCode.BAD_RADIUS),
            errors(404, ErrorCode.NOT_RANKED),
            parameters=(period, *AROUND),
        ),
    )


#: The routes under ``/api/v1/boards``, in registration order.
BOARD_ROUTES: tuple[Route, ...] = (
    *_routes("week", week_board, week_around, week_friends),
    *_routes("month", month_board, month_around, month_friends),
)
