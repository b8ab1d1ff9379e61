"""What the route table's entries share: :class:`Route` (an operation's description and its
handler), :func:`api_route` (a route under ``/api/v1`` with the answers every such route may
give), the types of path and query parameters, and the headers every answer carries.
:mod:`server.web.routes` assembles the per-area lists (:mod:`server.web.routes_players`,
:mod:`server.web.routes_daily`, :mod:`server.web.routes_games`) into the table.
"""

from __future__ import annotations

import datetime as dt
import inspect
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from msgspec import Meta

from server.errors import ErrorCode
from server.protocol.client import MAX_ID
from server.protocol.openapi import Answer, Auth, Header, Operation, Parameter, errors
from server.services.keyset import MAX_LIMIT, MAX_RADIUS
from server.services.rooms import INVITE_ALPHABET, INVITE_LENGTH
from server.web.http import PREFIX, Handler


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
#: The ``date`` of a daily's path.
DATE = Parameter("date", "path", DateParam, "the UTC date, YYYY-MM-DD: today or earlier")
#: The query parameters of a board's keyset page.
PAGE = (
    Parameter("limit", "query", LimitParam, "entries per page", default=50),
    Parameter(
        "cursor",
        "query",
        CursorParam,
        "the previous page's next_cursor (opaque); absent for the first page",
    ),
)
#: The player in the middle of a board's window around them, and the window's radius.
AROUND = (
    Parameter("player_id", "path", RowIdParam, "the player in the middle"),
    Parameter("radius", "query", RadiusParam, "entries either side of theirs", default=5),
)
NO_STORE = Header(
    "Cache-Control", "API answers are never cached", {"type": "string", "const": "no-store"}
)
#: The headers every answer carries (the document keeps them once).
COMMON_HEADERS = (
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
#: A write whose COMMIT was sent and not confirmed (docs/protocol.md §5.6); never a read.
_OUTCOME_UNKNOWN = errors(503, ErrorCode.OUTCOME_UNKNOWN)
_FAILED = errors(500, ErrorCode.INTERNAL_ERROR)
_OTHER_SITE = errors(403, ErrorCode.ORIGIN_NOT_ALLOWED)
#: Every route's answer to an address with too many connections in use
#: (``TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS``).
TOO_MANY_CONNECTIONS = errors(429, ErrorCode.TOO_MANY_CONNECTIONS)
_NOT_JSON = errors(415, ErrorCode.UNSUPPORTED_MEDIA_TYPE)
_BODY_TOO_SLOW = errors(408, ErrorCode.REQUEST_TIMEOUT)


def _merged(answers: list[Answer]) -> list[Answer]:
    """One answer per status, in the order of their first appearance: the error answers of
    one status become one, with every code and header of them."""
    by_status: dict[int, Answer] = {}
    for answer in answers:
        first = by_status.get(answer.status)
        if first is None:
            by_status[answer.status] = answer
            continue
        if not (first.codes and answer.codes):
            raise ValueError(f"two answers of status {answer.status}, not both errors")
        codes = tuple(dict.fromkeys((*first.codes, *answer.codes)))
        merged = errors(answer.status, *codes)
        named = {h.component: h for h in (*first.headers, *answer.headers)}
        headers = tuple(named.values())
        by_status[answer.status] = replace(merged, headers=headers)
    return list(by_status.values())


def api_route(
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
    such route may answer with, each with ``Cache-Control: no-store``: a route that changes
    something (any method but ``GET``) refuses a page of another site (403) and may answer
    that its outcome is unknown (503 ``outcome_unknown``), and one that
    takes a body refuses a body not sent as JSON (415) or not sent in time (408); any route
    refuses an address with too many connections in use (429). Answers of one status are one
    answer, carrying every code of them."""
    every = [*answers]
    if method != "GET":
        every += [_OTHER_SITE, _OUTCOME_UNKNOWN]
    if request is not None:
        every += [_NOT_JSON, _BODY_TOO_SLOW]
    every += [TOO_MANY_CONNECTIONS, _DATABASE_FAILED, _FAILED]
    return Route(
        Operation(
            method=method,
            path=f"{PREFIX}{path}",
            operation_id=handler.__name__,
            summary=summary,
            description=inspect.getdoc(handler) or summary,
            tag=tag,
            answers=tuple(replace(a, headers=(*a.headers, NO_STORE)) for a in _merged(every)),
            parameters=parameters,
            request=request,
            auth=auth,
        ),
        handler,
    )


#: A bearer route's answer to a missing or unknown token.
UNAUTHORIZED = errors(401, ErrorCode.UNAUTHORIZED)
#: The ``player_id`` of a path.
PLAYER_ID = Parameter("player_id", "path", RowIdParam, "the player")
