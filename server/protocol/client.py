"""Client → server websocket messages and their single parse point (``parse_client_message``).

Every message is a JSON object with a ``type``; a request may carry an ``id`` (a string of at most
64 characters or an integer) that the reply echoes. Anything that is not a valid message becomes a
:class:`ProtocolError` naming what was wrong; the rest of the server only sees typed values, the
engine's own among them: a :class:`~server.engine.codes.GameCode` and a
:class:`~server.engine.codes.RuleSet` for ``new_game`` and ``race_create``, an
:class:`~server.engine.game.Action` for ``action``. The exact wire format is documented in
``docs/protocol.md``; :func:`client_message_schema` gives it as a JSON Schema.

>>> message = parse_client_message('{"type": "action", "game_id": 7, "seq": 3, '
...                                '"action": "remove", "pos": 24, "id": 5}')
>>> message.action, message.game_id, message.seq, message.id
(Action(kind=<ActionKind.REMOVE: 'remove'>, pos=24), 7, 3, 5)
>>> parse_client_message('{"type": "new_game", "rules": "c"}').rules
<RuleSet.CLASSIC: 'C'>
>>> try:
...     parse_client_message('{"type": "resume", "game_id": "7", "id": "r1"}')
... except ProtocolError as exc:
...     exc.code, exc.message, exc.request_id
(<ErrorCode.INVALID_MESSAGE: 'invalid_message'>, 'resume: game_id: Expected `int`, got `str`', 'r1')
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta
from msgspec.structs import force_setattr

from server.engine.codes import GameCode, RuleSet
from server.engine.errors import EngineError
from server.engine.game import Action
from server.engine.layout import POSITION_COUNT
from server.errors import ErrorCode, ProtocolError
from server.protocol.refusals import MAX_REQUEST_ID_LENGTH, id_of, refusal

__all__ = [
    "MAX_ID",
    "MESSAGE_TYPES",
    "ActionRequest",
    "ClientMessage",
    "Hello",
    "Hint",
    "InviteToRace",
    "JoinDaily",
    "NewGame",
    "Ping",
    "ProtocolError",
    "QueueCancel",
    "QueueJoin",
    "RaceCreate",
    "RaceJoin",
    "RaceLeave",
    "RaceStart",
    "Resign",
    "Resume",
    "client_message_schema",
    "parse_client_message",
    "peek_request_id",
]

#: Largest id the database can hold (PostgreSQL bigint).
MAX_ID = 2**63 - 1

#: Longest string ``id``.

RequestId = int | Annotated[str, Meta(max_length=MAX_REQUEST_ID_LENGTH)]
RowId = Annotated[int, Meta(ge=1, le=MAX_ID)]
Position = Annotated[int, Meta(ge=0, le=POSITION_COUNT - 1)]
CodeText = Annotated[str, Meta(max_length=64)]
RulesLetter = Literal["E", "C", "e", "c"]
InviteCode = Annotated[str, Meta(min_length=1, max_length=20)]
ActionName = Literal["remove", "draw", "undo"]
_CHOICES: Final = {
    "action": "expected 'remove', 'draw' or 'undo'",
    "rules": "expected 'E', 'C', 'e' or 'c'",
}


class _Message(
    msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True, tag_field="type"
):
    """Common to every message: the optional ``id``; the ``type`` is the class's tag.

    A member that parsing turns into an engine value is declared with its wire type for the
    decoder (and the JSON Schema) and with its parsed type for type checkers; ``__post_init__``
    converts it, whether the message was decoded or built in code with either form.
    """

    id: RequestId | None = None


#: Games a ``hello`` may say the page holds, at most (as many as a welcome lists).
HELD_GAMES_MAX = 20


class HeldGame(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A game whose STATE a reconnecting page holds, at the ``seq`` of that STATE."""

    game_id: RowId
    seq: Annotated[int, Meta(ge=0)]


class Hello(_Message, tag="hello", frozen=True):
    """First message of a connection: authenticates with a player's bearer token. ``games``:
    the games whose STATE the page holds (a reconnection); those still unfinished at that
    ``seq`` are named in the welcome's ``unchanged`` instead of being sent again."""

    token: Annotated[str, Meta(min_length=1, max_length=200)]
    locale: Annotated[str, Meta(max_length=20)] | None = None
    error_help: bool = True
    games: Annotated[list[HeldGame], Meta(max_length=HELD_GAMES_MAX)] | None = None


def _rule_set(rules: str | None) -> RuleSet:
    return RuleSet.CLASSIC if rules in ("C", "c") else RuleSet.EASY


def _game_code(code: GameCode | str | None, request_id: int | str | None) -> GameCode | None:
    if code is None or isinstance(code, GameCode):
        return code
    try:
        return GameCode.parse(code)
    except EngineError as exc:
        raise ProtocolError(ErrorCode.BAD_CODE, str(exc), request_id) from None


class _OnADeal(_Message, frozen=True):
    """A message that names a deal: the game ``code`` (which carries its own rule set), or else
    a random deal under ``rules`` (Easy unless ``C`` or ``c``).

    Parsed, ``code`` is a :class:`GameCode` or None and ``rules`` a :class:`RuleSet`.

    Raises:
        ProtocolError: ``bad_code`` quoting a code that is not one.
    """

    if TYPE_CHECKING:
        code: GameCode | None = None
        rules: RuleSet = RuleSet.EASY
    else:
        code: CodeText | None = None
        rules: RulesLetter | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "code", _game_code(self.code, self.id))
        force_setattr(self, "rules", _rule_set(self.rules))


class NewGame(_OnADeal, tag="new_game", frozen=True):
    """Start a free-play game on a deal (see :class:`_OnADeal`)."""


class JoinDaily(_Message, tag="join_daily", frozen=True):
    """Create or resume the player's one attempt at today's daily challenge."""


class Resume(_Message, tag="resume", frozen=True):
    """Get the current state of one of the player's games; ``seq``: the newest seq this client
    was acknowledged for it (the stored game behind it is an error, not an older state)."""

    game_id: RowId
    seq: Annotated[int, Meta(ge=0)] | None = None


_WIRE_ACTIONS: Final[dict[tuple[str, int | None], Action]] = {
    **{("remove", pos): Action.remove(pos) for pos in range(POSITION_COUNT)},
    ("draw", None): Action.draw(),
    ("undo", None): Action.undo(),
}


class ActionRequest(_Message, tag="action", frozen=True):
    """Play a removal, a draw or an undo; ``seq`` is the number of actions the client has seen.

    ``action`` is ``remove`` (with ``pos``, 0..27), ``draw`` or ``undo`` (without ``pos``).
    Parsed, ``action`` is the engine's :class:`Action` and ``pos`` its position (None for a draw
    or an undo).

    Raises:
        ProtocolError: ``invalid_message`` when ``pos`` is missing for a removal or given for a
            draw or an undo.
    """

    game_id: RowId
    seq: Annotated[int, Meta(ge=0)]
    if TYPE_CHECKING:
        action: Action
    else:
        action: ActionName
    pos: Position | None = None

    def __post_init__(self) -> None:
        action: Action | str = self.action
        if isinstance(action, Action):
            if self.pos is not None and self.pos != action.pos:
                raise ProtocolError(
                    ErrorCode.INVALID_MESSAGE, f"'pos' {self.pos} is not the action's", self.id
                )
            force_setattr(self, "pos", action.pos)
            return
        engine = _WIRE_ACTIONS.get((action, self.pos))
        if engine is None:
            raise ProtocolError(
                ErrorCode.INVALID_MESSAGE, _action_problem(action, self.pos), self.id
            )
        force_setattr(self, "action", engine)


def _action_problem(action: str, pos: int | None) -> str:
    if action not in ("remove", "draw", "undo"):
        return f"action: Invalid enum value {action!r}, {_CHOICES['action']}"
    if action != "remove":
        return f"action {action!r} takes no 'pos'"
    if pos is None:
        return "action 'remove' needs 'pos' (0..27)"
    return f"pos: Expected `int` in 0..{POSITION_COUNT - 1}, got {pos!r}"


class Resign(_Message, tag="resign", frozen=True):
    """Give up a game."""

    game_id: RowId


class RaceCreate(_OnADeal, tag="race_create", frozen=True):
    """Open a race room on a deal (see :class:`_OnADeal`) with a time limit (``time_limit_s``,
    the server's default when absent); the sender hosts it."""

    time_limit_s: Annotated[int, Meta(ge=1, le=86_400)] | None = None
    #: The host opts into a rated race (docs/rules.md §4 "Ratings"): only on a random deal.
    rated: bool = False


class RaceJoin(_Message, tag="race_join", frozen=True):
    """Take a seat in a race room by its invite code, or watch it (``watch``, or once started);
    ``rated``: a racer taking a seat in a rated room opts into its rating (required there,
    refused in a room that is not rated)."""

    invite: InviteCode
    watch: bool = False
    rated: bool = False


class RaceLeave(_Message, tag="race_leave", frozen=True):
    """Leave a race room (in a running race, this resigns the player's game)."""

    invite: InviteCode


class RaceStart(_Message, tag="race_start", frozen=True):
    """The host starts the race: countdown, then the deal for everyone at once."""

    invite: InviteCode


class InviteToRace(_Message, tag="invite_to_race", frozen=True):
    """A racer seated in a lobby invites a player they follow who is online (docs/rules.md §4
    "Following"); the player is told (``race_invite``) on every socket of theirs."""

    invite: InviteCode
    player_id: RowId


class QueueJoin(_Message, tag="queue_join", frozen=True):
    """Wait for a quick race under ``rules`` (Easy unless ``C`` or ``c``): the server matches
    the sender by rating into a rated race (docs/rules.md §4 "Quick races"); answered with
    ``queue_waiting``, then ``queue_matched`` when matched.

    Parsed, ``rules`` is a :class:`RuleSet`.
    """

    if TYPE_CHECKING:
        rules: RuleSet = RuleSet.EASY
    else:
        rules: RulesLetter | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "rules", _rule_set(self.rules))


class QueueCancel(_Message, tag="queue_cancel", frozen=True):
    """Stop waiting for a quick race; answered with ``queue_cancelled``."""


class Hint(_Message, tag="hint", frozen=True):
    """Ask for the best next action (free play only; the game is marked as hinted)."""

    game_id: RowId


class Ping(_Message, tag="ping", frozen=True):
    """Keep-alive; answered with ``pong``."""


ClientMessage = (
    Hello
    | NewGame
    | JoinDaily
    | Resume
    | ActionRequest
    | Resign
    | RaceCreate
    | RaceJoin
    | RaceLeave
    | RaceStart
    | InviteToRace
    | QueueJoin
    | QueueCancel
    | Hint
    | Ping
)
MESSAGE_TYPES = (
    "hello",
    "new_game",
    "join_daily",
    "resume",
    "action",
    "resign",
    "race_create",
    "race_join",
    "race_leave",
    "race_start",
    "invite_to_race",
    "queue_join",
    "queue_cancel",
    "hint",
    "ping",
)

_DECODER: Final = msgspec.json.Decoder(ClientMessage)


class _IdOnly(msgspec.Struct):
    id: RequestId | None = None


_ID_DECODER: Final = msgspec.json.Decoder(_IdOnly)


def client_message_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a client message, generated from the message classes.

    Returns:
        A schema whose top level is an ``anyOf`` of the fifteen message types, with a
        ``discriminator`` on ``type`` mapping each ``type`` value to its definition under
        ``$defs`` (keyed by class name: ``Hello``, ``NewGame``, ...). Each definition lists its
        members with their JSON types and bounds, the required ones, and
        ``"additionalProperties": false``; ``ActionRequest`` adds, as ``if``/``then``/``else``,
        that ``pos`` is required with ``"action": "remove"`` and must be absent or null
        otherwise. One rule is checked by :func:`parse_client_message` only: a ``code`` must be
        a valid game code (``bad_code``).
    """
    schema = msgspec.json.schema(ClientMessage)
    schema["$defs"]["ActionRequest"]["if"] = {"properties": {"action": {"const": "remove"}}}
    schema["$defs"]["ActionRequest"]["then"] = {
        "required": ["pos"],
        "properties": {"pos": {"type": "integer"}},
    }
    schema["$defs"]["ActionRequest"]["else"] = {"properties": {"pos": {"type": "null"}}}
    return schema


def parse_client_message(raw: str | bytes) -> ClientMessage:
    """Parse one websocket text frame into a typed client message.

    Args:
        raw: the frame's text.

    Returns:
        One of :class:`Hello`, :class:`NewGame`, :class:`JoinDaily`, :class:`Resume`,
        :class:`ActionRequest`, :class:`Resign`, :class:`RaceCreate`, :class:`RaceJoin`,
        :class:`RaceLeave`, :class:`RaceStart`, :class:`InviteToRace`, :class:`Hint`,
        :class:`Ping`.

    Raises:
        ProtocolError: with code ``bad_json`` (not JSON), ``not_an_object``, ``unknown_type``
            (missing or unknown ``type``), ``invalid_message`` (a field missing, of the wrong
            type, out of range, or not allowed, or a string that is not valid Unicode, naming
            the field: ``"action: game_id: Expected `int`, got `str`"``) or ``bad_code`` (a
            ``code`` that is not a game code). Checked in that order; every code but the first
            two carries the message's ``id`` when it is a valid one.
    """
    try:
        return _DECODER.decode(raw)
    except (msgspec.DecodeError, UnicodeError, RecursionError) as exc:
        raise refusal(raw, exc, MESSAGE_TYPES, _CHOICES) from None


def peek_request_id(raw: str | bytes) -> int | str | None:
    """The ``id`` of a frame that will not be handled (say, rate-limited), so its error can
    echo it; None when the frame is not a JSON object with a valid ``id``."""
    try:
        return _ID_DECODER.decode(raw).id
    except msgspec.ValidationError:
        return None
    except (msgspec.DecodeError, UnicodeError, RecursionError):
        pass
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return id_of(data) if isinstance(data, dict) else None
