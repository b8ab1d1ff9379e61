"""Fan-out of the events between processes to the websockets this process holds.

Every process listens to the database's events (``server.storage.events``): those for players,
and those of the rooms this process serves — the hub tells its :class:`RoomChannels` (the
listener) to follow a room's channel when the room's first local subscriber comes and to let
it go when its last one leaves. For each event about a race that has subscribers here, the hub
builds the message once and queues it on each subscriber's outbox (never waiting for a
socket). The deal of a race is released to this process's racers by a timer at the race's
``starts_at``.

Events are delivered at most once (an event can be lost between a commit and its publish), so
the hub converges from the database: after its listener reconnects it sends every followed
room again (:meth:`Hub.resync`), and :meth:`Hub.sweep`, run periodically, reads one digest of
every followed room and reads whole and sends those that differ from what the hub last sent or
heard of them (a missed progress, a missed change, a start missed between a room's read and its
LISTEN).

The hub also knows which token each authenticated websocket of this process said hello with:
when a player's tokens are revoked (:class:`TokensRevoked`, from any process), it asks the
database which of their sockets' tokens still exist and closes the others (4001, ``signed
out``), as it does for every socket after the event connection was lost (events may have been
missed meanwhile).

Each of its tasks (a token check, a room read again, a deal released, an invitation) that
fails other than as it expects is started again after a back-off and counted
(:mod:`server.web.background`): a failure never ends a revoked-token check for good.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Protocol

from server.catalogue import Locale
from server.errors import ServiceError, StorageError
from server.protocol import server as out
from server.services import Services
from server.services.races import Room
from server.storage.events import (
    Event,
    QueueMatched,
    RaceFinished,
    RaceInvited,
    RaceProgress,
    RaceRoomChanged,
    RaceStarted,
    TokensRevoked,
)
from server.web.background import supervised
from server.web.metrics import BackgroundTask

log = logging.getLogger(__name__)

#: Seconds between tries to check revoked tokens against a database that failed: doubling from
#: the first to the last, then the last until it answers or the sockets are gone.
RECHECK_RETRY_S = (0.5, 5.0)


class Subscriber(Protocol):
    """A connection that receives race events."""

    @property
    def player_id(self) -> int | None: ...
    @property
    def locale(self) -> Locale: ...
    @property
    def key(self) -> str: ...
    def push(self, message: out.Message, key: Hashable | None = None) -> None: ...
    def push_frame(self, frame: str, key: Hashable | None = None) -> None: ...


class Authenticated(Protocol):
    """A connection authenticated by a bearer token."""

    @property
    def player_id(self) -> int | None: ...
    @property
    def key(self) -> str: ...
    def push(self, message: out.Message, key: Hashable | None = None) -> None: ...
    @property
    def token_id(self) -> int | None: ...
    @property
    def is_open(self) -> bool: ...
    def sign_out(self) -> None:
        """Its token was revoked: close it (4001, ``signed out``)."""
        ...


class RoomChannels(Protocol):
    """Where the events of one room are listened to (the event listener)."""

    def follow(self, race_id: int) -> None: ...
    def unfollow(self, race_id: int) -> None: ...


#: What the hub last sent or heard of a room: its version, status and watchers, and each
#: racer's (cards_left, score, moves, status, presence).
_Known = tuple[object, ...]


def _digest(known: tuple[_Known, dict[int, _Known]]) -> tuple[int, int, int]:
    """What a room's digest (:meth:`RaceService.digests`) is when the room is as ``known``."""
    fixed, racers = known
    version = fixed[0]
    assert isinstance(version, int)
    moves = sum(m for _, _, m, _, _ in racers.values() if isinstance(m, int))
    ended = sum(1 for _, _, _, status, _ in racers.values() if status not in (None, "playing"))
    return version, moves, ended


def _known(room: Room) -> tuple[_Known, dict[int, _Known]]:
    fixed: _Known = (room.version, room.status, room.watchers, room.watchers_total)
    racers: dict[int, _Known] = {
        seat.player_id: (seat.cards_left, seat.score, seat.moves, seat.status, seat.presence)
        for seat in room.seats
    }
    return fixed, racers


class Hub:
    """Routes race events to local subscribers, and closes local connections whose token was
    revoked.

    Args:
        services: the process's services (to read rooms and games).
        channels: told which rooms' events this process needs (None: it is told nothing).
    """

    def __init__(self, services: Services, channels: RoomChannels | None = None) -> None:
        self._services = services
        self._channels = channels
        self._rooms: dict[int, set[Subscriber]] = {}
        #: What was last sent or heard of each followed room (see :meth:`sweep`).
        self._last: dict[int, tuple[_Known, dict[int, _Known]]] = {}
        self._invites: dict[int, str] = {}
        self._released: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        #: Rooms being read to be sent; a room changed again meanwhile is read once more after.
        self._reading: dict[int, bool] = {}
        #: Keys of this process's open connections (those not here are closed).
        self._open: set[str] = set()
        #: This process's authenticated connections, by player.
        self._signed_in: dict[int, set[Authenticated]] = {}
        #: Revocation events handled so far (see :meth:`revocations`).
        self._revocations = 0

    # ----------------------------------------------------------------------- connections

    def opened(self, key: str) -> None:
        """A connection of this process opened."""
        self._open.add(key)

    def closed(self, key: str) -> None:
        """A connection of this process closed."""
        self._open.discard(key)

    def open_keys(self) -> frozenset[str]:
        """The keys of this process's open connections."""
        return frozenset(self._open)

    # ------------------------------------------------------------------------- tokens

    @property
    def revocations(self) -> int:
        """How many revocations of tokens this process has been told of: a connection reads
        it before its token is looked up, and after :meth:`signed_in` checks its token again
        when it moved (a revocation may have been handled between the look-up and the
        registration)."""
        return self._revocations

    def signed_in(self, connection: Authenticated, before: int | None) -> None:
        """``connection`` authenticated as its ``player_id`` with its ``token_id`` (having
        been ``before``'s, or nobody's)."""
        if before is not None:
            self._forget_signed_in(connection, before)
        if connection.player_id is not None:
            self._signed_in.setdefault(connection.player_id, set()).add(connection)

    def signed_off(self, connection: Authenticated) -> None:
        """An authenticated connection closed."""
        if connection.player_id is not None:
            self._forget_signed_in(connection, connection.player_id)

    def signed_in_all(self) -> list[tuple[int, str]]:
        """``(player_id, connection key)`` of every authenticated connection of this
        process."""
        return [
            (player_id, connection.key)
            for player_id, connections in self._signed_in.items()
            for connection in connections
        ]

    def check_tokens(self, connections: list[Authenticated]) -> None:
        """Close those of ``connections`` whose token no longer exists (in a task of its
        own)."""
        if connections:
            self.supervise(BackgroundTask.TOKEN_CHECK, lambda: self._check_tokens(connections))

    def _forget_signed_in(self, connection: Authenticated, player_id: int) -> None:
        connections = self._signed_in.get(player_id)
        if connections is not None:
            connections.discard(connection)
            if not connections:
                del self._signed_in[player_id]

    async def _check_tokens(self, connections: list[Authenticated]) -> None:
        """Ask the database which of the connections' tokens still exist and sign the others
        out; a database failure is retried while any of them is open."""
        delay, longest = RECHECK_RETRY_S
        while True:
            connections = [c for c in connections if c.is_open and c.token_id is not None]
            if not connections:
                return
            try:
                live = await self._services.players.live_tokens(
                    {c.token_id for c in connections if c.token_id is not None}
                )
            except StorageError as exc:
                log.warning("cannot check revoked tokens (%s); trying again", exc)
                await asyncio.sleep(delay)
                delay = min(longest, delay * 2)
                continue
            for connection in connections:
                if connection.token_id not in live:
                    connection.sign_out()
            return

    # --------------------------------------------------------------------- subscriptions

    def subscribe(self, subscriber: Subscriber, room: Room) -> None:
        """Send ``room``'s events to ``subscriber`` from now on."""
        if room.id not in self._rooms and self._channels is not None:
            self._channels.follow(room.id)
        self._rooms.setdefault(room.id, set()).add(subscriber)
        self._last.setdefault(room.id, _known(room))  # what the new follower was just shown
        self._invites[room.id] = room.invite
        now = self._services.clock.now()
        if room.status == "running" and room.starts_at is not None and room.starts_at > now:
            # Covers a start announced before this process followed the race.
            self._schedule_release(room.id, room.invite, room.starts_at)

    def unsubscribe(self, subscriber: Subscriber, race_id: int) -> None:
        """Stop sending a race's events to ``subscriber``."""
        members = self._rooms.get(race_id)
        if members is not None:
            members.discard(subscriber)
            if not members:
                self._forget(race_id)

    def drop(self, subscriber: Subscriber) -> None:
        """Remove a closed connection from every room."""
        for race_id in [r for r, members in self._rooms.items() if subscriber in members]:
            self.unsubscribe(subscriber, race_id)

    def follows(self, subscriber: Subscriber, invite: str) -> bool:
        """Whether ``subscriber`` follows the race with this (normalized) invite code."""
        return any(
            code == invite and subscriber in self._rooms.get(race_id, ())
            for race_id, code in self._invites.items()
        )

    def follows_all(self) -> list[tuple[int, int, str]]:
        """``(race_id, player_id, connection key)`` of every local connection following a room."""
        return [
            (race_id, subscriber.player_id, subscriber.key)
            for race_id, members in self._rooms.items()
            for subscriber in members
            if subscriber.player_id is not None
        ]

    def subscribers(self, race_id: int) -> int:
        """How many local connections follow a race."""
        return len(self._rooms.get(race_id, ()))

    async def close(self) -> None:
        """Cancel timers and pending fan-out work."""
        for timer in self._timers.values():
            timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --------------------------------------------------------------------------- events

    def handle(self, event: Event) -> None:
        """Take one event from the listener (called on the event loop, must not block)."""
        if isinstance(event, TokensRevoked):
            # Which tokens were revoked is read from the database, not from the event
            # (anyone who may connect to the database may NOTIFY).
            self._revocations += 1
            self.check_tokens(list(self._signed_in.get(event.player_id, ())))
            return
        if isinstance(event, QueueMatched):
            if any(p in self._signed_in for p in event.player_ids):
                self.supervise(BackgroundTask.QUEUE_MATCHED, lambda: self._matched(event))
            return
        if isinstance(event, RaceInvited):
            if event.player_id in self._signed_in:
                self.supervise(BackgroundTask.RACE_INVITATION, lambda: self._invite(event))
            return
        race_id = event.race_id
        if race_id not in self._rooms:
            return
        if isinstance(event, RaceProgress):
            last = self._last.get(race_id)
            if last is not None and event.player_id in last[1]:
                presence = last[1][event.player_id][4]
                last[1][event.player_id] = (
                    event.cards_left,
                    event.score,
                    event.moves,
                    event.status,
                    presence,
                )
            message = out.race_progress(self._invites[race_id], event)
            self._fan_out(race_id, message, ("progress", race_id, event.player_id))
        elif isinstance(event, RaceRoomChanged | RaceStarted | RaceFinished):
            # The room is read again; a start is scheduled from the stored room, not from the
            # event (anyone who may connect to the database may NOTIFY).
            self._refresh_room(race_id)

    def resync(self) -> None:
        """After a lost event connection: send every followed room's current state again, and
        check every authenticated connection's token (a revocation may have been missed)."""
        for race_id in list(self._rooms):
            self._refresh_room(race_id)
        self._revocations += 1
        self.check_tokens([c for members in self._signed_in.values() for c in members])

    async def sweep(self) -> None:
        """Put right what lost events left behind: read the digest of every followed room in
        one statement (its version, its games' moves added up, its games ended), and read whole
        and send those rooms whose digest differs from what was last sent or heard of them.

        Raises:
            StorageError: the digests could not be read (the loop tries again later).
        """
        digests = await self._services.races.digests(list(self._last))
        for race_id, digest in digests.items():
            last = self._last.get(race_id)
            if last is None or _digest(last) == digest or race_id in self._reading:
                continue  # as known, or a read of it is under way
            self._reading[race_id] = False
            try:
                await self._send_room(race_id, only_changed=True)
                if self._reading.get(race_id):  # changed meanwhile: send it as it is now
                    self._reading[race_id] = False
                    await self._send_room_until_settled(race_id)
            finally:
                self._reading.pop(race_id, None)

    # -------------------------------------------------------------------------- helpers

    async def _invite(self, event: RaceInvited) -> None:
        """Tell the invited player's connections here, once the room, the inviter's seat and
        the follow are read from the database (the event is only a hint)."""
        try:
            room = await self._services.races.room(event.invite)
            invitation = await self._services.friends.invitation(event, room)
        except (ServiceError, StorageError) as exc:
            log.warning("race %s: cannot check an invitation (%s)", event.invite, exc)
            return
        if invitation is None:
            return
        message = out.race_invite(invitation.invite, invitation.from_id, invitation.from_name)
        for connection in list(self._signed_in.get(event.player_id, ())):
            connection.push(message)

    async def _matched(self, event: QueueMatched) -> None:
        """Tell the matched players' connections here, once the room is read from the
        database: only its seated racers (the event is only a hint)."""
        try:
            room = await self._services.races.room(event.invite)
        except (ServiceError, StorageError) as exc:
            log.warning("race %s: cannot check a quick-race match (%s)", event.invite, exc)
            return
        message = out.queue_matched(room.invite, room.rules.value)
        seated = {seat.player_id for seat in room.seats}
        for player_id in event.player_ids:
            if player_id in seated:
                for connection in list(self._signed_in.get(player_id, ())):
                    connection.push(message)

    def _fan_out(self, race_id: int, message: out.Message, key: Hashable | None) -> None:
        """Queue ``message`` for every local follower of the race, encoded once for all."""
        members = self._rooms.get(race_id)
        if not members:
            return
        frame = out.encode(message)
        for subscriber in list(members):
            subscriber.push_frame(frame, key)

    def _refresh_room(self, race_id: int) -> None:
        """Send a changed room to its followers: read it now, or, when a read of it is already
        under way, once more after that one (a burst of changes costs two reads, not one each;
        the last read is after the last change)."""
        if race_id in self._reading:
            self._reading[race_id] = True
            return
        self._reading[race_id] = False
        self.spawn(self._refresh_until_settled(race_id))

    async def _refresh_until_settled(self, race_id: int) -> None:
        try:
            await supervised(
                BackgroundTask.ROOM_REFRESH, lambda: self._send_room_until_settled(race_id)
            )
        finally:
            self._reading.pop(race_id, None)

    async def _send_room_until_settled(self, race_id: int) -> None:
        while True:
            await self._send_room(race_id)
            if not self._reading.get(race_id):
                return
            self._reading[race_id] = False

    async def _send_room(self, race_id: int, *, only_changed: bool = False) -> None:
        """Read a followed room and send it to its local followers (``only_changed``: unless it
        is as last sent or heard)."""
        invite = self._invites.get(race_id)
        if invite is None:
            return
        try:
            room = await self._services.races.room(invite)
        except (ServiceError, StorageError) as exc:
            log.warning("race %s: cannot read the room (%s)", invite, exc)
            return
        if race_id not in self._rooms:
            return  # let go meanwhile
        known = _known(room)
        if only_changed and self._last.get(race_id) == known:
            return
        self._last[race_id] = known
        now = self._services.clock.now()
        if room.status == "running" and room.starts_at is not None:
            self._schedule_release(race_id, room.invite, room.starts_at)
        if room.status == "finished":
            message = out.race_results(room, now)
            self._fan_out(race_id, message, ("results", race_id))
        else:
            self._fan_out(race_id, out.race_room(room, now), ("room", race_id))

    def _schedule_release(self, race_id: int, invite: str, starts_at: dt.datetime) -> None:
        if race_id in self._released or race_id in self._timers:
            return
        delay = (starts_at - self._services.clock.now()).total_seconds()
        loop = asyncio.get_running_loop()
        self._timers[race_id] = loop.call_later(
            max(0.0, delay),
            lambda: self.supervise(
                BackgroundTask.RACE_RELEASE, lambda: self._release(race_id, invite)
            ),
        )

    async def _release(self, race_id: int, invite: str) -> None:
        """The countdown is over: send each local racer their game, all at once."""
        self._timers.pop(race_id, None)
        self._released.add(race_id)
        try:
            room = await self._services.races.room(invite)
        except (ServiceError, StorageError) as exc:
            log.warning("race %s: cannot release the deal (%s)", invite, exc)
            return
        games = {seat.player_id: seat.game_id for seat in room.seats if seat.game_id}
        for subscriber in list(self._rooms.get(race_id, ())):
            player_id = subscriber.player_id
            game_id = games.get(player_id) if player_id is not None else None
            if player_id is None or game_id is None:
                continue
            try:
                snapshot = await self._services.games.resume(player_id, game_id, release=True)
            except (ServiceError, StorageError) as exc:
                log.warning("race %s: cannot load game %s (%s)", invite, game_id, exc)
                continue
            subscriber.push(out.race_go(invite, out.game_state(snapshot, subscriber.locale)))

    def supervise(self, task: BackgroundTask, run: Callable[[], Awaitable[object]]) -> None:
        """Run ``run()`` in a task of its own (cancelled, if still running, by :meth:`close`),
        started again after a back-off each time it fails, and counted
        (:func:`server.web.background.supervised`)."""
        self.spawn(supervised(task, run))

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` in a task of its own, cancelled (if still running) by :meth:`close`."""
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _forget(self, race_id: int) -> None:
        if self._rooms.pop(race_id, None) is not None and self._channels is not None:
            self._channels.unfollow(race_id)
        self._last.pop(race_id, None)
        self._invites.pop(race_id, None)
        timer = self._timers.pop(race_id, None)
        if timer is not None:
            timer.cancel()
        self._released.discard(race_id)
