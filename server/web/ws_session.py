"""One websocket connection's state (:class:`WsSession`): who it is, its limits, the requests
waiting for its worker, and its outbox, through which everything it sends goes. The endpoint's
reading and closing are :mod:`server.web.ws`'s; what each request does is
:mod:`server.web.handlers`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable
from dataclasses import dataclass, field

from aiohttp import WSCloseCode, web

from server.catalogue import Locale
from server.protocol import server as out
from server.protocol.client import ClientMessage
from server.services import Services
from server.services.connections import ConnectionLimit
from server.services.players import PlayerInfo
from server.services.presence import Connection
from server.web.admission import Admission
from server.web.hub import Hub
from server.web.outbox import CLOSE_GRACE_S, Outbox
from server.web.ratelimit import TokenBucket

log = logging.getLogger(__name__)

#: Requests of one connection waiting for its worker (beyond it: ``busy``); the rate limit keeps
#: an honest client far below it.
MAX_WAITING_REQUESTS = 64
#: The close of a connection whose token was revoked (docs/protocol.md §8).
SIGNED_OUT_CODE = 4001
SIGNED_OUT_REASON = b"signed out"
#: Seconds a signed-out connection's requests taken up already may take to be answered
#: before it is closed all the same.
SIGNED_OUT_ANSWER_S = 5.0
#: Turns of the event loop after which a frame that had reached the socket is queued.
READ_TURNS = 4


async def _either(idle: asyncio.Event, worker: asyncio.Task[None]) -> None:
    """Wait until ``idle`` is set or ``worker`` has ended."""
    waiting = asyncio.ensure_future(idle.wait())
    try:
        await asyncio.wait({waiting, worker}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()


@dataclass(eq=False, slots=True)
class WsSession:
    """One websocket connection's state. Everything it sends goes through its outbox."""

    services: Services
    hub: Hub
    admission: Admission
    ws: web.WebSocketResponse
    outbox: Outbox
    #: The connection's request rate; a request over it is dropped (``rate_limited``).
    rate: TokenBucket
    #: Dropped requests: a sender that keeps going past this is a flood (closed).
    flood: TokenBucket
    #: The per-player connection limit of this process.
    connections: ConnectionLimit
    key: str
    #: Set when the server shuts down (it then closes every connection).
    shutting_down: asyncio.Event
    player: PlayerInfo | None = None
    #: The id of the token the connection said hello with (``player_tokens.id``).
    token_id: int | None = None
    #: Set when that token was revoked: the connection is being closed (4001).
    signed_out: bool = False
    locale: Locale = Locale.EN
    error_help: bool = True
    #: Requests waiting for the worker, each with its ``time.perf_counter()`` when its frame
    #: was taken up.
    requests: asyncio.Queue[tuple[ClientMessage, float]] = field(
        default_factory=lambda: asyncio.Queue(MAX_WAITING_REQUESTS)
    )
    #: The task serving :attr:`requests`, from the connection's first request to its close.
    worker: asyncio.Task[None] | None = None
    #: Set while the worker waits for a request (none being served, none waiting).
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: Whether this connection has followed a race room (then its close is recorded).
    followed: bool = False
    #: ``hello`` messages read but not yet answered (the hello deadline waits for them).
    hellos_pending: int = 0
    #: Whether the connection's place among its player's connections was given back.
    place_released: bool = False

    def release_place(self) -> None:
        """Give the connection's place among its player's connections on this process back,
        once (a later call does nothing)."""
        if self.player is not None and not self.place_released:
            self.connections.release(self.player.id)
            self.place_released = True

    @property
    def player_id(self) -> int | None:
        return None if self.player is None else self.player.id

    @property
    def is_open(self) -> bool:
        """Whether the socket is open and not being signed out."""
        return not self.ws.closed and not self.signed_out

    def sign_out(self) -> None:
        """The connection's token was revoked: serve nothing more, answer what was asked
        already, and close it with 4001 (``signed out``)."""
        if self.signed_out:
            return
        self.signed_out = True
        log.info("closing %s: its token was revoked", self.key)
        self.hub.spawn(self._close_signed_out())

    async def _close_signed_out(self) -> None:
        """Answer every request this connection has taken up — the one being served as it
        ends, every other ``unauthorized`` (:mod:`server.web.handlers`), those the reader
        takes up meanwhile too — then close with 4001. A websocket sends nothing after its
        close frame: what arrives after it is not answered. Bounded by
        :data:`SIGNED_OUT_ANSWER_S` (a request stuck on the database)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(SIGNED_OUT_ANSWER_S):
                await self._answered()
        await self.outbox.wait_sent(timeout=1.0)
        await self.outbox.shut(SIGNED_OUT_CODE, SIGNED_OUT_REASON)

    async def _answered(self) -> None:
        """Return once the worker has answered every request waiting and the reader has taken
        up no new one: what reached this process before the close has been answered."""
        while True:
            worker = self.worker
            if worker is not None and not worker.done() and not self.idle.is_set():
                await _either(self.idle, worker)
                continue
            # A few turns of the event loop: frames already in the socket's buffer are read
            # (one turn), handed to the reader, which queues them (the next), and so on.
            for _ in range(READ_TURNS):
                await asyncio.sleep(0)
            worker = self.worker
            if self.requests.empty() and (worker is None or worker.done() or self.idle.is_set()):
                return

    @property
    def connection(self) -> Connection:
        """This connection as the race presence records know it."""
        return self.services.presence.connection(self.key)

    async def stop_worker(self) -> None:
        """Cancel the request being served, if any (an action still runs to its end)."""
        if self.worker is not None:
            self.worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.worker

    def push(self, message: out.Message, key: Hashable | None = None) -> None:
        """Queue a message (never waits for the socket)."""
        self.outbox.put(out.encode(message), key)

    def push_frame(self, frame: str, key: Hashable | None = None) -> None:
        """Queue an encoded message (one frame shared by every follower of a race)."""
        self.outbox.put(frame, key)

    async def send(self, message: out.Message) -> None:
        """Queue a reply. A connection whose own replies pile up waits for its reader (its
        requests slow down, nobody else's); one whose reader does not catch up within the
        grace time is closed with 1008."""
        await self.outbox.send(out.encode(message))
        if self.outbox.pending > self.outbox.limit // 2:
            await self.outbox.wait_sent(timeout=CLOSE_GRACE_S)
            if self.outbox.pending > self.outbox.limit // 2:
                await self.outbox.overflow()

    async def refuse(self, error: out.Message, reason: bytes) -> None:
        """Send ``error`` (given a second to go out), then close with 1008 and ``reason``."""
        await self.send(error)
        await self.outbox.wait_sent(timeout=1.0)
        await self.outbox.shut(WSCloseCode.POLICY_VIOLATION, reason)
