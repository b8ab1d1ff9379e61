"""The REST handlers under ``/api/v1`` (JSON): players and their devices (registration,
sign-in, tokens), the daily challenge, leaderboards, game records, race rooms; ``/healthz``,
``/readyz`` and ``/metrics``. No rules here. Profiles and following are
:mod:`server.web.api_players`'s, replays :mod:`server.web.api_replays`'s.

:mod:`server.web.routes` registers and describes them (the route table); what they share
(answers, middlewares, parameters and bodies) is :mod:`server.web.http`'s. Every body is a
:mod:`server.protocol.rest` Struct encoded by :func:`server.protocol.rest.encode`; errors are
``{"error": {"code", "message"}}`` with a fitting HTTP status.
"""

from __future__ import annotations

import logging

import msgspec
from aiohttp import web
from limits import RateLimitItemPerMinute

from server.errors import (
    ErrorCode,
    InvalidInputError,
)
from server.logs import bind
from server.protocol import rest
from server.protocol.rest_types import LineStep, Player
from server.protocol.server import room_state
from server.services.daily import DailyInfo, parse_date
from server.services.game_views import GameSummary
from server.services.leaderboards import Entry
from server.storage.daily import DailyDifficulty
from server.storage.db import database_answers
from server.web import metrics
from server.web.board_params import caller_id, page_query, window_query
from server.web.http import (
    bearer,
    client_address,
    client_group,
    error_response,
    new_player_body,
    path_id,
    per_address,
    required_credential,
    respond,
    sign_in_body,
    utc,
)
from server.web.keys import ADMISSION, METRICS, SERVICES, SETTINGS

log = logging.getLogger(__name__)


async def _database_answers(request: web.Request) -> bool:
    try:
        await database_answers(request.app[SERVICES].db)
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
    body = await new_player_body(request)
    services = request.app[SERVICES]
    address_hash = services.moderation.address_hash(client_address(request))
    async with request.app[ADMISSION].turn():
        new = await services.players.register(body.name, address_hash=address_hash)
    return respond(
        rest.PlayerCreated(new.player.id, new.player.name, new.token, new.recovery_code), 201
    )


def _over_limit(request: web.Request, kind: str, per_minute: int) -> bool:
    """Count one request of ``kind`` from the client's address (an IPv6 address by its /64);
    whether it is over ``per_minute`` such requests in the last minute (sliding window)."""
    address = client_group(request)
    return not per_address.hit(RateLimitItemPerMinute(per_minute), f"{kind}:{address}")


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
    body = await sign_in_body(request)
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
    credential = await required_credential(request)
    token = await request.app[SERVICES].players.rotate_token(credential)
    return respond(rest.NewToken(token))


async def new_recovery_code(request: web.Request) -> web.Response:
    """Make the player a new recovery code, shown only here; the old one stops working at
    once. Devices signed in stay signed in."""
    credential = await required_credential(request)
    code = await request.app[SERVICES].players.new_recovery_code(credential)
    return respond(rest.NewRecoveryCode(code))


async def sign_out(request: web.Request) -> web.Response:
    """Sign the player's devices out: with ``keep=current`` (the default) every device but the
    caller's, with ``keep=none`` every one, the caller's too. Their tokens stop working at
    once, and their websockets, on every server process, are closed with 4001 (``signed
    out``). The recovery code signs back in."""
    credential = await required_credential(request)
    keep = request.query.get("keep", "current")
    if keep not in ("current", "none"):
        raise InvalidInputError(
            f"keep must be 'current' or 'none', not {keep[:20]!r}", code=ErrorCode.BAD_KEEP
        )
    count = await request.app[SERVICES].players.sign_out(
        credential.player.id, keep=credential if keep == "current" else None
    )
    return respond(rest.SignedOut(count))


async def me(request: web.Request) -> web.Response:
    """The player the bearer token belongs to."""
    player = await bearer(request, required=True)
    assert player is not None
    return respond(Player(player.id, player.name))


def _daily(info: DailyInfo) -> rest.DailyChallenge:
    return rest.DailyChallenge(
        date=info.date,
        rules=info.rules,
        code=None if info.code is None else str(info.code),
        is_open=info.is_open,
        players=info.players,
        ranked=info.ranked,
        closes_at=utc(info.closes_at),
        server_time=utc(info.server_time),
        par=info.par,
        line=None if info.line is None else [LineStep(s.action, s.pos, s.card) for s in info.line],
        difficulty=info.level,
        baselines=None if info.baselines is None else _baselines(info.baselines),
    )


def _baselines(figures: DailyDifficulty) -> rest.DailyBaselines:
    return rest.DailyBaselines(
        greedy=rest.GreedyBaseline(figures.greedy_status.value, figures.greedy_score),
        random=rest.RandomBaseline(
            playouts=figures.random_playouts,
            win_rate=round(figures.random_wins / figures.random_playouts, 4),
            median_score=figures.random_median_score,
        ),
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


def _entry(entry: Entry, replayable: bool) -> rest.LeaderboardEntry:
    return rest.LeaderboardEntry(
        rank=entry.rank,
        player_id=entry.player_id,
        name=entry.name,
        score=entry.score,
        moves=entry.moves,
        undos=entry.undos,
        elapsed_ms=entry.elapsed_ms,
        status=entry.status,
        finished_at=utc(entry.finished_at),
        game_id=entry.game_id,
        replayable=replayable,
    )


async def leaderboard(request: web.Request) -> web.Response:
    """A keyset page of a date's leaderboard (its won and blocked daily games, best first);
    ``next_cursor`` leads to the next page."""
    date = parse_date(request.match_info["date"])
    limit, cursor = page_query(request)
    services = request.app[SERVICES]
    page = await services.leaderboards.page(date, limit, cursor)
    replayable = await services.replays.daily_replayable(date)
    return respond(
        rest.LeaderboardPage(date, [_entry(e, replayable) for e in page.entries], page.next_cursor)
    )


async def around(request: web.Request) -> web.Response:
    """The leaderboard around one player's entry: up to ``radius`` entries either side."""
    date = parse_date(request.match_info["date"])
    player_id, radius = window_query(request)
    services = request.app[SERVICES]
    entries = await services.leaderboards.around(date, player_id, radius)
    replayable = await services.replays.daily_replayable(date)
    return respond(
        rest.LeaderboardWindow(date, player_id, [_entry(e, replayable) for e in entries])
    )


async def friends_board(request: web.Request) -> web.Response:
    """The friends' view of a date's leaderboard: the caller's entry and those of the players
    they follow who have one, each with its rank on the whole board (as on its pages), in
    board order."""
    me = await caller_id(request)
    date = parse_date(request.match_info["date"])
    services = request.app[SERVICES]
    entries = await services.friends.board(date, me)
    replayable = await services.replays.daily_replayable(date)
    return respond(rest.FriendsBoard(date, [_entry(e, replayable) for e in entries]))


def _game_record(summary: GameSummary) -> rest.GameRecord:
    return rest.GameRecord(
        id=summary.id,
        player=Player(summary.player_id, summary.player_name),
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
        created_at=utc(summary.created_at),
        finished_at=None if summary.finished_at is None else utc(summary.finished_at),
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
                at=utc(a.at),
            )
            for a in summary.actions
        ],
    )


async def game_summary(request: web.Request) -> web.Response:
    """A game's record; its code and full action list once the game has ended (a daily game:
    once its date is over; a race game: once the race is finished), and the action list to
    its owner (Bearer) at any time."""
    game_id = path_id(request, "game_id")
    viewer = await bearer(request, required=False)
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
