"""Server → client messages: the single place where replies and the game STATE are encoded.

Every function returns a JSON-ready dict; ``encode`` turns one into the frame's text. The wire
format is documented in ``docs/protocol.md``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from server.engine.cards import FULL_DECK, Card
from server.engine.codes import GameCode
from server.engine.errors import Locale, Rejection, blocked_notice, rejection_message
from server.engine.game import FACE_DOWN, Action, GameView, Status

JSON = dict[str, Any]


class GameSnapshot(Protocol):
    """What the encoder needs of a game at one moment (the services' snapshot has it)."""

    @property
    def id(self) -> int: ...
    @property
    def mode(self) -> StrEnum: ...
    @property
    def code(self) -> GameCode: ...
    @property
    def code_visible(self) -> bool: ...
    @property
    def daily_date(self) -> dt.date | None: ...
    @property
    def seq(self) -> int: ...
    @property
    def view(self) -> GameView: ...
    @property
    def elapsed_ms(self) -> int: ...
    @property
    def race_id(self) -> int | None: ...


class PlayerInfo(Protocol):
    """What the encoder needs of a player."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...


#: Messages for the rejection codes the services add to the engine's.
_SERVICE_REJECTIONS = {
    "stale_seq": {
        Locale.EN: "The game moved on; here is its current state.",
        Locale.ZH_HANT: "牌局已更新，以下是目前的狀態。",
    },
    "daily_closed": {
        Locale.EN: "This daily challenge is closed.",
        Locale.ZH_HANT: "本日挑戰已結束。",
    },
    "race_not_started": {
        Locale.EN: "The race has not started yet; wait for the countdown to end.",
        Locale.ZH_HANT: "比賽尚未開始，請等倒數結束。",
    },
    "race_over": {
        Locale.EN: "The race is over.",
        Locale.ZH_HANT: "比賽已結束。",
    },
}


#: One encoder for every frame (msgspec: compact JSON, UTF-8 characters kept).
_ENCODER = msgspec.json.Encoder()


def encode(message: Message) -> str:
    """The text frame for a message (compact JSON, UTF-8 characters kept; a string that is
    not valid Unicode, such as a lone surrogate echoed in an ``id``, is escaped instead)."""
    try:
        return _ENCODER.encode(message).decode()
    except UnicodeEncodeError:
        return json.dumps(msgspec.to_builtins(message), separators=(",", ":"))


#: What a STATE's tableau shows for each thing a view holds: a card's two characters, the
#: face-down marker, or null for a removed card.
_SHOWN_TEXT: dict[Card | str | None, str | None] = {
    **{card: str(card) for card in FULL_DECK},
    FACE_DOWN: FACE_DOWN,
    None: None,
}


def _with_id(message: JSON, request_id: int | str | None) -> JSON:
    if request_id is not None:
        message["id"] = request_id
    return message


class _Reply(msgspec.Struct, frozen=True, omit_defaults=True, tag_field="type"):
    """A typed server message: its ``type`` is the class's tag, written first; ``id`` (the
    request's, when it had one) is left out when None."""


class GameState(msgspec.Struct, frozen=True, omit_defaults=True):
    """The STATE object: what the player may see of a game (never a face-down or stock card).

    ``code`` is null while the deal is secret (an open daily, a running race); ``tableau`` holds
    28 entries, each a card (``"7H"``), ``"down"`` or null (removed); ``elapsed_ms`` is server
    time; ``message`` (the blocked notice in the player's language) only on a blocked game.
    """

    game_id: int
    mode: str
    code: str | None
    rules: str
    daily_date: str | None
    race_id: int | None
    seq: int
    status: str
    score: int
    moves: int
    undos: int
    stock_count: int
    waste: str | None
    tableau: list[str | None]
    cards_left: int
    can_undo: bool
    elapsed_ms: int
    message: str | None = None


class GameReply(_Reply, frozen=True, tag="game"):
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""

    game: GameState
    id: int | str | None = None


class Accepted(_Reply, frozen=True, tag="accepted"):
    """An action was applied and committed (or was an exact repeat of the last one)."""

    game: GameState
    id: int | str | None = None


class Rejected(_Reply, frozen=True, tag="rejected"):
    """An action was refused; nothing changed. ``message`` only with error help on."""

    code: str
    game: GameState
    message: str | None = None
    id: int | str | None = None


class ErrorReply(_Reply, frozen=True, tag="error"):
    """A request could not be handled: ``code`` (machine-readable) and ``message``;
    ``retry_after_ms`` only with ``server_busy`` (nothing was done; try again after it)."""

    code: str
    message: str
    retry_after_ms: int | None = None
    id: int | str | None = None


class Pong(_Reply, frozen=True, tag="pong"):
    """Reply to ``ping``."""

    id: int | str | None = None


#: A message as the outbox takes it: a typed reply, or a JSON-ready dict.
Message = _Reply | JSON


def game_state(snapshot: GameSnapshot, locale: Locale) -> GameState:
    """The STATE of ``snapshot`` for a player whose language is ``locale`` (see
    :class:`GameState`)."""
    view = snapshot.view
    return GameState(
        game_id=snapshot.id,
        mode=snapshot.mode.value,
        code=str(snapshot.code) if snapshot.code_visible else None,
        rules=snapshot.code.rules.value,
        daily_date=snapshot.daily_date.isoformat() if snapshot.daily_date else None,
        race_id=snapshot.race_id,
        seq=snapshot.seq,
        status=view.status.value,
        score=view.score,
        moves=view.moves,
        undos=view.undos,
        stock_count=view.stock_count,
        waste=_SHOWN_TEXT[view.waste],
        tableau=[_SHOWN_TEXT[c] for c in view.tableau],
        cards_left=view.cards_left,
        can_undo=view.can_undo,
        elapsed_ms=snapshot.elapsed_ms,
        message=blocked_notice(locale) if view.status is Status.BLOCKED else None,
    )


def welcome(
    player: PlayerInfo,
    games: Sequence[GameSnapshot],
    locale: Locale,
    rooms: Sequence[RoomView] = (),
    now: dt.datetime | None = None,
) -> JSON:
    """Reply to ``hello``: the player, their unfinished games (each a STATE) and the race rooms
    they sit in (lobby or running, each a ROOM; the connection follows them)."""
    return {
        "type": "welcome",
        "player": {"id": player.id, "name": player.name},
        "locale": locale.value,
        "games": [game_state(g, locale) for g in games],
        "races": [room_state(r, now or dt.datetime.now(dt.UTC)) for r in rooms],
    }


def game(snapshot: GameSnapshot, locale: Locale, request_id: int | str | None) -> GameReply:
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""
    return GameReply(game_state(snapshot, locale), request_id)


def accepted(snapshot: GameSnapshot, locale: Locale, request_id: int | str | None) -> Accepted:
    """An action was applied and committed (or was an exact repeat of the last one)."""
    return Accepted(game_state(snapshot, locale), request_id)


def rejected(
    snapshot: GameSnapshot,
    code: str,
    locale: Locale,
    error_help: bool,
    request_id: int | str | None,
) -> Rejected:
    """An action was refused; nothing changed. ``message`` is sent only with error help on."""
    text = _rejection_text(code, locale) if error_help else None
    return Rejected(code, game_state(snapshot, locale), text or None, request_id)


def _rejection_text(code: str, locale: Locale) -> str | None:
    try:
        return rejection_message(Rejection(code), locale)
    except ValueError:
        return _SERVICE_REJECTIONS.get(code, {}).get(locale)


def error(code: str, message: str, request_id: int | str | None = None) -> ErrorReply:
    """A request could not be handled (malformed, unauthorized, unknown game, …)."""
    return ErrorReply(code, message, id=request_id)


def busy(message: str, retry_after_s: float, request_id: int | str | None = None) -> ErrorReply:
    """Too many players are arriving (or every database connection is taken): nothing was
    done; try again after ``retry_after_ms``. Shape: ``{type: "error", code: "server_busy",
    message, retry_after_ms, id?}``."""
    return ErrorReply("server_busy", message, int(retry_after_s * 1000), request_id)


def pong(request_id: int | str | None) -> Pong:
    """Reply to ``ping``."""
    return Pong(request_id)


def iso_time(when: dt.datetime | None) -> str | None:
    """A UTC time as ISO 8601 with a ``Z`` (``2026-03-14T12:00:00Z``), or None."""
    return None if when is None else when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


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


def presence(view: PresenceView | None) -> JSON | None:
    """A PRESENCE object: ``{state: "connected" | "reconnecting" | "gone", since, until}``
    (UTC times; ``until``, for ``reconnecting`` only, is the end of the grace period, when the
    player is gone unless back). None for a racer whose presence is not known yet."""
    if view is None:
        return None
    return {"state": view.state, "since": iso_time(view.since), "until": iso_time(view.until)}


def room_state(room: RoomView, now: dt.datetime) -> JSON:
    """The ROOM object: a race room as anyone with its invite sees it (never a card).

    Shape: ``{race_id, invite, link, host_id, status, rules, code (null until finished),
    host_deal (true when the host chose the code and may know the cards), time_limit_s,
    max_players, version, created_at, starts_at, ends_at, finished_at, server_time,
    grace_s, players: [{player_id, name, seat, host, presence, progress}],
    watchers: [{player_id, name, presence}] (at most 50, connected first), watchers_total,
    results}`` (``presence``: see :func:`presence`).
    """
    return {
        "race_id": room.id,
        "invite": room.invite,
        "link": f"/race/{room.invite}",
        "host_id": room.host_id,
        "status": room.status,
        "rules": room.rules.value,
        "code": None if room.code is None else str(room.code),
        "host_deal": room.host_deal,
        "time_limit_s": room.time_limit_s,
        "max_players": room.max_players,
        "version": room.version,
        "created_at": iso_time(room.created_at),
        "starts_at": iso_time(room.starts_at),
        "ends_at": iso_time(room.ends_at),
        "finished_at": iso_time(room.finished_at),
        "server_time": iso_time(now),
        "players": [
            {
                "player_id": seat.player_id,
                "name": seat.name,
                "seat": seat.seat,
                "host": seat.player_id == room.host_id,
                "presence": presence(seat.presence),
                "progress": None
                if seat.game_id is None
                else {
                    "cards_left": seat.cards_left,
                    "score": seat.score,
                    "moves": seat.moves,
                    "status": seat.status,
                    "elapsed_ms": seat.elapsed_ms,
                },
            }
            for seat in room.seats
        ],
        "watchers": [
            {"player_id": w.player_id, "name": w.name, "presence": presence(w.presence)}
            for w in room.watchers
        ],
        "watchers_total": room.watchers_total,
        "grace_s": room.grace_s,
        "results": room.results,
    }


def race(
    room: RoomView,
    now: dt.datetime,
    *,
    racer: bool,
    game: GameState | None,
    request_id: int | str | None,
) -> JSON:
    """Reply to ``race_create``, ``race_join`` and ``race_start``: the room, the sender's role,
    and (a racer of a started race) their game's STATE."""
    message: JSON = {
        "type": "race",
        "race": room_state(room, now),
        "role": "racer" if racer else "spectator",
    }
    if game is not None:
        message["game"] = game
    return _with_id(message, request_id)


def race_left(invite: str, request_id: int | str | None) -> JSON:
    """Reply to ``race_leave``."""
    return _with_id({"type": "race_left", "invite": invite}, request_id)


def race_room(room: RoomView, now: dt.datetime) -> JSON:
    """Pushed when a room changes (a player joins or leaves, the host starts, it closes)."""
    return {"type": "race_room", "race": room_state(room, now)}


def race_go(invite: str, game: GameState) -> JSON:
    """Pushed to each racer when the countdown ends: the deal, the same for everyone."""
    return {"type": "race_go", "invite": invite, "game": game}


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


class RaceProgress(_Reply, frozen=True, tag="race_progress"):
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


def race_results(room: RoomView, now: dt.datetime) -> JSON:
    """Pushed when a race ends: the room with its ranked results and its code."""
    return {"type": "race_results", "race": room_state(room, now)}


def hint(game_id: int, action: Action | None, request_id: int | str | None) -> JSON:
    """Reply to ``hint``: the best next action (``null`` when none is possible)."""
    return _with_id(
        {
            "type": "hint",
            "game_id": game_id,
            "action": None if action is None else action.kind.value,
            "pos": None if action is None else action.pos,
        },
        request_id,
    )


#: The typed server messages: the game's replies and a racer's progress.
TypedReply = GameReply | Accepted | Rejected | ErrorReply | Pong | RaceProgress


def server_message_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as msgspec writes it) of the typed server messages
    (:data:`TypedReply`), each told apart by its ``type``; the STATE is ``GameState`` in its
    ``$defs``."""
    return msgspec.json.schema(TypedReply)
