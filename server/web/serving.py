"""Running the application on a port until the process is told to stop: what
:func:`aiohttp.web.run_app` does, with the runner that refuses connections at accept for their
address's limit (:class:`server.web.per_address.GatedAppRunner`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web

from server.web.operations import OperationsRunner, operations_app
from server.web.per_address import GatedAppRunner

log = logging.getLogger(__name__)

#: Connections the kernel keeps waiting to be accepted (capped by ``net.core.somaxconn``).
#: aiohttp's default of 128 overflows in a storm before the process sees the connections: the
#: kernel drops their handshakes, and a client that sends nothing first waits for its own
#: time-out. Accepted, they wait at the door (:mod:`server.web.arrivals`) instead.
LISTEN_BACKLOG = 4096

#: Connections asyncio accepts each time the listening socket is ready, all set up (transport,
#: protocol, some 100-150 µs each) in the next turn of the event loop. asyncio takes this number
#: from the listen backlog: at 4,096, when a storm's reconnecting pages had piled up in the
#: kernel while the process was busy, thousands were set up in one turn, 0.5 to 1.1 s during
#: which no player's frame was read (two workers, 10,000 pages cut). So the socket is opened with
#: this backlog, and told :data:`LISTEN_BACKLOG` afterwards.
ACCEPT_BATCH = 32


#: How long the operations port's requests in flight may take at shutdown (s). It is closed
#: first, so that probes stop answering at once, and its requests must not hold up the main
#: port's: a scraper that keeps its connection busy would otherwise be waited for up to
#: aiohttp's default of 60 s before a single websocket was told the server is going away.
OPS_SHUTDOWN_S = 1.0


class OperationsPortError(Exception):
    """The operations port cannot be listened on; the message names the address and the
    reason (its ``OSError`` is the ``__cause__``)."""


class ListeningSite(web.TCPSite):
    """A :class:`aiohttp.web.TCPSite` whose sockets keep :data:`LISTEN_BACKLOG` connections
    waiting in the kernel and are accepted from :data:`ACCEPT_BATCH` at a time."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, reuse_port: bool) -> None:
        super().__init__(runner, host, port, reuse_port=reuse_port, backlog=ACCEPT_BATCH)

    async def start(self) -> None:
        await super().start()
        # aiohttp's server, set by start(): asyncio's, or uvloop's of the same shape.
        server = cast(asyncio.Server, self._server)
        for listening in server.sockets:
            # listen() again on the same socket (a duplicate of its descriptor) changes its
            # backlog; asyncio goes on accepting ACCEPT_BATCH at a time.
            with socket.socket(fileno=os.dup(listening.fileno())) as same:
                same.listen(LISTEN_BACKLOG)


def run_app(
    app: web.Application,
    *,
    host: str,
    port: int,
    reuse_port: bool,
    shutdown_timeout: float,
    on_listening: Callable[[], None],
    loop: asyncio.AbstractEventLoop | None = None,
    ops_port: int | None = None,
    ops_host: str | None = None,
) -> None:
    """Serve ``app`` on ``host``:``port`` until SIGINT or SIGTERM (or Ctrl-C), then shut it
    down (its websockets closed, its requests given ``shutdown_timeout`` s to end, its clean-up
    run) and return. ``on_listening`` is called once the port is open. It runs on ``loop``
    (closed at the end), else on a new asyncio event loop. With ``ops_port``, its health and
    metrics are served on ``ops_host`` (else ``host``):``ops_port`` too
    (:mod:`server.web.operations`), from when the main port is open until the shutdown begins.

    Raises:
        OSError: the port cannot be listened on (``EADDRINUSE``…).
        OperationsPortError: ``ops_port`` cannot be listened on.
        Exception: whatever the application's start raised (the database's failures,
            :class:`server.web.app.StartupTimeout`).
    """

    async def serve() -> None:
        runner = GatedAppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=shutdown_timeout
        )
        await runner.setup()
        ops: OperationsRunner | None = None
        try:
            await ListeningSite(runner, host, port, reuse_port=reuse_port).start()
            if ops_port is not None:
                ops = OperationsRunner(
                    operations_app(app),
                    handle_signals=False,
                    access_log=None,
                    shutdown_timeout=OPS_SHUTDOWN_S,
                )
                await ops.setup()
                where = ops_host or host
                try:
                    await ListeningSite(ops, where, ops_port, reuse_port=reuse_port).start()
                except OSError as exc:
                    raise OperationsPortError(
                        f"cannot listen on {where}:{ops_port}: {exc.strerror or exc}"
                    ) from exc
            on_listening()
            await asyncio.Event().wait()  # until cancelled, or a signal ends the loop
        finally:
            try:
                if ops is not None:
                    await ops.cleanup()
            finally:
                await runner.cleanup()

    loop = loop or asyncio.new_event_loop()
    main = loop.create_task(serve())
    restore = _stop_on_signals(loop)
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            _cancel_tasks(asyncio.all_tasks(loop), loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            restore()  # (before the loop's close, which would leave them at their defaults)
            asyncio.set_event_loop(None)
            loop.close()


def _stop_on_signals(loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
    """Make the first SIGINT or SIGTERM stop the server (:class:`aiohttp.web.GracefulExit`
    out of the loop) and every later one change nothing until the shutdown is over: ``timeout``
    and process managers send SIGTERM to the process and to its group at once, and a second
    signal cut the shutdown short (aiohttp's handler raised again: status 1, the clean-up
    undone, the presence record left behind; once aiohttp had removed it, the signal's default
    action ended the process). The shutdown has bounds of its own. Returns what puts the
    handlers the process had before back."""
    stopping = False

    def on_signal() -> None:
        nonlocal stopping
        if stopping:
            log.info("already stopping: a signal that comes again changes nothing")
            return
        stopping = True
        raise web.GracefulExit()

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for sig in before:
            loop.add_signal_handler(sig, on_signal)
    except NotImplementedError:  # no signal handlers on this loop (Windows)
        return lambda: None

    def restore() -> None:
        for sig, handler in before.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    return restore


def _cancel_tasks(tasks: set[asyncio.Task[Any]], loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left running at the end and let it end; report what failed meanwhile."""
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception while stopping",
                    "exception": task.exception(),
                    "task": task,
                }
            )


__all__ = [
    "ACCEPT_BATCH",
    "LISTEN_BACKLOG",
    "OPS_SHUTDOWN_S",
    "ListeningSite",
    "OperationsPortError",
    "run_app",
]
