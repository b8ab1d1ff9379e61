"""The daily's levels with the solver (docs/rules.md §4 "Choosing", "Difficulty"): over four
weeks of dates on a simulated clock, each date's deal is of the level its weekday asks for, the
first candidate that fits; two services, each with solver processes and a store of its own
(PostgreSQL for one, memory for the other), choose the same deals with the same baselines, as
two server processes with the same secret would; the level is shown from the start, the
baselines only once the date is over. Without the solver: candidate 0, no level."""

from __future__ import annotations

import ast
import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine import RuleSet, Status
from server.engine.difficulty import Level
from server.services import daily as daily_module
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.services.daily import (
    MAX_CANDIDATES,
    WEEKDAY_LEVELS,
    DailyService,
    derive_daily_code,
    level_for,
)
from server.storage.daily import PostgresDailyStore
from server.storage.sessions import Sessions
from tests.fakes.daily import MemoryDailyStore
from tests.fakes.database import MemoryDatabase
from tests.helpers import daily_code

SECRET = b"test-daily-key-0123456789abcdefghij"
MONDAY = dt.date(2026, 3, 16)
WEEKS = 4


def _noon(date: dt.date) -> dt.datetime:
    return dt.datetime.combine(date, dt.time(12), tzinfo=dt.UTC)


@pytest.fixture
async def own_analyzer() -> AsyncIterator[Analyzer]:
    """Solver processes of a second server process (the session's are the first's)."""
    pool = Analyzer(workers=1)
    yield pool
    pool.close()


def test_the_week_goes_from_easy_to_expert() -> None:
    assert [level.value for level in WEEKDAY_LEVELS] == [
        "easy",
        "easy",
        "medium",
        "medium",
        "hard",
        "expert",
        "expert",
    ]
    assert MONDAY.weekday() == 0
    assert [level_for(MONDAY + dt.timedelta(days=d)) for d in range(7)] == list(WEEKDAY_LEVELS)
    assert MAX_CANDIDATES == 128


async def test_four_weeks_of_dailies_follow_the_week_and_two_processes_agree(
    db: AsyncEngine, analyzer: Analyzer, own_analyzer: Analyzer
) -> None:
    clock = FakeClock(_noon(MONDAY))
    first = DailyService(PostgresDailyStore(Sessions(db)), clock, SECRET, RuleSet.EASY, analyzer)
    second = DailyService(
        MemoryDailyStore(MemoryDatabase(clock)), clock, SECRET, RuleSet.EASY, own_analyzer
    )
    dates = [MONDAY + dt.timedelta(days=d) for d in range(7 * WEEKS)]
    for date in dates:
        clock.set(_noon(date))
        one, two = await asyncio.gather(first.info(), second.info())
        assert one.date == two.date == date
        assert one.level is two.level is WEEKDAY_LEVELS[date.weekday()]
        assert one.code is None and one.baselines is None and two.baselines is None
    assert {level_for(date) for date in dates} == set(Level)

    clock.set(_noon(dates[-1] + dt.timedelta(days=1)))
    for number, date in enumerate(dates):
        one, two = await asyncio.gather(first.info(date), second.info(date))
        assert one.code is not None and one.code == two.code
        assert one.baselines is not None and one.baselines == two.baselines
        assert one.baselines.level is one.level is level_for(date)
        assert one.baselines.greedy_status in (Status.WON, Status.BLOCKED)
        assert 0 <= one.baselines.random_wins <= one.baselines.random_playouts == 1000
        assert one.baselines.random_median_score <= (one.par or 0)
        if number < 7:  # the first candidate that fits, worked out here for one week
            assert one.code == daily_code(SECRET, date, RuleSet.EASY)


async def test_a_candidate_of_another_level_is_passed_over(analyzer: Analyzer) -> None:
    clock = FakeClock(_noon(MONDAY))
    daily = DailyService(
        MemoryDailyStore(MemoryDatabase(clock)), clock, SECRET, RuleSet.CLASSIC, analyzer
    )
    for date in (MONDAY, MONDAY + dt.timedelta(days=5)):  # easy, expert
        chosen = await daily.choose(date)
        assert chosen.difficulty is not None and chosen.difficulty.level is level_for(date)
        candidate = 0
        while (earlier := derive_daily_code(SECRET, date, RuleSet.CLASSIC, candidate)) != (
            chosen.code
        ):
            grade = await analyzer.grade(earlier)  # cached: the choice graded it
            assert grade.difficulty is None or grade.difficulty.level is not level_for(date)
            assert grade.analysis.winnable is (grade.difficulty is not None)
            candidate += 1


async def test_without_the_solver_candidate_0_is_dealt_with_no_level() -> None:
    clock = FakeClock(_noon(MONDAY))
    daily = DailyService(MemoryDailyStore(MemoryDatabase(clock)), clock, SECRET)
    info = await daily.info()
    assert (info.level, info.baselines, info.par) == (None, None, None)
    clock.advance(days=1)
    past = await daily.info(MONDAY)
    assert past.code == derive_daily_code(SECRET, MONDAY, RuleSet.EASY, 0)
    assert (past.level, past.baselines) == (None, None)


def test_the_service_leaves_solving_and_measuring_to_the_solver_processes() -> None:
    # Nothing in the daily service solves or measures a deal itself (in the event loop): it
    # asks the Analyzer, whose worker processes run grade_code.
    tree = ast.parse(Path(daily_module.__file__).read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not {"measure", "solve", "is_winnable", "grade_code", "greedy_game"} & imported
    assert "Analyzer" in imported
