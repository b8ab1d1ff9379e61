"""What each websocket request does: ``hello`` authenticates the connection, then one small
handler per request type (:data:`HANDLERS`) calls a service and sends its answer; a refusal is
answered as an ``error`` in one place (:func:`answer`). No rules here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from server.catalogue import Locale
from server.errors import (
    BannedError,
    ErrorCode,
    ServerBusyError,
    ServiceError,
    StorageError,
    UnauthorizedError,
    refusal,
)
from server.protocol import server as out
from server.protocol.client import (
    ActionRequest,
    ClientMessage,
    Hello,
    Hint,
    InviteToRace,
    JoinDaily,
    NewGame,
    ProtocolError,
    QueueCancel,
    QueueJoin,
    RaceCreate,
    RaceJoin,
    RaceLeave,
    RaceStart,
    Resign,
    Resume,
)
from server.services.game_views import Outcome
from server.services.players import PlayerInfo
from server.services.races import normalize_invite
from server.web import metrics
from server.web.ws_session import WsSession

log = logging.getLogger(__name__)


#: Seconds between tries to record the rooms of a hello that could not be recorded at once:
#: doubling from the first to the last, then the last until it works or the connection closes.
FOLLOW_RETRY_S = (0.5, 4.0)


async def _follow_later(session: WsSession, player_id: int) -> None:
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


async def answer(session: WsSession, message: ClientMessage) -> None:
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


async def _hello(session: WsSession, message: Hello) -> None:
    """Authenticate the connection; answer ``welcome`` with the player's unfinished games and
    race rooms (which the connection follows from now on). The token, the games and whether the
    player sits in a room are read in one statement (shared with the hellos arriving with
    it); the rooms only when they do."""
    services = session.services
    revocations = session.hub.revocations
    held = None if message.games is None else {g.game_id: g.seq for g in message.games}
    welcomed = await services.welcomes.welcome(message.token, held)
    credential = welcomed.credential
    me = credential.player
    before = session.player_id
    session.connections.authenticate(me.id, before)
    session.player, session.token_id = me, credential.token_id
    session.hub.signed_in(session, before)
    if session.hub.revocations != revocations:
        # A revocation was handled while the token was looked up: it may have been this one.
        session.hub.check_tokens([session])
    try:
        if before is not None and before != me.id:
            await services.friends.disconnected(session.key)
        await services.friends.connected(session.key, me.id)
    except StorageError:  # recorded by the next online sweep
        log.warning("online: the hello of %s was not recorded at once", session.key)
    session.locale = Locale.parse(message.locale)
    session.error_help = message.error_help
    rooms = []
    if welcomed.seated:  # rare: most hellos read nothing more
        try:
            session.followed |= await services.presence.follow_rooms(me.id, session.connection)
        except StorageError:  # a locked room, the database: recorded again in the background
            session.followed = True
            session.hub.spawn(_follow_later(session, me.id))
        rooms = await services.races.active_for(me.id)
        for room in rooms:
            session.hub.subscribe(session, room)
    welcome = out.welcome(
        me,
        welcomed.games,
        session.locale,
        rooms,
        services.clock.now(),
        message.id,
        welcomed.unchanged,
    )
    await session.send(welcome)


async def _dispatch(session: WsSession, message: ClientMessage) -> None:
    """Serve one request by its handler in :data:`HANDLERS` (``hello`` first, then the rest).
    On a connection being closed because its token was revoked, every request (a ``hello``
    too) is answered ``unauthorized``."""
    if session.signed_out:
        if isinstance(message, ActionRequest):
            metrics.action_failed(ErrorCode.UNAUTHORIZED)
        await session.send(out.error(ErrorCode.UNAUTHORIZED, SIGNED_OUT, message.id))
        return
    if isinstance(message, Hello):
        async with session.admission.turn(greeting=True):
            await _hello(session, message)
        return
    if session.player is None:
        if isinstance(message, ActionRequest):
            metrics.action_failed(ErrorCode.HELLO_REQUIRED)
        await session.send(
            out.error(ErrorCode.HELLO_REQUIRED, "send 'hello' with a token first", message.id)
        )
        return
    # An action's commit checks the device's token itself (in the same statement); a request
    # that changes ranked or shared state looks it up first, so none is done for a device
    # signed out a moment ago whose socket the revocation's notice has not closed yet. (A
    # free game, a resume or a hint in that moment's window changes nothing of anyone's: they
    # skip the look-up, which would cost each new game a query.)
    token_id = session.token_id
    if (
        isinstance(message, CHECKED_REQUESTS)
        and token_id is not None
        and not await session.services.players.live_tokens({token_id})
    ):
        await _signed_out(session, message)
        return
    await HANDLERS[type(message)](session, session.player, message)


#: The requests (besides actions) done only once the device's token is found to exist.
CHECKED_REQUESTS = (
    JoinDaily,
    Resign,
    RaceCreate,
    RaceJoin,
    RaceLeave,
    RaceStart,
    InviteToRace,
    QueueJoin,
)

#: What a device signed out is told when it asks for anything more.
SIGNED_OUT = "this device was signed out; nothing was changed"


async def _signed_out(session: WsSession, message: ClientMessage) -> None:
    """The connection's token is gone: say so (given a moment to go out), then close it with
    4001 like the revocation's notice would."""
    await session.send(out.error(ErrorCode.UNAUTHORIZED, SIGNED_OUT, message.id))
    await session.outbox.wait_sent(timeout=1.0)
    session.sign_out()


M = TypeVar("M", bound=ClientMessage)
#: Serves one kind of request of an authenticated connection: answers it (or raises a
#: ServiceError / StorageError, answered by :func:`answer`).
Handler = Callable[[WsSession, PlayerInfo, M], Awaitable[None]]
HANDLERS: dict[type[Any], Handler[Any]] = {}


def _handles(kind: type[M]) -> Callable[[Handler[M]], Handler[M]]:
    """Register the handler of one request type in :data:`HANDLERS`."""

    def register(handler: Handler[M]) -> Handler[M]:
        HANDLERS[kind] = handler
        return handler

    return register


@_handles(NewGame)
async def _new_game(session: WsSession, player: PlayerInfo, message: NewGame) -> None:
    async with session.admission.turn():  # a new table: part of getting in
        snapshot = await session.services.games.new_free_game(
            player.id, message.code, message.rules
        )
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(JoinDaily)
async def _join_daily(session: WsSession, player: PlayerInfo, message: JoinDaily) -> None:
    async with session.admission.turn():  # a new table: part of getting in
        snapshot = await session.services.games.join_daily(player.id)
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(Resume)
async def _resume(session: WsSession, player: PlayerInfo, message: Resume) -> None:
    snapshot = await session.services.games.resume(
        player.id, message.game_id, acknowledged_seq=message.seq
    )
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(ActionRequest)
async def _action(session: WsSession, player: PlayerInfo, message: ActionRequest) -> None:
    try:
        result = await session.services.games.act(
            player.id, message.game_id, message.seq, message.action, token_id=session.token_id
        )
    except UnauthorizedError:  # the device's token is gone: nothing was stored
        metrics.action_failed(ErrorCode.UNAUTHORIZED)
        await _signed_out(session, message)
        return
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
async def _resign(session: WsSession, player: PlayerInfo, message: Resign) -> None:
    snapshot = await session.services.games.resign(player.id, message.game_id)
    await session.send(out.game(snapshot, session.locale, message.id))


@_handles(Hint)
async def _hint(session: WsSession, player: PlayerInfo, message: Hint) -> None:
    best = await session.services.games.hint(player.id, message.game_id)
    await session.send(out.hint(message.game_id, best, message.id))


@_handles(RaceCreate)
async def _race_create(session: WsSession, player: PlayerInfo, message: RaceCreate) -> None:
    services = session.services
    session.followed = True  # before: a close while it commits still unfollows
    room = await services.races.create(
        player,
        message.code,
        message.rules,
        message.time_limit_s,
        connection=session.connection,
        rated=message.rated,
    )
    session.hub.subscribe(session, room)
    await session.send(
        out.race(room, services.clock.now(), racer=True, game=None, request_id=message.id)
    )


@_handles(RaceJoin)
async def _race_join(session: WsSession, player: PlayerInfo, message: RaceJoin) -> None:
    services = session.services
    session.followed = True  # before: a close while it commits still unfollows
    joined = await services.races.join(
        player,
        message.invite,
        watch=message.watch,
        connection=session.connection,
        rated=message.rated,
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
async def _race_leave(session: WsSession, player: PlayerInfo, message: RaceLeave) -> None:
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
async def _race_start(session: WsSession, player: PlayerInfo, message: RaceStart) -> None:
    services = session.services
    session.followed = True
    room = await services.races.start(player, message.invite, session.connection)
    session.hub.subscribe(session, room)
    await session.send(
        out.race(room, services.clock.now(), racer=True, game=None, request_id=message.id)
    )


@_handles(InviteToRace)
async def _invite_to_race(session: WsSession, player: PlayerInfo, message: InviteToRace) -> None:
    services = session.services
    room = await services.races.room(message.invite)
    await services.friends.invite(player, room, message.player_id)
    await session.send(out.invited(room.invite, message.player_id, message.id))


@_handles(QueueJoin)
async def _queue_join(session: WsSession, player: PlayerInfo, message: QueueJoin) -> None:
    waiting = await session.services.matchmaker.join(player, message.rules, session.connection)
    await session.send(
        out.queue_waiting(
            waiting.rules.value, waiting.rating, waiting.gap, waiting.since, message.id
        )
    )


@_handles(QueueCancel)
async def _queue_cancel(session: WsSession, player: PlayerInfo, message: QueueCancel) -> None:
    was_waiting = await session.services.matchmaker.cancel(player)
    await session.send(out.queue_cancelled(was_waiting, message.id))
