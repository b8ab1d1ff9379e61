"""REST routes under ``/api/v1`` (JSON): players, the daily challenge, leaderboards, games.

Errors are ``{"error": {"code", "message"}}`` with a fitting HTTP status.
"""

from __future__ import annotations

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
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter
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
from server.protocol.server import iso_time, room_state
from server.services.daily import DailyInfo, parse_date
from server.services.games import GameSummary
from server.services.leaderboards import Entry
from server.services.players import PlayerInfo
from server.web import metrics
from server.web.keys import ADMISSION, METRICS, SERVICES, SETTINGS

log = logging.getLogger(__name__)

PREFIX = "/api/v1"
#: Registrations per client address. A sliding window counter keeps two counters per address
#: that expire with their windows (a moving window's memory store keeps a key for every
#: address it has ever seen).
_registrations = SlidingWindowCounterRateLimiter(MemoryStorage())
_INTEGER = re.compile(r"-?[0-9]{1,12}")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(status: int, code: str, message: str) -> web.Response:
    """A JSON error body ``{"error": {"code", "message"}}`` with the given HTTP status."""
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


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


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn service errors and HTTP errors under the API into JSON error bodies."""
    try:
        return await handler(request)
    except ServerBusyError as exc:
        return _busy(exc)
    except ServiceError as exc:
        return error_response(exc.http_status, exc.code, exc.message)
    except web.HTTPException as exc:
        if not request.path.startswith(PREFIX) or exc.status < 400:
            raise
        response = error_response(exc.status, exc.reason.lower().replace(" ", "_"), exc.reason)
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


def _busy(exc: ServerBusyError) -> web.Response:
    """503 ``server_busy`` with a ``Retry-After`` (whole seconds)."""
    response = error_response(503, exc.code, exc.message)
    response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
    return response


def add_routes(app: web.Application) -> None:
    """Register every REST route."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    if app[SETTINGS].metrics:
        app.router.add_get("/metrics", scrape_metrics)
    app.router.add_post(f"{PREFIX}/players", register_player)
    app.router.add_get(f"{PREFIX}/players/me", me)
    app.router.add_get(f"{PREFIX}/daily", daily_today)
    app.router.add_get(f"{PREFIX}/daily/{{date}}", daily_of_date)
    app.router.add_get(f"{PREFIX}/daily/{{date}}/leaderboard", leaderboard)
    app.router.add_get(f"{PREFIX}/daily/{{date}}/leaderboard/around/{{player_id}}", around)
    app.router.add_get(f"{PREFIX}/games/{{game_id}}", game_summary)
    app.router.add_get(f"{PREFIX}/races/{{invite}}", race_room)


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
    raw = request.match_info[name]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise InvalidInputError(f"{name} must be a positive integer", code=ErrorCode(f"bad_{name}"))
    return int(raw)


async def _bearer(request: web.Request, *, required: bool) -> PlayerInfo | None:
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
    player = await request.app[SERVICES].players.authenticate(token.strip())
    bind(player_id=player.id)
    return player


async def _database_answers(request: web.Request) -> bool:
    try:
        async with request.app[SERVICES].db.connect() as conn:
            await conn.execute(text("SELECT 1"))
    except Exception as exc:
        log.warning("health check: database unreachable: %s", exc.__class__.__name__)
        return False
    return True


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz`` (liveness) → 200 ``{"status": "ok", "database": "ok" | "unreachable"}``
    while the process serves requests: a database outage is no reason to restart the server
    (play resumes by itself when the database is back)."""
    database = "ok" if await _database_answers(request) else "unreachable"
    return web.json_response({"status": "ok", "database": database})


async def readyz(request: web.Request) -> web.Response:
    """``GET /readyz`` (readiness) → 200 ``{"status": "ok", "database": "ok"}`` when the
    database answers, else 503 ``{"status": "unavailable", "database": "unreachable"}``."""
    if await _database_answers(request):
        return web.json_response({"status": "ok", "database": "ok"})
    return web.json_response({"status": "unavailable", "database": "unreachable"}, status=503)


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
    """``POST /api/v1/players {"name"}`` → 201 ``{"id", "name", "token"}``; 429
    ``rate_limited`` past ``TRIPEAKS_REGISTER_PER_MINUTE`` registrations from one address."""
    settings = request.app[SETTINGS]
    limit = RateLimitItemPerMinute(settings.register_per_minute)
    if not _registrations.hit(limit, f"register:{_client_address(request, settings)}"):
        metrics.RATE_LIMITED_REGISTRATIONS.inc()
        return error_response(
            429, "rate_limited", "too many registrations from this address; try again later"
        )
    body = await _json_object(request)
    if "name" not in body:
        raise InvalidInputError("the body needs a 'name'", code=ErrorCode.BAD_NAME)
    services = request.app[SERVICES]
    address_hash = services.moderation.address_hash(_client_address(request, settings))
    async with request.app[ADMISSION].turn():
        player, token = await services.players.register(body["name"], address_hash=address_hash)
    return web.json_response({"id": player.id, "name": player.name, "token": token}, status=201)


def _client_address(request: web.Request, settings: Settings) -> str:
    """The client's address: the peer, or behind a trusted proxy the address it forwarded."""
    if settings.trust_forwarded_for:
        forwarded = request.headers.get("X-Forwarded-For", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.remote or "unknown"


async def me(request: web.Request) -> web.Response:
    """``GET /api/v1/players/me`` (Bearer) → ``{"id", "name"}``."""
    player = await _bearer(request, required=True)
    assert player is not None
    return web.json_response({"id": player.id, "name": player.name})


def _daily_json(info: DailyInfo) -> dict[str, Any]:
    return {
        "date": info.date.isoformat(),
        "rules": info.rules.value,
        "code": None if info.code is None else str(info.code),
        "is_open": info.is_open,
        "players": info.players,
        "ranked": info.ranked,
        "closes_at": iso_time(info.closes_at),
        "par": info.par,
        "line": None
        if info.line is None
        else [{"action": s.action.value, "pos": s.pos, "card": s.card} for s in info.line],
    }


async def daily_today(request: web.Request) -> web.Response:
    """``GET /api/v1/daily`` → today's (UTC) daily: date, rules, players; code null while open."""
    return web.json_response(_daily_json(await request.app[SERVICES].daily.info()))


async def daily_of_date(request: web.Request) -> web.Response:
    """``GET /api/v1/daily/{date}`` → that date's daily (its code once the date is over)."""
    date = parse_date(request.match_info["date"])
    return web.json_response(_daily_json(await request.app[SERVICES].daily.info(date)))


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "rank": entry.rank,
        "player_id": entry.player_id,
        "name": entry.name,
        "score": entry.score,
        "moves": entry.moves,
        "undos": entry.undos,
        "elapsed_ms": entry.elapsed_ms,
        "status": entry.status,
        "finished_at": iso_time(entry.finished_at),
    }


async def leaderboard(request: web.Request) -> web.Response:
    """``GET /api/v1/daily/{date}/leaderboard?limit=&cursor=`` → ``{date, entries,
    next_cursor}`` (keyset pages; limit 1..100, default 50)."""
    date = parse_date(request.match_info["date"])
    limit = _int_param(request.query.get("limit"), "limit", 50)
    page = await request.app[SERVICES].leaderboards.page(
        date, limit, request.query.get("cursor") or None
    )
    return web.json_response(
        {
            "date": date.isoformat(),
            "entries": [_entry_json(e) for e in page.entries],
            "next_cursor": page.next_cursor,
        }
    )


async def around(request: web.Request) -> web.Response:
    """``GET /api/v1/daily/{date}/leaderboard/around/{player_id}?radius=`` → ``{date,
    player_id, entries}``: up to ``radius`` (0..50, default 5) entries either side."""
    date = parse_date(request.match_info["date"])
    player_id = _path_id(request, "player_id")
    radius = _int_param(request.query.get("radius"), "radius", 5)
    entries = await request.app[SERVICES].leaderboards.around(date, player_id, radius)
    return web.json_response(
        {
            "date": date.isoformat(),
            "player_id": player_id,
            "entries": [_entry_json(e) for e in entries],
        }
    )


def _summary_json(summary: GameSummary) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": summary.id,
        "player": {"id": summary.player_id, "name": summary.player_name},
        "mode": summary.mode.value,
        "rules": summary.code.rules.value,
        "code": str(summary.code) if summary.revealed else None,
        "deal_version": summary.code.version.value,
        "daily_date": None if summary.daily_date is None else summary.daily_date.isoformat(),
        "status": summary.status.value,
        "score": summary.score,
        "moves": summary.moves,
        "undos": summary.undos,
        "seq": summary.seq,
        "elapsed_ms": summary.elapsed_ms,
        "created_at": iso_time(summary.created_at),
        "finished_at": iso_time(summary.finished_at),
        "hinted": summary.hinted,
        "par": summary.par,
        "par_share": None if not summary.par else round(summary.score / summary.par, 4),
    }
    if summary.actions is not None:
        body["actions"] = [
            {
                "seq": a.seq,
                "action": a.kind.value,
                "pos": a.pos,
                "card": a.card,
                "score_after": a.score_after,
                "at": iso_time(a.at),
            }
            for a in summary.actions
        ]
    return body


async def game_summary(request: web.Request) -> web.Response:
    """``GET /api/v1/games/{id}`` → the game's summary; its code and full action list once
    the game has ended (a daily game: once its date is over), or to its owner (Bearer)."""
    game_id = _path_id(request, "game_id")
    viewer = await _bearer(request, required=False)
    summary = await request.app[SERVICES].games.summary(
        game_id, None if viewer is None else viewer.id
    )
    return web.json_response(_summary_json(summary))


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise InvalidInputError("the body is not valid JSON", code=ErrorCode.BAD_JSON) from None
    if not isinstance(body, dict):
        raise InvalidInputError("the body must be a JSON object", code=ErrorCode.BAD_JSON)
    return body


async def race_room(request: web.Request) -> web.Response:
    """``GET /api/v1/races/{invite}`` → the ROOM object: players, status, progress, and (once
    finished) the ranked results and the deal's code."""
    services = request.app[SERVICES]
    room = await services.races.room(request.match_info["invite"])
    return web.json_response(msgspec.to_builtins(room_state(room, services.clock.now())))
