"""What every REST route shares: the answer of a body or an error, the middlewares (timing,
request id, every failure answered as the JSON error body), and the reading of parameters,
bearer tokens and JSON bodies, each refusing bad input with an error that names it.

The routes themselves are the handlers of :mod:`server.web.api`, :mod:`server.web.api_players`
and :mod:`server.web.api_replays`, registered and described by :mod:`server.web.routes`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from aiohttp import web
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter

from server.errors import (
    ErrorCode,
    ForbiddenError,
    InvalidInputError,
    RequestTimeoutError,
    ServerBusyError,
    ServiceError,
    StorageError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
    refusal,
)
from server.logs import bind, log_context
from server.protocol import rest
from server.protocol.client import MAX_ID
from server.protocol.rest_players import FollowName
from server.services.addresses import address_group
from server.services.players import Credential, PlayerInfo
from server.web.faults import Fault, client_fault
from server.web.keys import SERVICES, SETTINGS

log = logging.getLogger(__name__)

PREFIX = "/api/v1"
#: Registrations and sign-ins per client address (each under a key of its own). A sliding
#: window counter keeps two counters per address that expire with their windows (a moving
#: window's memory store keeps a key for every address it has ever seen).
per_address = SlidingWindowCounterRateLimiter(MemoryStorage())
_INTEGER = re.compile(r"-?[0-9]{1,12}")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def respond(body: rest.Body, status: int = 200) -> web.Response:
    """A JSON answer: ``body`` (a :mod:`server.protocol.rest` body) with the given status."""
    return web.Response(
        body=rest.encode(body), status=status, content_type="application/json", charset="utf-8"
    )


def utc(when: dt.datetime) -> dt.datetime:
    """An aware time as UTC, as every body sends it (docs/protocol.md §12.1)."""
    return when.astimezone(dt.UTC)


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
    except RequestTimeoutError as exc:
        # What is left of the body would be read as the next request: none will be.
        response = error_response(exc.http_status, exc.code, exc.message)
        response.force_close()
        return response
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


#: Methods that change nothing. A page of another site may send them: it cannot read the
#: answers, the server sending no CORS headers.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: The websocket's path: its upgrade is checked like a request that changes something.
WS_PATH = "/ws"


@web.middleware
async def origin_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a request that changes something (any method but ``GET``, ``HEAD`` and
    ``OPTIONS`` under ``/api/v1``) or opens the websocket from a page of another site: its
    ``Origin``, when it has one, must be the server's own or one of
    ``TRIPEAKS_ALLOWED_ORIGINS`` (see :func:`check_origin`)."""
    path = request.path
    if path == WS_PATH or (request.method not in SAFE_METHODS and path.startswith(PREFIX)):
        check_origin(request)
    return await handler(request)


def check_origin(request: web.Request) -> None:
    """Let a request through when it has no ``Origin`` (a program, not a browser), or when
    its ``Origin`` is the server's own — the scheme ``http`` or ``https`` and the host and port
    its ``Host`` header names, as a page of this server sends them — or one of
    ``TRIPEAKS_ALLOWED_ORIGINS`` (``*``: any).

    A browser sends ``Origin`` with every cross-site request and with every same-site one but
    ``GET`` and ``HEAD``. Bearer tokens are never sent by a browser on its own (no cookie
    holds one), so a page of another site can only act through its visitors' browsers with
    what needs no token: this check refuses it that too.

    Raises:
        ForbiddenError: ``origin_not_allowed`` (403).
    """
    origin = request.headers.get("Origin")
    if origin is None:
        return
    allowed = request.app[SETTINGS].origins
    sent = origin.strip().lower().rstrip("/")
    scheme, separator, authority = sent.partition("://")
    own = bool(separator) and scheme in ("http", "https")
    if own and authority == request.headers.get("Host", "").strip().lower():
        return
    if "*" in allowed or sent in allowed:
        return
    raise ForbiddenError(
        f"requests from pages of {origin[:100]!r} are not accepted here "
        "(TRIPEAKS_ALLOWED_ORIGINS lists the sites that may)",
        code=ErrorCode.ORIGIN_NOT_ALLOWED,
    )


def _busy(exc: ServerBusyError) -> web.Response:
    """503 ``server_busy`` with a ``Retry-After`` (whole seconds)."""
    response = error_response(503, exc.code, exc.message)
    response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
    return response


# ------------------------------------------------------------------------- client address


def client_address(request: web.Request) -> str:
    """The client's address: the peer's, or behind a trusted proxy
    (``TRIPEAKS_TRUST_FORWARDED_FOR``) the last ``X-Forwarded-For`` entry, the one the proxy
    added."""
    if request.app[SETTINGS].trust_forwarded_for:
        forwarded = request.headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.remote or "unknown"


def client_group(request: web.Request) -> str:
    """What the limits per address count the client as: its address's
    :func:`~server.services.addresses.address_group` (an IPv4 address as it is, an IPv6 address
    by its /64 network, which one subscriber usually holds whole: moderation's address hashes
    group alike), or the address as it is when it is not an IP address."""
    address = client_address(request)
    return address_group(address) or address


# ------------------------------------------------------------------------------ parameters


def int_param(raw: str | None, name: str, default: int) -> int:
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


def path_id(request: web.Request, name: str) -> int:
    """A row id in the path: ASCII digits, 1 to :data:`MAX_ID` (the database's bigint), as the
    OpenAPI document's parameter says.

    Raises:
        InvalidInputError: ``bad_<name>`` (e.g. ``bad_game_id``): anything else, 0 included.
    """
    raw = request.match_info[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or not 1 <= int(raw) <= MAX_ID:
        raise InvalidInputError(f"{name} must be a positive integer", code=ErrorCode(f"bad_{name}"))
    return int(raw)


async def bearer(request: web.Request, *, required: bool) -> PlayerInfo | None:
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


async def required_credential(request: web.Request) -> Credential:
    credential = await _credential(request, required=True)
    assert credential is not None
    return credential


async def new_player_body(request: web.Request) -> rest.NewPlayer:
    """The request's body, read as a :class:`rest.NewPlayer`.

    Raises:
        UnsupportedMediaTypeError: ``unsupported_media_type``: not sent as
            ``application/json`` (415).
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


async def sign_in_body(request: web.Request) -> rest.SignIn:
    """The request's body, read as a :class:`rest.SignIn`.

    Raises:
        UnsupportedMediaTypeError: ``unsupported_media_type`` (as for :func:`new_player_body`).
        InvalidInputError: ``bad_json`` (as for :func:`new_player_body`); ``invalid_input`` (no
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


async def follow_name_body(request: web.Request) -> FollowName:
    """The request's body, read as a :class:`FollowName`.

    Raises:
        UnsupportedMediaTypeError: ``unsupported_media_type`` (as for :func:`new_player_body`).
        InvalidInputError: ``bad_json`` (as for :func:`new_player_body`); ``invalid_input`` (no
            ``name``, or not a string of at most 200 characters).
        web.HTTPRequestEntityTooLarge: a body over the size limit (413).
    """
    body = await _json_object(request)
    try:
        return msgspec.convert(body, FollowName)
    except msgspec.ValidationError:
        raise InvalidInputError(
            "the body needs a 'name', a string of at most 200 characters",
            code=ErrorCode.INVALID_INPUT,
        ) from None


async def _json_object(request: web.Request) -> dict[str, Any]:
    """The request's body, a JSON object sent as ``Content-Type: application/json`` (any
    ``charset`` parameter). A body sent as anything else is refused before it is read: a page
    of another site can send ``text/plain`` (or a form) without the browser asking the server
    first, never ``application/json``.

    Raises:
        UnsupportedMediaTypeError: ``unsupported_media_type`` (415): no ``Content-Type``, or
            another one.
        InvalidInputError: ``bad_json``: a body that cannot be read (see :func:`_body_text`),
            not JSON (``NaN`` and ``Infinity`` are not JSON numbers), a number past Python's
            4,300 digits, nested too deep, or not an object.
    """
    if request.content_type != "application/json":
        sent = request.headers.get("Content-Type")
        raise UnsupportedMediaTypeError(
            "send the body as JSON, with Content-Type: application/json"
            + (f" (not {sent[:40]!r})" if sent else " (the request has no Content-Type)")
        )
    try:
        body = json.loads(await _body_text(request), parse_constant=_not_a_json_number)
    except (ValueError, RecursionError):  # (JSONDecodeError is a ValueError)
        raise InvalidInputError("the body is not valid JSON", code=ErrorCode.BAD_JSON) from None
    if not isinstance(body, dict):
        raise InvalidInputError("the body must be a JSON object", code=ErrorCode.BAD_JSON)
    return body


def _not_a_json_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


async def _body_text(request: web.Request) -> str:
    """The request's body as text, in the charset its ``Content-Type`` names (UTF-8 by
    default), read within ``TRIPEAKS_HTTP_BODY_TIMEOUT_S``.

    Raises:
        RequestTimeoutError: ``request_timeout`` (408): the body did not arrive in time (its
            answer closes the connection).
        InvalidInputError: ``bad_json`` naming why the body cannot be read.
    """
    try:
        async with asyncio.timeout(request.app[SETTINGS].http_body_timeout_s):
            raw = await request.read()
    except TimeoutError:
        client_fault(Fault.BODY_TIMEOUT, f"{request.method} {request.path}: the body was too slow")
        raise RequestTimeoutError(
            "the body did not arrive in time; closing the connection"
        ) from None
    except ConnectionResetError:
        # The client left mid-body: its doing, noted quietly (the answer reaches nobody).
        client_fault(Fault.DISCONNECTED, f"{request.method} {request.path}: the body was cut off")
        raise InvalidInputError(
            "the body could not be read (the connection was lost)", code=ErrorCode.BAD_JSON
        ) from None
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
