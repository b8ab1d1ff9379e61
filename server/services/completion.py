"""Waiting for work that must run to its end even when the caller is cancelled (a client
vanishing while its action commits)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from server.storage.commits import WriteOutcome

T = TypeVar("T")


async def settled(outcome: WriteOutcome) -> bool:
    """Wait until ``outcome`` is done (its result or exception left in it), even through
    cancellations of the caller; returns whether the caller was cancelled meanwhile (the
    cancellation is then the caller's to raise once it has dealt with the outcome).

    A cancellation of the caller does not cancel ``outcome`` (:class:`WriteOutcome` refuses
    it): asyncio delivers it once ``outcome`` is done, here."""
    if outcome.done():
        return False
    try:
        await outcome
    except asyncio.CancelledError:
        # Refused by the outcome and delivered once it is done; or the writer withdrew it.
        return not outcome.cancelled()
    except Exception:  # left in the outcome for the caller
        pass
    return False


async def to_completion(work: Coroutine[Any, Any, T]) -> T:
    """Await ``work`` in a task of its own that a cancellation of the caller does not stop; a
    cancelled caller is cancelled only once ``work`` is over (its result then goes unused)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: nobody waits for it any more
        raise
