"""The streak rule (docs/rules.md §4 "Daily challenge", "Streaks") as :func:`streaks` keeps
it: unit cases for every shape of history, and a property test against an independent model
that walks back day by day."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.services.profiles import Streaks, par_share, streaks

TODAY = dt.date(2026, 3, 14)


def days_ago(*offsets: int) -> list[dt.date]:
    return [TODAY - dt.timedelta(days=n) for n in offsets]


@pytest.mark.parametrize(
    ("ago", "expected"),
    [
        pytest.param([], Streaks(0, 0), id="never-ranked"),
        pytest.param([0], Streaks(1, 1), id="today-only"),
        pytest.param([1], Streaks(1, 1), id="yesterday-only-still-alive"),
        pytest.param([2], Streaks(0, 1), id="two-days-ago-broken"),
        pytest.param([0, 1, 2], Streaks(3, 3), id="run-ending-today"),
        pytest.param([1, 2, 3], Streaks(3, 3), id="run-ending-yesterday-alive"),
        pytest.param([2, 3, 4], Streaks(0, 3), id="run-ending-two-days-ago-over"),
        pytest.param([0, 2, 3, 4], Streaks(1, 3), id="gap-yesterday-today-starts-anew"),
        pytest.param([0, 1, 5, 6, 7, 8], Streaks(2, 4), id="best-in-the-past"),
        pytest.param([0, 1, 2, 3, 10, 11], Streaks(4, 4), id="current-is-best"),
        pytest.param([0, 0, 1, 1], Streaks(2, 2), id="repeated-dates-count-once"),
        pytest.param([3, 0, 2, 1], Streaks(4, 4), id="any-order"),
        pytest.param([-1, 0], Streaks(1, 1), id="future-dates-ignored"),
        pytest.param([-1], Streaks(0, 0), id="only-a-future-date"),
        pytest.param(list(range(400)), Streaks(400, 400), id="over-a-year-and-a-leap-day"),
    ],
)
def test_current_and_best_streak(ago: list[int], expected: Streaks) -> None:
    assert streaks(days_ago(*ago), TODAY) == expected


def test_a_streak_runs_across_month_and_year_ends() -> None:
    new_year = dt.date(2027, 1, 1)
    dates = [new_year - dt.timedelta(days=n) for n in range(3)]  # 12-30, 12-31, 01-01
    assert streaks(dates, new_year) == Streaks(3, 3)
    assert streaks(dates, dt.date(2027, 1, 2)) == Streaks(3, 3)  # alive through 01-02
    assert streaks(dates, dt.date(2027, 1, 3)) == Streaks(0, 3)  # 01-02 ended without one
    assert streaks(dates[1:], dt.date(2026, 12, 31)) == Streaks(2, 2)  # 12-30 and 12-31


def test_the_current_streak_ends_when_a_whole_date_passes_without_a_result() -> None:
    dates = days_ago(1, 2, 3)
    assert streaks(dates, TODAY).current == 3  # today still open
    assert streaks(dates, TODAY + dt.timedelta(days=1)).current == 0  # today ended without


def test_par_share_is_rounded_like_a_game_record_and_absent_without_par() -> None:
    assert par_share(500, 760) == round(500 / 760, 4)
    assert par_share(760, 760) == 1.0
    assert par_share(500, None) is None
    assert par_share(500, 0) is None


def _model(dates: set[dt.date], today: dt.date) -> Streaks:
    """An independent model: walk back from today (or yesterday) for the current streak; for
    the best, try every date as a run's end and walk back."""
    dates = {d for d in dates if d <= today}

    def run_ending(day: dt.date) -> int:
        n = 0
        while day - dt.timedelta(days=n) in dates:
            n += 1
        return n

    current = run_ending(today) or run_ending(today - dt.timedelta(days=1))
    best = max((run_ending(d) for d in dates), default=0)
    return Streaks(current, best)


@settings(max_examples=300, deadline=None)  # a busy machine may be slow: no time limit
@given(
    st.sets(st.integers(-5, 60), max_size=40),
    st.integers(0, 3000),
)
def test_streaks_agree_with_walking_back_day_by_day(offsets: set[int], shift: int) -> None:
    today = dt.date(2024, 1, 1) + dt.timedelta(days=shift)
    dates = {today - dt.timedelta(days=n) for n in offsets}
    result = streaks(sorted(dates, reverse=True), today)
    assert result == _model(dates, today)
    assert 0 <= result.current <= result.best <= len(dates)
