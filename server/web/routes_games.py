"""The route table's entries of stored games (tag ``games``: a game's record and its replay)
and race rooms (tag ``races``). :mod:`server.web.routes` assembles them into
:data:`server.web.routes.ROUTES`."""

from __future__ import annotations

from server.errors import ErrorCode
from server.protocol.openapi import Answer, Auth, Parameter, errors
from server.protocol.rest import GameRecord
from server.protocol.rest_replays import Replay
from server.protocol.server import RoomState
from server.services.rooms import INVITE_ALPHABET, INVITE_LENGTH
from server.web.api import game_summary, race_room
from server.web.api_replays import game_replay
from server.web.routing import UNAUTHORIZED, InviteParam, Route, RowIdParam, api_route

#: The routes under ``/api/v1/games`` and ``/api/v1/races``, in registration order.
GAME_ROUTES: tuple[Route, ...] = (
    api_route(
        "GET",
        "/games/{game_id}",
        game_summary,
        "A game's record",
        "games",
        Answer(200, "the game's record", GameRecord),
        errors(400, ErrorCode.BAD_GAME_ID),
        UNAUTHORIZED,
        errors(404, ErrorCode.UNKNOWN_GAME),
        parameters=(Parameter("game_id", "path", RowIdParam, "the game"),),
        auth=Auth.OPTIONAL_BEARER,
    ),
    api_route(
        "GET",
        "/games/{game_id}/replay",
        game_replay,
        "A finished game's replay",
        "games",
        Answer(200, "the game, its deal, its actions and the optimal line", Replay),
        errors(400, ErrorCode.BAD_GAME_ID),
        errors(404, ErrorCode.UNKNOWN_GAME),
        errors(409, ErrorCode.REPLAY_NOT_PUBLIC),
        parameters=(Parameter("game_id", "path", RowIdParam, "the game"),),
    ),
    api_route(
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
)
