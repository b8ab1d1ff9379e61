"""The REST route table (:data:`ROUTES`): each route's handler and its description, from which
:func:`add_routes` registers the routes and :func:`openapi_document` writes the OpenAPI 3.1
document served at ``GET /api/v1/openapi.json``, so no route exists without its description.

The table is assembled here from the per-area lists, in registration order:
:mod:`server.web.routes_players` (players, profiles, following), :mod:`server.web.routes_daily`
(the daily and its leaderboards), :mod:`server.web.routes_boards` (the weekly and monthly
boards), :mod:`server.web.routes_ladder` (the ladder), :mod:`server.web.routes_games` (game
records, replays, race rooms), then this document and the health routes. What the entries
share (:class:`Route`, parameter types, common answers and headers) is :mod:`server.web.routing`'s.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from dataclasses import replace
from importlib import metadata
from typing import Annotated, Any

from aiohttp import web
from msgspec import Meta

from server.protocol.openapi import Answer, Header, Operation
from server.protocol.openapi import openapi_document as describe
from server.protocol.rest import Health
from server.web.api import healthz, readyz, scrape_metrics
from server.web.http import PREFIX, Handler
from server.web.keys import SETTINGS
from server.web.routes_boards import BOARD_ROUTES
from server.web.routes_daily import DAILY_ROUTES
from server.web.routes_games import GAME_ROUTES
from server.web.routes_ladder import LADDER_ROUTES
from server.web.routes_players import PLAYER_ROUTES
from server.web.routing import COMMON_HEADERS, NO_STORE, TOO_MANY_CONNECTIONS, Route


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


OpenApiDocument = Annotated[
    dict[str, Any],
    Meta(
        description="an OpenAPI 3.1 document",
        extra_json_schema={"required": ["openapi", "info", "paths"]},
    ),
]


def _health(path: str, handler: Handler, summary: str, *answers: Answer) -> Route:
    return Route(
        Operation(
            method="GET",
            path=path,
            operation_id=handler.__name__,
            summary=summary,
            description=inspect.getdoc(handler) or summary,
            tag="health",
            answers=(*answers, TOO_MANY_CONNECTIONS),
        ),
        handler,
    )


#: Every route the API registers, as its OpenAPI document describes it.
ROUTES: tuple[Route, ...] = (
    *PLAYER_ROUTES,
    *DAILY_ROUTES,
    *BOARD_ROUTES,
    *LADDER_ROUTES,
    *GAME_ROUTES,
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
                replace(TOO_MANY_CONNECTIONS, headers=(NO_STORE,)),
            ),
        ),
        openapi,
    ),
    _health(
        "/healthz",
        healthz,
        "Liveness",
        Answer(200, "the process serves requests", Health),
    ),
    _health(
        "/readyz",
        readyz,
        "Readiness",
        Answer(200, "the database answers", Health),
        Answer(503, "the database does not answer", Health),
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
        common_headers=COMMON_HEADERS,
        websocket_path="/ws",
    )


@functools.cache
def _openapi_json() -> tuple[bytes, str]:
    body = json.dumps(openapi_document()).encode()
    return body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'
