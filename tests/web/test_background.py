"""Background tasks that fail are started again after a back-off and counted in ``/metrics``
(``tripeaks_background_restarts_total{task}``): the revoked-token check (``Hub._check_tokens``)
that a driver error once ended for good, and the periodic loops of ``server/web/app.py``."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace
from typing import Any, cast

import pytest
from aiohttp.test_utils import TestClient

from server.services import Services
from server.web import background
from server.web.hub import Authenticated, Hub
from server.web.metrics import BACKGROUND_RESTARTS, BackgroundTask
from tests.helpers import eventually, metric, metric_samples


def restarts(task: BackgroundTask) -> float:
    value: float = BACKGROUND_RESTARTS.labels(task.value)._value.get()
    return value


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "RESTART_BACKOFF_S", (0.01, 0.05))


class Connection:
    """An open connection signed in with ``token_id``."""

    def __init__(self, token_id: int) -> None:
        self.player_id = 1
        self.key = f"ws-{token_id}"
        self.token_id = token_id
        self.is_open = True
        self.signed_out = False

    def push(self, message: Any, key: Any = None) -> None: ...

    def sign_out(self) -> None:
        self.signed_out = True


async def test_a_token_check_whose_store_raises_is_started_again_and_counted() -> None:
    """The store raises something the check does not expect (not a StorageError) twice: the
    check runs a third time, signs the revoked socket out, and two restarts are counted."""
    calls = 0

    async def live_tokens(token_ids: set[int]) -> set[int]:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RuntimeError("the store broke")
        return {1}

    services = SimpleNamespace(players=SimpleNamespace(live_tokens=live_tokens))
    hub = Hub(cast(Services, services))
    kept, revoked = Connection(1), Connection(2)
    before = restarts(BackgroundTask.TOKEN_CHECK)
    hub.check_tokens(cast(list[Authenticated], [kept, revoked]))
    await eventually(lambda: revoked.signed_out, "the revoked socket is signed out", within_s=10)
    assert not kept.signed_out
    assert calls == 3
    assert restarts(BackgroundTask.TOKEN_CHECK) - before == 2
    await hub.close()


async def test_supervised_ends_when_its_task_returns_and_with_its_cancellation() -> None:
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise ValueError("once")

    before = restarts(BackgroundTask.RACE_RELEASE)
    await asyncio.wait_for(background.supervised(BackgroundTask.RACE_RELEASE, flaky), 5)
    assert (runs, restarts(BackgroundTask.RACE_RELEASE) - before) == (2, 1)

    async def forever() -> None:
        await asyncio.sleep(3600)

    task = asyncio.create_task(background.supervised(BackgroundTask.RACE_RELEASE, forever))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_periodic_step_that_fails_is_counted_and_tried_again_after_a_back_off() -> None:
    steps: list[float] = []
    loop = asyncio.get_running_loop()

    async def step() -> None:
        steps.append(loop.time())
        if len(steps) <= 3:
            raise RuntimeError("the database went away")

    before = restarts(BackgroundTask.RACE_SWEEP)
    task = asyncio.create_task(
        background.periodically(BackgroundTask.RACE_SWEEP, 0.05, step, at_once=True, longest_s=1.0)
    )
    try:
        await eventually(lambda: len(steps) >= 6, "the loop goes on after the failures")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert restarts(BackgroundTask.RACE_SWEEP) - before == 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(steps)]
    assert gaps[1] > gaps[0] * 1.5  # backing off while it keeps failing
    assert gaps[4] < gaps[2]  # back to its pace once it succeeds


async def test_the_restarts_are_served_in_metrics(client: TestClient[Any, Any]) -> None:
    samples = metric_samples(await (await client.get("/metrics")).text())
    for task in BackgroundTask:
        assert ("tripeaks_background_restarts_total", frozenset({("task", task.value)})) in samples
    assert metric(samples, "tripeaks_background_restarts_total", task="token_check") >= 0
