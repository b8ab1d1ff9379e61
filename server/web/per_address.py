"""How many connections each client address holds in use on this server process, and the limit
on them (``TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS``).

A connection is in use while the server serves a request on it: a websocket for its whole
life, from before its upgrade; an HTTP request from its headers to its answer, reading its body
included. A connection accepted from an address that already has the limit in use is closed
at once, before anything is read from it or sent on it (:func:`refuse_at_accept`): refusing
costs the server next to nothing, however often the address comes back. A request that
arrives over the limit on a connection accepted earlier (kept alive) is answered 429
``too_many_connections`` at once, a websocket before its upgrade. The address is the
client's as every limit per address takes it (:func:`server.web.http.client_group`: an IPv6
address by its /64, the forwarded one behind a trusted proxy). A connection still sending
its first request's headers is not yet anyone's:
``TRIPEAKS_HTTP_HEADER_TIMEOUT_S`` bounds it instead.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from server.errors import ErrorCode
from server.services.addresses import address_group
from server.web.arrivals import hold_arrivals
from server.web.faults import Fault, client_fault
from server.web.http import Handler, client_group, error_response
from server.web.keys import ARRIVALS, SETTINGS


class AddressConnections:
    """Counts the connections in use per client address; one that would take an address past
    ``per_address`` is refused and counts nothing.

    Args:
        per_address: the most connections one address may have in use at once (>= 1).
    """

    def __init__(self, per_address: int) -> None:
        if per_address < 1:
            raise ValueError(f"a limit per address must be at least 1, not {per_address}")
        self.per_address = per_address
        self._in_use: Counter[str] = Counter()

    def take(self, address: str) -> bool:
        """Count one more connection of ``address``; False (nothing counted) when it already
        has ``per_address``."""
        if self._in_use[address] >= self.per_address:
            return False
        self._in_use[address] += 1
        return True

    def give_back(self, address: str) -> None:
        """One of the address's connections is no longer in use."""
        self._in_use[address] -= 1
        if self._in_use[address] <= 0:
            del self._in_use[address]

    def in_use(self, address: str) -> int:
        """How many connections ``address`` has in use."""
        return self._in_use[address]

    @property
    def addresses(self) -> int:
        """How many addresses have a connection in use (the memory the counts take)."""
        return len(self._in_use)


#: The application's counts (see :func:`limit_middleware`).
ADDRESS_CONNECTIONS = web.AppKey("address_connections", AddressConnections)


@web.middleware
async def limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Serve the request as one of its address's connections in use, or answer 429
    ``too_many_connections`` when the address has too many (a websocket is refused so before
    its upgrade)."""
    counts = request.app[ADDRESS_CONNECTIONS]
    address = client_group(request)
    if not counts.take(address):
        client_fault(
            Fault.CONNECTION_LIMIT,
            f"{request.method} {request.path} from {address}: over its "
            f"{counts.per_address} connections",
        )
        refused = error_response(
            429,
            ErrorCode.TOO_MANY_CONNECTIONS,
            f"this address already has {counts.per_address} connections in use; close one",
        )
        refused.force_close()  # one connection fewer at once, not after an idle time
        return refused
    try:
        return await handler(request)
    finally:
        counts.give_back(address)


def refuse_at_accept(server: web.Server, app: web.Application) -> None:
    """Make ``server`` (``app``'s connections, :class:`GatedAppRunner`) close each connection
    whose address already has ``TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS`` in use the moment it is
    accepted (see :func:`close_at_accept`).

    Behind a trusted proxy (``TRIPEAKS_TRUST_FORWARDED_FOR``) every connection comes from the
    proxy, whose clients are known only once a request's headers are read: nothing is refused
    at accept there (the middleware's 429 still is)."""
    if app[SETTINGS].trust_forwarded_for:
        return
    counts = app[ADDRESS_CONNECTIONS]

    def over_its_address(transport: asyncio.Transport) -> str | None:
        peer = transport.get_extra_info("peername")
        if not isinstance(peer, tuple) or not peer:
            return None  # not an IP connection (a Unix socket)
        address = address_group(str(peer[0])) or str(peer[0])
        if counts.in_use(address) < counts.per_address:
            return None
        return (
            f"a connection from {address} closed as it was accepted: over its "
            f"{counts.per_address} connections"
        )

    close_at_accept(server, over_its_address)


def close_at_accept(server: web.Server, refusal: Callable[[asyncio.Transport], str | None]) -> None:
    """Make ``server`` close each connection for which ``refusal`` gives a reason the moment
    it is accepted: nothing is read from it nor sent on it (its peer sees the connection
    closed), and it is counted and logged quietly, with that reason, as a ``connection_limit``
    client fault, as a 429 is."""
    made = server.connection_made

    def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
        made(handler, transport)  # the server's own record, which its connection_lost ends
        why = refusal(transport)
        if why is not None:
            client_fault(Fault.CONNECTION_LIMIT, why)
            transport.pause_reading()  # nothing read from it; the door lets it be
            # On the loop's next turn: the handler's task, created as this returns, must start
            # before the close reaches the handler, as for a client that leaves at once.
            asyncio.get_running_loop().call_soon(transport.abort)

    server.connection_made = connection_made  # type: ignore[method-assign]


class GatedAppRunner(web.AppRunner):
    """An :class:`aiohttp.web.AppRunner` whose server refuses connections at accept for their
    address's limit (:func:`refuse_at_accept`) and holds new ones at the door while the process
    is busy (:func:`server.web.arrivals.hold_arrivals`); the app must be one of
    :func:`server.web.app.create_app`."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        refuse_at_accept(server, self.app)
        hold_arrivals(server, self.app[ARRIVALS])
        return server


__all__ = [
    "ADDRESS_CONNECTIONS",
    "AddressConnections",
    "GatedAppRunner",
    "close_at_accept",
    "limit_middleware",
    "refuse_at_accept",
]
