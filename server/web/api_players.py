"""The REST handlers of players' profiles and following under ``/api/v1/players`` (JSON):
``GET /players/{player_id}`` and ``/players/me/following`` (``GET``, ``POST``, ``PUT`` and
``DELETE`` of one player). No rules here: :mod:`server.services.profiles` and the friends
service hold them.

:mod:`server.web.routes_players` registers and describes them; the bodies are
:mod:`server.protocol.rest_players`'s; errors are ``{"error": {"code", "message"}}`` with a
fitting HTTP status.
"""

from __future__ import annotations

from aiohttp import web

from server.errors import ErrorCode, NotFoundError
from server.protocol.rest_players import (
    FollowedPlayer,
    Following,
    PlayerProfile,
    PlayerRatings,
    ProfileDay,
    RatedRace,
    RuleSetRating,
    Streak,
    Unfollowed,
)
from server.services.friends import FollowedPlayer as Followed
from server.services.period_boards import Period, PeriodEntry
from server.services.profiles import Profile
from server.web.api_boards import standing
from server.web.http import bearer, follow_name_body, path_id, respond, utc
from server.web.keys import SERVICES


def _followed(player: Followed) -> FollowedPlayer:
    return FollowedPlayer(player.id, player.name, utc(player.since), player.online)


async def following(request: web.Request) -> web.Response:
    """The players the caller follows, the earliest followed first, each with whether they
    have a websocket open now (on any server process), and how many one may follow."""
    player = await bearer(request, required=True)
    assert player is not None
    friends = request.app[SERVICES].friends
    players = await friends.following(player.id)
    return respond(Following([_followed(p) for p in players], friends.max_following))


def _player_id(request: web.Request) -> int:
    """The ``player_id`` of the path: a row id, 1 and up.

    Raises:
        InvalidInputError: ``bad_player_id``.
    """
    return path_id(request, "player_id")


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
    return respond(Unfollowed(player_id, was))


Standing = tuple[Period, PeriodEntry | None]


def _profile(profile: Profile, week: Standing, month: Standing) -> PlayerProfile:
    return PlayerProfile(
        id=profile.player_id,
        name=profile.name,
        member_since=profile.member_since,
        today=profile.today,
        streak=Streak(profile.streaks.current, profile.streaks.best),
        best_score=profile.best_score,
        average_par_share=profile.average_par_share,
        ranked_days=profile.ranked_days,
        races_played=profile.races_played,
        races_won=profile.races_won,
        days=[
            ProfileDay(d.date, d.status, d.score, d.rank, d.par, d.par_share) for d in profile.days
        ],
        week=standing(*week),
        month=standing(*month),
    )


async def player_ratings(request: web.Request) -> web.Response:
    """A player's ratings by rule set (docs/rules.md §4 "Ratings"), each with its last rated
    races, the latest first (none before their first rated race).

    Raises:
        InvalidInputError: ``bad_player_id``.
        NotFoundError: ``unknown_player``.
    """
    player_id = path_id(request, "player_id")
    services = request.app[SERVICES]
    if await services.players.get(player_id) is None:
        raise NotFoundError(f"there is no player {player_id}", code=ErrorCode.UNKNOWN_PLAYER)
    ratings = [
        RuleSetRating(
            rating.rules.value,
            rating.shown,
            rating.provisional,
            rating.mu,
            rating.sigma,
            rating.races,
            rating.wins,
            utc(rating.rated_at),
            [
                RatedRace(
                    p.race_id,
                    p.invite,
                    utc(p.rated_at),
                    p.rank,
                    p.racers,
                    p.before,
                    p.after,
                    p.change,
                )
                for p in points
            ],
        )
        for rating, points in await services.ratings.with_history(player_id)
    ]
    return respond(PlayerRatings(player_id, ratings))


async def player_profile(request: web.Request) -> web.Response:
    """A player's public profile: name, member since, the daily history by UTC date (result,
    rank on that date's leaderboard, score, share of par), the current and best daily streak,
    best score, average share of par, races played and won, and their rank on the boards of
    the current week and month. Never a deal's code nor a card: today's daily shows its result
    alone, a race still running shows nowhere."""
    player_id = path_id(request, "player_id")
    services = request.app[SERVICES]
    profile = await services.profiles.profile(player_id)
    week, month = await services.boards.standings(player_id, profile.today)
    return respond(_profile(profile, week, month))
