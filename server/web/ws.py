"""The websocket endpoint ``/ws``: read frames, parse them, queue the requests for the
connection's worker (one task per connection, from its first request to its close;
:mod:`server.web.handlers` serves each request), close. No rules here.

Close codes: 1001 server shutting down, 1003 binary frames, 1008 no hello in time or a flood,
1009 a frame over the size limit (aiohttp closes those itself), 4001 the token the connection
said hello with was revoked (rotated, or its device signed out).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from itertools import count

from aiohttp import WebSocketError, WSCloseCode, WSMessage, WSMsgType, web

from server.errors import (
    ErrorCode,
)
from server.logs import bind, log_context
from server.protocol import server as out
from server.protocol.client import (
    ActionRequest,
    ClientMessage,
    Hello,
    Ping,
    ProtocolError,
    parse_client_message,
    peek_request_id,
)
from server.web import metrics
from server.web.departures import Departures
from server.web.handlers import answer
from server.web.keys import (
    ADMISSION,
    ARRIVALS,
    DEPARTURES,
    HUB,
    PLAYER_SOCKETS,
    SERVICES,
    SETTINGS,
    SHUTTING_DOWN,
    SOCKETS,
)
from server.web.metrics import CloseReason
from server.web.outbox import Outbox
from server.web.ratelimit import TokenBucket
from server.web.ws_session import MAX_WAITING_REQUESTS, WsSession

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 15.0
#: Bytes handed to the transport between checks for a peer that stopped reading. aiohttp's
#: default (256 KiB) lets that much pile up in each stalled socket's buffer before the writer
#: waits, so the outbox's bound and its coalescing would only start to matter after it.
WRITER_LIMIT = 16 * 1024
_connection_ids = count(1)


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
        _let_go(ws)
        return web.Response(status=400, text="the connection closed during the upgrade")
    request.app[SOCKETS].add(ws)
    key = f"ws-{next(_connection_ids)}"
    bind(connection_id=key)
    request.app[HUB].opened(key)
    session = WsSession(
        services=request.app[SERVICES],
        hub=request.app[HUB],
        admission=request.app[ADMISSION],
        ws=ws,
        outbox=Outbox(
            ws,
            settings.ws_send_queue,
            transport=request.transport,
            byte_limit=settings.ws_send_buffer_bytes,
        ),
        rate=TokenBucket(settings.ws_rate_per_second, burst=settings.ws_rate_per_second),
        flood=TokenBucket(settings.ws_rate_per_second * 2, burst=settings.ws_rate_per_second * 2),
        connections=request.app[PLAYER_SOCKETS],
        key=key,
        shutting_down=request.app[SHUTTING_DOWN],
    )
    metrics.WEBSOCKETS_OPEN.inc()
    reason = CloseReason.CONNECTION_LOST
    try:
        through_door = partial(request.app[ARRIVALS].through, request.protocol)
        reason = await _serve(session, request.app[DEPARTURES], through_door)
    except (ConnectionResetError, asyncio.CancelledError):
        # The connection was lost under the handler (aiohttp then cancels it), for one of the
        # server's reasons (its heartbeat, a slow reader cut off, the shutdown) or the peer's.
        reason = _why_closed(session, None)
    finally:
        metrics.websocket_closed(reason)
        session.release_place()  # if it was not given back before its turn came
        if session.player is not None:
            session.hub.signed_off(session)
            _offline(session)
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
        _let_go(ws)
    return ws


def _let_go(ws: web.WebSocketResponse) -> None:
    """Stop the heartbeat of a websocket that is done with, for good.

    aiohttp (3.14) arms the heartbeat again whenever data arrives, even after the close: the
    peer's answer to the server's close frame does, and the timer then holds the whole
    connection (its request, buffers, parser, this handler's session) for a heartbeat and a
    half (45 s by default) after it closed. Sockets closed at a high rate — an attacker's that
    never say hello, closed at the hello deadline — piled up in memory so. Without a heartbeat
    interval nothing arms it again (attributes of aiohttp's own; the test of closed sockets
    being let go at once checks it still holds)."""
    ws._heartbeat = None
    ws._cancel_heartbeat()


#: Seconds a closed connection's presence record may take (the sweep settles it otherwise).
UNFOLLOW_TIMEOUT_S = 5.0


async def _unfollow(session: WsSession) -> None:
    """The connection closed: the rooms it followed are told (its player may be reconnecting).
    A database that does not answer in time is logged; the next sweep settles it (a connection
    of a process taken for dead, or this one's at its shutdown)."""
    try:
        async with asyncio.timeout(UNFOLLOW_TIMEOUT_S):
            await session.services.presence.unfollow(session.connection)
    except Exception:  # the database, a locked room, the time-out: the sweep settles it
        log.warning("presence: the close of %s was not recorded at once", session.key)


def _offline(session: WsSession) -> None:
    """The connection closed: its player is online no more through it (forgotten in the next
    write of the online records, not waited for: a cut closes thousands at once), and waits
    for a quick race no more if they waited from it (in a task of its own: this handler may be
    in the middle of being cancelled)."""
    services = session.services
    if services.matchmaker.waits_from(session.connection):
        session.hub.spawn(_leave_queue(session))
    else:
        services.friends.forget(session.key)


async def _leave_queue(session: WsSession) -> None:
    """The connection of a player who asked for a quick race closed: out of the queue, then
    online no more through it, whether the queue could be left or not (forgotten as any close
    is). A database that does not answer in time is logged; this process's next matcher pass
    drops the queue row (it matches nobody from a connection of its own that is closed)."""
    try:
        async with asyncio.timeout(UNFOLLOW_TIMEOUT_S):
            # The queue first: a matcher pass could seat a player who is gone.
            await session.services.matchmaker.disconnected(session.connection)
    except Exception:  # the database, the time-out: the matcher settles it
        log.warning("quick race: the close of %s was not recorded at once", session.key)
    finally:
        session.services.friends.forget(session.key)


async def _serve(
    session: WsSession, departures: Departures, through_door: Callable[[], None]
) -> CloseReason:
    """Read the connection's frames; once it ends, wait for its turn to be let go
    (``departures``) and stop its worker. Reading never waits on a request being served: requests go
    to the connection's worker, which serves them one at a time in order, while this loop keeps
    reading, so pings (websocket and ``ping`` messages) are answered at once even while an
    action waits for its commit. ``through_door`` is called once the first message is read
    (:meth:`server.web.arrivals.Arrivals.through`).

    Returns:
        Why the connection ended.
    """
    ws = session.ws
    try:
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        entering = True
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
            if entering:
                through_door()
                entering = False
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
        if not session.hellos_pending:
            # Its player may be back on another connection before this one is let go: its
            # place among their connections is free at once (a hello still being answered
            # could take one after this; then it is given back once the worker stopped).
            session.release_place()
        try:
            # A cut can end thousands of connections in one turn of the loop: they are let
            # go a few at a time (server.web.departures).
            await departures.turn()
        finally:
            await session.stop_worker()


def _why_closed(session: WsSession, msg: WSMessage | None) -> CloseReason:
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


async def _accept(session: WsSession, raw: str) -> None:
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
        _submit(session, message, received)
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


async def _work(session: WsSession) -> None:
    """Serve the connection's requests one after the other, in the order they came, for as
    long as the connection lives: one task per connection, started by its first request and
    waiting for the next between them, rather than a task started for each request."""
    requests = session.requests
    try:
        while True:
            if requests.empty():
                session.idle.set()
            message, received = await requests.get()
            await _handle(session, message, received)
    except ConnectionResetError:
        session.idle.set()  # the peer is gone; the reader sees the connection close


async def _handle(session: WsSession, message: ClientMessage, received: float) -> None:
    try:
        with log_context(
            player_id=session.player_id,
            request_id=message.id,
            game_id=getattr(message, "game_id", None),
        ):
            await answer(session, message)
    finally:
        if isinstance(message, Hello):
            session.hellos_pending -= 1
    if isinstance(message, ActionRequest):
        metrics.ACK_SECONDS.observe(time.perf_counter() - received)


def _submit(session: WsSession, message: ClientMessage, received: float) -> None:
    """Queue a request for the connection's worker, started with its first request.
    ``received`` is the ``time.perf_counter()`` at which its frame was taken up.

    Raises:
        asyncio.QueueFull: :data:`MAX_WAITING_REQUESTS` already wait.
    """
    session.requests.put_nowait((message, received))
    session.idle.clear()
    if session.worker is None or session.worker.done():  # first, or one that failed
        session.worker = asyncio.create_task(_work(session))
