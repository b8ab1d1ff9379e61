"""The route table's entries of the daily challenge and its leaderboards (tag ``daily``).
:mod:`server.web.routes` assembles them into :data:`server.web.routes.ROUTES`."""

from __future__ import annotations

from server.errors import ErrorCode
from server.protocol.openapi import Answer, Auth, errors
from server.protocol.rest import (
    DailyChallenge,
    FriendsBoard,
    LeaderboardPage,
    LeaderboardWindow,
)
from server.web.api import around, daily_of_date, daily_today, friends_board, leaderboard
from server.web.routing import AROUND, DATE, PAGE, UNAUTHORIZED, Route, api_route

#: The routes under ``/api/v1/daily``, in registration order.
DAILY_ROUTES: tuple[Route, ...] = (
    api_route(
        "GET",
        "/daily",
        daily_today,
        "Today's daily challenge",
        "daily",
        Answer(200, "today's daily", DailyChallenge),
    ),
    api_route(
        "GET",
        "/daily/{date}",
        daily_of_date,
        "A date's daily challenge",
        "daily",
        Answer(200, "that date's daily", DailyChallenge),
        errors(400, ErrorCode.BAD_DATE),
        errors(404, ErrorCode.NO_DAILY),
        parameters=(DATE,),
    ),
    api_route(
        "GET",
        "/daily/{date}/leaderboard",
        leaderboard,
        "A page of a date's leaderboard",
        "daily",
        Answer(200, "a page of entries", LeaderboardPage),
        errors(400, ErrorCode.BAD_DATE, ErrorCode.BAD_LIMIT, ErrorCode.BAD_CURSOR),
        parameters=(DATE, *PAGE),
    ),
    api_route(
        "GET",
        "/daily/{date}/leaderboard/friends",
        friends_board,
        "The friends' view of a date's leaderboard",
        "daily",
        Answer(200, "the caller's entry and those of the players they follow", FriendsBoard),
        errors(400, ErrorCode.BAD_DATE),
        UNAUTHORIZED,
        parameters=(DATE,),
        auth=Auth.BEARER,
    ),
    api_route(
        "GET",
        "/daily/{date}/leaderboard/around/{player_id}",
        around,
        "The leaderboard around a player",
        "daily",
        Answer(200, "the entries around the player's", LeaderboardWindow),
        errors(400, ErrorCode.BAD_DATE, ErrorCode.BAD_PLAYER_ID, ErrorCode.BAD_RADIUS),
        errors(404, ErrorCode.NOT_RANKED),
        parameters=(DATE, *AROUND),
    ),
)
