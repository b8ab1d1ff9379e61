"""REST bodies and the API's OpenAPI 3.1 document.

Every body the REST API sends or reads is a msgspec Struct here (the race room is the ROOM of
:mod:`server.protocol.server`); the web layer builds them and encodes them with
:func:`encode`. :func:`openapi_document` writes the OpenAPI document from a list of
:class:`Operation` (the web layer's route table, the same one that registers the routes) and
the JSON Schemas msgspec generates from these types, so the document cannot drift from the
bodies. The wire format is documented in ``docs/protocol.md`` §12.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from server.engine.actions import ActionKind, Status
from server.engine.codes import DealVersion, RuleSet
from server.errors import ErrorCode
from server.protocol.client import client_message_schema
from server.protocol.server import RoomState, server_message_schema

# ------------------------------------------------------------------------------ value types

Card = Annotated[
    str,
    Meta(pattern="^[A2-9TJQK][CDHS]$", description="a card: rank (A 2-9 T J Q K), then suit"),
]
Timestamp = Annotated[
    dt.datetime,
    Meta(
        tz=True,
        extra_json_schema={"pattern": "Z$"},
        description="a UTC time, ISO 8601 with a Z (2026-11-29T14:51:06.833656Z)",
    ),
]
Date = Annotated[dt.date, Meta(description="a UTC date, YYYY-MM-DD")]
RowId = Annotated[int, Meta(ge=1)]
Count = Annotated[int, Meta(ge=0)]
GameModeName = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["free", "daily", "race"]},
        description="free play, the daily challenge, or a race",
    ),
]
RankedStatus = Annotated[
    str,
    Meta(
        extra_json_schema={"enum": ["won", "blocked"]},
        description="how the game ended (only won and blocked games are ranked)",
    ),
]

# ------------------------------------------------------------------------------ bodies


class NewPlayer(msgspec.Struct, frozen=True):
    """``POST /api/v1/players``: the name to register (other members are ignored). The name is
    NFKC-normalised, trimmed and its inner spaces collapsed, and must then be 2-24 letters,
    digits and `` _-.'``, starting with a letter or a digit, not taken nor like a taken one
    (docs/protocol.md §12.2)."""

    name: Annotated[str, Meta(examples=["Alice"])]


Token = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        description="a bearer token (shown only once; the server keeps its SHA-256)",
        examples=["fvu5L_V-ny368EFo9IxOQivENR4Y88TJWugU1xxBN-8"],
    ),
]
RecoveryCode = Annotated[
    str,
    Meta(
        pattern="^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){6}$",
        description="a recovery code: 28 symbols of Crockford's base32 (no I, L, O, U) in "
        "groups of four; shown only once, the server keeps its SHA-256",
        examples=["7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF"],
    ),
]


class PlayerCreated(msgspec.Struct, frozen=True):
    """A new player, their bearer token and their recovery code (both shown only here)."""

    id: RowId
    name: str
    token: Token
    recovery_code: RecoveryCode


class SignIn(msgspec.Struct, frozen=True):
    """``POST /api/v1/sessions``: a player's name (read as registration reads it: any case,
    look-alike letters) and recovery code (any case, hyphens and spaces optional, ``O`` for
    ``0``, ``I`` or ``L`` for ``1``) (docs/protocol.md §12.13)."""

    name: Annotated[str, Meta(max_length=200, examples=["Alice"])]
    recovery_code: Annotated[
        str, Meta(max_length=200, examples=["7K2M-9XQD-R4TW-HN6B-Y3EA-0PZC-V8GF"])
    ]


class SignedIn(msgspec.Struct, frozen=True):
    """A device signed in with a recovery code: the player and the device's own new token
    (shown only here)."""

    id: RowId
    name: str
    token: Token


class NewToken(msgspec.Struct, frozen=True):
    """The caller's new bearer token (shown only here); the one it replaces no longer works."""

    token: Token


class NewRecoveryCode(msgspec.Struct, frozen=True):
    """The player's new recovery code (shown only here); the one it replaces no longer
    works."""

    recovery_code: RecoveryCode


class SignedOut(msgspec.Struct, frozen=True):
    """How many of the player's devices (bearer tokens) were signed out."""

    signed_out: Count


class Player(msgspec.Struct, frozen=True):
    """A player: id and display name."""

    id: RowId
    name: str


class LineStep(msgspec.Struct, frozen=True):
    """One action of an optimal line: the card removed or drawn (``pos`` for a removal)."""

    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card


class DailyChallenge(msgspec.Struct, frozen=True):
    """A date's daily challenge. ``code`` and ``line`` are null while the date is open;
    ``par`` (the best final score perfect play reaches) is null without the solver."""

    date: Date
    rules: RuleSet
    code: str | None
    is_open: bool
    players: Count
    ranked: Count
    closes_at: Timestamp
    par: int | None
    line: list[LineStep] | None


class LeaderboardEntry(msgspec.Struct, frozen=True):
    """One row of a daily leaderboard; entries equal on score, moves and elapsed time share a
    rank."""

    rank: RowId
    player_id: RowId
    name: str
    score: int
    moves: Count
    undos: Count
    elapsed_ms: Count
    status: RankedStatus
    finished_at: Timestamp


class LeaderboardPage(msgspec.Struct, frozen=True):
    """A keyset page of a date's leaderboard; ``next_cursor`` is null on the last page."""

    date: Date
    entries: list[LeaderboardEntry]
    next_cursor: str | None


class LeaderboardWindow(msgspec.Struct, frozen=True):
    """The entries around one player's: up to ``radius`` either side."""

    date: Date
    player_id: RowId
    entries: list[LeaderboardEntry]


class GameRecordAction(msgspec.Struct, frozen=True):
    """One row of a game's action log: the card removed, drawn or put back, and the score
    after."""

    seq: RowId
    action: ActionKind
    pos: Annotated[int, Meta(ge=0, le=27)] | None
    card: Card
    score_after: int
    at: Timestamp


class GameRecord(msgspec.Struct, frozen=True):
    """A stored game. ``code`` is null and ``actions`` absent while they are not revealed to
    the viewer (docs/protocol.md §12.7)."""

    id: RowId
    player: Player
    mode: GameModeName
    rules: RuleSet
    code: str | None
    deal_version: DealVersion
    daily_date: Date | None
    status: Status
    score: int
    moves: Count
    undos: Count
    seq: Count
    elapsed_ms: Count | None
    created_at: Timestamp
    finished_at: Timestamp | None
    hinted: bool
    par: int | None
    par_share: float | None
    actions: list[GameRecordAction] | UnsetType = UNSET


class Health(msgspec.Struct, frozen=True):
    """``/healthz`` (200 while the process serves) and ``/readyz`` (503 while the database
    does not answer): the process's and the database's state."""

    status: Annotated[str, Meta(extra_json_schema={"enum": ["ok", "unavailable"]})]
    database: Annotated[str, Meta(extra_json_schema={"enum": ["ok", "unreachable"]})]


class ErrorDetail(msgspec.Struct, frozen=True):
    """What went wrong: a stable machine-readable ``code`` and an English ``message`` naming
    what was wrong."""

    code: ErrorCode
    message: str


class ErrorBody(msgspec.Struct, frozen=True):
    """Every REST error (docs/protocol.md §12.1)."""

    error: ErrorDetail


def error_body(code: ErrorCode, message: str) -> ErrorBody:
    """The body of an error answer."""
    return ErrorBody(ErrorDetail(code, message))


#: Every body the REST API sends.
Body = (
    PlayerCreated
    | SignedIn
    | NewToken
    | NewRecoveryCode
    | SignedOut
    | Player
    | DailyChallenge
    | LeaderboardPage
    | LeaderboardWindow
    | GameRecord
    | RoomState
    | Health
    | ErrorBody
)


def encode(body: Body) -> bytes:
    """A body's JSON as the REST API sends it: on one line, with ``", "`` and ``": "``
    separators and every non-ASCII character escaped (docs/protocol.md §12.1). msgspec turns
    the Struct into JSON values (dates, times, enums, absent members); the standard library
    lays them out."""
    return json.dumps(msgspec.to_builtins(body)).encode()


# ------------------------------------------------------------------------------ the document


class Auth(StrEnum):
    """What an operation asks of the ``Authorization`` header."""

    NONE = "none"
    BEARER = "bearer"
    OPTIONAL_BEARER = "optional_bearer"


@dataclass(frozen=True, slots=True)
class Parameter:
    """A path or query parameter: its name, where it goes, and its type (a type msgspec can
    describe, with its limits as :class:`msgspec.Meta`)."""

    name: str
    location: Literal["path", "query"]
    type: Any
    description: str
    default: Any = None


@dataclass(frozen=True, slots=True)
class Header:
    """A response header and its value's JSON Schema; the document keeps it once, under
    ``components/headers/<key>`` (``key``: the name unless given)."""

    name: str
    description: str
    schema: dict[str, Any]
    required: bool = True
    key: str = ""

    @property
    def component(self) -> str:
        """Its name under ``components/headers``."""
        return self.key or self.name


@dataclass(frozen=True, slots=True)
class Answer:
    """One documented response of an operation: its status, its body's type (None: no body)
    and, for an error, the codes it may carry."""

    status: int
    description: str
    body: Any = None
    codes: tuple[ErrorCode, ...] = ()
    headers: tuple[Header, ...] = ()
    media_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Operation:
    """One REST route as the document describes it."""

    method: str
    path: str
    operation_id: str
    summary: str
    description: str
    tag: str
    answers: tuple[Answer, ...]
    parameters: tuple[Parameter, ...] = ()
    request: Any = None
    auth: Auth = Auth.NONE


def errors(status: int, *codes: ErrorCode, headers: tuple[Header, ...] = ()) -> Answer:
    """An error answer: ``status`` with an :class:`ErrorBody` carrying one of ``codes``."""
    listed = ", ".join(f"`{code.value}`" for code in codes)
    return Answer(status, f"error: {listed}", ErrorBody, codes, headers)


#: Where the document's schemas are.
REF_TEMPLATE: Final = "#/components/schemas/{name}"


def openapi_document(
    operations: Sequence[Operation],
    *,
    title: str,
    version: str,
    description: str,
    common_headers: Sequence[Header] = (),
    websocket_path: str | None = None,
) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``operations``.

    Every body, parameter and header schema is generated by msgspec from the types the
    operations name (:func:`msgspec.json.schema_components`, references under
    ``#/components/schemas``). An error answer's schema is :class:`ErrorBody` with ``code``
    narrowed to the codes the answer lists. ``common_headers`` are added to every answer
    (a header whose name an answer already declares is left to the answer).

    With ``websocket_path``, the document's ``x-websocket`` member holds the JSON Schemas
    (draft 2020-12) of the websocket's client and server messages, each a resource of its own
    (``$id``), so that their ``#/$defs`` references resolve inside them.
    """
    body_types: list[Any] = []
    for op in operations:
        if op.request is not None:
            body_types.append(op.request)
        body_types.extend(a.body for a in op.answers if a.body is not None)
        body_types.extend(p.type for p in op.parameters)
    unique = list(dict.fromkeys(body_types))
    refs, components = msgspec.json.schema_components(unique, ref_template=REF_TEMPLATE)
    schema_of = dict(zip(unique, refs, strict=True))

    headers: dict[str, dict[str, Any]] = {}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        item: dict[str, Any] = {
            "operationId": op.operation_id,
            "summary": op.summary,
            "description": op.description,
            "tags": [op.tag],
        }
        if op.parameters:
            item["parameters"] = [_parameter(p, schema_of[p.type]) for p in op.parameters]
        if op.request is not None:
            item["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": schema_of[op.request]}},
            }
        item["security"] = {
            Auth.NONE: [],
            Auth.BEARER: [{"bearer": []}],
            Auth.OPTIONAL_BEARER: [{}, {"bearer": []}],
        }[op.auth]
        item["responses"] = {
            str(a.status): _response(a, schema_of, common_headers, headers) for a in op.answers
        }
        paths.setdefault(op.path, {})[op.method.lower()] = item

    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "schemas": components,
            "headers": dict(sorted(headers.items())),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a token POST /api/v1/players or POST /api/v1/sessions returned",
                }
            },
        },
        "tags": [{"name": tag} for tag in dict.fromkeys(op.tag for op in operations)],
    }
    if websocket_path is not None:
        document["x-websocket"] = {
            "path": websocket_path,
            "client_messages": {"$id": "urn:tripeaks:ws:client", **client_message_schema()},
            "server_messages": {"$id": "urn:tripeaks:ws:server", **server_message_schema()},
        }
    return document


def _parameter(parameter: Parameter, schema: dict[str, Any]) -> dict[str, Any]:
    if parameter.default is not None:
        schema = {**schema, "default": parameter.default}
    return {
        "name": parameter.name,
        "in": parameter.location,
        "required": parameter.location == "path",
        "description": parameter.description,
        "schema": schema,
    }


def _response(
    answer: Answer,
    schema_of: dict[Any, dict[str, Any]],
    common: Sequence[Header],
    components: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    response: dict[str, Any] = {"description": answer.description}
    own = {h.name.lower() for h in answer.headers}
    headers = [*answer.headers, *(h for h in common if h.name.lower() not in own)]
    for h in headers:
        described = {"description": h.description, "required": h.required, "schema": h.schema}
        if components.setdefault(h.component, described) != described:
            raise ValueError(f"two headers are described as {h.component!r}")
        response.setdefault("headers", {})[h.name] = {"$ref": f"#/components/headers/{h.component}"}
    if answer.body is not None:
        schema = schema_of[answer.body]
        if answer.codes:
            schema = {
                "allOf": [schema],
                "properties": {
                    "error": {"properties": {"code": {"enum": [c.value for c in answer.codes]}}}
                },
            }
        response["content"] = {answer.media_type: {"schema": schema}}
    return response
