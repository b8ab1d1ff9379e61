"""Shutdown clean-up steps are bounded: one that hangs is logged and passed over."""

from __future__ import annotations

import asyncio
import logging

import pytest

from server.web import app as app_module


async def test_a_hanging_clean_up_step_is_given_up_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(app_module, "CLEANUP_STEP_S", 0.05)
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with caplog.at_level(logging.ERROR, logger=app_module.log.name):
        await asyncio.wait_for(app_module._bounded("a stuck step", never), 5)
    assert "a stuck step did not stop" in caplog.text


async def test_a_step_that_does_not_end_when_cancelled_is_left_behind_within_the_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A database driver cancelled in mid-query awaits its connection's close, shielded: the
    # shutdown must not wait for it.
    monkeypatch.setattr(app_module, "CLEANUP_STEP_S", 0.05)
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    with caplog.at_level(logging.ERROR, logger=app_module.log.name):
        await asyncio.wait_for(app_module._bounded("a stubborn step", stubborn()), 5)
    assert "a stubborn step did not stop" in caplog.text
    release.set()  # let the step left behind end, so the test leaves no task


async def test_a_failing_step_is_logged_and_a_cancelled_task_is_awaited_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    task.cancel()
    with caplog.at_level(logging.ERROR, logger=app_module.log.name):
        await app_module._bounded("a failing step", fails())
        await app_module._bounded("a cancelled task", task)
    assert "stopping a failing step failed" in caplog.text
    assert "a cancelled task" not in caplog.text
    assert task.cancelled()


async def test_every_step_runs_when_the_clean_up_runs_in_a_task_being_cancelled() -> None:
    # aiohttp's run_app stops by cancelling its main task: the clean-up then runs in a task
    # whose cancellation is under way, and every step must still run.
    done: list[str] = []

    async def step(name: str) -> None:
        await asyncio.sleep(0)
        done.append(name)

    async def main() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            background = asyncio.create_task(asyncio.sleep(3600))
            await app_module._stop("a background task", background)
            await app_module._bounded("first", step("first"))
            await app_module._bounded("second", step("second"))

    task = asyncio.create_task(main())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert done == ["first", "second"]
