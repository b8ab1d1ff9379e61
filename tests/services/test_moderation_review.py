"""The review of a day's suspicious results on either store (:class:`ReviewService` over
``backend.review``, in memory and PostgreSQL): the day's results, hidden ones included, with
their players' address hashes and the logs that could follow the line, reach the signals; a
date without a daily is refused; a day without results solves nothing."""

from __future__ import annotations

import secrets

import pytest

from server.engine import GameCode
from server.errors import ErrorCode, NotFoundError
from server.services.moderation import ModerationService
from server.services.review import Line, ReviewService
from tests.backends import Backend
from tests.boards import DATE, T0, Row, store_rows

CODE = GameCode.parse("TP1-E-AAAAAAA")
LINE = Line(700, (("draw", None), ("remove", 20), ("remove", 11)))


def solved(code: GameCode) -> Line:
    assert code == CODE
    return LINE


async def test_the_day_s_results_reach_the_signals(backend: Backend) -> None:
    normal = [Row(f"Normal{i}", 600 + i, 40, 600_000 + 1_000 * i) for i in range(6)]
    quick = Row("Quick", 620, 40, 100_000)  # 17% of the median
    solver = Row("Solver", 700, 3, 500_000)  # its log is the line
    hidden = Row("Hidden", 610, 40, 90_000)  # fast, hidden: listed, off the median
    socks = [Row(f"Sock{i}", 550, 40, 700_000) for i in range(3)]
    rows = [*normal, quick, solver, hidden, *socks]
    await store_rows(backend, rows)
    shared = secrets.token_bytes(32)
    await backend.daily.keep_deal(DATE, CODE, T0)
    for sock in socks:
        await backend.set_address(sock.player_id, shared)
    [solver_game] = [g.id for g in await backend.stored_games(solver.player_id)]
    await backend.add_actions(solver_game, LINE.steps)
    [hidden_game] = [g.id for g in await backend.stored_games(hidden.player_id)]
    await ModerationService(backend.moderation).hide(hidden_game, "fast", "mod")

    day = await ReviewService(backend.review).suspicious(DATE, solve=solved)

    found = {f.result.player_name: [s.name for s in f.signals] for f in day.flagged}
    assert found == {
        "Quick": ["fast"],
        "Hidden": ["fast"],
        "Solver": ["optimal_line"],
        "Sock0": ["shared_address"],
        "Sock1": ["shared_address"],
        "Sock2": ["shared_address"],
    }
    assert (day.ranked, day.hidden, day.won_on_board) == (12, 1, 11)
    assert (day.par, day.line_length) == (LINE.par, len(LINE.steps))
    flagged_hidden = next(f.result for f in day.flagged if f.result.player_name == "Hidden")
    assert flagged_hidden.hidden and not flagged_hidden.banned
    assert {f.result.address_hash for f in day.flagged if f.result.player_name[:4] == "Sock"} == {
        shared
    }


async def test_a_date_without_a_daily_is_refused_and_a_day_without_results_solves_nothing(
    backend: Backend,
) -> None:
    reviews = ReviewService(backend.review)
    with pytest.raises(NotFoundError, match="there was no daily challenge on 2026-03-14") as exc:
        await reviews.suspicious(DATE)
    assert exc.value.code == ErrorCode.NO_DAILY
    await backend.daily.keep_deal(DATE, CODE, T0)

    def unsolvable(code: GameCode) -> Line:
        raise AssertionError("a day without results needs no line")

    day = await reviews.suspicious(DATE, solve=unsolvable)
    assert (day.ranked, day.flagged, day.par, day.median_won_ms) == (0, [], None, None)
    assert await backend.review.action_logs([]) == {}
