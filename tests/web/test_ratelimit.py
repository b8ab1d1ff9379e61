"""The per-connection token bucket (``server.web.ratelimit``), on a clock the test moves."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server.web.ratelimit import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_bucket_lets_a_burst_through_then_refills_at_the_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=4, burst=4, clock=clock)
    assert [bucket.take() for _ in range(5)] == [True] * 4 + [False]
    clock.now += 0.125  # half a token
    assert not bucket.take()
    clock.now += 0.125  # one token
    assert bucket.take()
    assert not bucket.take()
    clock.now += 60  # a long pause fills it to the burst, no further
    assert [bucket.take() for _ in range(5)] == [True] * 4 + [False]


def test_a_refused_request_takes_nothing() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=1, burst=1, clock=clock)
    assert bucket.take()
    for _ in range(100):
        assert not bucket.take()
    clock.now += 1
    assert bucket.take()


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 5), (5, 0), (5, 0.5)])
def test_a_bucket_that_could_never_answer_is_refused(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="rate > 0 and burst >= 1"):
        TokenBucket(rate, burst)


@given(
    rate=st.integers(min_value=1, max_value=50),
    gaps=st.lists(st.floats(min_value=0, max_value=0.5), min_size=1, max_size=300),
)
def test_no_window_lets_more_through_than_the_burst_and_the_rate(
    rate: int, gaps: list[float]
) -> None:
    clock = Clock()
    bucket = TokenBucket(rate=rate, burst=rate, clock=clock)
    taken: list[float] = []
    for gap in gaps:
        clock.now += gap
        if bucket.take():
            taken.append(clock.now)
    for i, start in enumerate(taken):
        within = [t for t in taken[i:] if t - start <= 1.0]
        assert len(within) <= 2 * rate  # the burst, plus a second's refill
    span = taken[-1] - taken[0] if taken else 0.0
    assert len(taken) <= rate + rate * span + 1e-9
