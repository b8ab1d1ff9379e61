"""Typed application keys shared by the web modules."""

from __future__ import annotations

import asyncio

from aiohttp import web

from server.config import Settings
from server.services import Services
from server.services.clock import Clock
from server.services.connections import ConnectionLimit
from server.web.admission import Admission
from server.web.arrivals import Arrivals
from server.web.departures import Departures
from server.web.hub import Hub
from server.web.metrics import ActivityReader

SETTINGS = web.AppKey("settings", Settings)
CLOCK = web.AppKey("clock", Clock)
SERVICES = web.AppKey("services", Services)
HUB = web.AppKey("hub", Hub)
#: Players getting in (registering, saying hello) at once in this process.
ADMISSION = web.AppKey("admission", Admission)
#: New connections held at the door while the process is busy.
ARRIVALS = web.AppKey("arrivals", Arrivals)
DEPARTURES = web.AppKey("departures", Departures)
SOCKETS = web.AppKey("sockets", set[web.WebSocketResponse])
#: Open authenticated websockets per player, in this process, and their limit.
PLAYER_SOCKETS = web.AppKey("player_sockets", ConnectionLimit)
#: Set when the application starts shutting down (its websockets are being closed).
SHUTTING_DOWN = web.AppKey("shutting_down", asyncio.Event)
#: The database figures of this application's ``/metrics`` scrapes.
METRICS = web.AppKey("metrics", ActivityReader)
