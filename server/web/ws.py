"""The websocket endpoint ``/ws``: parse → call a service → send. No rules here.

Close codes: 1001 server shutting down, 1003 binary frames, 1008 no hello in time or a flood,
1009 a frame over the size limit (aiohttp closes those itself), 4001 the token the connection
said hello with was revoked (rotated, or its device signed out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from itertools import count
from typing import Any, TypeVar

from aiohttp import WebSocketError, WSCloseCode, WSMessage, WSMsgType, web

from server.catalogue import Locale
from server.errors import (
    BannedError,
    ErrorCode,
    ServerBusyError,
    ServiceError,
    StorageError,
    refusal,
)
from server.logs import bind, log_context
from server.protocol import server as out
from server.protocol.client import (
    ActionRequest,
    ClientMessage,
    Hello,
    Hint,
    JoinDaily,
    NewGame,
    Ping,
    ProtocolError,
    RaceCreate,
    RaceJoin,
    RaceLeave,
    RaceStart,
    Resign,
    Resume,
    parse_client_message,
    peek_request_id,
)
from server.services import Services
from server.services.connections import ConnectionLimit
from server.services.game_views import Outcome
from server.services.players import PlayerInfo
from server.services.presence import Connection
from server.services.races import normalize_invite
from server.web import metrics
from server.web.admission import Admission
from server.web.hub import Hub
from server.web.keys import (
    ADMISSION,
    HUB,
    PLAYER_SOCKETS,
    SERVICES,
    SETTINGS,
    SHUTTING_DOWN,
    SOCKETS,
)
from server.web.metrics import CloseReason
from server.web.outbox import CLOSE_GRACE_S, Outbox
from server.web.ratelimit import TokenBucket

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 15.0
#: Requests of one connection waiting for its worker (beyond it: ``busy``); the rate limit keeps
#: an honest client far below it.
MAX_WAITING_REQUESTS = 64
#: Bytes handed to the transport between checks for a peer that stopped reading. aiohttp's
#: default (256 KiB) lets that much pile up in each stalled socket's buffer before the writer
#: waits, so the outbox's bound and its coalescing would only start to matter after it.
WRITER_LIMIT = 16 * 1024
_connection_ids = count(1)
#: The close of a connection whose token was revoked (docs/protocol.md §8).
SIGNED_OUT_CODE = 4001
SIGNED_OUT_REASON = b"signed out"


@dataclass(eq=False, slots=True)
class _Session:
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
    worker: asyncio.Task[None] | None = None
    #: Whether this connection has followed a race room (then its close is recorded).
    followed: bool = False
    #: ``hello`` messages read but not yet answered (the hello deadline waits for them).
    hellos_pending: int = 0

    @property
    def player_id(self) -> int | None:
        return None if self.player is None else self.player.id

    @property
    def is_open(self) -> bool:
        """Whether the socket is open and not being signed out."""
        return not self.ws.closed and not self.signed_out

    def sign_out(self) -> None:
        """The connection's token was revoked: serve nothing more and close it with 4001
        (``signed out``)."""
        if self.signed_out:
            return
        self.signed_out = True
        log.info("closing %s: its token was revoked", self.key)
        self.hub.spawn(self.outbox.shut(SIGNED_OUT_CODE, SIGNED_OUT_REASON))

    @property
    def connection(self) -> Connection:
        """This connection as the race presence records know it."""
        return self.services.presence.connection(self.key)

    def submit(self, message: ClientMessage, received: float) -> None:
        """Queue a request for the connection's worker, started when none runs: a worker runs
        only while requests wait, so an idle connection holds no task. ``received`` is the
        ``time.perf_counter()`` at which its frame was taken up.

        Raises:
            asyncio.QueueFull: :data:`MAX_WAITING_REQUESTS` already wait.
        """
        self.requests.put_nowait((message, received))
        if self.worker is None or self.worker.done():
            self.worker = asyncio.create_task(_work(self))

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
        self.push(message)
        if self.outbox.pending > self.outbox.limit // 2:
            await self.outbox.wait_sent(timeout=CLOSE_GRACE_S)
            if self.outbox.pending > self.outbox.limit // 2:
                await self.outbox.overflow()

    async def refuse(self, error: out.Message, reason: bytes) -> None:
        """Send ``error`` (given a second to go out), then close with 1008 and ``reason``."""
        await self.send(error)
        await self.outbox.wait_sent(timeout=1.0)
        await self.outbox.shut(WSCloseCode.POLICY_VIOLATION, reason)


async def websocket_handler(request: web.Request) -> web.StreamResponse:
    """``GET /ws``: the play connection. The first message must be ``hello``."""
    settings = request.app[SETTINGS]
    ws = web.WebSocketResponse(
        # aiohttp refuses frames of max_msg_size bytes and more; ours is the largest allowed.
        max_msg_size=settings.ws_max_message_bytes + 1,
        heartbeat=settings.ws_heartbeat_s,
        writer_limit=WRITER_LIMIT,
    )
    try:
        await ws.prepare(request)
    except ConnectionResetError:
        # The client left during the upgrade: nothing to serve, and nothing the server did
        # wrong (aiohttp finishes this response quietly on the closed connection).
        return web.Response(status=400, text="the connection closed during the upgrade")
    request.app[SOCKETS].add(ws)
    key = f"ws-{next(_connection_ids)}"
    bind(connection_id=key)
    request.app[HUB].opened(key)
    session = _Session(
        services=request.app[SERVICES],
        hub=request.app[HUB],
        admission=request.app[ADMISSION],
        ws=ws,
        outbox=Outbox(ws, settings.ws_send_queue, transport=request.transport),
        rate=TokenBucket(settings.ws_rate_per_second, burst=settings.ws_rate_per_second),
        flood=TokenBucket(settings.ws_rate_per_second * 2, burst=settings.ws_rate_per_second * 2),
        connections=request.app[PLAYER_SOCKETS],
        key=key,
        shutting_down=request.app[SHUTTING_DOWN],
    )
    metrics.WEBSOCKETS_OPEN.inc()
    reason = CloseReason.CONNECTION_LOST
    try:
        reason = await _serve(session)
    except (ConnectionResetError, asyncio.CancelledError):
        # The connection was lost under the handler (aiohttp then cancels it), for one of the
        # server's reasons (its heartbeat, a slow reader cut off, the shutdown) or the peer's.
        reason = _why_closed(session, None)
    finally:
        metrics.websocket_closed(reason)
        if session.player is not None:
            session.connections.release(session.player.id)
            session.hub.signed_off(session)
        session.hub.drop(session)
        session.hub.closed(session.key)
        request.app[SOCKETS].discard(ws)
        if session.followed:
            # In a task of its own: this handler may be in the middle of being cancelled.
            session.hub.spawn(_unfollow(session))
        await session.outbox.wait_sent(timeout=1.0)
        await session.outbox.close()
        if not ws.closed:
            # Bounded: a peer that stopped reading leaves the close frame stuck behind what it
            # has not read; it is cut off after the grace time instead.
            await session.outbox.shut(WSCloseCode.OK, b"")
    return ws


#: Seconds a closed connection's presence record may take (the sweep settles it otherwise).
UNFOLLOW_TIMEOUT_S = 5.0


async def _unfollow(session: _Session) -> None:
    """The connection closed: the rooms it followed are told (its player may be reconnecting).
    A database that does not answer in time is logged; the next sweep settles it (a connection
    of a process taken for dead, or this one's at its shutdown)."""
    try:
        async with asyncio.timeout(UNFOLLOW_TIMEOUT_S):
            await session.services.presence.unfollow(session.connection)
    except Exception:  # the database, a locked room, the time-out: the sweep settles it
        log.warning("presence: the close of %s was not recorded at once", session.key)


#: Seconds between tries to record the rooms of a hello that could not be recorded at once:
#: doubling from the first to the last, then the last until it works or the connection closes.
FOLLOW_RETRY_S = (0.5, 4.0)


async def _follow_later(session: _Session, player_id: int) -> None:
    """Record the rooms a connection follows after its hello could not (a room locked for a
    while, the database away): tried again for as long as the connection is open."""
    delay, longest = FOLLOW_RETRY_S
    while not session.ws.closed:
        await asyncio.sleep(delay)
        if session.ws.closed:
            return
        try:
            await session.services.presence.follow_rooms(player_id, session.connection)
            return
        except StorageError:
            delay = min(longest, delay * 2)


async def _serve(session: _Session) -> CloseReason:
    """Read the connection's frames. Reading never waits on a request being served: requests go
    to the connection's worker, which serves them one at a time in order, while this loop keeps
    reading, so pings (websocket and ``ping`` messages) are answered at once even while an
    action waits for its commit.

    Returns:
        Why the connection ended.
    """
    ws = session.ws
    try:
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        while not ws.closed:
            timeout = None if session.player else max(0.0, deadline - time.monotonic())
            try:
                msg = await ws.receive(timeout=timeout)
            except TimeoutError:
                if session.player is not None:
                    continue  # a hello was answered meanwhile: no deadline any more
                if session.hellos_pending:
                    deadline = time.monotonic() + HELLO_TIMEOUT_S  # one is being answered
                    continue
                await session.refuse(
                    out.error(ErrorCode.HELLO_TIMEOUT, "send 'hello' with a token first"),
                    b"no hello",
                )
                return CloseReason.HELLO_TIMEOUT
            if msg.type in (
                WSMsgType.CLOSE,
                WSMsgType.CLOSING,
                WSMsgType.CLOSED,
                WSMsgType.ERROR,
            ):
                return _why_closed(session, msg)
            if msg.type is WSMsgType.BINARY:
                await ws.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"text frames only")
                return CloseReason.BINARY_FRAME
            if msg.type is not WSMsgType.TEXT:
                continue
            if not session.rate.take():
                # Over the rate the message is dropped; a sender that keeps going regardless
                # (twice the rate dropped in a second, so three times the rate sent) is a flood.
                if not session.flood.take():
                    session.outbox.stop_reading()
                    await session.refuse(
                        out.error(ErrorCode.FLOOD, "too many messages; closing"), b"flood"
                    )
                    return CloseReason.FLOOD
                metrics.RATE_LIMITED_MESSAGES.inc()
                await session.send(
                    out.error(
                        ErrorCode.RATE_LIMITED,
                        "too many messages; slow down",
                        peek_request_id(msg.data),
                    )
                )
                continue
            await _accept(session, msg.data)
        return _why_closed(session, None)
    finally:
        await session.stop_worker()


def _why_closed(session: _Session, msg: WSMessage | None) -> CloseReason:
    """Why a connection ended when its reader found it ending: ``msg`` is the close, closing,
    closed or error message it read (None: the socket was found closed between two reads, or
    lost under the reader)."""
    if session.outbox.overflowed:
        return CloseReason.SLOW_READER
    if session.signed_out:
        return CloseReason.SIGNED_OUT
    if session.shutting_down.is_set():
        return CloseReason.SERVER_SHUTDOWN
    if msg is not None and msg.type is WSMsgType.CLOSE:
        return CloseReason.CLIENT
    error = msg.data if msg is not None and msg.type is WSMsgType.ERROR else None
    error = error or session.ws.exception()
    if isinstance(error, WebSocketError):
        if error.code == WSCloseCode.MESSAGE_TOO_BIG:
            return CloseReason.MESSAGE_TOO_BIG
        return CloseReason.PROTOCOL_ERROR
    if isinstance(error, TimeoutError):  # aiohttp's heartbeat: no pong in time
        return CloseReason.HEARTBEAT
    return CloseReason.CONNECTION_LOST


async def _accept(session: _Session, raw: str) -> None:
    """Parse one frame: answer a ping or a malformed frame at once, hand anything else to the
    connection's worker (or refuse it with ``busy`` when too many already wait)."""
    received = time.perf_counter()
    try:
        message = parse_client_message(raw)
    except ProtocolError as exc:
        await session.send(out.error(exc.code, exc.message, exc.request_id))
        return
    if isinstance(message, Ping):
        await session.send(out.pong(message.id))
        return
    try:
        session.submit(message, received)
        if isinstance(message, Hello):
            session.hellos_pending += 1
    except asyncio.QueueFull:
        await session.send(
            out.error(
                ErrorCode.BUSY,
                f"{MAX_WAITING_REQUESTS} requests are already waiting on this connection; "
                "wait for their answers",
                message.id,
            )
        )


async def _work(session: _Session) -> None:
    """Serve the connection's waiting requests one after the other, in the order they came,
    and end when none is left (the next request starts a new worker)."""
    try:
        while not session.requests.empty():
            await _handle(session, *session.requests.get_nowait())
    except ConnectionResetError:
        return  # the peer is gone; the reader sees the connection close


async def _handle(session: _Session, message: ClientMessage, received: float) -> None:
    try:
        with log_context(
            player_id=session.player_id,
            request_id=message.id,
            game_id=getattr(message, "game_id", None),
        ):
            await _answer(session, message)
    finally:
        if isinstance(message, Hello):
            session.hellos_pending -= 1
    if isinstance(message, ActionRequest):
        metrics.ACK_SECONDS.observe(time.perf_counter() - received)


async def _answer(session: _Session, message: ClientMessage) -> None:
    """Serve one request; a failure is answered with an error (counted, for an action)."""
    request_id = message.id
    reply: out.ErrorReply
    try:
        await _dispatch(session, message)
        return
    except ProtocolError as exc:
        rid = exc.request_id if exc.request_id is not None else request_id
        reply = out.error(exc.code, exc.message, rid)
    except ServiceError as exc:
        reply = _service_error(exc, request_id)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except StorageError as exc:
        reply = _service_error(refusal(exc), request_id)
    except Exception:
        log.exception("unexpected error handling a websocket message")
        reply = out.error(ErrorCode.INTERNAL_ERROR, "the server failed; try again", request_id)
    if isinstance(message, ActionRequest):
        metrics.action_failed(reply.code)
    await session.send(reply)


def _service_error(exc: ServiceError, request_id: int | str | None) -> out.ErrorReply:
    """The error reply for a service's refusal (``server_busy`` with its ``retry_after_ms``,
    ``banned`` with its ``ban``)."""
    if isinstance(exc, ServerBusyError):
        return out.busy(exc.message, exc.retry_after_s, request_id)
    if isinstance(exc, BannedError):
        return out.banned(exc.message, exc.since, exc.reason, request_id)
    return out.error(exc.code, exc.message, request_id)


async def _hello(session: _Session, message: Hello) -> None:
    """Authenticate the connection; answer ``welcome`` with the player's unfinished games and
    race rooms (which the connection follows from now on)."""
    services = session.services
    revocations = session.hub.revocations
    credential = await services.players.credential(message.token)
    me = credential.player
    before = session.player_id
    session.connections.authenticate(me.id, before)
    session.player, session.token_id = me, credential.token_id
    session.hub.signed_in(session, before)
    if session.hub.revocations != revocations:
        # A revocation was handled while the token was looked up: it may have been this one.
        session.hub.check_tokens([session])
    session.locale = Locale.parse(message.locale)
    session.error_help = message.error_help
    games = await services.games.unfinished(me.id)
    try:
        session.followed |= await services.presence.follow_rooms(me.id, session.connection)
    except StorageError:  # a locked room, the database: recorded again in the background
        session.followed = True
        session.hub.spawn(_follow_later(session, me.id))
    rooms = await services.races.active_for(me.id)
    for room in rooms:
        session.hub.subscribe(session, room)
    welcome = out.welcome(me, games, session.locale, rooms, services.clock.now(), message.id)
    await session.send(welcome)


async def _dispatch(session: _Session, message: ClientMessage) -> None:
    """Serve one request by its handler in :data:`_HANDLERS` (``hello`` first, then the rest)."""
    if isinstance(message, Hello):
        async with session.admission.turn():
            await _hello(session, message)
        return
    if session.signed_out:
        await session.send(
            out.error(ErrorCode.UNAUTHORIZED, "this device was signed out", message.id)
        )
        return
    if session.player is None:
        if isinstance(message, ActionRequest):
            metrics.action_failed(ErrorCode.HELLO_REQUIRED)
        await session.send(
            out.error(ErrorCode.HELLO_REQUIRED, "send 'hello' with a token first", message.id)
        )
        return
    await _HANDLERS[type(message)](session, session.player, message)


M = TypeVar("M", bound=ClientMessage)
#: Serves one kind of request of an authenticated connection: answers it (or raises a
#: ServiceError / StorageError, answered by :func:`_answer`).
Handler = Callable[[_Session, PlayerInfo, M], Awaitable[None]]
_HANDLERS: dict[type[Any], Handler[Any]] = {}


def _handles(kind: type[M]) -> Callable[[Handler[M]], Handler[M]]:
    """Register the handler of one request type in :data:`_HANDLERS`."""

    def register(handler: Handler[M]) -> Handler[M]:
        _HANDLERS[kind] = handler
        return handler

    return register


@_handles(NewGame)
async def _new_game(session: _Session, player: PlayerInfo, message: NewGame) -> None:
    async with session.admission.turn():  # a new table: part of getting in
        snapshot = await session.services.games.new_free_game(
            player.id, message.code, message.rules
        )
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(JoinDaily)
async def _join_daily(session: _Session, player: PlayerInfo, message: JoinDaily) -> None:
    async with session.admission.turn():  # a new table: part of getting in
        snapshot = await session.services.games.join_daily(player.id)
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(Resume)
async def _resume(session: _Session, player: PlayerInfo, message: Resume) -> None:
    snapshot = await session.services.games.resume(player.id, message.game_id)
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(ActionRequest)
async def _action(session: _Session, player: PlayerInfo, message: ActionRequest) -> None:
    result = await session.services.games.act(
        player.id, message.game_id, message.seq, message.action
    )
    if result.outcome is Outcome.ACCEPTED:
        metrics.ACCEPTED.inc()
        await session.send(out.accepted(result.snapshot, session.locale, message.id))
        return
    assert result.code is not None
    metrics.action_rejected(result.code)
    await session.send(
        out.rejected(result.snapshot, result.code, session.locale, session.error_help, message.id)
    )


@_handles(Resign)
async def _resign(session: _Session, player: PlayerInfo, message: Resign) -> None:
    snapshot = await session.services.games.resign(player.id, message.game_id)
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(Hint)
async def _hint(session: _Session, player: PlayerInfo, message: Hint) -> None:
    best = await session.services.games.hint(player.id, message.game_id)
    await session.send(out.hint(message.game_id, best, message.id))


@_handles(RaceCreate)
async def _race_create(session: _Session, player: PlayerInfo, message: RaceCreate) -> None:
    services = session.services
    session.followed = True  # before: a close while it commits still unfollows
    room = await services.races.create(
        player, message.code, message.rules, message.time_limit_s, connection=session.connection
    )
    session.hub.subscribe(session, room)
    await session.send(
        out.race(room, services.clock.now(), racer=True, game=None, request_id=message.id)
    )


@_handles(RaceJoin)
async def _race_join(session: _Session, player: PlayerInfo, message: RaceJoin) -> None:
    services = session.services
    session.followed = True  # before: a close while it commits still unfollows
    joined = await services.races.join(
        player, message.invite, watch=message.watch, connection=session.connection
    )
    session.hub.subscribe(session, joined.room)
    game = None
    started = services.races.started(joined.room)
    if joined.game_id is not None and started:
        snapshot = await services.games.resume(player.id, joined.game_id)
        game = out.game_state(snapshot, session.locale)
    await session.send(
        out.race(
            joined.room, services.clock.now(), racer=joined.racer, game=game, request_id=message.id
        )
    )


@_handles(RaceLeave)
async def _race_leave(session: _Session, player: PlayerInfo, message: RaceLeave) -> None:
    invite = normalize_invite(message.invite)
    room = await session.services.races.leave(
        player,
        invite,
        watching=session.hub.follows(session, invite),
        connection=session.connection,
    )
    session.hub.unsubscribe(session, room.id)
    await session.send(out.race_left(room.invite, message.id))


@_handles(RaceStart)
async def _race_start(session: _Session, player: PlayerInfo, message: RaceStart) -> None:
    services = session.services
    session.followed = True
    room = await services.races.start(player, message.invite, session.connection)
    session.hub.subscribe(session, room)
    await session.send(
        out.race(room, services.clock.now(), racer=True, game=None, request_id=message.id)
    )
