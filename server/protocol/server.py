"""Server → client messages: the single place where replies and the game STATE are encoded.

Every message is a msgspec Struct whose ``type`` is its tag (:data:`TypedReply`; a request's
``id``, when it had one, comes last); ``encode`` turns one into the frame's text and
:func:`server_message_schema` gives their JSON Schema. The wire format is documented in
``docs/protocol.md``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from server.catalogue import Locale, text
from server.engine.cards import FULL_DECK, Card
from server.engine.codes import GameCode
from server.engine.errors import Rejection
from server.engine.game import FACE_DOWN, Action, GameView, Status
from server.errors import ErrorCode


class SnapshotView(Protocol):
    """What the encoder reads of a game at one moment: the fields of the one snapshot type,
    :class:`server.services.games.GameSnapshot` (the protocol layer does not import services)."""

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


class PlayerView(Protocol):
    """What the encoder needs of a player."""

    @property
    def id(self) -> int: ...
    @property
    def name(self) -> str: ...


class PlayerText(StrEnum):
    """Every catalogue key (``server/catalogue/<locale>.json``) whose text the server sends
    players; the page's own texts are the catalogue's other keys."""

    #: A blocked game's STATE ``message``, whatever the error help setting.
    BLOCKED_NOTICE = "state.blocked"
    #: ``rejected`` ``message`` texts (with error help on), for the engine's rejection codes…
    NOT_ADJACENT = "rejected.not_adjacent"
    BLOCKED = "rejected.blocked"
    #: … and for those the services add.
    STALE_SEQ = "rejected.stale_seq"
    DAILY_CLOSED = "rejected.daily_closed"
    #: (``race_not_started`` is answered as an ``error`` today, so this text is not sent.)
    RACE_NOT_STARTED = "rejected.race_not_started"
    RACE_OVER = "rejected.race_over"


#: The rejection codes that have a text (the others are sent without ``message``).
_REJECTION_TEXT: dict[str, PlayerText] = {
    Rejection.NOT_ADJACENT: PlayerText.NOT_ADJACENT,
    Rejection.BLOCKED: PlayerText.BLOCKED,
    "stale_seq": PlayerText.STALE_SEQ,
    "daily_closed": PlayerText.DAILY_CLOSED,
    "race_not_started": PlayerText.RACE_NOT_STARTED,
    "race_over": PlayerText.RACE_OVER,
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


class Ban(msgspec.Struct, frozen=True):
    """A ban from ranked play, as its player is told: since when (a UTC date, ``YYYY-MM-DD``)
    and why (the moderator's words)."""

    since: str
    reason: str


class ErrorReply(_Reply, frozen=True, tag="error"):
    """A request could not be handled: ``code`` (machine-readable) and ``message``;
    ``retry_after_ms`` only with ``server_busy`` (nothing was done; try again after it);
    ``ban`` only with ``banned`` (for the page to say in the player's language)."""

    code: ErrorCode
    message: str
    retry_after_ms: int | None = None
    ban: Ban | None = None
    id: int | str | None = None


class Pong(_Reply, frozen=True, tag="pong"):
    """Reply to ``ping``."""

    id: int | str | None = None


#: A message as the outbox takes it.
Message = _Reply


def game_state(snapshot: SnapshotView, locale: Locale) -> GameState:
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
        message=text(PlayerText.BLOCKED_NOTICE, locale) if view.status is Status.BLOCKED else None,
    )


class WelcomePlayer(msgspec.Struct, frozen=True):
    """The player a connection speaks for."""

    id: int
    name: str


class Welcome(_Reply, frozen=True, tag="welcome"):
    """Reply to ``hello``: the player, their unfinished games (each a STATE) and the race
    rooms they sit in (lobby or running, each a ROOM; the connection follows them)."""

    player: WelcomePlayer
    locale: str
    games: list[GameState]
    races: list[RoomState]
    id: int | str | None = None


def welcome(
    player: PlayerView,
    games: Sequence[SnapshotView],
    locale: Locale,
    rooms: Sequence[RoomView] = (),
    now: dt.datetime | None = None,
    request_id: int | str | None = None,
) -> Welcome:
    """Reply to ``hello`` (see :class:`Welcome`)."""
    at = now or dt.datetime.now(dt.UTC)
    return Welcome(
        WelcomePlayer(player.id, player.name),
        locale.value,
        [game_state(g, locale) for g in games],
        [room_state(r, at) for r in rooms],
        request_id,
    )


def game(snapshot: SnapshotView, locale: Locale, request_id: int | str | None) -> GameReply:
    """Reply to ``new_game``, ``join_daily``, ``resume`` and ``resign``."""
    return GameReply(game_state(snapshot, locale), request_id)


def accepted(snapshot: SnapshotView, locale: Locale, request_id: int | str | None) -> Accepted:
    """An action was applied and committed (or was an exact repeat of the last one)."""
    return Accepted(game_state(snapshot, locale), request_id)


def rejected(
    snapshot: SnapshotView,
    code: str,
    locale: Locale,
    error_help: bool,
    request_id: int | str | None,
) -> Rejected:
    """An action was refused; nothing changed. ``message`` is sent only with error help on."""
    message = rejection_text(code, locale) if error_help else None
    return Rejected(code, game_state(snapshot, locale), message, request_id)


def rejection_text(code: str, locale: Locale) -> str | None:
    """The player text of a rejection code in ``locale`` (docs/rules.md §2 "Rejections and
    messages"); None for the codes that have none.

    >>> rejection_text("blocked", Locale.EN)
    'This card is blocked.'
    >>> rejection_text("no_card", Locale.EN) is None
    True
    """
    key = _REJECTION_TEXT.get(code)
    return None if key is None else text(key, locale)


def error(code: ErrorCode, message: str, request_id: int | str | None = None) -> ErrorReply:
    """A request could not be handled (malformed, unauthorized, unknown game, …)."""
    return ErrorReply(code, message, id=request_id)


def busy(message: str, retry_after_s: float, request_id: int | str | None = None) -> ErrorReply:
    """Too many players are arriving (or every database connection is taken): nothing was
    done; try again after ``retry_after_ms``. Shape: ``{type: "error", code: "server_busy",
    message, retry_after_ms, id?}``."""
    return ErrorReply(ErrorCode.SERVER_BUSY, message, int(retry_after_s * 1000), id=request_id)


def banned(
    message: str, since: dt.date, reason: str, request_id: int | str | None = None
) -> ErrorReply:
    """Ranked play refused to a banned player. Shape: ``{type: "error", code: "banned",
    message, ban: {since, reason}, id?}``."""
    ban = Ban(since.isoformat(), reason)
    return ErrorReply(ErrorCode.BANNED, message, ban=ban, id=request_id)


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
        players=[
            RoomPlayer(
                player_id=seat.player_id,
                name=seat.name,
                seat=seat.seat,
                host=seat.player_id == room.host_id,
                presence=presence(seat.presence),
                progress=None
                if seat.game_id is None
                else Progress(
                    seat.cards_left, seat.score, seat.moves, seat.status, seat.elapsed_ms
                ),
            )
            for seat in room.seats
        ],
        watchers=[RoomWatcher(w.player_id, w.name, presence(w.presence)) for w in room.watchers],
        watchers_total=room.watchers_total,
        grace_s=room.grace_s,
        results=room.results,
    )


class Race(_Reply, frozen=True, tag="race"):
    """Reply to ``race_create``, ``race_join`` and ``race_start``: the room, the sender's
    ``role`` (``racer`` or ``spectator``) and, for a racer of a started race, their STATE."""

    race: RoomState
    role: str
    game: GameState | None = None
    id: int | str | None = None


class RaceLeft(_Reply, frozen=True, tag="race_left"):
    """Reply to ``race_leave``."""

    invite: str
    id: int | str | None = None


class RaceRoom(_Reply, frozen=True, tag="race_room"):
    """Pushed when a room changes (a player joins or leaves, the host starts, it closes)."""

    race: RoomState


class RaceResults(_Reply, frozen=True, tag="race_results"):
    """Pushed when a race ends: the room with its ranked results and its code."""

    race: RoomState


class RaceGo(_Reply, frozen=True, tag="race_go"):
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


def race_results(room: RoomView, now: dt.datetime) -> RaceResults:
    """Pushed when a race ends: the room with its ranked results and its code."""
    return RaceResults(room_state(room, now))


class Hint(_Reply, frozen=True, tag="hint"):
    """Reply to ``hint``: the best next action's kind and position (both null when no action
    is possible; ``pos`` null for a draw or an undo)."""

    game_id: int
    action: str | None
    pos: int | None
    id: int | str | None = None


def hint(game_id: int, action: Action | None, request_id: int | str | None) -> Hint:
    """Reply to ``hint``."""
    return Hint(
        game_id,
        None if action is None else action.kind.value,
        None if action is None else action.pos,
        request_id,
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
)


def server_message_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, as msgspec writes it) of the typed server messages
    (:data:`TypedReply`), each told apart by its ``type``; the STATE is ``GameState`` in its
    ``$defs``."""
    return msgspec.json.schema(TypedReply)
