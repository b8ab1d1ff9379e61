"""The REST route table (:data:`ROUTES`): each route's handler and its description, from which
:func:`add_routes` registers the routes and :func:`openapi_document` writes the OpenAPI 3.1
document served at ``GET /api/v1/openapi.json``, so no route exists without its description.

One module past 400 lines on purpose: the table is declarations, one entry per route with its
parameters, bodies and answers, read as a whole (the API at a glance); it holds no logic.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import inspect
import json
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Annotated, Any, Literal

from aiohttp import web
from msgspec import Meta

from server.errors import (
    ErrorCode,
)
from server.protocol import rest
from server.protocol.client import MAX_ID
from server.protocol.openapi import Answer, Auth, Header, Operation, Parameter, errors
from server.protocol.openapi import openapi_document as describe
from server.protocol.server import RoomState
from server.services.leaderboards import MAX_LIMIT, MAX_RADIUS
from server.services.rooms import INVITE_ALPHABET, INVITE_LENGTH
from server.web.api import (
    around,
    daily_of_date,
    daily_today,
    follow,
    follow_by_name,
    following,
    friends_board,
    game_replay,
    game_summary,
    healthz,
    leaderboard,
    me,
    new_recovery_code,
    player_profile,
    race_room,
    readyz,
    register_player,
    rotate_token,
    scrape_metrics,
    sign_in,
    sign_out,
    unfollow,
)
from server.web.http import PREFIX, Handler
from server.web.keys import SETTINGS


def add_routes(app: web.Application) -> None:
    """Register every route of :data:`ROUTES`, and ``/metrics`` when it is on."""
    for route in ROUTES:
        op = route.operation
        if op.method == "GET":  # with HEAD
            app.router.add_get(op.path, route.handler)
        else:
            app.router.add_route(op.method, op.path, route.handler)
    if app[SETTINGS].metrics:
        app.router.add_get("/metrics", scrape_metrics)


async def openapi(request: web.Request) -> web.Response:
    """This document: the OpenAPI 3.1 description of every REST route, generated from the
    route table and the typed bodies; ``x-websocket`` holds the JSON Schemas of the
    websocket's messages. Revalidate with ``If-None-Match``."""
    body, etag = _openapi_json()
    headers = {"Cache-Control": "no-cache", "ETag": etag}
    if any(tag.value in (etag.strip('"'), "*") for tag in request.if_none_match or ()):
        return web.Response(status=304, headers=headers)
    return web.Response(
        body=body, content_type="application/json", charset="utf-8", headers=headers
    )


@dataclass(frozen=True, slots=True)
class Route:
    """A registered route: its description and its handler."""

    operation: Operation
    handler: Handler


DateParam = Annotated[dt.date, Meta(examples=["2026-12-01"])]
RowIdParam = Annotated[int, Meta(ge=1, le=MAX_ID, examples=[1])]
LimitParam = Annotated[int, Meta(ge=1, le=MAX_LIMIT, examples=[2])]
RadiusParam = Annotated[int, Meta(ge=0, le=MAX_RADIUS, examples=[1])]
CursorParam = Annotated[str, Meta(max_length=200)]
KeepParam = Literal["current", "none"]
_INVITE_CHAR = INVITE_ALPHABET + INVITE_ALPHABET.lower()
InviteParam = Annotated[
    str,
    Meta(pattern=f"^[- ]*([{_INVITE_CHAR}][- ]*){{{INVITE_LENGTH}}}$", examples=["WW9Q3T"]),
]
OpenApiDocument = Annotated[
    dict[str, Any],
    Meta(
        description="an OpenAPI 3.1 document",
        extra_json_schema={"required": ["openapi", "info", "paths"]},
    ),
]

_DATE = Parameter("date", "path", DateParam, "the UTC date, YYYY-MM-DD: today or earlier")
_NO_STORE = Header(
    "Cache-Control", "API answers are never cached", {"type": "string", "const": "no-store"}
)
_COMMON_HEADERS = (
    Header(
        "X-Request-Id",
        "the request's id in the server's logs: the client's own X-Request-Id when it is 1 to "
        "64 of A-Z a-z 0-9 . _ : -, else 16 random hex digits",
        {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$"},
    ),
    Header(
        "Server-Timing",
        "the time the server spent on the answer, in ms",
        {"type": "string", "pattern": '^app;dur=[0-9]+\\.[0-9];desc="server"$'},
    ),
)
_RETRY_AFTER = Header(
    "Retry-After",
    "with server_busy: whole seconds to wait before trying again",
    {"type": "string", "pattern": "^[0-9]+$"},
    required=False,
)
_DATABASE_FAILED = errors(
    503, ErrorCode.UNAVAILABLE, ErrorCode.SERVER_BUSY, headers=(_RETRY_AFTER,)
)
_FAILED = errors(500, ErrorCode.INTERNAL_ERROR)


def _api(
    method: str,
    path: str,
    handler: Handler,
    summary: str,
    tag: str,
    *answers: Answer,
    parameters: tuple[Parameter, ...] = (),
    request: Any = None,
    auth: Auth = Auth.NONE,
) -> Route:
    """A route under ``/api/v1`` that uses the database: its answers, and the failures every
    such route may answer with, each with ``Cache-Control: no-store``."""
    every = (*answers, _DATABASE_FAILED, _FAILED)
    return Route(
        Operation(
            method=method,
            path=f"{PREFIX}{path}",
            operation_id=handler.__name__,
            summary=summary,
            description=inspect.getdoc(handler) or summary,
            tag=tag,
            answers=tuple(replace(a, headers=(*a.headers, _NO_STORE)) for a in every),
            parameters=parameters,
            request=request,
            auth=auth,
        ),
        handler,
    )


def _health(path: str, handler: Handler, summary: str, *answers: Answer) -> Route:
    return Route(
        Operation(
            method="GET",
            path=path,
            operation_id=handler.__name__,
            summary=summary,
            description=inspect.getdoc(handler) or summary,
            tag="health",
            answers=answers,
        ),
        handler,
    )


_UNAUTHORIZED = errors(401, ErrorCode.UNAUTHORIZED)
_PLAYER_ID = Parameter("player_id", "path", RowIdParam, "the player")

#: Every route the API registers, as its OpenAPI document describes it.
ROUTES: tuple[Route, ...] = (
    _api(
        "POST",
        "/players",
        register_player,
        "Register a player",
        "players",
        Answer(201, "the new player and their token", rest.PlayerCreated),
        errors(400, ErrorCode.BAD_NAME, ErrorCode.BAD_JSON),
        errors(409, ErrorCode.NAME_TAKEN, ErrorCode.CONFLICT),
        errors(413, ErrorCode.REQUEST_ENTITY_TOO_LARGE),
        errors(429, ErrorCode.RATE_LIMITED),
        request=rest.NewPlayer,
    ),
    _api(
        "GET",
        "/players/me",
        me,
        "The player of the token",
        "players",
        Answer(200, "the player", rest.Player),
        _UNAUTHORIZED,
        auth=Auth.BEARER,
    ),
    _api(
        "GET",
        "/players/{player_id}",
        player_profile,
        "A player's profile",
        "players",
        Answer(200, "the player's profile", rest.PlayerProfile),
        errors(400, ErrorCode.BAD_PLAYER_ID),
        errors(404, ErrorCode.UNKNOWN_PLAYER),
        parameters=(Parameter("player_id", "path", RowIdParam, "the player"),),
    ),
    _api(
        "POST",
        "/sessions",
        sign_in,
        "Sign a device in with a recovery code",
        "players",
        Answer(201, "the player and the device's new token", rest.SignedIn),
        errors(400, ErrorCode.BAD_JSON, ErrorCode.INVALID_INPUT),
        errors(401, ErrorCode.SIGN_IN_FAILED),
        errors(413, ErrorCode.REQUEST_ENTITY_TOO_LARGE),
        errors(429, ErrorCode.RATE_LIMITED),
        request=rest.SignIn,
    ),
    _api(
        "POST",
        "/players/me/token",
        rotate_token,
        "Replace the caller's token",
        "players",
        Answer(200, "the new token; the old one no longer works", rest.NewToken),
        _UNAUTHORIZED,
        auth=Auth.BEARER,
    ),
    _api(
        "POST",
        "/players/me/recovery-code",
        new_recovery_code,
        "Make a new recovery code",
        "players",
        Answer(200, "the new recovery code; the old one no longer works", rest.NewRecoveryCode),
        _UNAUTHORIZED,
        auth=Auth.BEARER,
    ),
    _api(
        "DELETE",
        "/players/me/sessions",
        sign_out,
        "Sign the player's other devices out",
        "players",
        Answer(200, "how many devices were signed out", rest.SignedOut),
        errors(400, ErrorCode.BAD_KEEP),
        _UNAUTHORIZED,
        parameters=(
            Parameter(
                "keep",
                "query",
                KeepParam,
                "current: sign out every device but the caller's; none: every one",
                default="current",
            ),
        ),
        auth=Auth.BEARER,
    ),
    _api(
        "GET",
        "/players/me/following",
        following,
        "The players the caller follows",
        "players",
        Answer(200, "the players followed, and whether each is online", rest.Following),
        _UNAUTHORIZED,
        auth=Auth.BEARER,
    ),
    _api(
        "POST",
        "/players/me/following",
        follow_by_name,
        "Follow a player by name",
        "players",
        Answer(200, "the player followed", rest.FollowedPlayer),
        errors(400, ErrorCode.BAD_JSON, ErrorCode.INVALID_INPUT, ErrorCode.CANNOT_FOLLOW_SELF),
        _UNAUTHORIZED,
        errors(404, ErrorCode.UNKNOWN_PLAYER),
        errors(409, ErrorCode.FOLLOWING_LIMIT),
        errors(413, ErrorCode.REQUEST_ENTITY_TOO_LARGE),
        request=rest.FollowName,
        auth=Auth.BEARER,
    ),
    _api(
        "PUT",
        "/players/me/following/{player_id}",
        follow,
        "Follow a player",
        "players",
        Answer(200, "the player followed", rest.FollowedPlayer),
        errors(400, ErrorCode.BAD_PLAYER_ID, ErrorCode.CANNOT_FOLLOW_SELF),
        _UNAUTHORIZED,
        errors(404, ErrorCode.UNKNOWN_PLAYER),
        errors(409, ErrorCode.FOLLOWING_LIMIT),
        parameters=(_PLAYER_ID,),
        auth=Auth.BEARER,
    ),
    _api(
        "DELETE",
        "/players/me/following/{player_id}",
        unfollow,
        "Stop following a player",
        "players",
        Answer(200, "the player is not followed (any more)", rest.Unfollowed),
        errors(400, ErrorCode.BAD_PLAYER_ID),
        _UNAUTHORIZED,
        parameters=(_PLAYER_ID,),
        auth=Auth.BEARER,
    ),
    _api(
        "GET",
        "/daily",
        daily_today,
        "Today's daily challenge",
        "daily",
        Answer(200, "today's daily", rest.DailyChallenge),
    ),
    _api(
        "GET",
        "/daily/{date}",
        daily_of_date,
        "A date's daily challenge",
        "daily",
        Answer(200, "that date's daily", rest.DailyChallenge),
        errors(400, ErrorCode.BAD_DATE),
        errors(404, ErrorCode.NO_DAILY),
        parameters=(_DATE,),
    ),
    _api(
        "GET",
        "/daily/{date}/leaderboard",
        leaderboard,
        "A page of a date's leaderboard",
        "daily",
        Answer(200, "a page of entries", rest.LeaderboardPage),
        errors(400, ErrorCode.BAD_DATE, ErrorCode.BAD_LIMIT, ErrorCode.BAD_CURSOR),
        parameters=(
            _DATE,
            Parameter("limit", "query", LimitParam, "entries per page", default=50),
            Parameter(
                "cursor",
                "query",
                CursorParam,
                "the previous page's next_cursor (opaque); absent for the first page",
            ),
        ),
    ),
    _api(
        "GET",
        "/daily/{date}/leaderboard/friends",
        friends_board,
        "The friends' view of a date's leaderboard",
        "daily",
        Answer(200, "the caller's entry and those of the players they follow", rest.FriendsBoard),
        errors(400, ErrorCode.BAD_DATE),
        _UNAUTHORIZED,
        parameters=(_DATE,),
        auth=Auth.BEARER,
    ),
    _api(
        "GET",
        "/daily/{date}/leaderboard/around/{player_id}",
        around,
        "The leaderboard around a player",
        "daily",
        Answer(200, "the entries around the player's", rest.LeaderboardWindow),
        errors(400, ErrorCode.BAD_DATE, ErrorCode.BAD_PLAYER_ID, ErrorCode.BAD_RADIUS),
        errors(404, ErrorCode.NOT_RANKED),
        parameters=(
            _DATE,
            Parameter("player_id", "path", RowIdParam, "the player in the middle"),
            Parameter("radius", "query", RadiusParam, "entries either side of theirs", default=5),
        ),
    ),
    _api(
        "GET",
        "/games/{game_id}",
        game_summary,
        "A game's record",
        "games",
        Answer(200, "the game's record", rest.GameRecord),
        errors(400, ErrorCode.BAD_GAME_ID),
        _UNAUTHORIZED,
        errors(404, ErrorCode.UNKNOWN_GAME),
        parameters=(Parameter("game_id", "path", RowIdParam, "the game"),),
        auth=Auth.OPTIONAL_BEARER,
    ),
    _api(
        "GET",
        "/games/{game_id}/replay",
        game_replay,
        "A finished game's replay",
        "games",
        Answer(200, "the game, its deal, its actions and the optimal line", rest.Replay),
        errors(400, ErrorCode.BAD_GAME_ID),
        errors(404, ErrorCode.UNKNOWN_GAME),
        errors(409, ErrorCode.REPLAY_NOT_PUBLIC),
        parameters=(Parameter("game_id", "path", RowIdParam, "the game"),),
    ),
    _api(
        "GET",
        "/races/{invite}",
        race_room,
        "A race room",
        "races",
        Answer(200, "the room (the ROOM object)", RoomState),
        errors(400, ErrorCode.BAD_INVITE),
        errors(404, ErrorCode.UNKNOWN_INVITE),
        parameters=(
            Parameter(
                "invite",
                "path",
                InviteParam,
                f"the room's invite code: {INVITE_LENGTH} characters of {INVITE_ALPHABET}, "
                "case, dashes and spaces ignored",
            ),
        ),
    ),
    Route(
        Operation(
            method="GET",
            path=f"{PREFIX}/openapi.json",
            operation_id="openapi",
            summary="This OpenAPI document",
            description=inspect.getdoc(openapi) or "",
            tag="meta",
            answers=(
                Answer(
                    200,
                    "the OpenAPI 3.1 document",
                    OpenApiDocument,
                    headers=(
                        Header("ETag", "the document's version", {"type": "string"}),
                        Header(
                            "Cache-Control",
                            "cache, but revalidate",
                            {"type": "string", "const": "no-cache"},
                            key="Cache-Control-revalidate",
                        ),
                    ),
                ),
                Answer(
                    304,
                    "not modified (If-None-Match named the current ETag)",
                    headers=(Header("ETag", "the document's version", {"type": "string"}),),
                ),
            ),
        ),
        openapi,
    ),
    _health(
        "/healthz",
        healthz,
        "Liveness",
        Answer(200, "the process serves requests", rest.Health),
    ),
    _health(
        "/readyz",
        readyz,
        "Readiness",
        Answer(200, "the database answers", rest.Health),
        Answer(503, "the database does not answer", rest.Health),
    ),
)

_DESCRIPTION = """\
The TriPeaks server's REST API (JSON), generated from the server's route table and typed \
bodies. Play itself goes over the websocket at `/ws`: the JSON Schemas of its messages, both \
ways, are under `x-websocket`. docs/protocol.md describes both, with examples.

Every response carries `X-Request-Id` and `Server-Timing`; every `GET` also answers `HEAD`. \
Under `/api/v1`, an unknown path is 404 `not_found` and a method a path does not take is 405 \
`method_not_allowed` (with `Allow`), both with the error body."""


def _version() -> str:
    try:
        return metadata.version("tripeaks-server")
    except metadata.PackageNotFoundError:
        return "0"


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of :data:`ROUTES` (made once)."""
    return describe(
        [route.operation for route in ROUTES],
        title="TriPeaks server API",
        version=_version(),
        description=_DESCRIPTION,
        common_headers=_COMMON_HEADERS,
        websocket_path="/ws",
    )


@functools.cache
def _openapi_json() -> tuple[bytes, str]:
    body = json.dumps(openapi_document()).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'
