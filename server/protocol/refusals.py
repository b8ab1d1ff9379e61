"""Why a client frame was refused: the :class:`~server.errors.ProtocolError` that names what was
wrong, found in the order of the checks of :func:`server.protocol.client.parse_client_message`
(not JSON, not an object, an unknown ``type``, a field missing, of the wrong type, out of range
or not allowed, a string that is not valid Unicode), from the decoder's own message where it
has one."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from server.errors import ErrorCode, ProtocolError

#: Longest string ``id`` a request may carry (longer ones are not echoed).
MAX_REQUEST_ID_LENGTH = 64


def refusal(
    raw: str | bytes,
    error: Exception,
    message_types: Sequence[str],
    choices: Mapping[str, str],
) -> ProtocolError:
    """The error for a frame the decoder refused, found in the order of the checks.

    Args:
        raw: the frame's text.
        error: what the decoder raised (a msgspec error, a UnicodeError or a RecursionError).
        message_types: every known message ``type``, in the order the error lists them.
        choices: for a field that takes one of a few values, the sentence naming them.

    Returns:
        A :class:`ProtocolError` with ``bad_json``, ``not_an_object``, ``unknown_type`` or
        ``invalid_message`` (naming the field), carrying the message's ``id`` when it is a
        valid one (from ``unknown_type`` on); a ``ProtocolError`` a field's own check raised
        (``bad_code``) is returned as it is.
    """
    try:
        data: Any = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return ProtocolError(ErrorCode.BAD_JSON, f"message is not valid JSON: {exc}")
    if not isinstance(data, dict):
        return ProtocolError(ErrorCode.NOT_AN_OBJECT, "message must be a JSON object with a 'type'")
    request_id = id_of(data)
    kind = data.get("type")
    if kind not in message_types:
        shown = kind if isinstance(kind, str) and len(kind) <= 40 else None
        what = f"unknown message type {shown!r}" if shown is not None else "missing message 'type'"
        return ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"{what}; expected one of {', '.join(message_types)}",
            request_id,
        )
    cause = error.__cause__
    if isinstance(cause, ProtocolError):
        return cause
    if isinstance(error, msgspec.ValidationError):
        detail = _describe(str(error), choices)
    else:
        detail = _not_json_value(data) or "message is not valid"
    return ProtocolError(ErrorCode.INVALID_MESSAGE, f"{kind}: {detail}", request_id)


_AT = re.compile(r"^(?P<text>.*) - at `\$\.?(?P<path>.*)`$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<field>.*)`$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>.*)`$", re.DOTALL)


def _describe(error: str, choices: Mapping[str, str]) -> str:
    """``field: what was wrong`` for one of msgspec's validation messages; a field inside a
    member is named by its path (``games[0].seq: required field missing``)."""
    path, text = "", error
    if match := _AT.match(error):
        path, text = match["path"], match["text"]
    if match := _MISSING.match(text):
        return f"{_member(path, match['field'])}: required field missing"
    if match := _UNKNOWN.match(text):
        return f"{_member(path, match['field'])}: unknown field, not allowed"
    if text.startswith("Invalid enum value") and path in choices:
        text = f"{text}, {choices[path]}"
    return f"{path}: {text}" if path else text


def _member(path: str, field: str) -> str:
    """The path of ``field`` in the object at ``path`` (the message itself when empty)."""
    return f"{path}.{field}" if path else field


def _not_json_value(data: dict[str, Any]) -> str | None:
    """``field: what was wrong`` for the first member the standard library reads but strict JSON
    refuses: a string holding a lone surrogate, or NaN or Infinity."""
    for key, value in data.items():
        if _lone_surrogate(key):
            return f"{key!r}: a member name is not valid Unicode (a lone surrogate)"
        if _lone_surrogate(value):
            return f"{key}: a string is not valid Unicode (a lone surrogate)"
        if _non_finite(value):
            return f"{key}: NaN and Infinity are not JSON numbers"
    return None


def _lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    return False


def _non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_non_finite(item) for item in value)
    if isinstance(value, dict):
        return any(_non_finite(item) for item in value.values())
    return False


def id_of(data: dict[str, Any]) -> int | str | None:
    """A message's ``id`` when it is a valid one (an int, or a string of at most 64)."""
    rid = data.get("id")
    if isinstance(rid, bool) or not isinstance(rid, int | str):
        return None
    return rid if not isinstance(rid, str) or len(rid) <= MAX_REQUEST_ID_LENGTH else None
