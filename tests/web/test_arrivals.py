"""The door (:mod:`server.web.arrivals`): new connections wait, unread, while the process is
busy with the players in play, and are let in at the pace it greets them."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator
from typing import Any, cast

import pytest
from aiohttp import ClientSession, TCPConnector
from aiohttp.test_utils import TestServer
from aiohttp.web_protocol import RequestHandler

from server.web import arrivals as door
from server.web.admission import Admission
from server.web.arrivals import (
    CROWD,
    ENTERING_PER_ADDRESS,
    HELD_AT_MOST,
    HOLD_WAITING,
    LET_IN_LEAST,
    LET_IN_MOST,
    Arrivals,
)
from server.web.keys import ADMISSION, ARRIVALS
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, eventually, hold_the_door


class _Transport:
    """A connection as the door sees it: paused, resumed, closing, aborted."""

    def __init__(self, sock: socket.socket | None = None, address: str = "192.0.2.1") -> None:
        self.handler = cast(RequestHandler, _Handler())
        self.address = address
        self.paused = False
        self.closing = False
        self.aborted = False
        self.sock = sock

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default

    def pause_reading(self) -> None:
        self.paused = True

    def is_reading(self) -> bool:
        return not self.paused and not self.is_closing()

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closing or self.aborted

    def abort(self) -> None:
        self.aborted = True


class _Handler:
    """A request handler without aiohttp's header timer."""


def _start(arrivals: Arrivals, transport: _Transport) -> None:
    """The connection's request begins (its headers read), from its address."""
    arrivals.started(transport.handler, lambda: transport.address)


def _through(arrivals: Arrivals, transports: list[_Transport]) -> int:
    """How many of ``transports`` were let in; each is through the door then (its first
    request answered at once)."""
    for transport in transports:
        if not transport.paused:
            arrivals.through(transport.handler)
    return sum(not t.paused for t in transports)


def _arrive(arrivals: Arrivals, count: int) -> list[_Transport]:
    transports = [_Transport() for _ in range(count)]
    for transport in transports:
        arrivals.arrived(transport.handler, cast(Any, transport))
    return transports


def _busy(admission: Admission, busy: bool) -> None:
    admission.lag_s = 0.5 if busy else 0.0
    admission.last_cpu_share = 1.0


async def test_while_the_process_is_busy_new_connections_wait_and_are_let_in_at_its_pace() -> None:
    admission = Admission(limit=5)
    arrivals = Arrivals(admission, header_timeout_s=10)

    def let_in(transports: list[_Transport]) -> int:
        return _through(arrivals, transports)

    first = _arrive(arrivals, LET_IN_MOST + 3)  # faster than the door is wide
    assert let_in(first) == LET_IN_MOST and arrivals.waiting == 3
    arrivals.measured()  # on time: the next measure lets them in
    assert let_in(first) == LET_IN_MOST + 3 and arrivals.waiting == 0
    _busy(admission, True)
    held = _arrive(arrivals, 300)
    assert let_in(held) == 0
    arrivals.measured()  # late: half as many as the door's width
    assert let_in(held) == LET_IN_MOST // 2
    for _ in range(10):
        arrivals.measured()
    assert let_in(held) == 64 + 32 + 16 + 8 + 4 + 6 * LET_IN_LEAST  # halved down to the least
    _busy(admission, False)
    before = let_in(held)
    arrivals.measured()  # on time again: one more each time
    assert let_in(held) - before == LET_IN_LEAST + 1
    held[before + LET_IN_LEAST + 1].closing = True  # its peer left while it waited: skipped
    arrivals.measured()
    assert let_in(held) - before == 2 * LET_IN_LEAST + 3
    later = _arrive(arrivals, 1)  # others wait before it: it waits too
    assert later[0].paused
    while arrivals.waiting:
        arrivals.measured()
    assert not any(t.paused for t in held + later if not t.closing)
    assert arrivals.held_total == 304
    arrivals.measured()  # nobody waits: the door wide open again
    assert let_in(_arrive(arrivals, LET_IN_MOST)) == LET_IN_MOST


async def test_a_late_loop_holds_a_crowd_whatever_share_of_a_core_the_process_had() -> None:
    """On a machine whose cores are all busy the process may never reach its share of a core
    for its own work: a late loop still holds connections once a crowd arrives (and while
    some wait), but not a trickle; and it does not narrow the door, since holding connections
    back would not make a loop late for the machine's work any sooner."""
    admission = Admission(limit=5)
    arrivals = Arrivals(admission, header_timeout_s=10)
    admission.lag_s, admission.last_cpu_share = 0.5, 0.2  # late, for the machine's work
    trickle = _arrive(arrivals, CROWD - 1)
    assert not any(t.paused for t in trickle)  # a few connections: read at once
    crowd = _arrive(arrivals, LET_IN_MOST)
    assert all(t.paused for t in crowd) and arrivals.waiting == LET_IN_MOST
    arrivals.measured()  # still late, but not for the process's work: the door's whole width
    assert _through(arrivals, crowd) == LET_IN_MOST
    assert arrivals.waiting == 0 and arrivals.held_total == LET_IN_MOST
    assert _arrive(arrivals, 1)[0].paused  # the crowd before the last measure still counts
    arrivals.measured()
    arrivals.measured()  # two measures without a crowd: a late loop alone holds nobody
    assert not _arrive(arrivals, 1)[0].paused
    assert arrivals.last_held_at > 0


async def test_the_door_widens_by_a_quarter_while_the_loop_is_on_time() -> None:
    admission = Admission(limit=5)
    arrivals = Arrivals(admission, header_timeout_s=10)
    _busy(admission, True)
    held = _arrive(arrivals, 4000)
    widths: list[int] = []
    for _ in range(8):
        arrivals.measured()
        widths.append(_through(arrivals, held) - sum(widths))
    assert widths == [64, 32, 16, 8, 4, 2, 2, 2]  # halved while late for its own work
    _busy(admission, False)
    for _ in range(20):
        arrivals.measured()
        widths.append(_through(arrivals, held) - sum(widths))
    assert widths[8:] == [
        *(3, 4, 5, 6, 7, 8, 10, 12, 15, 18, 22, 27, 33, 41, 51, 63, 78, 97, 121),
        LET_IN_MOST,
    ]


async def test_connections_entering_bound_the_door_until_through_or_for_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connection let in is entering once its first request begins, until that request is
    through (or the connection closed), for ENTERING_S at most; while ENTERING_MOST are
    entering, nobody more is let in. One that has sent no request is not entering."""
    monkeypatch.setattr(door, "ENTERING_MOST", 5)
    monkeypatch.setattr(door, "ENTERING_S", 0.2)
    admission = Admission(limit=5)
    arrivals = Arrivals(admission, header_timeout_s=10)
    first = _arrive(arrivals, 8)  # the door wide open
    assert not any(t.paused for t in first) and arrivals.entering == 0  # no request yet
    for transport in first[:6]:
        _start(arrivals, transport)
    _start(arrivals, first[0])  # a later request of the same connection: nothing
    assert arrivals.entering == 6
    later = _arrive(arrivals, 3)  # 6 entering: they wait
    assert all(t.paused for t in later) and arrivals.waiting == 3
    arrivals.measured()
    assert arrivals.waiting == 3  # none through yet: nobody more
    arrivals.through(first[0].handler)
    arrivals.through(first[0].handler)  # again: changes nothing
    arrivals.through(first[6].handler)  # closed before its first request: not entering
    assert arrivals.entering == 5
    arrivals.measured()
    assert arrivals.waiting == 3  # still 5 entering
    arrivals.through(first[1].handler)
    arrivals.measured()  # 4 entering: let in (they count once their requests begin)
    assert arrivals.waiting == 0 and arrivals.entering == 4
    _start(arrivals, first[0])  # through already: its next request changes nothing
    for transport in later:
        _start(arrivals, transport)
    assert arrivals.entering == 7
    loop = asyncio.get_running_loop()
    since = loop.time()
    await eventually(lambda: loop.time() > since + 0.25, "past ENTERING_S")
    arrivals.measured()  # they count as entering no more
    assert arrivals.entering == 0


async def test_one_address_counts_for_a_few_connections_entering_at_most() -> None:
    """Connections of one address past ENTERING_PER_ADDRESS are let in without counting as
    entering: a few addresses whose connections never get through cannot shut the door."""
    arrivals = Arrivals(Admission(limit=5), header_timeout_s=10)
    mine = _arrive(arrivals, ENTERING_PER_ADDRESS + 4)
    theirs = [_Transport(address="2001:db8::/64") for _ in range(3)]
    for transport in theirs:
        arrivals.arrived(transport.handler, cast(Any, transport))
    for transport in mine + theirs:
        _start(arrivals, transport)
    assert arrivals.entering == ENTERING_PER_ADDRESS + 3
    arrivals.through(mine[0].handler)  # one of the address's counted gets through
    arrivals.through(mine[-1].handler)  # one that was not counted: nothing changes
    assert arrivals.entering == ENTERING_PER_ADDRESS + 2
    more = _Transport()
    arrivals.arrived(more.handler, cast(Any, more))
    _start(arrivals, more)  # the address has room for one again
    assert arrivals.entering == ENTERING_PER_ADDRESS + 3


async def test_a_page_a_call_and_a_websocket_are_through_the_door(
    make_server: ServerFactory,
) -> None:
    """A response to a page or an API call, a websocket's first message and a connection
    closed take its connection off those entering, on a real server."""
    server: TestServer = await make_server()
    app = server.app
    base = str(server.make_url("")).rstrip("/")
    arrivals: Arrivals = app[ARRIVALS]
    async with ClientSession(connector=TCPConnector(force_close=True)) as http:
        async with http.post(f"{base}/api/v1/players", json={"name": "Door"}) as resp:
            token = (await resp.json())["token"]
        async with http.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        await eventually(lambda: arrivals.entering == 0, "the calls through")
        ws = await http.ws_connect(f"{base}/ws")
        assert arrivals.entering == 1  # upgraded; its first message not read yet
        player = WsPlayer(ws)
        assert (await player.request({"type": "hello", "token": token}))["type"] == "welcome"
        assert arrivals.entering == 0
        await ws.close()
        silent = await http.ws_connect(f"{base}/ws")
        assert arrivals.entering == 1
        await silent.close()
        await eventually(lambda: arrivals.entering == 0, "the closed connection through")
    with socket.create_connection(("127.0.0.1", server.port)):  # nothing sent
        await eventually(lambda: len(arrivals._unbegun) == 1, "the silent connection let in")
        assert arrivals.entering == 0  # no request: not entering
    await eventually(lambda: not arrivals._unbegun, "the silent connection's close seen")


async def test_connections_that_send_nothing_do_not_keep_the_door_shut(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of connections that send nothing, or not a whole request's headers, is let in
    without counting as entering: a page's request after them is not held for them."""
    monkeypatch.setattr(door, "ENTERING_MOST", 2)
    server: TestServer = await make_server()
    arrivals: Arrivals = server.app[ARRIVALS]
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(10)]
    for sock in silent[:5]:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never ended
    try:
        await eventually(lambda: len(arrivals._unbegun) == 10, "the flood let in")
        assert arrivals.entering == 0
        async with ClientSession() as http, http.get(str(server.make_url("/healthz"))) as resp:
            assert resp.status == 200
        assert arrivals.entering == 0 and len(arrivals._unbegun) == 10
    finally:
        for sock in silent:
            sock.close()


@pytest.fixture
def tcp_pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    """Connected loopback TCP pairs (client, accepted), closed after the test."""
    listener = socket.create_server(("127.0.0.1", 0))
    made: list[tuple[socket.socket, socket.socket]] = []
    made_sockets: list[socket.socket] = []

    def pair() -> tuple[socket.socket, socket.socket]:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        made_sockets.extend((client, accepted))
        return client, accepted

    made.extend(pair() for _ in range(4))
    yield made
    for sock in made_sockets:
        sock.close()
    listener.close()


async def test_a_held_connection_whose_peer_left_is_dropped_without_taking_a_place(
    tcp_pairs: list[tuple[socket.socket, socket.socket]],
) -> None:
    """A page given up (its connection closed, or reset) while it waited at the door takes no
    place among those let in at the next measure; one that sent its request and then closed
    its side is let in, as is one that sent nothing yet."""
    (closed, a), (reset, b), (sent_then_closed, c), (_silent, d) = tcp_pairs
    closed.close()
    reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    reset.close()  # an RST, not a FIN
    sent_then_closed.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    sent_then_closed.shutdown(socket.SHUT_WR)
    admission = Admission(limit=5)
    arrivals = Arrivals(admission, header_timeout_s=10)
    _busy(admission, True)
    transports = [_Transport(sock) for sock in (a, b, c, d)]
    for transport in transports:
        arrivals.arrived(cast(RequestHandler, _Handler()), cast(Any, transport))
    assert all(t.paused for t in transports) and arrivals.waiting == 4

    async def peers_seen() -> bool:  # the FIN and the RST have reached the accepted sockets
        return door.peer_left(cast(Any, transports[0])) and door.peer_left(cast(Any, transports[1]))

    await eventually(peers_seen, "the peers' close and reset seen")
    arrivals.measured()  # busy: the door lets LET_IN_LEAST in
    assert LET_IN_LEAST == 2
    assert [t.aborted for t in transports] == [True, True, False, False]
    assert [t.paused for t in transports] == [True, True, False, False]
    assert arrivals.waiting == 0 and arrivals.left_while_held == 2


async def test_many_hellos_waiting_for_admission_hold_the_door_and_a_full_door_closes() -> None:
    admission = Admission(limit=1)
    arrivals = Arrivals(admission, header_timeout_s=10)
    admission._waiting_for[True] = HOLD_WAITING  # the database holds the hellos up
    assert _arrive(arrivals, 1)[0].paused
    admission._waiting_for[True] = 0
    arrivals.measured()
    assert arrivals.waiting == 0


async def test_a_full_door_closes_the_next_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(door, "HELD_AT_MOST", 3)
    admission = Admission(limit=1)
    _busy(admission, True)
    arrivals = Arrivals(admission, header_timeout_s=10)
    transports = _arrive(arrivals, 4)
    await asyncio.sleep(0)  # the abort is on the loop's next turn
    assert [t.aborted for t in transports] == [False, False, False, True]
    assert arrivals.turned_away == 1 and HELD_AT_MOST > 3


async def test_a_connection_held_past_its_header_time_out_is_served_once_let_in(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its headers could not be read while it waited: their time-out counts from when it is
    let in, and the page says hello as if it had not waited."""
    server: TestServer = await make_server(http_header_timeout_s=0.5)
    app = server.app
    base = str(server.make_url("")).rstrip("/")
    loop = asyncio.get_running_loop()
    async with ClientSession(connector=TCPConnector(force_close=True)) as http:
        async with http.post(f"{base}/api/v1/players", json={"name": "Door"}) as resp:
            assert resp.status == 201
            token = (await resp.json())["token"]
        busy = hold_the_door(app, monkeypatch)
        began = loop.time()
        connecting = asyncio.create_task(http.ws_connect(f"{base}/ws"))
        await eventually(lambda: app[ARRIVALS].waiting == 1, "the connection waits at the door")
        await eventually(lambda: loop.time() > began + 1.0, "past its header time-out")
        assert not connecting.done()  # neither answered nor closed while it waited
        busy[0] = False
        player = WsPlayer(await connecting)
        welcome = await player.request({"type": "hello", "token": token})
        assert welcome["type"] == "welcome"
        assert app[ARRIVALS].held_total == 1 and app[ADMISSION].turned_away == 0
        await player.ws.close()


class _TimedHandler:
    """A request handler with aiohttp's header timer, armed at the accept."""

    def __init__(self, deadline: float) -> None:
        self._next_keepalive_close_time = deadline
        self._keepalive_handle: asyncio.TimerHandle | None = asyncio.get_running_loop().call_at(
            deadline, self._process_keepalive
        )
        self.expired = False

    def _process_keepalive(self) -> None:
        self.expired = True


async def test_a_connection_let_in_before_its_timer_was_stopped_keeps_the_timer_armed_afresh() -> (
    None
):
    """Held and let in within one turn of the loop: the stop meant for a held connection comes
    after the fresh timer and leaves it be (a silent client must still be cut off)."""
    admission = Admission(limit=1)
    _busy(admission, True)
    loop = asyncio.get_running_loop()
    arrivals = Arrivals(admission, header_timeout_s=30)
    handler, transport = _TimedHandler(loop.time() + 10), _Transport()
    arrivals.arrived(cast(RequestHandler, handler), cast(Any, transport))
    _busy(admission, False)
    arrivals.measured()  # let in at once, its timer armed for 30 s from now
    await asyncio.sleep(0)  # the stop meant for a held connection runs now
    timer = handler._keepalive_handle
    assert not transport.paused and timer is not None and not timer.cancelled()
    assert handler._next_keepalive_close_time > loop.time() + 20
    held_handler, held = _TimedHandler(loop.time() + 10), _Transport()
    _busy(admission, True)
    arrivals.arrived(cast(RequestHandler, held_handler), cast(Any, held))
    await asyncio.sleep(0)
    assert held.paused and held_handler._keepalive_handle is None  # no time-out while held
    timer.cancel()
