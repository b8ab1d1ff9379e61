"""The race messages: the replies to ``race_create``, ``race_join``, ``race_start`` and
``race_leave``, the invitations (``race_invite``, ``invited``), and what is pushed to a room's
followers (``race_room``, ``race_go``, ``race_progress``, ``race_results``). The ROOM they carry
is :mod:`server.protocol.race_room`'s. The wire format is documented in ``docs/protocol.md``;
:mod:`server.protocol.server` gathers every message.
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol

import msgspec

from server.protocol.game_messages import GameState
from server.protocol.messages import Message
from server.protocol.race_room import RoomState, RoomView, room_state


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
    "ProgressView",
    "Race",
    "RaceGo",
    "RaceInvite",
    "RaceLeft",
    "RaceProgress",
    "RaceResults",
    "RaceRoom",
    "invited",
    "race",
    "race_go",
    "race_invite",
    "race_left",
    "race_progress",
    "race_results",
    "race_room",
]
