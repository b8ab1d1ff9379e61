"""The operations port (``TRIPEAKS_OPS_PORT``): ``/healthz``, ``/readyz`` and ``/metrics`` of a
server process on a port of their own, for a load balancer's probes and a metrics scraper.

On the main port these requests wait with everyone else's: in a reconnect storm new
connections wait unread at the door (:mod:`server.web.arrivals`), first come first served, and
a probe sent then waited behind thousands of pages (26.5 s in a burst of 8,000 connections on
two workers), long enough for a load balancer to take a process that was serving its players
for dead, and send its players elsewhere into the next storm. The operations port has no door
and no per-address limit: its connections are read as they come. It answers nothing else
(404), so it gives a client nothing the main port does not. A connection that has not sent its
request's headers within ``TRIPEAKS_HTTP_HEADER_TIMEOUT_S`` is closed, as on the main port, and
at most :data:`OPS_CONNECTIONS_MOST` are open at once (one more is closed as it is accepted): a
flood of connections to it costs the process a few file descriptors, not all of them.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from server.web import faults
from server.web.api import healthz, readyz, scrape_metrics
from server.web.keys import METRICS, SERVICES, SETTINGS
from server.web.per_address import close_at_accept

#: Connections open at once on the operations port at most (probes and scrapers need a few).
OPS_CONNECTIONS_MOST = 64


def operations_app(main: web.Application) -> web.Application:
    """The application of the operations port of ``main`` (a started
    :func:`server.web.app.create_app`, whose services and metrics it answers from):
    ``GET /healthz``, ``GET /readyz`` and, with ``TRIPEAKS_METRICS``, ``GET /metrics``, as on
    the main port."""
    settings = main[SETTINGS]
    ops = web.Application(client_max_size=1024, handler_args=faults.handler_args(settings))
    ops[SETTINGS] = settings
    ops[SERVICES] = main[SERVICES]
    ops[METRICS] = main[METRICS]
    ops.router.add_get("/healthz", healthz)
    ops.router.add_get("/readyz", readyz)
    if settings.metrics:
        ops.router.add_get("/metrics", scrape_metrics)
    ops.on_response_prepare.append(_no_store)
    return ops


async def _no_store(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer is of this moment: no cache keeps it."""
    response.headers["Cache-Control"] = "no-store"


class OperationsRunner(web.AppRunner):
    """The runner of the operations port: a connection past :data:`OPS_CONNECTIONS_MOST` open
    is closed as it is accepted (nothing read from it, nothing sent), counted as a
    ``connection_limit`` client fault."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()

        def too_many(transport: asyncio.Transport) -> str | None:
            if len(server.connections) <= OPS_CONNECTIONS_MOST:
                return None
            return (
                f"a connection to the operations port closed as it was accepted: "
                f"{OPS_CONNECTIONS_MOST} already open"
            )

        close_at_accept(server, too_many)
        return server


__all__ = ["OPS_CONNECTIONS_MOST", "OperationsRunner", "operations_app"]
