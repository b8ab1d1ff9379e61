"""Server → client messages: every reply and push, and the one place their JSON Schema comes
from. The wire format is documented in ``docs/protocol.md``.

Every message is a msgspec Struct whose ``type`` is its tag (:data:`TypedReply`; a request's
``id``, when it had one, comes last); ``encode`` turns one into the frame's text and
:func:`server_message_schema` gives their JSON Schema. They are written by concern, and every
name is importable from here (``from server.protocol import server as out``):

- :mod:`server.protocol.messages`: the base :class:`Message`, ``encode``, ``iso_time``, and the
  ``error`` and ``pong`` replies;
- :mod:`server.protocol.game_messages`: the STATE (``GameState``) and the replies about a game,
  with the player texts the server sends (``PlayerText``);
- :mod:`server.protocol.race_room`: the ROOM (``RoomState``);
- :mod:`server.protocol.race_messages`: the race messages;
- :mod:`server.protocol.queue_messages`: the quick-race queue's messages;
- here: ``welcome`` (a player's games and rooms) and the union of them all.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from server.catalogue import Locale
from server.protocol.game_messages import (
    Accepted,
    GameReply,
    GameState,
    Hint,
    PlayerText,
    Rejected,
    SnapshotView,
    accepted,
    game,
    game_state,
    hint,
    rejected,
    rejection_text,
)
from server.protocol.messages import (
    Ban,
    ErrorReply,
    Message,
    Pong,
    banned,
    busy,
    encode,
    error,
    iso_time,
    pong,
)
from server.protocol.queue_messages import (
    QueueCancelled,
    QueueMatched,
    QueueWaiting,
    queue_cancelled,
    queue_matched,
    queue_waiting,
)
from server.protocol.race_messages import (
    Invited,
    Inviter,
    ProgressView,
    Race,
    RaceGo,
    RaceInvite,
    RaceLeft,
    RaceProgress,
    RaceResults,
    RaceRoom,
    invited,
    race,
    race_go,
    race_invite,
    race_left,
    race_progress,
    race_results,
    race_room,
)
from server.protocol.race_room import (
    Presence,
    PresenceView,
    Progress,
    RoomPlayer,
    RoomState,
    RoomView,
    RoomWatcher,
    SeatView,
    WatcherView,
    presence,
    room_state,
)


class PlayerView(Protocol):
    """What the encoder needs of a player."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...


class WelcomePlayer(msgspec.Struct, frozen=True):
    """The player a connection speaks for."""

    id: int
    name: str


class Welcome(Message, frozen=True, tag="welcome"):
    """Reply to ``hello``: the player, their unfinished games (each a STATE) and the race
    rooms they sit in (lobby or running, each a ROOM; the connection follows them)."""

    player: WelcomePlayer
    locale: str
    games: list[GameState]
    races: list[RoomState]
    id: int | str | None = None
    #: The games the hello said the page holds that are unfinished and still at the page's
    #: ``seq``: left out of ``games`` (the page's STATE of each is current). None (left out)
    #: when the hello named no game.
    unchanged: list[int] | None = None


def welcome(
    player: PlayerView,
    games: Sequence[SnapshotView],
    locale: Locale,
    rooms: Sequence[RoomView] = (),
    now: dt.datetime | None = None,
    request_id: int | str | None = None,
    unchanged: Sequence[int] | None = None,
) -> Welcome:
    """Reply to ``hello`` (see :class:`Welcome`)."""
    at = now or dt.datetime.now(dt.UTC)
    return Welcome(
        WelcomePlayer(player.id, player.name),
        locale.value,
        [game_state(g, locale) for g in games],
        [room_state(r, at) for r in rooms],
        request_id,
        None if unchanged is None else list(unchanged),
    )


#: Every server message.
TypedReply = (
    Welcome
    | GameReply
    | Accepted
    | Rejected
    | ErrorReply
    | Pong
    | Hint
    | Race
    | RaceLeft
    | RaceRoom
    | RaceGo
    | RaceProgress
    | RaceResults
    | RaceInvite
    | Invited
    | QueueWaiting
    | QueueCancelled
    | QueueMatched
)


def server_message_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as msgspec writes it) of the typed server messages
    (:data:`TypedReply`), each told apart by its ``type``; the STATE is ``GameState`` in its
    ``$defs``."""
    return msgspec.json.schema(TypedReply)


__all__ = [
    "Accepted",
    "Ban",
    "ErrorReply",
    "GameReply",
    "GameState",
    "Hint",
    "Invited",
    "Inviter",
    "Message",
    "PlayerText",
    "PlayerView",
    "Pong",
    "Presence",
    "PresenceView",
    "Progress",
    "ProgressView",
    "QueueCancelled",
    "QueueMatched",
    "QueueWaiting",
    "Race",
    "RaceGo",
    "RaceInvite",
    "RaceLeft",
    "RaceProgress",
    "RaceResults",
    "RaceRoom",
    "Rejected",
    "RoomPlayer",
    "RoomState",
    "RoomView",
    "RoomWatcher",
    "SeatView",
    "SnapshotView",
    "TypedReply",
    "WatcherView",
    "Welcome",
    "WelcomePlayer",
    "accepted",
    "banned",
    "busy",
    "encode",
    "error",
    "game",
    "game_state",
    "hint",
    "invited",
    "iso_time",
    "pong",
    "presence",
    "queue_cancelled",
    "queue_matched",
    "queue_waiting",
    "race",
    "race_go",
    "race_invite",
    "race_left",
    "race_progress",
    "race_results",
    "race_room",
    "rejected",
    "rejection_text",
    "room_state",
    "server_message_schema",
    "welcome",
]
