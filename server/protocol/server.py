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

from server.engine.cards import Card
from server.engine.codes import GameCode
from server.engine.errors import Locale, Rejection, blocked_notice, rejection_message
from server.engine.game import Action, GameView, Status

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


def encode(message: JSON) -> str:
    """The text frame for a message (compact JSON, UTF-8 characters kept; a string that is
    not valid Unicode, such as a lone surrogate echoed in an ``id``, is escaped instead)."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(message, separators=(",", ":"))
    return text


def _with_id(message: JSON, request_id: int | str | None) -> JSON:
    if request_id is not None:
        message["id"] = request_id
    return message


def game_state(snapshot: GameSnapshot, locale: Locale) -> JSON:
    """The STATE object: what the player may see of a game (never a face-down or stock card).

    Shape: ``{game_id, mode, code (null for an open daily), rules, daily_date, race_id, seq, status,
    score, moves, undos, stock_count, waste, tableau (28 × card | "down" | null), cards_left,
    can_undo, elapsed_ms, message?}``.
    """
    view = snapshot.view
    state: JSON = {
        "game_id": snapshot.id,
        "mode": snapshot.mode.value,
        "code": str(snapshot.code) if snapshot.code_visible else None,
        "rules": snapshot.code.rules.value,
        "daily_date": snapshot.daily_date.isoformat() if snapshot.daily_date else None,
        "race_id": snapshot.race_id,
        "seq": snapshot.seq,
        "status": view.status.value,
        "score": view.score,
        "moves": view.moves,
        "undos": view.undos,
        "stock_count": view.stock_count,
        "waste": str(view.waste),
        "tableau": [str(c) if isinstance(c, Card) else c for c in view.tableau],
        "cards_left": view.cards_left,
        "can_undo": view.can_undo,
        "elapsed_ms": snapshot.elapsed_ms,
    }
    if view.status is Status.BLOCKED:
        state["message"] = blocked_notice(locale)
    return state


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


def game(snapshot: GameSnapshot, locale: Locale, request_id: int | str | None) -> JSON:
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""
    return _with_id({"type": "game", "game": game_state(snapshot, locale)}, request_id)


def accepted(snapshot: GameSnapshot, locale: Locale, request_id: int | str | None) -> JSON:
    """An action was applied and committed (or was an exact repeat of the last one)."""
    return _with_id({"type": "accepted", "game": game_state(snapshot, locale)}, request_id)


def rejected(
    snapshot: GameSnapshot,
    code: str,
    locale: Locale,
    error_help: bool,
    request_id: int | str | None,
) -> JSON:
    """An action was refused; nothing changed. ``message`` is sent only with error help on."""
    message: JSON = {"type": "rejected", "code": code}
    if error_help:
        text = _rejection_text(code, locale)
        if text:
            message["message"] = text
    message["game"] = game_state(snapshot, locale)
    return _with_id(message, request_id)


def _rejection_text(code: str, locale: Locale) -> str | None:
    try:
        return rejection_message(Rejection(code), locale)
    except ValueError:
        return _SERVICE_REJECTIONS.get(code, {}).get(locale)


def error(code: str, message: str, request_id: int | str | None = None) -> JSON:
    """A request could not be handled (malformed, unauthorized, unknown game, …)."""
    return _with_id({"type": "error", "code": code, "message": message}, request_id)


def busy(message: str, retry_after_s: float, request_id: int | str | None = None) -> JSON:
    """Too many players are arriving (or every database connection is taken): nothing was
    done; try again after ``retry_after_ms``. Shape: ``{type: "error", code: "server_busy",
    message, retry_after_ms, id?}``."""
    reply = error("server_busy", message, request_id)
    reply["retry_after_ms"] = int(retry_after_s * 1000)
    return reply


def pong(request_id: int | str | None) -> JSON:
    """Reply to ``ping``."""
    return _with_id({"type": "pong"}, request_id)


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
    game: JSON | None,
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


def race_go(invite: str, game: JSON) -> JSON:
    """Pushed to each racer when the countdown ends: the deal, the same for everyone."""
    return {"type": "race_go", "invite": invite, "game": game}


def race_progress(invite: str, event: dict[str, Any]) -> JSON:
    """Pushed after every accepted action of a racer: their progress (never their cards)."""
    return {
        "type": "race_progress",
        "invite": invite,
        "player_id": event["player_id"],
        "seq": event["seq"],
        "cards_left": event["cards_left"],
        "score": event["score"],
        "moves": event["moves"],
        "status": event["status"],
        "elapsed_ms": event["elapsed_ms"],
    }


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
