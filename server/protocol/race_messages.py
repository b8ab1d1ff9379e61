"""The ROOM (a race room as anyone with its invite sees it, never a card) and the race
messages: the replies to ``race_create``, ``race_join``, ``race_start`` and ``race_leave``, and
what is pushed to a room's followers (``race_room``, ``race_go``, ``race_progress``,
``race_results``). The wire format is documented in ``docs/protocol.md``;
:mod:`server.protocol.server` gathers every message.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from server.engine.codes import GameCode
from server.protocol.game_messages import GameState
from server.protocol.messages import Message, iso_time


class PresenceView(Protocol):
    """What the encoder needs of a racer's or watcher's presence."""

    @property
    def state(self) -> str: ...
    @property
    def since(self) -> dt.datetime: ...
    @property
    def until(self) -> dt.datetime | None: ...


class WatcherView(Protocol):
    """What the encoder needs of a watcher."""

    @property
    def player_id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def presence(self) -> PresenceView: ...


class SeatView(Protocol):
    """What the encoder needs of a racer's seat."""

    @property
    def player_id(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def seat(self) -> int: ...
    @property
    def game_id(self) -> int | None: ...
    @property
    def cards_left(self) -> int | None: ...
    @property
    def score(self) -> int | None: ...
    @property
    def moves(self) -> int | None: ...
    @property
    def status(self) -> str | None: ...
    @property
    def elapsed_ms(self) -> int | None: ...
    @property
    def presence(self) -> PresenceView | None: ...


class RoomView(Protocol):
    """What the encoder needs of a race room."""

    @property
    def id(self) -> int: ...
    @property
    def invite(self) -> str: ...
    @property
    def host_id(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def rules(self) -> StrEnum: ...
    @property
    def code(self) -> GameCode | None: ...
    @property
    def host_deal(self) -> bool: ...
    @property
    def time_limit_s(self) -> int: ...
    @property
    def max_players(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def created_at(self) -> dt.datetime: ...
    @property
    def starts_at(self) -> dt.datetime | None: ...
    @property
    def ends_at(self) -> dt.datetime | None: ...
    @property
    def finished_at(self) -> dt.datetime | None: ...
    @property
    def seats(self) -> Sequence[SeatView]: ...
    @property
    def results(self) -> list[dict[str, Any]] | None: ...
    @property
    def watchers(self) -> Sequence[WatcherView]: ...
    @property
    def watchers_total(self) -> int: ...
    @property
    def grace_s(self) -> float: ...


class Presence(msgspec.Struct, frozen=True):
    """A PRESENCE object: ``state`` is ``connected``, ``reconnecting`` or ``gone``; ``since``
    and ``until`` are UTC times (``until``, for ``reconnecting`` only, is the end of the grace
    period, when the player is gone unless back)."""

    state: str
    since: str | None
    until: str | None


def presence(view: PresenceView | None) -> Presence | None:
    """The PRESENCE of ``view``; None for a racer whose presence is not known yet."""
    if view is None:
        return None
    return Presence(view.state, iso_time(view.since), iso_time(view.until))


class Progress(msgspec.Struct, frozen=True):
    """A racer's progress in a ROOM (never a card): their game's counters now."""

    cards_left: int | None
    score: int | None
    moves: int | None
    status: str | None
    elapsed_ms: int | None


class RoomPlayer(msgspec.Struct, frozen=True):
    """A racer in a ROOM: ``progress`` is null until their game exists."""

    player_id: int
    name: str
    seat: int
    host: bool
    presence: Presence | None
    progress: Progress | None


class RoomWatcher(msgspec.Struct, frozen=True):
    """A spectator in a ROOM."""

    player_id: int
    name: str
    presence: Presence | None


class RoomState(msgspec.Struct, frozen=True):
    """The ROOM object: a race room as anyone with its invite sees it (never a card).

    ``code`` is null until the race is over; ``host_deal`` is true when the host chose the code
    (and may know the cards); times are UTC (``server_time``: when this was read);
    ``watchers`` holds at most 50, connected first; ``results`` is null until the race ends.
    """

    race_id: int
    invite: str
    link: str
    host_id: int
    status: str
    rules: str
    code: str | None
    host_deal: bool
    time_limit_s: int
    max_players: int
    version: int
    created_at: str | None
    starts_at: str | None
    ends_at: str | None
    finished_at: str | None
    server_time: str | None
    players: list[RoomPlayer]
    watchers: list[RoomWatcher]
    watchers_total: int
    grace_s: float
    results: list[dict[str, Any]] | None


def room_state(room: RoomView, now: dt.datetime) -> RoomState:
    """The ROOM of ``room`` as read at ``now`` (see :class:`RoomState`)."""
    return RoomState(
        race_id=room.id,
        invite=room.invite,
        link=f"/race/{room.invite}",
        host_id=room.host_id,
        status=room.status,
        rules=room.rules.value,
        code=None if room.code is None else str(room.code),
        host_deal=room.host_deal,
        time_limit_s=room.time_limit_s,
        max_players=room.max_players,
        version=room.version,
        created_at=iso_time(room.created_at),
        starts_at=iso_time(room.starts_at),
        ends_at=iso_time(room.ends_at),
        finished_at=iso_time(room.finished_at),
        server_time=iso_time(now),
        players=[room_player(seat, room.host_id) for seat in room.seats],
        watchers=[RoomWatcher(w.player_id, w.name, presence(w.presence)) for w in room.watchers],
        watchers_total=room.watchers_total,
        grace_s=room.grace_s,
        results=room.results,
    )


def room_player(seat: SeatView, host_id: int) -> RoomPlayer:
    """A racer of a ROOM whose host is ``host_id`` (see :class:`RoomPlayer`)."""
    progress = None
    if seat.game_id is not None:
        progress = Progress(seat.cards_left, seat.score, seat.moves, seat.status, seat.elapsed_ms)
    return RoomPlayer(
        player_id=seat.player_id,
        name=seat.name,
        seat=seat.seat,
        host=seat.player_id == host_id,
        presence=presence(seat.presence),
        progress=progress,
    )


class Race(Message, frozen=True, tag="race"):
    """Reply to ``race_create``, ``race_join`` and ``race_start``: the room, the sender's
    ``role`` (``racer`` or ``spectator``) and, for a racer of a started race, their STATE."""

    race: RoomState
    role: str
    game: GameState | None = None
    id: int | str | None = None


class RaceLeft(Message, frozen=True, tag="race_left"):
    """Reply to ``race_leave``."""

    invite: str
    id: int | str | None = None


class Inviter(msgspec.Struct, frozen=True):
    """Who sent an invitation: a racer seated in the room."""

    id: int
    name: str


class RaceInvite(Message, frozen=True, tag="race_invite"):
    """Pushed to every socket of a player a racer they are followed by invited to a lobby:
    the room's invite code and who invited them (``from``)."""

    invite: str
    from_: Inviter = msgspec.field(name="from")


class Invited(Message, frozen=True, tag="invited"):
    """Reply to ``invite_to_race``: the player was told (on every socket of theirs)."""

    invite: str
    player_id: int
    id: int | str | None = None


def race_invite(invite: str, from_id: int, from_name: str) -> RaceInvite:
    """Pushed to an invited player."""
    return RaceInvite(invite, Inviter(from_id, from_name))


def invited(invite: str, player_id: int, request_id: int | str | None) -> Invited:
    """Reply to ``invite_to_race``."""
    return Invited(invite, player_id, request_id)


class RaceRoom(Message, frozen=True, tag="race_room"):
    """Pushed when a room changes (a player joins or leaves, the host starts, it closes)."""

    race: RoomState


class RaceResults(Message, frozen=True, tag="race_results"):
    """Pushed when a race ends: the room with its ranked results and its code."""

    race: RoomState


class RaceGo(Message, frozen=True, tag="race_go"):
    """Pushed to each racer when the countdown ends: the deal, the same for everyone."""

    invite: str
    game: GameState


def race(
    room: RoomView,
    now: dt.datetime,
    *,
    racer: bool,
    game: GameState | None,
    request_id: int | str | None,
) -> Race:
    """Reply to ``race_create``, ``race_join`` and ``race_start``."""
    return Race(room_state(room, now), "racer" if racer else "spectator", game, request_id)


def race_left(invite: str, request_id: int | str | None) -> RaceLeft:
    """Reply to ``race_leave``."""
    return RaceLeft(invite, request_id)


def race_room(room: RoomView, now: dt.datetime) -> RaceRoom:
    """Pushed when a room changes."""
    return RaceRoom(room_state(room, now))


def race_go(invite: str, game: GameState) -> RaceGo:
    """Pushed to each racer when the countdown ends."""
    return RaceGo(invite, game)


class ProgressView(Protocol):
    """What the encoder needs of a racer's progress."""

    @property
    def player_id(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def cards_left(self) -> int: ...
    @property
    def score(self) -> int: ...
    @property
    def moves(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def elapsed_ms(self) -> int: ...


class RaceProgress(Message, frozen=True, tag="race_progress"):
    """Pushed after every accepted action of a racer: their progress (never their cards)."""

    invite: str
    player_id: int
    seq: int
    cards_left: int
    score: int
    moves: int
    status: str
    elapsed_ms: int


def race_progress(invite: str, event: ProgressView) -> RaceProgress:
    """Pushed after every accepted action of a racer: their progress (never their cards)."""
    return RaceProgress(
        invite,
        event.player_id,
        event.seq,
        event.cards_left,
        event.score,
        event.moves,
        event.status,
        event.elapsed_ms,
    )


def race_results(room: RoomView, now: dt.datetime) -> RaceResults:
    """Pushed when a race ends: the room with its ranked results and its code."""
    return RaceResults(room_state(room, now))


__all__ = [
    "Invited",
    "Inviter",
    "Presence",
    "PresenceView",
    "Progress",
    "ProgressView",
    "Race",
    "RaceGo",
    "RaceInvite",
    "RaceLeft",
    "RaceProgress",
    "RaceResults",
    "RaceRoom",
    "RoomPlayer",
    "RoomState",
    "RoomView",
    "RoomWatcher",
    "SeatView",
    "WatcherView",
    "invited",
    "presence",
    "race",
    "race_go",
    "race_invite",
    "race_left",
    "race_progress",
    "race_results",
    "race_room",
    "room_player",
    "room_state",
]
