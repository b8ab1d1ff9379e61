"""The operations port (``TRIPEAKS_OPS_PORT``): ``/healthz``, ``/readyz`` and ``/metrics`` of a
server process on a port of their own, for a load balancer's probes and a metrics scraper.

On the main port these requests wait with everyone else's: in a reconnect storm new
connections wait unread at the door (:mod:`server.web.arrivals`), first come first served, and
a probe sent then waited behind thousands of pages (26.5 s in a burst of 8,000 connections on
two workers), long enough for a load balancer to take a process that was serving its players
for dead, and send its players elsewhere into the next storm. The operations port has no door
and no per-address limit: its connections are read as they come. It answers nothing else
(404), so it gives a client nothing the main port does not.
"""

from __future__ import annotations

from aiohttp import web

from server.web.api import healthz, readyz, scrape_metrics
from server.web.keys import METRICS, SERVICES, SETTINGS


def operations_app(main: web.Application) -> web.Application:
    """The application of the operations port of ``main`` (a started
    :func:`server.web.app.create_app`, whose services and metrics it answers from):
    ``GET /healthz``, ``GET /readyz`` and, with ``TRIPEAKS_METRICS``, ``GET /metrics``, as on
    the main port."""
    ops = web.Application()
    ops[SETTINGS] = main[SETTINGS]
    ops[SERVICES] = main[SERVICES]
    ops[METRICS] = main[METRICS]
    ops.router.add_get("/healthz", healthz)
    ops.router.add_get("/readyz", readyz)
    if main[SETTINGS].metrics:
        ops.router.add_get("/metrics", scrape_metrics)
    ops.on_response_prepare.append(_no_store)
    return ops


async def _no_store(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer is of this moment: no cache keeps it."""
    response.headers["Cache-Control"] = "no-store"


__all__ = ["operations_app"]
