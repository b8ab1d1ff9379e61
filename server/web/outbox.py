"""A bounded, coalescing send queue per websocket, drained by its own writer task.

Nothing that sends to a player waits for that player's socket: a slow or stalled receiver
only delays its own writer. Messages with a coalescing key (a racer's progress, a room's state)
replace the queued message with the same key in place, so they take no more room however fast
they come; when ordinary messages pile up past the limit, the connection is closed with 1008.

Coalescing keeps the queue short however little the peer reads, so the queue's length alone
does not tell a stalled reader: what it has not taken piles up below the queue, in the
transport's buffer and in the kernel's send buffer (some 1 MB a socket, the kernel growing it),
and a peer that pings now and then is never taken for dead. So the bytes waiting for the peer
are bounded too — queued, in the transport, in the kernel (Linux tells how many) — and past the
bound the connection is closed with 1008 all the same. Asking the kernel is a system call,
so it is asked only when the answer could matter: the writer keeps an upper bound of the
kernel's share (its last answer plus every frame written since; the websocket's own pings and pongs,
a few bytes each, aside), and the kernel is asked when
that bound would put the connection past the limit, or when the transport holds bytes (the
kernel took no more: the peer is behind).

A reply that finds the writer waiting, nothing queued and nothing in the transport is written
at once by the task that sends it (:meth:`Outbox.send`), instead of waking the writer for it:
one turn of the loop fewer for each reply of a player who keeps up.

A peer that does not read even the close frame is cut off after :data:`CLOSE_GRACE_S`: a
stalled socket must not hold its connection and buffers for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import struct
import sys
from collections import OrderedDict
from collections.abc import Hashable
from itertools import count

from aiohttp import WSCloseCode, web

log = logging.getLogger(__name__)

#: Seconds a peer gets to take a close frame (and answer it) before its connection is aborted.
CLOSE_GRACE_S = 2.0

if sys.platform == "linux":
    import termios

    #: The ioctl that tells how many bytes a TCP socket's send buffer holds, not yet
    #: acknowledged by the peer (SIOCOUTQ, which Linux numbers as TIOCOUTQ).
    _UNSENT: int | None = termios.TIOCOUTQ
else:  # elsewhere the kernel's share is not counted
    _UNSENT = None


def unsent_in_kernel(transport: asyncio.BaseTransport | None) -> int:
    """Bytes the kernel holds for the peer of ``transport``'s socket and the peer has not
    acknowledged (0 where the system does not tell, or once the socket is closed)."""
    if _UNSENT is None or transport is None:
        return 0
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        held: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), _UNSENT, b"\0\0\0\0"))[0]
    except (OSError, ValueError):  # closed meanwhile
        return 0
    return held


#: Longest text (characters) written at once by :meth:`Outbox.send`: well under the
#: transport's high-water mark (64 KiB), so the write never waits for the peer.
DIRECT_MAX_CHARS = 16 * 1024

#: Bytes a server frame's header takes at most (no mask; 8 bytes of length).
_FRAME_HEADER_BYTES = 10


def _frame_bytes(text: str) -> int:
    """The most bytes ``text`` takes on the wire as one text frame (uncompressed)."""
    return _FRAME_HEADER_BYTES + (len(text) if text.isascii() else len(text.encode()))


class Outbox:
    """The send queue of one websocket.

    Args:
        ws: the prepared websocket.
        limit: most messages queued at once; one more closes the socket with 1008.
        transport: the connection under ``ws``, aborted when a close does not get through.
        grace_s: how long a close may take before the connection is aborted.
        byte_limit: most bytes waiting for the peer (see :attr:`waiting_bytes`); a message
            queued past it closes the socket with 1008 (None: no such bound).

    Attributes:
        overflowed: whether the reader fell too far behind and the connection was closed for
            it (1008, "too slow").
    """

    def __init__(
        self,
        ws: web.WebSocketResponse,
        limit: int = 256,
        *,
        transport: asyncio.Transport | None = None,
        grace_s: float = CLOSE_GRACE_S,
        byte_limit: int | None = None,
    ) -> None:
        self._ws = ws
        self._limit = limit
        self._transport = transport
        self._grace_s = grace_s
        self._byte_limit = byte_limit
        self._queue: OrderedDict[Hashable, str] = OrderedDict()
        #: The characters of the queued messages (their bytes, but for non-ASCII text).
        self._queued_chars = 0
        #: At least the bytes the kernel holds for the peer: its last answer plus the frames
        #: written since (see :meth:`_kernel_bound`).
        self._unsent_bound = 0
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._serial = count()
        self._closed = False
        #: Whether the writer waits for something to be queued (not in the middle of a write).
        self._writer_waits = False
        self.overflowed = False
        self._closing: asyncio.Task[None] | None = None
        self._writer = asyncio.create_task(self._drain(), name="ws-writer")

    @property
    def limit(self) -> int:
        """Most messages queued at once before the connection is closed."""
        return self._limit

    @property
    def pending(self) -> int:
        """Messages queued and not yet written."""
        return len(self._queue)

    @property
    def waiting_bytes(self) -> int:
        """Bytes waiting for the peer: the queued messages (counted in characters), what the
        transport holds, and what the kernel holds unacknowledged (on Linux)."""
        transport = self._transport
        buffered = 0 if transport is None else transport.get_write_buffer_size()
        return self._queued_chars + buffered + unsent_in_kernel(transport)

    def _over_byte_limit(self, limit: int, more: int = 0) -> int | None:
        """The bytes waiting for the peer (as :attr:`waiting_bytes`, with ``more`` characters
        about to be written) if they are past ``limit``, else None. The kernel is asked only
        when the transport holds bytes or the upper bound of its share would be past the
        limit; its answer then replaces the bound."""
        transport = self._transport
        buffered = 0 if transport is None else transport.get_write_buffer_size()
        cheap = self._queued_chars + more + buffered
        if buffered == 0 and cheap + self._unsent_bound <= limit:
            return None
        self._unsent_bound = unsent_in_kernel(transport)
        waiting = cheap + self._unsent_bound
        return waiting if waiting > limit else None

    @property
    def closed(self) -> bool:
        """Whether the outbox stopped (socket closed, overflow, or :meth:`close`)."""
        return self._closed

    def put(self, text: str, key: Hashable | None = None) -> None:
        """Queue a message; with a ``key``, replace a queued message with the same key.

        Never blocks. Overflow — more than ``limit`` messages queued, or more than
        ``byte_limit`` bytes waiting for the peer — closes the connection (1008, "too slow")
        and drops the queue.
        """
        if self._closed:
            return
        if key is not None and key in self._queue:
            self._queued_chars += len(text) - len(self._queue[key])
            self._queue[key] = text
        else:
            self._queue[("_", next(self._serial)) if key is None else key] = text
            self._queued_chars += len(text)
            if len(self._queue) > self._limit:
                self._overflow(f"fell {len(self._queue)} messages behind")
                return
        if not self._overflowed_bytes():
            self._ready.set()

    def _overflowed_bytes(self, more: int = 0) -> bool:
        """Close the connection (1008) if the bytes waiting for the peer, with ``more``
        characters about to be written, are past ``byte_limit``; whether it did."""
        if self._byte_limit is None:
            return False
        waiting = self._over_byte_limit(self._byte_limit, more)
        if waiting is None:
            return False
        self._overflow(f"has {waiting} bytes waiting for it")
        return True

    async def send(self, text: str) -> None:
        """Queue a message without a key, or write it at once when nothing is ahead of it:
        the writer waiting, nothing queued, nothing in the transport, and the text short
        enough (:data:`DIRECT_MAX_CHARS`) that the write cannot wait for the peer. The bounds
        are those of :meth:`put` (past one, the connection is closed with 1008)."""
        transport = self._transport
        if not (
            self._writer_waits
            and not self._queue
            and not self._closed
            and transport is not None
            and transport.get_write_buffer_size() == 0
            and len(text) <= DIRECT_MAX_CHARS
            and not self._ws.closed
        ):
            self.put(text)
            return
        if self._overflowed_bytes(len(text)):
            return
        self._unsent_bound += _frame_bytes(text)
        try:
            await self._ws.send_str(text)
        except (ConnectionError, RuntimeError):
            self._closed = True  # the peer vanished: drop quietly, as the writer does

    def _overflow(self, why: str = "is too slow") -> None:
        log.info("closing a websocket whose reader %s", why)
        self._queue.clear()
        self._queued_chars = 0
        self._closed = True
        self.overflowed = True
        self._closing = asyncio.create_task(
            self.shut(WSCloseCode.POLICY_VIOLATION, b"too slow"), name="ws-shut"
        )

    async def overflow(self) -> None:
        """Treat the reader as too slow now: drop the queue and close with 1008 (cutting the
        connection off after the grace time)."""
        if self._closing is None:
            self._overflow()
        if self._closing is not None:
            await asyncio.shield(self._closing)

    def stop_reading(self) -> None:
        """Read nothing more from the peer (a flood): what it keeps sending waits in its own
        socket buffers, costing the server nothing, until the connection is closed."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.pause_reading()

    async def shut(self, code: int, message: bytes) -> None:
        """Close the websocket with ``code``; if that takes longer than the grace time (a peer
        that does not read leaves the close frame stuck behind what it has not read), abort
        the connection instead of waiting on it for ever."""
        try:
            async with asyncio.timeout(self._grace_s):
                await self._ws.close(code=code, message=message)
        except (TimeoutError, ConnectionError):
            pass
        finally:
            if self._transport is not None:
                self._transport.abort()  # a no-op once the close went through

    async def wait_sent(self, timeout: float) -> None:  # noqa: ASYNC109 - a bounded best effort
        """Give the writer up to ``timeout`` seconds to write what is queued."""
        if not self._queue or self._closed:
            return  # nothing to wait for: no timer armed (most closed connections)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self._queue and not self._closed:
                    self._idle.clear()
                    await self._idle.wait()

    async def close(self) -> None:
        """Stop the writer (queued messages are dropped); after an overflow, first wait until
        the connection is closed or cut off (at most the grace time)."""
        self._closed = True
        if self._closing is not None:
            # Not the other way round: the writer and the close may both be waiting for the
            # socket to drain, on one shared future, which cancelling the writer would cancel.
            await asyncio.shield(self._closing)
        self._writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._writer

    async def _drain(self) -> None:
        try:
            while not self._closed:
                self._writer_waits = True
                try:
                    await self._ready.wait()
                finally:
                    self._writer_waits = False
                self._ready.clear()
                while self._queue and not self._closed:
                    _, text = self._queue.popitem(last=False)
                    self._queued_chars -= len(text)
                    if self._ws.closed:
                        self._closed = True
                        break
                    self._unsent_bound += _frame_bytes(text)
                    await self._ws.send_str(text)
                self._idle.set()
        except (ConnectionError, RuntimeError):
            self._closed = True  # the peer vanished (even mid-write): drop quietly
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("websocket writer failed")
            self._closed = True
