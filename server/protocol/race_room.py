"""The ROOM (docs/protocol.md §11.3): a race room as anyone with its invite sees it, never a
card — its racers with their progress and presence, its watchers, and its results once the race
is over. :func:`room_state` builds it from what the race service reads (the ``*View``
Protocols say what it needs); :mod:`server.protocol.race_messages` sends it in ``race``,
``race_room`` and ``race_results``, and the REST API as ``GET /api/v1/races/{invite}``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from server.engine.codes import GameCode
from server.protocol.messages import iso_time


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
    def rated(self) -> bool: ...
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


class RaceRating(msgspec.Struct, frozen=True):
    """A racer's rating change in a rated race (docs/rules.md §4 "Ratings"): the rating shown
    ``before`` the race (after the absence's widening) and ``after`` it, ``change`` = after −
    before, and whether the rating is ``provisional`` after it."""

    before: int
    after: int
    change: int
    provisional: bool


class RaceResult(msgspec.Struct, frozen=True):
    """A RESULT of a finished race: one racer's place (docs/protocol.md §11.7).

    ``rank`` is 1 + how many racers rank strictly ahead (equal results share it: 1, 1, 3);
    ``cleared`` is true for a racer who won (removed all 28 cards); ``cards_removed`` is
    28 − ``cards_left``; ``elapsed_ms`` runs from ``starts_at`` to the end of their game (null:
    stopped by the time limit); ``last_removal_ms`` from ``starts_at`` to their last removal
    still in effect (null: none), absent from the results of races finished before it was
    kept; ``game_id`` their race game, absent from those of races finished before replays;
    ``rating`` their rating change, present only in a rated race's results (for every racer
    it rated).
    """

    rank: int
    player_id: int
    name: str
    status: str
    cleared: bool
    score: int
    cards_left: int
    cards_removed: int
    moves: int
    elapsed_ms: int | None
    last_removal_ms: int | msgspec.UnsetType | None = msgspec.UNSET
    game_id: int | msgspec.UnsetType = msgspec.UNSET
    rating: RaceRating | msgspec.UnsetType = msgspec.UNSET


class RoomState(msgspec.Struct, frozen=True):
    """The ROOM object: a race room as anyone with its invite sees it (never a card).

    ``code`` is null until the race is over; ``host_deal`` is true when the host chose the code
    (and may know the cards); times are UTC (``server_time``: when this was read);
    ``watchers`` holds at most 50, connected first; ``results`` is null until the race ends;
    ``rated``: the race's results move its racers' ratings (a quick race, or a friends' race
    every racer opted into).
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
    results: list[RaceResult] | None
    rated: bool = False


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
        results=None if room.results is None else msgspec.convert(room.results, list[RaceResult]),
        rated=room.rated,
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


__all__ = [
    "Presence",
    "PresenceView",
    "Progress",
    "RaceRating",
    "RaceResult",
    "RoomPlayer",
    "RoomState",
    "RoomView",
    "RoomWatcher",
    "SeatView",
    "WatcherView",
    "presence",
    "room_player",
    "room_state",
]
