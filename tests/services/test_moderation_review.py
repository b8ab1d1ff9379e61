"""The review of a day's suspicious results over the database (:class:`ReviewService` over
:class:`PostgresReviewStore`): the day's results, hidden ones included, with their players'
address hashes and the logs that could follow the line, reach the signals; a date without a
daily is refused; a day without results solves nothing."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine import GameCode
from server.errors import ErrorCode, NotFoundError
from server.services.moderation import ModerationService
from server.services.review import Line, ReviewService
from server.storage.models import DailyChallenge, Game, GameAction, Player
from server.storage.moderation import PostgresModerationStore
from server.storage.review import PostgresReviewStore
from server.storage.sessions import Sessions
from tests.boards import DATE, T0, Row, insert_rows

CODE = GameCode.parse("TP1-E-AAAAAAA")
LINE = Line(700, (("draw", None), ("remove", 20), ("remove", 11)))


def solved(code: GameCode) -> Line:
    assert code == CODE
    return LINE


async def test_the_day_s_results_reach_the_signals(db: AsyncEngine) -> None:
    normal = [Row(f"Normal{i}", 600 + i, 40, 600_000 + 1_000 * i) for i in range(6)]
    quick = Row("Quick", 620, 40, 100_000)  # 17% of the median
    solver = Row("Solver", 700, 3, 500_000)  # its log is the line
    hidden = Row("Hidden", 610, 40, 90_000)  # fast, hidden: listed, off the median
    socks = [Row(f"Sock{i}", 550, 40, 700_000) for i in range(3)]
    rows = [*normal, quick, solver, hidden, *socks]
    await insert_rows(db, rows)
    shared = secrets.token_bytes(32)
    async with db.begin() as conn:
        await conn.execute(insert(DailyChallenge).values(date=DATE, code=str(CODE), rules="E"))
        for sock in socks:
            await conn.execute(
                update(Player).where(Player.id == sock.player_id).values(address_hash=shared)
            )
        solver_game = await conn.scalar(select(Game.id).where(Game.player_id == solver.player_id))
        await conn.execute(
            insert(GameAction),
            [
                {"game_id": solver_game, "seq": seq, "kind": kind, "pos": pos}
                | {"card": "AS", "score_after": 0, "created_at": T0}
                for seq, (kind, pos) in enumerate(LINE.steps, start=1)
            ],
        )
        hidden_game = await conn.scalar(select(Game.id).where(Game.player_id == hidden.player_id))
    assert hidden_game is not None
    await ModerationService(PostgresModerationStore(Sessions(db))).hide(hidden_game, "fast", "mod")

    day = await ReviewService(PostgresReviewStore(Sessions(db))).suspicious(DATE, solve=solved)

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
    db: AsyncEngine,
) -> None:
    reviews = ReviewService(PostgresReviewStore(Sessions(db)))
    with pytest.raises(NotFoundError, match="there was no daily challenge on 2026-03-14") as exc:
        await reviews.suspicious(DATE)
    assert exc.value.code == ErrorCode.NO_DAILY
    async with db.begin() as conn:
        await conn.execute(insert(DailyChallenge).values(date=DATE, code=str(CODE), rules="E"))

    def unsolvable(code: GameCode) -> Line:
        raise AssertionError("a day without results needs no line")

    day = await reviews.suspicious(DATE, solve=unsolvable)
    assert (day.ranked, day.flagged, day.par, day.median_won_ms) == (0, [], None, None)
    assert await PostgresReviewStore(Sessions(db)).action_logs([]) == {}
