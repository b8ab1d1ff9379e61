"""The REST handlers of the weekly and monthly boards under ``/api/v1/boards`` (JSON): a page,
the window around a player and the friends' view of ``/boards/week/{week}`` and
``/boards/month/{month}``. No rules here: :mod:`server.services.period_boards` holds them.

:mod:`server.web.routes_boards` registers and describes them; the bodies are
:mod:`server.protocol.rest_boards`'s; errors are ``{"error": {"code", "message"}}`` with a
fitting HTTP status.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from server.protocol import rest_boards as rest
from server.services.period_boards import Period, PeriodEntry, PeriodKind
from server.web.board_params import caller_id, page_query, window_query
from server.web.http import respond
from server.web.keys import SERVICES


def _period(request: web.Request, kind: PeriodKind) -> Period:
    """The week or month of the path (its parameter is named after its kind).

    Raises:
        InvalidInputError: ``bad_period``, naming what was wrong.
    """
    return Period.parse(kind, request.match_info[kind])


def _named(period: Period) -> dict[str, Any]:
    """The members naming the period in each of its bodies."""
    return {
        "kind": period.kind,
        "period": str(period),
        "starts_on": period.starts_on,
        "ends_on": period.ends_on,
    }


def _entry(entry: PeriodEntry) -> rest.PeriodEntry:
    return rest.PeriodEntry(
        rank=entry.rank,
        player_id=entry.player_id,
        name=entry.name,
        total=entry.total,
        days=entry.days,
        elapsed_ms=entry.elapsed_ms,
    )


async def _page(request: web.Request, kind: PeriodKind) -> web.Response:
    period = _period(request, kind)
    limit, cursor = page_query(request)
    page = await request.app[SERVICES].boards.page(period, limit, cursor)
    return respond(
        rest.PeriodBoardPage(
            **_named(period),
            entries=[_entry(e) for e in page.entries],
            next_cursor=page.next_cursor,
        )
    )


async def _around(request: web.Request, kind: PeriodKind) -> web.Response:
    period = _period(request, kind)
    player_id, radius = window_query(request)
    entries = await request.app[SERVICES].boards.around(period, player_id, radius)
    return respond(
        rest.PeriodBoardWindow(
            **_named(period),
            player_id=player_id,
            entries=[_entry(e) for e in entries],
        )
    )


async def _friends(request: web.Request, kind: PeriodKind) -> web.Response:
    me = await caller_id(request)
    period = _period(request, kind)
    entries = await request.app[SERVICES].boards.friends(period, me)
    return respond(
        rest.PeriodFriendsBoard(
            **_named(period),
            entries=[_entry(e) for e in entries],
        )
    )


async def week_board(request: web.Request) -> web.Response:
    """A keyset page of an ISO week's board (players by the sum of their daily scores in the
    week, best first); ``next_cursor`` leads to the next page."""
    return await _page(request, "week")


async def month_board(request: web.Request) -> web.Response:
    """A keyset page of a month's board (players by the sum of their daily scores in the
    month, best first); ``next_cursor`` leads to the next page."""
    return await _page(request, "month")


async def week_around(request: web.Request) -> web.Response:
    """An ISO week's board around one player's entry: up to ``radius`` entries either side."""
    return await _around(request, "week")


async def month_around(request: web.Request) -> web.Response:
    """A month's board around one player's entry: up to ``radius`` entries either side."""
    return await _around(request, "month")


async def week_friends(request: web.Request) -> web.Response:
    """The friends' view of an ISO week's board: the caller's entry and those of the players
    they follow who have one, each with its rank on the whole board, in board order."""
    return await _friends(request, "week")


async def month_friends(request: web.Request) -> web.Response:
    """The friends' view of a month's board: the caller's entry and those of the players they
    follow who have one, each with its rank on the whole board, in board order."""
    return await _friends(request, "month")


def standing(period: Period, entry: PeriodEntry | None) -> rest.PeriodStanding:
    """A player's place on a period's board, as a profile shows it."""
    if entry is None:
        return rest.PeriodStanding(str(period), None, None, None)
    return rest.PeriodStanding(str(period), entry.rank, entry.total, entry.days)
