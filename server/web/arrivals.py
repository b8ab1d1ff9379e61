"""New connections held at the door while the process is busy with the players in play.

A storm of reconnecting pages (every socket of a process cut at once) arrives faster than one
process can greet it: each new connection costs its HTTP headers, its websocket upgrade and
its ``hello`` (about a millisecond of CPU), and while thousands of them are read at once every
player in play waits behind them for their acks. Turning them away (``server_busy``) comes
only after that work is done, and each refused page comes back to cost it again.

So while the event loop runs late (:data:`HOLD_LAG_S` or more at its last measure) because of
the process's own work (it used :data:`~server.web.admission.SHED_CPU_SHARE` of a core or more
meanwhile) or while a crowd arrives (:data:`CROWD` connections between two measures, or some
already waiting: on a machine whose cores are all busy the process may never reach its share),
or :data:`HOLD_WAITING` hellos already wait for their turn at admission (the database is what
holds them up), a new connection is accepted but not read: its reading is paused
(:meth:`asyncio.ReadTransport.pause_reading`) and it waits at the door, first come first
served, costing a file descriptor and a few KiB, while its request waits in the kernel. A held
connection whose peer closed or reset it before sending anything (a page given up, a
connect-and-abort flood) is dropped when its turn comes, without taking a place: the kernel
tells (its TCP state, and the bytes waiting to be read), since the server reads nothing from it
while it waits. The
door lets connections in by the measure of the loop (every 50 ms): a quarter more each time
than the last (at least one more) while the loop is on time (up to :data:`LET_IN_MOST`, the
door's width when nobody waits), half as many (at least :data:`LET_IN_LEAST`) while it is late
for the process's own work or :data:`HOLD_WAITING` hellos wait, so the door finds and keeps the
pace at which the process greets a storm without making the players in play wait. Connections
arriving faster than that between two measures wait too: a storm's first thousands arrive
within one. A connection let in has its whole header time-out
(``TRIPEAKS_HTTP_HEADER_TIMEOUT_S``) from then. At most :data:`HELD_AT_MOST` wait; one more is
closed as it arrives (its page comes back later, as after any failed connection).

The door's width follows the process's own work only: a loop late while the process used
little of a core (the machine busy with other work, a load generator on the same cores) does
not narrow it, since holding connections back would not make that loop any sooner (it holds
new arrivals, though, while a crowd arrives). What bounds the work let in is the
number of connections *entering*: let in, their first request begun (its headers read:
:meth:`Arrivals.started`) and not through yet (a page's or the API's: its response begun; the
websocket's: its first message read, a hello then waiting for its turn at admission, where
:data:`HOLD_WAITING` bounds it). While :data:`ENTERING_MOST` are entering, the door lets nobody
more in: a process that greets slowly (its database slow, its core shared) is sent connections
as fast as it greets them, and a storm's pages do not pile up as hellos it must turn away. A
connection that sends nothing, or not a whole request's headers, is not entering (it costs the
process nothing, and a flood of them must not keep the door shut); one counts as entering for
:data:`ENTERING_S` at most, and at most :data:`ENTERING_PER_ADDRESS` of one client's address
group count (connections that never get through, websockets that never say hello reopened as
they are closed, from a few addresses, must not keep it shut either).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import socket
import struct
import sys
from collections import Counter, deque
from collections.abc import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from server.web import metrics
from server.web.admission import Admission

log = logging.getLogger(__name__)

if sys.platform == "linux":
    import termios

    #: The ioctl that tells how many bytes a socket holds that were received and not read.
    _UNREAD: int | None = termios.FIONREAD
else:  # elsewhere a held connection's peer is not looked at
    _UNREAD = None

#: How late the event loop must run at its last measure (s), the process busy, for new
#: connections to wait at the door.
HOLD_LAG_S = 0.025
#: Hellos waiting for their turn at admission from which new connections wait at the door.
HOLD_WAITING = 256
#: Connections let in at a measure at least (a door that never closes: 40 a second at the
#: least, so the wait has an end however busy the process is).
LET_IN_LEAST = 2
#: Connections let in between two measures at most (2,560 a second).
LET_IN_MOST = 128
#: Connections waiting at the door at most.
HELD_AT_MOST = 10_000
#: Connections entering (let in, their first request begun and not through yet) from which
#: the door lets nobody more in.
ENTERING_MOST = 512
#: How long a connection counts as entering at most, from its first request's beginning (s).
ENTERING_S = 2.0
#: Connections of one client's address group (an IPv4 address, an IPv6 /64, the forwarded
#: client behind a trusted proxy) counted as entering at most: more of them are let in without
#: counting, so that a few addresses holding connections that never get through (websockets
#: that never say hello, reopened as they are closed) cannot keep the door shut.
ENTERING_PER_ADDRESS = 16
#: TCP states (``tcpi_state`` of ``TCP_INFO``, Linux) of a connection still open both ways,
#: and of one whose peer closed its side.
_ESTABLISHED = 1
_CLOSE_WAIT = 8

#: Connections arriving between two measures from which they are a crowd: a late loop then
#: holds them whatever share of a core the process had (on a machine whose cores are all busy,
#: workers and load alike, none may reach it, and a storm went in unheld).
CROWD = 32


class Arrivals:
    """The door of one server process (see the module's docstring).

    Args:
        admission: whose measures of the event loop (lag, CPU share) decide.
        header_timeout_s: the time a connection has for its first request's headers (s),
            counted again from the moment it is let in.
    """

    def __init__(self, admission: Admission, header_timeout_s: float) -> None:
        self._admission = admission
        self._header_timeout_s = header_timeout_s
        self._held: deque[tuple[RequestHandler, asyncio.Transport]] = deque()
        #: Connections let in whose first request has not begun, those entering (begun, not
        #: through yet) and, oldest first, when each of these began (the loop's clock, s; some
        #: may be through already).
        self._unbegun: set[RequestHandler] = set()
        #: Each connection entering and its client's address group, and how many of each
        #: group are entering.
        self._entering: dict[RequestHandler, str] = {}
        self._entering_from: Counter[str] = Counter()
        self._began_at: deque[tuple[float, RequestHandler]] = deque()
        self._let_in = LET_IN_MOST
        #: Connections that may still come in before the next measure.
        self._allowance = LET_IN_MOST
        #: Connections that arrived since the last measure, and at the one before.
        self._arrived = 0
        self._arrived_before = 0
        #: Connections that waited at the door, and those closed for a full door, so far.
        self.held_total = 0
        self.turned_away = 0
        #: Held connections dropped at their turn because their peer had left.
        self.left_while_held = 0
        #: When a connection last had to wait at the door (the loop's clock, s).
        self.last_held_at = -float("inf")

    @property
    def waiting(self) -> int:
        """Connections waiting at the door now (some may have closed meanwhile)."""
        return len(self._held)

    @property
    def entering(self) -> int:
        """Connections let in whose first request has begun and is not through yet (for at
        most :data:`ENTERING_S`)."""
        return len(self._entering)

    def started(self, handler: RequestHandler, address: Callable[[], str]) -> None:
        """A request of ``handler``'s connection begins (its headers were read): if it is the
        first of a connection let in, the connection is entering from now, unless
        :data:`ENTERING_PER_ADDRESS` of its client's address group (``address()``) already
        are. Any other call changes nothing."""
        if handler not in self._unbegun:
            return
        self._unbegun.discard(handler)
        group = address()
        if self._entering_from[group] >= ENTERING_PER_ADDRESS:
            return
        self._entering_from[group] += 1
        self._entering[handler] = group
        self._began_at.append((asyncio.get_running_loop().time(), handler))

    def through(self, handler: RequestHandler) -> None:
        """``handler``'s connection is through the door: its first request is through (a
        response begun, a websocket's first message read), or it closed. Any later call
        changes nothing."""
        self._unbegun.discard(handler)
        self._no_longer_entering(handler)

    def _no_longer_entering(self, handler: RequestHandler) -> None:
        group = self._entering.pop(handler, None)
        if group is not None:
            self._entering_from[group] -= 1
            if not self._entering_from[group]:
                del self._entering_from[group]

    def _forget_begun_before(self, when: float) -> None:
        """Connections whose first request began before ``when`` count as entering no
        more."""
        began_at = self._began_at
        while began_at and began_at[0][0] < when:
            self._no_longer_entering(began_at.popleft()[1])

    def _busy(self) -> bool:
        """Whether :data:`HOLD_WAITING` hellos wait at admission or :data:`ENTERING_MOST`
        connections are entering, or the loop ran late at its
        last measure either for the process's own work or while a crowd arrives (connections
        wait at the door, or :data:`CROWD` arrived between the last two measures)."""
        admission = self._admission
        if admission.waiting >= HOLD_WAITING or len(self._entering) >= ENTERING_MOST:
            return True
        if admission.lag_s < HOLD_LAG_S:
            return False
        crowd = bool(self._held) or max(self._arrived, self._arrived_before) >= CROWD
        return crowd or admission.late_for_own_work(HOLD_LAG_S)

    def arrived(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        """A connection was accepted: it is read at once, unless the process is busy or
        others wait before it (then it waits), or the door is full (then it is closed)."""
        self._arrived += 1
        if not self._held and self._allowance > 0 and not self._busy():
            self._allowance -= 1
            self._unbegun.add(handler)
            return
        if len(self._held) >= HELD_AT_MOST:
            self.turned_away += 1
            metrics.ARRIVALS_TURNED_AWAY.inc()
            asyncio.get_running_loop().call_soon(transport.abort)
            return
        transport.pause_reading()
        # It cannot send its headers while held. (On the loop's next turn: aiohttp arms its
        # header timer as this call returns; by then a measure may have let it in, with its
        # timer armed afresh, which stays.)
        asyncio.get_running_loop().call_soon(_stop_header_timer_while_held, handler, transport)
        self._held.append((handler, transport))
        self.held_total += 1
        self.last_held_at = asyncio.get_running_loop().time()
        metrics.ARRIVALS_HELD.inc()

    def measured(self) -> None:
        """After each measure of the loop: let connections in (see the module's
        docstring)."""
        self._arrived_before, self._arrived = self._arrived, 0
        self._forget_begun_before(asyncio.get_running_loop().time() - ENTERING_S)
        admission = self._admission
        if admission.waiting >= HOLD_WAITING or admission.late_for_own_work(HOLD_LAG_S):
            self._let_in = max(LET_IN_LEAST, self._let_in // 2)
        elif not self._held:
            self._let_in = LET_IN_MOST
        else:
            self._let_in = min(LET_IN_MOST, max(self._let_in + 1, self._let_in * 5 // 4))
        self._allowance = self._let_in
        while self._held and self._allowance > 0 and len(self._entering) < ENTERING_MOST:
            handler, transport = self._held.popleft()
            if transport.is_closing():
                continue  # closed while it waited
            if peer_left(transport):
                transport.abort()
                self.left_while_held += 1
                metrics.ARRIVALS_LEFT.inc()
                continue
            _header_timer(handler, self._header_timeout_s)
            transport.resume_reading()
            self._unbegun.add(handler)
            self._allowance -= 1


def peer_left(transport: asyncio.BaseTransport) -> bool:
    """Whether the peer of a connection that has not been read closed or reset it without
    anything left to read: its TCP state is neither established nor, with bytes waiting to be
    read, closed by the peer after sending them (a request followed by a half-close). False
    where the system does not tell (not Linux, not TCP, a socket closed meanwhile)."""
    sock = transport.get_extra_info("socket")
    if sock is None or _UNREAD is None:
        return False
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
        if state == _ESTABLISHED:
            return False
        if state != _CLOSE_WAIT:
            return True  # reset, or gone
        unread: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), _UNREAD, b"\0\0\0\0"))[0]
    except (OSError, ValueError):
        return False
    return unread == 0


def _header_timer(handler: RequestHandler, timeout_s: float | None) -> None:
    """Stop the timer by which ``handler``'s connection must have sent its first request's
    headers (None), or arm it for ``timeout_s`` from now. aiohttp keeps the timer and its
    deadline in these attributes and arms it at the accept; an aiohttp without them leaves the
    connection its time-out from its accept."""
    if not all(
        hasattr(handler, name)
        for name in ("_keepalive_handle", "_next_keepalive_close_time", "_process_keepalive")
    ):
        return
    if handler._keepalive_handle is not None:
        handler._keepalive_handle.cancel()
        handler._keepalive_handle = None
    if timeout_s is not None:
        loop = asyncio.get_running_loop()
        handler._next_keepalive_close_time = deadline = loop.time() + timeout_s
        handler._keepalive_handle = loop.call_at(deadline, handler._process_keepalive)


def _stop_header_timer_while_held(handler: RequestHandler, transport: asyncio.Transport) -> None:
    """Stop ``handler``'s header timer if its connection is still held (its reading paused)."""
    if not transport.is_reading() and not transport.is_closing():
        _header_timer(handler, None)


def hold_arrivals(server: web.Server, arrivals: Arrivals) -> None:
    """Make ``server`` hand each connection it accepts to ``arrivals`` (:class:`Arrivals`),
    unless it is closing or its reading was paused as it was accepted (refused there, its
    close on the loop's next turn), and tell it of each one that closed
    (:meth:`Arrivals.through`)."""
    made, lost = server.connection_made, server.connection_lost

    def connection_made(handler: RequestHandler, transport: asyncio.Transport) -> None:
        made(handler, transport)
        if transport.is_reading():  # not closing, nor paused: refused at accept
            arrivals.arrived(handler, transport)

    def connection_lost(handler: RequestHandler, exc: BaseException | None = None) -> None:
        lost(handler, exc)
        arrivals.through(handler)

    server.connection_made = connection_made  # type: ignore[method-assign]
    server.connection_lost = connection_lost  # type: ignore[method-assign]


__all__ = [
    "CROWD",
    "ENTERING_MOST",
    "ENTERING_PER_ADDRESS",
    "ENTERING_S",
    "HELD_AT_MOST",
    "HOLD_LAG_S",
    "HOLD_WAITING",
    "LET_IN_LEAST",
    "LET_IN_MOST",
    "Arrivals",
    "hold_arrivals",
    "peer_left",
]
