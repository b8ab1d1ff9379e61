"""What any client can make the server notice as often as it likes — a request HTTP cannot
read, a connection lost in the middle of a request, a body that does not arrive in time, a
connection over its address's limit, connections opened until the process has no file left —
logged at INFO (the last at WARNING) without a traceback, at
most one line per kind every :data:`QUIET_EVERY_S` seconds (with the number of those left out
since), and counted in ``/metrics``. Nothing in them is the server's fault, so nothing in them
is an ERROR: a client must not be able to fill the log, nor to bury the server's own errors in
it.

aiohttp's HTTP layer (its ``RequestHandler``) logs a request it cannot parse as an ERROR with a
traceback, through the logger it is given: :data:`HTTP_LAYER_LOG`, whose filter turns those
records into client faults and lets every other one through unchanged. A body cut off is seen
where it is read (in :mod:`server.web.http`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from aiohttp.http import HttpProcessingError

from server.web import metrics

if TYPE_CHECKING:
    from server.config import Settings

log = logging.getLogger(__name__)

#: Seconds between two log lines of one kind of client fault.
QUIET_EVERY_S = 10.0


class Fault(StrEnum):
    """A kind of client fault (the ``kind`` label of ``tripeaks_client_faults_total``)."""

    #: A request HTTP cannot read: a malformed request line, header or chunk (aiohttp answers
    #: 400 in plain text).
    MALFORMED_REQUEST = "malformed_request"
    #: The client left in the middle of a request (its body cut short, or before the answer).
    DISCONNECTED = "disconnected"
    #: A request body that did not arrive within ``TRIPEAKS_HTTP_BODY_TIMEOUT_S`` (408).
    BODY_TIMEOUT = "body_timeout"
    #: A request or websocket over its address's ``TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS`` (429).
    CONNECTION_LIMIT = "connection_limit"
    #: A connection the process could not accept, having no file left (its open-file limit):
    #: asyncio stops accepting for a second. Logged at WARNING: the limit may be too low.
    OUT_OF_FILES = "out_of_files"


class QuietLog:
    """At most one INFO line per key every ``every_s`` seconds; a line says how many were left
    out since the previous one.

    Args:
        logger: where the lines go.
        every_s: the shortest time between two lines of one key.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        logger: logging.Logger,
        every_s: float = QUIET_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self.every_s = every_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def note(self, key: str, message: str, level: int = logging.INFO) -> bool:
        """Log ``message`` under ``key`` (at ``level``) unless a line of that key went out less
        than ``every_s`` seconds ago; whether it was logged."""
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._left_out[key] = self._left_out.get(key, 0) + 1
            return False
        left_out = self._left_out.pop(key, 0)
        self._last[key] = now
        if left_out:
            message += f" ({left_out} more like it since the last such line, not logged)"
        self._logger.log(level, "%s", message)
        return True


#: The client faults' log (one line per kind every :data:`QUIET_EVERY_S` seconds).
QUIET = QuietLog(log)


def client_fault(kind: Fault, what: str, level: int = logging.INFO) -> None:
    """Count a client fault and log it quietly (at ``level``): ``what`` says what happened (no
    traceback)."""
    metrics.client_fault(kind.value)
    QUIET.note(kind.value, f"client fault ({kind.value}): {what}", level)


#: What asyncio reports, through the event loop's exception handler, when it cannot accept a
#: connection for want of a file (EMFILE, ENFILE) or of memory for it (ENOBUFS, ENOMEM).
ACCEPT_FAILED = "socket.accept() out of system resource"


def quiet_accept_failures(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Make ``loop`` report connections it cannot accept as a client fault (``out_of_files``,
    at WARNING, quietly) instead of an ERROR with a traceback each time: opening connections
    until the process has no file left is anyone's to do. Every other report goes where it
    went. Returns what puts the loop's former handler back."""
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == ACCEPT_FAILED:
            exc = context.get("exception")
            client_fault(
                Fault.OUT_OF_FILES,
                f"a connection could not be accepted ({exc}); accepting again in a second "
                "(raise the process's open-file limit?)",
                logging.WARNING,
            )
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
    return lambda: loop.set_exception_handler(previous)


class _ClientFaults(logging.Filter):
    """Turns aiohttp's ERROR about a request it could not read into a client fault; lets
    every other record (a handler's failure among them) through."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError) and exc.code < 500:
            client_fault(Fault.MALFORMED_REQUEST, f"HTTP could not read a request: {exc.message}")
            return False
        return True


#: The logger aiohttp's HTTP layer is given (``handler_args``); see the module's docstring.
HTTP_LAYER_LOG = logging.getLogger("server.web.http_layer")
if not any(isinstance(f, _ClientFaults) for f in HTTP_LAYER_LOG.filters):
    HTTP_LAYER_LOG.addFilter(_ClientFaults())


def handler_args(settings: Settings) -> dict[str, Any]:
    """The ``handler_args`` of an application's connections (the main port's, the operations
    port's): what aiohttp's HTTP layer logs goes through :data:`HTTP_LAYER_LOG`, and a slow or
    silent client holds its connection only so long."""
    return {
        # What a client did wrong (a request that cannot be read) is logged quietly.
        "logger": HTTP_LAYER_LOG,
        # A connection that has not sent a whole request's headers this long after it opened,
        # or after its previous answer, is closed: a client sending its headers a byte at a
        # time holds nothing for long (slowloris), nor does an idle one.
        "keepalive_timeout": settings.http_header_timeout_s,
        # A body a route does not read is read and dropped for at most this long after the
        # answer, then the connection is closed.
        "lingering_time": settings.http_body_timeout_s,
    }


__all__ = [
    "ACCEPT_FAILED",
    "HTTP_LAYER_LOG",
    "QUIET",
    "QUIET_EVERY_S",
    "Fault",
    "QuietLog",
    "client_fault",
    "quiet_accept_failures",
]
