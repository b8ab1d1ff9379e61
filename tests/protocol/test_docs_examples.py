"""Every example in docs/protocol.md agrees with the generated schemas.

Websocket frames: a client frame (``→``) validates against the client message schema exactly
when the server did not refuse it as unreadable (the reply shown after it is no ``bad_json``,
``not_an_object``, ``unknown_type`` or ``invalid_message`` error), and every server frame
(``←``) validates against the server message schema. HTTP exchanges (§12): each answer's body
and the headers shown validate against the OpenAPI document's answer for that route and status,
and the body of a request that was accepted against the operation's request schema (a body
the text leaves out, "(… not shown)", is not checked).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from server.errors import ErrorCode
from server.protocol.client import client_message_schema
from server.protocol.server import server_message_schema
from tests.contract import CONTRACT

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
TEXT = PROTOCOL.read_text(encoding="utf-8")
#: The errors of a frame the server could not read as a message: the schema refuses it too.
UNREADABLE = {
    ErrorCode.BAD_JSON,
    ErrorCode.NOT_AN_OBJECT,
    ErrorCode.UNKNOWN_TYPE,
    ErrorCode.INVALID_MESSAGE,
}
CLIENT = Draft202012Validator(client_message_schema())
SERVER = Draft202012Validator(server_message_schema())


def _line(offset: int) -> int:
    return TEXT.count("\n", 0, offset) + 1


def _blocks(language: str) -> list[tuple[int, str]]:
    """The fenced code blocks of a language: (the offset of their text, their text)."""
    return [(m.start(1), m[1]) for m in re.finditer(rf"```{language}\n(.*?)```", TEXT, re.DOTALL)]


# ------------------------------------------------------------------------------ websocket


@dataclass(frozen=True)
class Frame:
    """One websocket frame of an example."""

    line: int
    outgoing: bool  # → (client to server)
    text: str  # from the frame's first character to the end of its line
    value: Any  # the parsed JSON, or None when it does not parse
    elided: bool  # the example leaves part of the frame out (…)


def _frames() -> list[list[Frame]]:
    """The frames of every code block, in order (a block is one exchange)."""
    decoder = json.JSONDecoder()
    exchanges = []
    for start, block in _blocks("[a-z]*"):
        frames = []
        for m in re.finditer(r"([→←])[ \t]*(?=[\[{])", block):
            line_end = block.find("\n", m.end())
            text = block[m.end() : line_end if line_end >= 0 else None]
            try:
                value, _ = decoder.raw_decode(block, m.end())
            except json.JSONDecodeError:
                value = None
            frames.append(Frame(_line(start + m.start()), m[1] == "→", text, value, "…" in text))
        exchanges.append(frames)
    return exchanges


FRAMES = _frames()


def _reply_to(frames: list[Frame], index: int) -> Frame | None:
    """The first server frame after ``frames[index]`` in its exchange."""
    return next((f for f in frames[index + 1 :] if not f.outgoing), None)


def _unreadable(reply: Frame | None) -> bool:
    value = reply.value if reply is not None else None
    return (
        isinstance(value, dict)
        and value.get("type") == "error"
        and value.get("code") in {code.value for code in UNREADABLE}
    )


def _not_unicode(reply: Frame | None) -> bool:
    """The server refused a string that is not valid Unicode (a lone surrogate): a rule of
    JSON texts (RFC 8259 §8.2), not one a JSON Schema can state."""
    return reply is not None and "not valid Unicode" in str(reply.value)


def test_the_examples_are_found() -> None:
    frames = [f for exchange in FRAMES for f in exchange]
    assert sum(f.outgoing for f in frames) > 150
    assert sum(not f.outgoing for f in frames) > 200


def test_every_server_frame_validates_against_the_server_message_schema() -> None:
    problems = []
    for frame in (f for exchange in FRAMES for f in exchange if not f.outgoing):
        if frame.value is None:
            problems.append(f"line {frame.line}: not JSON: {frame.text[:80]}")
            continue
        problems += [
            f"line {frame.line}: {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in SERVER.iter_errors(frame.value)
        ]
    assert problems == []


def test_every_client_frame_validates_unless_the_server_could_not_read_it() -> None:
    problems = []
    checked = refused = 0
    for exchange in FRAMES:
        for index, frame in enumerate(exchange):
            if not frame.outgoing:
                continue
            reply = _reply_to(exchange, index)
            if frame.value is None:
                # Not JSON: on purpose (answered bad_json), or shortened in the text.
                if not frame.elided and not _unreadable(reply):
                    problems.append(f"line {frame.line}: not JSON: {frame.text[:80]}")
                continue
            errors = [e.message[:120] for e in CLIENT.iter_errors(frame.value)]
            if _unreadable(reply):
                refused += 1
                if not errors and not _not_unicode(reply):
                    problems.append(
                        f"line {frame.line}: the server refused {frame.text[:80]} as "
                        f"{reply.value['code'] if reply and reply.value else '?'}, "
                        "but the schema takes it"
                    )
            else:
                checked += 1
                problems += [f"line {frame.line}: {message}" for message in errors]
    assert problems == []
    assert checked > 150 and refused > 10


# ------------------------------------------------------------------------------ HTTP


@dataclass(frozen=True)
class Exchange:
    """One HTTP example: the request and the answer as the text shows them."""

    line: int
    method: str
    path: str
    request_body: str
    status: int
    headers: dict[str, str]
    body: str


def _exchanges() -> list[Exchange]:
    exchanges = []
    for start, block in _blocks("http"):
        request, _, answer = block.partition("\nHTTP/1.1 ")
        request_line, _, request_rest = request.partition("\n")
        method, target, _version = request_line.split(" ")
        _request_headers, _, request_body = request_rest.partition("\n\n")
        status_line, _, answer_rest = answer.partition("\n")
        head, _, body = answer_rest.partition("\n\n")
        headers = dict(line.split(": ", 1) for line in head.splitlines() if line)
        exchanges.append(
            Exchange(
                _line(start),
                method,
                target.split("?", 1)[0],
                request_body.strip(),
                int(status_line.split(" ", 1)[0]),
                headers,
                body.strip(),
            )
        )
    return exchanges


EXCHANGES = _exchanges()


def test_the_http_examples_are_found() -> None:
    assert len(EXCHANGES) > 60
    assert {e.method for e in EXCHANGES} >= {"GET", "POST"}


@pytest.mark.parametrize("exchange", EXCHANGES, ids=lambda e: f"line{e.line}")
def test_every_http_example_answers_as_the_openapi_document_says(exchange: Exchange) -> None:
    media_type = exchange.headers.get("Content-Type", "").split(";", 1)[0]
    body: bytes | None = exchange.body.encode() if media_type == "application/json" else b""
    if re.fullmatch(r"\(.*not shown\)", exchange.body):
        body = None  # the text leaves the body out
    problems = CONTRACT.problems(exchange.method, exchange.path, exchange.status, media_type, body)
    assert problems == []
    template = CONTRACT.template(exchange.path)
    op = None if template is None else CONTRACT.operation(exchange.method, template)
    if op is None:
        return
    response = op["responses"][str(exchange.status)]
    for name, value in exchange.headers.items():
        declared = response.get("headers", {}).get(name)
        if name == "Content-Type":
            assert media_type in response.get("content", {}), name
        elif declared is not None:
            header = CONTRACT.document["components"]["headers"][declared["$ref"].split("/")[-1]]
            assert list(Draft202012Validator(header["schema"]).iter_errors(value)) == [], name
    if 200 <= exchange.status < 300 and "requestBody" in op:
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        pointer = "/paths/" + template.replace("~", "~0").replace("/", "~1")  # type: ignore[union-attr]
        validator = CONTRACT.validator(
            f"{pointer}/{exchange.method.lower()}/requestBody/content/application~1json/schema"
        )
        assert schema and list(validator.iter_errors(json.loads(exchange.request_body))) == []
