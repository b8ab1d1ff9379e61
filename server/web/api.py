"""The REST handlers under ``/api/v1`` (JSON): players, their devices and profiles, the daily
challenge, leaderboards, games, race rooms; ``/healthz``, ``/readyz`` and ``/metrics``. No rules
here.

:mod:`server.web.routes` registers and describes them (the route table); what they share
(answers, middlewares, parameters and bodies) is :mod:`server.web.http`'s. Every body is a
:mod:`server.protocol.rest` Struct encoded by :func:`server.protocol.rest.encode`; errors are
``{"error": {"code", "message"}}`` with a fitting HTTP status.
"""

from __future__ import annotations

import datetime as dt
import logging

import msgspec
from aiohttp import web
from limits import RateLimitItemPerMinute
from sqlalchemy import text

from server.config import Settings
from server.errors import (
    ErrorCode,
    InvalidInputError,
)
from server.logs import bind
from server.protocol import rest
from server.protocol.server import room_state
from server.services.daily import DailyInfo, parse_date
from server.services.friends import FollowedPlayer
from server.services.game_views import GameSummary
from server.services.leaderboards import Entry
from server.services.profiles import Profile
from server.services.replays import Replay
from server.web import metrics
from server.web.http import (
    bearer,
    error_response,
    follow_name_body,
    int_param,
    new_player_body,
    path_id,
    per_address,
    required_credential,
    respond,
    sign_in_body,
)
from server.web.keys import ADMISSION, METRICS, SERVICES, SETTINGS

log = logging.getLogger(__name__)


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
    body = await new_player_body(request)
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
    player = await bearer(request, required=True)
    assert player is not None
    return respond(rest.Player(player.id, player.name))


def _followed(player: FollowedPlayer) -> rest.FollowedPlayer:
    return rest.FollowedPlayer(player.id, player.name, _utc(player.since), player.online)


async def following(request: web.Request) -> web.Response:
    """The players the caller follows, the earliest followed first, each with whether they
    have a websocket open now (on any server process), and how many one may follow."""
    player = await bearer(request, required=True)
    assert player is not None
    friends = request.app[SERVICES].friends
    players = await friends.following(player.id)
    return respond(rest.Following([_followed(p) for p in players], friends.max_following))


def _player_id(request: web.Request) -> int:
    """The ``player_id`` of the path: a row id, 1 and up.

    Raises:
        InvalidInputError: ``bad_player_id``.
    """
    player_id = path_id(request, "player_id")
    if player_id < 1:
        raise InvalidInputError("player_id must be 1 or more", code=ErrorCode.BAD_PLAYER_ID)
    return player_id


async def follow(request: web.Request) -> web.Response:
    """Follow a player by id (one-way: they are not asked). Following them again changes
    nothing (``since`` stays the first time)."""
    player = await bearer(request, required=True)
    assert player is not None
    player_id = _player_id(request)
    followed = await request.app[SERVICES].friends.follow(player.id, player_id)
    return respond(_followed(followed))


async def follow_by_name(request: web.Request) -> web.Response:
    """Follow a player by name, read as registration reads it (any case, look-alike
    letters). Following them again changes nothing."""
    player = await bearer(request, required=True)
    assert player is not None
    body = await follow_name_body(request)
    followed = await request.app[SERVICES].friends.follow_name(player.id, body.name)
    return respond(_followed(followed))


async def unfollow(request: web.Request) -> web.Response:
    """Stop following a player (also when one did not follow them: ``was_following`` says)."""
    player = await bearer(request, required=True)
    assert player is not None
    player_id = _player_id(request)
    was = await request.app[SERVICES].friends.unfollow(player.id, player_id)
    return respond(rest.Unfollowed(player_id, was))


def _profile(profile: Profile) -> rest.PlayerProfile:
    return rest.PlayerProfile(
        id=profile.player_id,
        name=profile.name,
        member_since=profile.member_since,
        today=profile.today,
        streak=rest.Streak(profile.streaks.current, profile.streaks.best),
        best_score=profile.best_score,
        average_par_share=profile.average_par_share,
        ranked_days=profile.ranked_days,
        races_played=profile.races_played,
        races_won=profile.races_won,
        days=[
            rest.ProfileDay(d.date, d.status, d.score, d.rank, d.par, d.par_share)
            for d in profile.days
        ],
    )


async def player_profile(request: web.Request) -> web.Response:
    """A player's public profile: name, member since, the daily history by UTC date (result,
    rank on that date's leaderboard, score, share of par), the current and best daily streak,
    best score, average share of par, races played and won. Never a deal's code nor a card:
    today's daily shows its result alone, a race still running shows nowhere."""
    player_id = path_id(request, "player_id")
    return respond(_profile(await request.app[SERVICES].profiles.profile(player_id)))


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
        finished_at=_utc(entry.finished_at),
        game_id=entry.game_id,
        replayable=replayable,
    )


async def leaderboard(request: web.Request) -> web.Response:
    """A keyset page of a date's leaderboard (its won and blocked daily games, best first);
    ``next_cursor`` leads to the next page."""
    date = parse_date(request.match_info["date"])
    limit = int_param(request.query.get("limit"), "limit", 50)
    services = request.app[SERVICES]
    page = await services.leaderboards.page(date, limit, request.query.get("cursor") or None)
    replayable = await services.replays.daily_replayable(date)
    return respond(
        rest.LeaderboardPage(date, [_entry(e, replayable) for e in page.entries], page.next_cursor)
    )


async def around(request: web.Request) -> web.Response:
    """The leaderboard around one player's entry: up to ``radius`` entries either side."""
    date = parse_date(request.match_info["date"])
    player_id = path_id(request, "player_id")
    radius = int_param(request.query.get("radius"), "radius", 5)
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
    player = await bearer(request, required=True)
    assert player is not None
    date = parse_date(request.match_info["date"])
    services = request.app[SERVICES]
    entries = await services.friends.board(date, player.id)
    replayable = await services.replays.daily_replayable(date)
    return respond(rest.FriendsBoard(date, [_entry(e, replayable) for e in entries]))


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
    game_id = path_id(request, "game_id")
    viewer = await bearer(request, required=False)
    summary = await request.app[SERVICES].games.summary(
        game_id, None if viewer is None else viewer.id
    )
    return respond(_game_record(summary))


def _replay(replay: Replay) -> rest.Replay:
    game, deal = replay.game, replay.deal
    return rest.Replay(
        game=rest.ReplayGame(
            id=game.id,
            player=rest.Player(game.player_id, game.player_name),
            mode=game.mode.value,
            daily_date=game.daily_date,
            race_invite=game.race_invite,
            code=str(game.code),
            rules=game.code.rules,
            status=game.status,
            score=game.score,
            moves=game.moves,
            undos=game.undos,
            elapsed_ms=game.elapsed_ms,
            created_at=_utc(game.created_at),
            finished_at=None if game.finished_at is None else _utc(game.finished_at),
            hinted=game.hinted,
        ),
        layout=rest.DealLayout(
            tableau=[str(card) for card in deal.tableau],
            waste=str(deal.waste),
            stock=[str(card) for card in deal.stock],
        ),
        actions=[
            rest.ReplayAction(
                seq=s.seq,
                action=s.kind,
                pos=s.pos,
                card=s.card,
                score_after=s.score_after,
                at=_utc(s.at),
                undoes=s.undoes,
                undone=s.undone,
            )
            for s in replay.steps
        ],
        par=replay.par,
        line=None
        if replay.line is None
        else [rest.LineStep(s.action, s.pos, s.card) for s in replay.line],
        diverged_at=replay.diverged_at,
    )


async def game_replay(request: web.Request) -> web.Response:
    """A finished game whose deal is public, to replay move by move: the game, every card of
    its deal, every stored action (undos tied to what they took back), the solver's optimal
    line, and the first action that left every optimal path. A daily game is replayable once
    its UTC date is over, a race game once its race has finished, a free game once it has
    ended; before that 409 ``replay_not_public``, which names nothing of the deal."""
    game_id = path_id(request, "game_id")
    return respond(_replay(await request.app[SERVICES].replays.replay(game_id)))


async def race_room(request: web.Request) -> web.Response:
    """A race room (the ROOM object) by its invite: players, status, progress, spectators,
    and, once finished, the ranked results and the deal's code."""
    services = request.app[SERVICES]
    room = await services.races.room(request.match_info["invite"])
    return respond(room_state(room, services.clock.now()))
