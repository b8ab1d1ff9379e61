"""Waiting for a write's outcome through cancellations of the waiting task."""

from __future__ import annotations

import asyncio

import pytest

from server.services.completion import settled
from server.storage.commits import WriteOutcome


async def _turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_an_outcome_is_not_cancelled_with_the_task_awaiting_it() -> None:
    outcome = WriteOutcome(loop=asyncio.get_running_loop())
    waiting = asyncio.create_task(settled(outcome))
    await _turns()
    waiting.cancel()
    waiting.cancel()  # twice: still one outcome, still waited for
    await _turns()
    assert not waiting.done(), "the caller was let go before the outcome was in"
    assert not outcome.cancelled()
    outcome.set_result(None)
    assert await waiting is True  # cancelled meanwhile: the caller's to raise
    assert outcome.result() is None


async def test_an_error_stays_in_the_outcome_for_the_caller() -> None:
    outcome = WriteOutcome(loop=asyncio.get_running_loop())
    waiting = asyncio.create_task(settled(outcome))
    await _turns()
    outcome.set_exception(LookupError("moved on"))
    assert await waiting is False
    with pytest.raises(LookupError):
        outcome.result()


async def test_a_cancelled_caller_is_told_after_an_error_too() -> None:
    outcome = WriteOutcome(loop=asyncio.get_running_loop())
    waiting = asyncio.create_task(settled(outcome))
    await _turns()
    waiting.cancel()
    await _turns()
    outcome.set_exception(LookupError("moved on"))
    assert await waiting is True
    assert isinstance(outcome.exception(), LookupError)


async def test_only_the_writer_withdraws_an_outcome() -> None:
    outcome = WriteOutcome(loop=asyncio.get_running_loop())
    assert outcome.cancel() is False and not outcome.done()
    waiting = asyncio.create_task(settled(outcome))
    await _turns()
    assert outcome.withdraw() is True
    assert await waiting is False and outcome.cancelled()


async def test_an_outcome_already_in_is_not_waited_for() -> None:
    outcome = WriteOutcome(loop=asyncio.get_running_loop())
    outcome.set_result(None)
    assert await settled(outcome) is False
