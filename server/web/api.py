"""REST routes under ``/api/v1`` (JSON): players, the daily challenge, leaderboards, games,
race rooms; ``/healthz`` and ``/readyz``; and the API's OpenAPI document.

:data:`ROUTES` is the route table: :func:`add_routes` registers it and
``GET /api/v1/openapi.json`` describes it, so no route exists without its description. Every
body is a :mod:`server.protocol.rest` Struct encoded by :func:`server.protocol.rest.encode`;
errors are ``{"error": {"code", "message"}}`` with a fitting HTTP status.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import inspect
import json
import logging
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter
from msgspec import Meta
from sqlalchemy import text

from server.config import Settings
from server.errors import (
    ErrorCode,
    InvalidInputError,
    ServerBusyError,
    ServiceError,
    StorageError,
    UnauthorizedError,
    refusal,
)
from server.logs import bind, log_context
from server.protocol import rest
from server.protocol.client import MAX_ID
from server.protocol.rest import Answer, Auth, Header, Operation, Parameter, errors
from server.protocol.server import RoomState, room_state
from server.services.daily import DailyInfo, parse_date
from server.services.game_views import GameSummary
from server.services.leaderboards import MAX_LIMIT, MAX_RADIUS, Entry
from server.services.players import Credential, PlayerInfo
from server.services.rooms import INVITE_ALPHABET, INVITE_LENGTH
from server.web import metrics
from server.web.keys import ADMISSION, METRICS, SERVICES, SETTINGS

log = logging.getLogger(__name__)

PREFIX = "/api/v1"
#: Registrations and sign-ins per client address (each under a key of its own). A sliding
#: window counter keeps two counters per address that expire with their windows (a moving
#: window's memory store keeps a key for every address it has ever seen).
_per_address = SlidingWindowCounterRateLimiter(MemoryStorage())
_INTEGER = re.compile(r"-?[0-9]{1,12}")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def respond(body: rest.Body, status: int = 200) -> web.Response:
    """A JSON answer: ``body`` (a :mod:`server.protocol.rest` body) with the given status."""
    return web.Response(
        body=rest.encode(body), status=status, content_type="application/json", charset="utf-8"
    )


def error_response(status: int, code: ErrorCode, message: str) -> web.Response:
    """A JSON error body ``{"error": {"code", "message"}}`` with the given HTTP status."""
    return respond(rest.error_body(code, message), status)


@web.middleware
async def timing_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Say how long the server spent on each REST answer: ``Server-Timing: app;dur=<ms>``
    (what a client sees beyond it is the network and its own side). Not for the websocket,
    whose answer is sent before the handler ends."""
    started = time.perf_counter()
    request_id = _request_id(request)
    with log_context(request_id=request_id):
        response = await handler(request)
    if not response.prepared:
        spent_ms = (time.perf_counter() - started) * 1000
        response.headers["Server-Timing"] = f'app;dur={spent_ms:.1f};desc="server"'
        response.headers["X-Request-Id"] = request_id
    return response


#: What an ``X-Request-Id`` a client sends may hold to be kept (else the server makes one).
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def _request_id(request: web.Request) -> str:
    """The request's id in the logs and its ``X-Request-Id`` answer: the client's own when it
    sent a plausible one (1 to 64 of ``A-Z a-z 0-9 . _ : -``), else 16 random hex digits."""
    sent = request.headers.get("X-Request-Id", "")
    return sent if _REQUEST_ID.fullmatch(sent) else secrets.token_hex(8)


#: The codes of the HTTP errors aiohttp raises under the API (an unknown path, a wrong method,
#: a body over the size limit).
_HTTP_CODES = {
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.REQUEST_ENTITY_TOO_LARGE,
}


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn service errors, HTTP errors and failures under the API into JSON error bodies."""
    try:
        return await handler(request)
    except ServerBusyError as exc:
        return _busy(exc)
    except ServiceError as exc:
        return error_response(exc.http_status, exc.code, exc.message)
    except web.HTTPException as exc:
        if not request.path.startswith(PREFIX) or exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status)
        if code is None:
            code = ErrorCode.INVALID_INPUT if exc.status < 500 else ErrorCode.INTERNAL_ERROR
        response = error_response(exc.status, code, exc.reason)
        if "Allow" in exc.headers:  # a 405 must name the allowed methods (RFC 9110 §15.5.6)
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except StorageError as exc:
        if not request.path.startswith(PREFIX):
            raise
        refused = refusal(exc)
        if isinstance(refused, ServerBusyError):
            return _busy(refused)
        return error_response(refused.http_status, refused.code, refused.message)
    except Exception:
        if not request.path.startswith(PREFIX):
            raise
        log.exception("unexpected error answering %s %s", request.method, request.path)
        return error_response(500, ErrorCode.INTERNAL_ERROR, "the server failed; try again")


def _busy(exc: ServerBusyError) -> web.Response:
    """503 ``server_busy`` with a ``Retry-After`` (whole seconds)."""
    response = error_response(503, exc.code, exc.message)
    response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
    return response


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


# ------------------------------------------------------------------------------ parameters


def _int_param(raw: str | None, name: str, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        if not _INTEGER.fullmatch(raw):  # int() would also take "1_0", "+5", " 5", "٥"
            raise ValueError
        return int(raw)
    except ValueError:
        raise InvalidInputError(
            f"{name} must be an integer", code=ErrorCode(f"bad_{name}")
        ) from None


def _path_id(request: web.Request, name: str) -> int:
    """A row id in the path: ASCII digits, at most :data:`MAX_ID` (the database's bigint)."""
    raw = request.match_info[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or int(raw) > MAX_ID:
        raise InvalidInputError(f"{name} must be a positive integer", code=ErrorCode(f"bad_{name}"))
    return int(raw)


async def _bearer(request: web.Request, *, required: bool) -> PlayerInfo | None:
    credential = await _credential(request, required=required)
    return None if credential is None else credential.player


async def _credential(request: web.Request, *, required: bool) -> Credential | None:
    """The request's bearer token, authenticated (None: no ``Authorization`` header and none
    required).

    Raises:
        UnauthorizedError: ``unauthorized``: a header that is missing (when required),
            malformed, or names an unknown token.
    """
    header = request.headers.get("Authorization")
    if header is None:
        if required:
            raise UnauthorizedError(
                "send Authorization: Bearer <token>", code=ErrorCode.UNAUTHORIZED
            )
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("the Authorization header must be 'Bearer <token>'")
    credential = await request.app[SERVICES].players.credential(token.strip())
    bind(player_id=credential.player.id)
    return credential


async def _required_credential(request: web.Request) -> Credential:
    credential = await _credential(request, required=True)
    assert credential is not None
    return credential


async def _new_player(request: web.Request) -> rest.NewPlayer:
    """The request's body, read as a :class:`rest.NewPlayer`.

    Raises:
        InvalidInputError: ``bad_json`` (a body that cannot be read: cut short, not decoded by
            its ``Content-Encoding``, in an unknown charset; not JSON, nested too deep, not an
            object); ``bad_name`` (no ``name``, or not a string).
        web.HTTPRequestEntityTooLarge: a body over the size limit (413).
    """
    body = await _json_object(request)
    if "name" not in body:
        raise InvalidInputError("the body needs a 'name'", code=ErrorCode.BAD_NAME)
    try:
        return msgspec.convert(body, rest.NewPlayer)
    except msgspec.ValidationError:
        raise InvalidInputError("name must be a string", code=ErrorCode.BAD_NAME) from None


async def _sign_in_body(request: web.Request) -> rest.SignIn:
    """The request's body, read as a :class:`rest.SignIn`.

    Raises:
        InvalidInputError: ``bad_json`` (as for :func:`_new_player`); ``invalid_input`` (no
            ``name`` or ``recovery_code``, or one that is not a string).
        web.HTTPRequestEntityTooLarge: a body over the size limit (413).
    """
    body = await _json_object(request)
    try:
        return msgspec.convert(body, rest.SignIn)
    except msgspec.ValidationError:
        raise InvalidInputError(
            "the body needs a 'name' and a 'recovery_code', both strings (at most 200 characters)",
            code=ErrorCode.INVALID_INPUT,
        ) from None


async def _json_object(request: web.Request) -> dict[str, Any]:
    """The request's body, a JSON object.

    Raises:
        InvalidInputError: ``bad_json``: a body that cannot be read (see :func:`_body_text`),
            not JSON, nested too deep, or not an object.
    """
    try:
        body = json.loads(await _body_text(request))
    except (json.JSONDecodeError, RecursionError):
        raise InvalidInputError("the body is not valid JSON", code=ErrorCode.BAD_JSON) from None
    if not isinstance(body, dict):
        raise InvalidInputError("the body must be a JSON object", code=ErrorCode.BAD_JSON)
    return body


async def _body_text(request: web.Request) -> str:
    """The request's body as text, in the charset its ``Content-Type`` names (UTF-8 by
    default).

    Raises:
        InvalidInputError: ``bad_json`` naming why the body cannot be read.
    """
    try:
        raw = await request.read()
    except web.RequestPayloadError:
        encoding = request.headers.get("Content-Encoding")
        raise InvalidInputError(
            f"the body could not be decoded as its Content-Encoding ({encoding[:20]}) says"
            if encoding
            else "the body could not be read (cut short?)",
            code=ErrorCode.BAD_JSON,
        ) from None
    charset = request.charset or "utf-8"
    try:
        return raw.decode(charset)
    except LookupError:
        raise InvalidInputError(
            f"the body's charset {charset[:20]!r} is not known", code=ErrorCode.BAD_JSON
        ) from None
    except UnicodeDecodeError:
        raise InvalidInputError("the body is not valid JSON", code=ErrorCode.BAD_JSON) from None


# ------------------------------------------------------------------------------ handlers


async def _database_answers(request: web.Request) -> bool:
    try:
        async with request.app[SERVICES].db.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        log.warning("health check: database unreachable: %s", exc.__class__.__name__)
        return False
    return True


async def healthz(request: web.Request) -> web.Response:
    """Liveness: 200 while the process serves requests, with the database's state (``ok`` or
    ``unreachable``): a database outage is no reason to restart the server (play resumes by
    itself when the database is back)."""
    database = "ok" if await _database_answers(request) else "unreachable"
    return respond(rest.Health("ok", database))


async def readyz(request: web.Request) -> web.Response:
    """Readiness: 200 ``{"status": "ok", "database": "ok"}`` when the database answers, else
    503 ``{"status": "unavailable", "database": "unreachable"}``."""
    if await _database_answers(request):
        return respond(rest.Health("ok", "ok"))
    return respond(rest.Health("unavailable", "unreachable"), 503)


async def scrape_metrics(request: web.Request) -> web.Response:
    """``GET /metrics`` → the Prometheus text format (``TRIPEAKS_METRICS``): this process's
    metrics (every worker's under ``serve --workers``), its database pool, and the race rooms
    and today's daily as the database shows them (left out when the database does not answer
    within a second)."""
    services = request.app[SERVICES]
    activity = await request.app[METRICS].read(services)
    body = metrics.render(services, activity)
    return web.Response(body=body, headers={"Content-Type": metrics.CONTENT_TYPE})


async def register_player(request: web.Request) -> web.Response:
    """Register a player under a display name; the answer holds the player's bearer token,
    shown only here. At most ``TRIPEAKS_REGISTER_PER_MINUTE`` registrations a minute from one
    client address (429 ``rate_limited`` beyond)."""
    settings = request.app[SETTINGS]
    if _over_limit(request, "register", settings.register_per_minute):
        metrics.RATE_LIMITED_REGISTRATIONS.inc()
        return error_response(
            429,
            ErrorCode.RATE_LIMITED,
            "too many registrations from this address; try again later",
        )
    body = await _new_player(request)
    services = request.app[SERVICES]
    address_hash = services.moderation.address_hash(_client_address(request, settings))
    async with request.app[ADMISSION].turn():
        new = await services.players.register(body.name, address_hash=address_hash)
    return respond(
        rest.PlayerCreated(new.player.id, new.player.name, new.token, new.recovery_code), 201
    )


def _over_limit(request: web.Request, kind: str, per_minute: int) -> bool:
    """Count one request of ``kind`` from the client's address; whether it is over
    ``per_minute`` such requests in the last minute (sliding window)."""
    address = _client_address(request, request.app[SETTINGS])
    return not _per_address.hit(RateLimitItemPerMinute(per_minute), f"{kind}:{address}")


async def sign_in(request: web.Request) -> web.Response:
    """Sign a new device in with the player's name and recovery code: the answer holds a new
    bearer token of the device's own, shown only here (the player's other devices stay signed
    in). A wrong name or code gets one answer, 401 ``sign_in_failed``, whichever was wrong.
    At most ``TRIPEAKS_SIGN_IN_PER_MINUTE`` sign-ins a minute from one client address, right
    or wrong (429 ``rate_limited`` beyond)."""
    settings = request.app[SETTINGS]
    if _over_limit(request, "sign-in", settings.sign_in_per_minute):
        metrics.RATE_LIMITED_SIGN_INS.inc()
        return error_response(
            429, ErrorCode.RATE_LIMITED, "too many sign-ins from this address; try again later"
        )
    body = await _sign_in_body(request)
    async with request.app[ADMISSION].turn():
        signed_in = await request.app[SERVICES].players.sign_in(body.name, body.recovery_code)
    bind(player_id=signed_in.player.id)
    player = signed_in.player
    return respond(rest.SignedIn(player.id, player.name, signed_in.token), 201)


async def rotate_token(request: web.Request) -> web.Response:
    """Replace the caller's bearer token by a new one, shown only here. The old token stops
    working at once: REST answers 401 to it, and every websocket it authenticated, on every
    server process, is closed with 4001 (``signed out``). The player's other devices are
    untouched."""
    credential = await _required_credential(request)
    token = await request.app[SERVICES].players.rotate_token(credential)
    return respond(rest.NewToken(token))


async def new_recovery_code(request: web.Request) -> web.Response:
    """Make the player a new recovery code, shown only here; the old one stops working at
    once. Devices signed in stay signed in."""
    credential = await _required_credential(request)
    code = await request.app[SERVICES].players.new_recovery_code(credential.player.id)
    return respond(rest.NewRecoveryCode(code))


async def sign_out(request: web.Request) -> web.Response:
    """Sign the player's devices out: with ``keep=current`` (the default) every device but the
    caller's, with ``keep=none`` every one, the caller's too. Their tokens stop working at
    once, and their websockets, on every server process, are closed with 4001 (``signed
    out``). The recovery code signs back in."""
    credential = await _required_credential(request)
    keep = request.query.get("keep", "current")
    if keep not in ("current", "none"):
        raise InvalidInputError(
            f"keep must be 'current' or 'none', not {keep[:20]!r}", code=ErrorCode.BAD_KEEP
        )
    count = await request.app[SERVICES].players.sign_out(
        credential.player.id, keep=credential if keep == "current" else None
    )
    return respond(rest.SignedOut(count))


def _client_address(request: web.Request, settings: Settings) -> str:
    """The client's address: the peer, or behind a trusted proxy the address it forwarded."""
    if settings.trust_forwarded_for:
        forwarded = request.headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.remote or "unknown"


async def me(request: web.Request) -> web.Response:
    """The player the bearer token belongs to."""
    player = await _bearer(request, required=True)
    assert player is not None
    return respond(rest.Player(player.id, player.name))


def _utc(when: dt.datetime) -> dt.datetime:
    return when.astimezone(dt.UTC)


def _daily(info: DailyInfo) -> rest.DailyChallenge:
    return rest.DailyChallenge(
        date=info.date,
        rules=info.rules,
        code=None if info.code is None else str(info.code),
        is_open=info.is_open,
        players=info.players,
        ranked=info.ranked,
        closes_at=_utc(info.closes_at),
        par=info.par,
        line=None
        if info.line is None
        else [rest.LineStep(s.action, s.pos, s.card) for s in info.line],
    )


async def daily_today(request: web.Request) -> web.Response:
    """Today's (UTC, by the database's clock) daily challenge: its rules, players and par;
    its code is null while the date is open."""
    return respond(_daily(await request.app[SERVICES].daily.info()))


async def daily_of_date(request: web.Request) -> web.Response:
    """A date's daily challenge (today or earlier): its code and an optimal line once the
    date is over."""
    date = parse_date(request.match_info["date"])
    return respond(_daily(await request.app[SERVICES].daily.info(date)))


def _entry(entry: Entry) -> rest.LeaderboardEntry:
    return rest.LeaderboardEntry(
        rank=entry.rank,
        player_id=entry.player_id,
        name=entry.name,
        score=entry.score,
        moves=entry.moves,
        undos=entry.undos,
        elapsed_ms=entry.elapsed_ms,
        status=entry.status,
        finished_at=_utc(entry.finished_at),
    )


async def leaderboard(request: web.Request) -> web.Response:
    """A keyset page of a date's leaderboard (its won and blocked daily games, best first);
    ``next_cursor`` leads to the next page."""
    date = parse_date(request.match_info["date"])
    limit = _int_param(request.query.get("limit"), "limit", 50)
    page = await request.app[SERVICES].leaderboards.page(
        date, limit, request.query.get("cursor") or None
    )
    return respond(rest.LeaderboardPage(date, [_entry(e) for e in page.entries], page.next_cursor))


async def around(request: web.Request) -> web.Response:
    """The leaderboard around one player's entry: up to ``radius`` entries either side."""
    date = parse_date(request.match_info["date"])
    player_id = _path_id(request, "player_id")
    radius = _int_param(request.query.get("radius"), "radius", 5)
    entries = await request.app[SERVICES].leaderboards.around(date, player_id, radius)
    return respond(rest.LeaderboardWindow(date, player_id, [_entry(e) for e in entries]))


def _game_record(summary: GameSummary) -> rest.GameRecord:
    return rest.GameRecord(
        id=summary.id,
        player=rest.Player(summary.player_id, summary.player_name),
        mode=summary.mode.value,
        rules=summary.code.rules,
        code=str(summary.code) if summary.revealed else None,
        deal_version=summary.code.version,
        daily_date=summary.daily_date,
        status=summary.status,
        score=summary.score,
        moves=summary.moves,
        undos=summary.undos,
        seq=summary.seq,
        elapsed_ms=summary.elapsed_ms,
        created_at=_utc(summary.created_at),
        finished_at=None if summary.finished_at is None else _utc(summary.finished_at),
        hinted=summary.hinted,
        par=summary.par,
        par_share=None if not summary.par else round(summary.score / summary.par, 4),
        actions=msgspec.UNSET
        if summary.actions is None
        else [
            rest.GameRecordAction(
                seq=a.seq,
                action=a.kind,
                pos=a.pos,
                card=a.card,
                score_after=a.score_after,
                at=_utc(a.at),
            )
            for a in summary.actions
        ],
    )


async def game_summary(request: web.Request) -> web.Response:
    """A game's record; its code and full action list once the game has ended (a daily game:
    once its date is over; a race game: once the race is finished), and the action list to
    its owner (Bearer) at any time."""
    game_id = _path_id(request, "game_id")
    viewer = await _bearer(request, required=False)
    summary = await request.app[SERVICES].games.summary(
        game_id, None if viewer is None else viewer.id
    )
    return respond(_game_record(summary))


async def race_room(request: web.Request) -> web.Response:
    """A race room (the ROOM object) by its invite: players, status, progress, spectators,
    and, once finished, the ranked results and the deal's code."""
    services = request.app[SERVICES]
    room = await services.races.room(request.match_info["invite"])
    return respond(room_state(room, services.clock.now()))


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


# ------------------------------------------------------------------------------ the route table


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
    return rest.openapi_document(
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
