"""Client → server websocket messages and their single parse point (``parse_client_message``).

Every message is a JSON object with a ``type``; a request may carry an ``id`` (a string of at most
64 characters or an integer) that the reply echoes. Anything that is not a valid message becomes a
:class:`ProtocolError` naming what was wrong; the rest of the server only sees typed values.
The exact wire format is documented in ``docs/protocol.md``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from server.engine.codes import GameCode, RuleSet
from server.engine.errors import EngineError
from server.engine.game import Action, ActionKind

#: Largest id the database can hold (PostgreSQL bigint).
MAX_ID = 2**63 - 1

RequestId = StrictInt | Annotated[StrictStr, Field(max_length=64)]


class ProtocolError(ValueError):
    """A client message that cannot be accepted.

    Attributes:
        code: machine-readable reason: ``bad_json``, ``not_an_object``, ``unknown_type`` or
            ``invalid_message``.
        message: a human-readable explanation naming the offending field or value.
        request_id: the message's ``id`` when it could be read, so the error can echo it.
    """

    def __init__(self, code: str, message: str, request_id: int | str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: RequestId | None = None


class Hello(_Message):
    """First message of a connection: authenticates with a player's bearer token."""

    type: Literal["hello"]
    token: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    locale: Annotated[StrictStr, Field(max_length=20)] | None = None
    error_help: StrictBool = True


class NewGame(_Message):
    """Start a free-play game, of the given game code or a random deal."""

    type: Literal["new_game"]
    code: Annotated[StrictStr, Field(max_length=64)] | None = None
    rules: Literal["E", "C", "e", "c"] | None = None

    def rule_set(self) -> RuleSet:
        """The rule set for a random deal (Easy unless ``rules`` says ``C``)."""
        return RuleSet.CLASSIC if (self.rules or "E").upper() == "C" else RuleSet.EASY

    def game_code(self) -> GameCode | None:
        """The parsed game code, or None for a random deal.

        Raises:
            ProtocolError: ``bad_code`` naming the bad code.
        """
        return _parse_code(self.code, self.id)


def _parse_code(text: str | None, request_id: int | str | None) -> GameCode | None:
    if text is None:
        return None
    try:
        return GameCode.parse(text)
    except EngineError as exc:
        raise ProtocolError("bad_code", str(exc), request_id) from None


class JoinDaily(_Message):
    """Create or resume the player's one attempt at today's daily challenge."""

    type: Literal["join_daily"]


class Resume(_Message):
    """Get the current state of one of the player's games."""

    type: Literal["resume"]
    game_id: Annotated[StrictInt, Field(ge=1, le=MAX_ID)]


class ActionRequest(_Message):
    """Play a removal, a draw or an undo; ``seq`` is the number of actions the client has seen."""

    type: Literal["action"]
    game_id: Annotated[StrictInt, Field(ge=1, le=MAX_ID)]
    seq: Annotated[StrictInt, Field(ge=0)]
    action: Literal["remove", "draw", "undo"]
    pos: Annotated[StrictInt, Field(ge=0, le=27)] | None = None

    def engine_action(self) -> Action:
        """The engine action this request asks for.

        Raises:
            ProtocolError: ``invalid_message`` when ``pos`` is missing for a removal or given
                for a draw or an undo.
        """
        kind = ActionKind(self.action)
        if kind is ActionKind.REMOVE:
            if self.pos is None:
                raise ProtocolError(
                    "invalid_message", "action 'remove' needs 'pos' (0..27)", self.id
                )
            return Action.remove(self.pos)
        if self.pos is not None:
            raise ProtocolError(
                "invalid_message", f"action {self.action!r} takes no 'pos'", self.id
            )
        return Action.draw() if kind is ActionKind.DRAW else Action.undo()


class Resign(_Message):
    """Give up a game."""

    type: Literal["resign"]
    game_id: Annotated[StrictInt, Field(ge=1, le=MAX_ID)]


class RaceCreate(_Message):
    """Open a race room (a random deal unless ``code`` is given); the sender hosts it."""

    type: Literal["race_create"]
    code: Annotated[StrictStr, Field(max_length=64)] | None = None
    rules: Literal["E", "C", "e", "c"] | None = None
    time_limit_s: Annotated[StrictInt, Field(ge=1, le=86_400)] | None = None

    def rule_set(self) -> RuleSet:
        """The rule set for a random deal (Easy unless ``rules`` says ``C``)."""
        return RuleSet.CLASSIC if (self.rules or "E").upper() == "C" else RuleSet.EASY

    def game_code(self) -> GameCode | None:
        """The parsed game code, or None for a random deal.

        Raises:
            ProtocolError: ``bad_code`` naming the bad code.
        """
        return _parse_code(self.code, self.id)


InviteCode = Annotated[StrictStr, Field(min_length=1, max_length=20)]


class RaceJoin(_Message):
    """Take a seat in a race room by its invite code, or watch it (``watch``, or once started)."""

    type: Literal["race_join"]
    invite: InviteCode
    watch: StrictBool = False


class RaceLeave(_Message):
    """Leave a race room (in a running race, this resigns the player's game)."""

    type: Literal["race_leave"]
    invite: InviteCode


class RaceStart(_Message):
    """The host starts the race: countdown, then the deal for everyone at once."""

    type: Literal["race_start"]
    invite: InviteCode


class Hint(_Message):
    """Ask for the best next action (free play only; the game is marked as hinted)."""

    type: Literal["hint"]
    game_id: Annotated[StrictInt, Field(ge=1, le=MAX_ID)]


class Ping(_Message):
    """Keep-alive; answered with ``pong``."""

    type: Literal["ping"]


ClientMessage = Annotated[
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
    | Hint
    | Ping,
    Field(discriminator="type"),
]
_ADAPTER: TypeAdapter[ClientMessage] = TypeAdapter(ClientMessage)
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
    "hint",
    "ping",
)


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        loc = ".".join(str(p) for p in item["loc"][1:]) or "message"
        parts.append(f"{loc}: {item['msg']}")
    return "; ".join(parts)


def parse_client_message(raw: str | bytes) -> ClientMessage:
    """Parse one websocket text frame into a typed client message.

    Args:
        raw: the frame's text.

    Returns:
        One of :class:`Hello`, :class:`NewGame`, :class:`JoinDaily`, :class:`Resume`,
        :class:`ActionRequest`, :class:`Resign`, :class:`RaceCreate`, :class:`RaceJoin`,
        :class:`RaceLeave`, :class:`RaceStart`, :class:`Hint`, :class:`Ping`.

    Raises:
        ProtocolError: with code ``bad_json`` (not JSON), ``not_an_object``, ``unknown_type``
            (missing or unknown ``type``) or ``invalid_message`` (a field missing, of the wrong
            type, out of range, or not allowed), naming what was wrong.
    """
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError("bad_json", f"message is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("not_an_object", "message must be a JSON object with a 'type'")
    request_id = _id_of(data)
    kind = data.get("type")
    if kind not in MESSAGE_TYPES:
        shown = kind if isinstance(kind, str) and len(kind) <= 40 else None
        what = f"unknown message type {shown!r}" if shown is not None else "missing message 'type'"
        raise ProtocolError(
            "unknown_type", f"{what}; expected one of {', '.join(MESSAGE_TYPES)}", request_id
        )
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise ProtocolError("invalid_message", f"{kind}: {_describe(exc)}", request_id) from None


def _id_of(data: dict[str, Any]) -> int | str | None:
    """A message's ``id`` when it is a valid one (an int, or a string of at most 64)."""
    rid = data.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    return rid if not isinstance(rid, str) or len(rid) <= 64 else None


def peek_request_id(raw: str | bytes) -> int | str | None:
    """The ``id`` of a frame that will not be handled (say, rate-limited), so its error can
    echo it; None when the frame is not a JSON object with a valid ``id``."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return _id_of(data) if isinstance(data, dict) else None
