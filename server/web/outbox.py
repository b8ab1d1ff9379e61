"""A bounded, coalescing send queue per websocket, drained by its own writer task.

Nothing that sends to a player waits for that player's socket: a slow or stalled receiver
only delays its own writer. Messages with a coalescing key (a racer's progress, a room's state)
replace the queued message with the same key in place, so they take no more room however fast
they come; when ordinary messages pile up past the limit, the connection is closed with 1008.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Hashable
from itertools import count

from aiohttp import WSCloseCode, web

log = logging.getLogger(__name__)


class Outbox:
    """The send queue of one websocket.

    Args:
        ws: the prepared websocket.
        limit: most messages queued at once; one more closes the socket with 1008.
    """

    def __init__(self, ws: web.WebSocketResponse, limit: int = 256) -> None:
        self._ws = ws
        self._limit = limit
        self._queue: OrderedDict[Hashable, str] = OrderedDict()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._serial = count()
        self._closed = False
        self._closing: asyncio.Task[bool] | None = None
        self._writer = asyncio.create_task(self._drain(), name="ws-writer")

    @property
    def pending(self) -> int:
        """Messages queued and not yet written."""
        return len(self._queue)

    @property
    def closed(self) -> bool:
        """Whether the outbox stopped (socket closed, overflow, or :meth:`close`)."""
        return self._closed

    def put(self, text: str, key: Hashable | None = None) -> None:
        """Queue a message; with a ``key``, replace a queued message with the same key.

        Never blocks. Overflow closes the connection (1008, "too slow") and drops the queue.
        """
        if self._closed:
            return
        if key is not None and key in self._queue:
            self._queue[key] = text
            return
        self._queue[("_", next(self._serial)) if key is None else key] = text
        if len(self._queue) > self._limit:
            log.info("closing a websocket whose reader fell %d messages behind", self._limit)
            self._queue.clear()
            self._closed = True
            self._closing = asyncio.create_task(
                self._ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"too slow")
            )
        self._ready.set()

    async def wait_sent(self, timeout: float) -> None:  # noqa: ASYNC109 - a bounded best effort
        """Give the writer up to ``timeout`` seconds to write what is queued."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._queue and not self._closed:
                    self._idle.clear()
                    await self._idle.wait()

    async def close(self) -> None:
        """Stop the writer (queued messages are dropped)."""
        self._closed = True
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer

    async def _drain(self) -> None:
        try:
            while not self._closed:
                await self._ready.wait()
                self._ready.clear()
                while self._queue and not self._closed:
                    _, text = self._queue.popitem(last=False)
                    if self._ws.closed:
                        self._closed = True
                        break
                    await self._ws.send_str(text)
                self._idle.set()
        except (ConnectionResetError, RuntimeError):
            self._closed = True  # the peer vanished: drop quietly
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("websocket writer failed")
            self._closed = True
