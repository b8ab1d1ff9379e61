"""What every server → client message shares: the base of the typed messages, the one
encoder of a frame's text, UTC times as the wire writes them, and the replies about no game or
room in particular (``error``, ``pong``).

Every message is a msgspec Struct whose ``type`` is its tag (a request's ``id``, when it had
one, comes last). The messages themselves are in :mod:`server.protocol.game_messages` (the
STATE and the replies about a game), :mod:`server.protocol.race_room` (the ROOM) and
:mod:`server.protocol.race_messages` (the race messages); :mod:`server.protocol.server` gathers
them all (``TypedReply``).
"""

from __future__ import annotations

import datetime as dt
import json

import msgspec

from server.errors import ErrorCode


class Message(msgspec.Struct, frozen=True, omit_defaults=True, tag_field="type"):
    """A typed server message, as the outbox takes it: its ``type`` is the class's tag, written
    first; ``id`` (the request's, when it had one) is left out when None."""


#: One encoder for every frame (msgspec: compact JSON, UTF-8 characters kept).
_ENCODER = msgspec.json.Encoder()


def encode(message: Message) -> str:
    """The text frame for a message (compact JSON, UTF-8 characters kept; a string that is
    not valid Unicode, such as a lone surrogate echoed in an ``id``, is escaped instead)."""
    try:
        return _ENCODER.encode(message).decode()
    except UnicodeEncodeError:
        return json.dumps(msgspec.to_builtins(message), separators=(",", ":"))


def iso_time(when: dt.datetime | None) -> str | None:
    """A UTC time as ISO 8601 with a ``Z`` (``2026-03-14T12:00:00Z``), or None."""
    return None if when is None else when.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


class Ban(msgspec.Struct, frozen=True):
    """A ban from ranked play, as its player is told: since when (a UTC date, ``YYYY-MM-DD``)
    and why (the moderator's words)."""

    since: str
    reason: str


class ErrorReply(Message, frozen=True, tag="error"):
    """A request could not be handled: ``code`` (machine-readable) and ``message``;
    ``retry_after_ms`` only with ``server_busy`` (nothing was done; try again after it);
    ``ban`` only with ``banned`` (for the page to say in the player's language)."""

    code: ErrorCode
    message: str
    retry_after_ms: int | None = None
    ban: Ban | None = None
    id: int | str | None = None


class Pong(Message, frozen=True, tag="pong"):
    """Reply to ``ping``."""

    id: int | str | None = None


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
    return ErrorReply(ErrorCode.BANNED, message, ban=Ban(since.isoformat(), reason), id=request_id)


def pong(request_id: int | str | None) -> Pong:
    """Reply to ``ping``."""
    return Pong(request_id)


__all__ = [
    "Ban",
    "ErrorReply",
    "Message",
    "Pong",
    "banned",
    "busy",
    "encode",
    "error",
    "iso_time",
    "pong",
]
