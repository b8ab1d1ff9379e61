"""The request parameters every board's REST handlers (daily, weekly and monthly boards,
ladder) read the same way: a page's ``limit`` and ``cursor``, a window's player and ``radius``,
the friends' view's caller. The board itself (date, period, rule set) is read by each handler
first, before these.
"""

from __future__ import annotations

from aiohttp import web

from server.web.http import bearer, int_param, path_id

PAGE_LIMIT = 50
"""Entries on a page when the query names no ``limit``."""
WINDOW_RADIUS = 5
"""Entries either side of the player in a window when the query names no ``radius``."""


def page_query(request: web.Request) -> tuple[int, str | None]:
    """A page's ``limit`` (default :data:`PAGE_LIMIT`) and ``cursor`` (None: the first page;
    an empty one is none).

    Raises:
        InvalidInputError: ``bad_limit``: not an integer.
    """
    limit = int_param(request.query.get("limit"), "limit", PAGE_LIMIT)
    return limit, request.query.get("cursor") or None


def window_query(request: web.Request) -> tuple[int, int]:
    """A window's player (path ``player_id``) and ``radius`` (default :data:`WINDOW_RADIUS`).

    Raises:
        InvalidInputError: ``bad_player_id`` or ``bad_radius``.
    """
    player_id = path_id(request, "player_id")
    return player_id, int_param(request.query.get("radius"), "radius", WINDOW_RADIUS)


async def caller_id(request: web.Request) -> int:
    """The signed-in caller's player id, for a friends' view.

    Raises:
        UnauthorizedError: ``unauthorized``: no valid bearer token.
    """
    player = await bearer(request, required=True)
    assert player is not None
    return player.id
