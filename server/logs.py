"""Logging: plain text or one JSON object per line (``TRIPEAKS_LOG_FORMAT``), each line carrying
what it is about.

Every module logs through the standard library (``logging.getLogger(__name__)``); the handler
set up by :func:`configure_logging` renders each record through structlog's processors. A line
logged while a request or a websocket message is being served carries the fields bound for it
with :func:`log_context` — ``request_id`` (a REST request's ``X-Request-Id``, or a websocket
message's ``id``), ``connection_id``, ``player_id``, ``game_id`` — where they are known; a
worker of ``serve --workers`` adds ``worker``.

JSON shape: ``{"event": str, "level": "info"|…, "logger": str, "timestamp": ISO 8601 UTC,
"exception"?: str, <bound fields>…}``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from contextvars import ContextVar, Token
from typing import Any, Literal, TextIO

import structlog

#: ``text`` (a line a person reads) or ``json`` (a line a log pipeline reads).
LogFormat = Literal["text", "json"]

_FIELDS: ContextVar[dict[str, object]] = ContextVar("tripeaks_log_fields", default={})  # noqa: B039 - never mutated


class log_context:
    """Within the block (and the tasks started in it), every log line carries ``fields``
    (None values are left out; the outer block's other fields stay).

    A class rather than a generator: it is entered for every request and websocket message,
    and a generator's context manager costs several times as much."""

    __slots__ = ("_fields", "_token")

    def __init__(self, **fields: object) -> None:
        self._fields = fields
        self._token: Token[dict[str, object]] | None = None

    def __enter__(self) -> None:
        self._token = _FIELDS.set(
            {
                **_FIELDS.get(),
                **{key: value for key, value in self._fields.items() if value is not None},
            }
        )

    def __exit__(self, *_exc: object) -> None:
        if self._token is not None:
            _FIELDS.reset(self._token)
            self._token = None


def bind(**fields: object) -> None:
    """From now on in this task (and the tasks it starts), log lines carry ``fields``."""
    _FIELDS.set(
        {**_FIELDS.get(), **{key: value for key, value in fields.items() if value is not None}}
    )


def bound() -> dict[str, object]:
    """The fields bound where this is called."""
    return dict(_FIELDS.get())


def _merge_fields(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key, value in _FIELDS.get().items():
        event.setdefault(key, value)
    return event


def configure_logging(
    level: str,
    log_format: LogFormat = "text",
    *,
    worker: int | None = None,
    stream: TextIO | None = None,
) -> None:
    """Send every log record of the process to ``stream`` (stderr by default) at ``level``
    and above, as text or JSON lines (see the module docstring); replaces the root logger's
    handlers."""
    pre_chain: list[Any] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _merge_fields,
    ]
    if worker is not None:
        pre_chain.append(_add_worker(worker))
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if log_format == "json"
        # Plain tracebacks whatever is installed: with rich present, structlog would render
        # each with its frames' locals, milliseconds of CPU per logged failure (a database
        # outage logs one per request).
        else structlog.dev.ConsoleRenderer(
            colors=False, pad_event_to=0, exception_formatter=structlog.dev.plain_traceback
        )
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *([structlog.processors.format_exc_info] if log_format == "json" else []),
            renderer,
        ],
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Alembic names each of its plugins as it loads them; nothing an operator acts on.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)


def _add_worker(number: int) -> Any:
    def add(
        _logger: object, _method: str, event: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event.setdefault("worker", number)
        return event

    return add


__all__ = ["LogFormat", "bind", "bound", "configure_logging", "log_context"]
