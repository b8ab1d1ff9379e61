"""Closed connections let go a few at a time: a cut that ends thousands of connections at once
does not hold up the players who stayed connected.

When a network blip or a restarted proxy cuts every socket of a process at once, each closed
connection's reader wakes in the same turn of the event loop, and letting one go (its worker
stopped, its session forgotten, its player's online record and rooms told, aiohttp's own end of
the request) costs some hundreds of µs: 5,000 cut at once kept the loop busy for nearly two
seconds in a few long turns, and the frames of players still connected, each needing several
turns to be answered, waited behind all of them (their ack p99 was 1.96 s, and 0.62 and 0.68 s
in two runs with this: ``benchmarks/action_path.py --closed 0 --storm 5000``). So a closed
connection takes its turn here first: at most :data:`LET_GO_PER_TURN` are let go in one turn of
the loop, the others wait in the order they closed; the turns stay short and the players still
connected are served between them. A closed connection gives its place among its player's
connections on this process (``TRIPEAKS_MAX_SOCKETS_PER_PLAYER``) back before it waits, so a
page that comes back at once is let in (unless a hello of the closed connection was still
being answered: its place is given back once its worker stopped).
"""

from __future__ import annotations

import asyncio
from collections import deque

from server.web import metrics

#: Closed connections let go in one turn of the event loop (at some hundreds of µs each, a few
#: ms of the turn).
LET_GO_PER_TURN = 32


class Departures:
    """Closed connections' turns to be let go (see the module's docstring); one per event
    loop, used from it alone.

    Args:
        per_turn: how many are let go in one turn of the loop, at least 1.

    Raises:
        ValueError: ``per_turn`` under 1.
    """

    def __init__(self, per_turn: int = LET_GO_PER_TURN) -> None:
        if per_turn < 1:
            raise ValueError(f"per_turn must be at least 1, not {per_turn}")
        self._per_turn = per_turn
        #: Let go, or given their turn, in this turn of the loop.
        self._this_turn = 0
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._next_turn_due = False
        #: Closed connections that had to wait for a later turn, since the start, and when
        #: one last had to (the loop's clock, s).
        self.waited_total = 0
        self.last_waited_at = -float("inf")

    @property
    def waiting(self) -> int:
        """Closed connections waiting for their turn now."""
        return len(self._waiting)

    async def turn(self) -> None:
        """Return when this closed connection may be let go: at once while fewer than
        ``per_turn`` were in this turn of the loop and none waits, else in a later turn, in
        the order they came.

        Raises:
            asyncio.CancelledError: the caller was cancelled while it waited (its place is
                given to the next).
        """
        if not self._waiting and self._this_turn < self._per_turn:
            self._this_turn += 1
            self._at_next_turn()
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        self.waited_total += 1
        self.last_waited_at = loop.time()
        metrics.DEPARTURES_WAITED.inc()
        self._at_next_turn()
        await waiter

    def _at_next_turn(self) -> None:
        if not self._next_turn_due:
            self._next_turn_due = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new turn of the loop: give the next ``per_turn`` waiting their turn (they run in
        the turn after this one, as every callback scheduled now does)."""
        self._next_turn_due = False
        self._this_turn = 0
        while self._waiting and self._this_turn < self._per_turn:
            waiter = self._waiting.popleft()
            if not waiter.done():  # else its caller was cancelled while it waited
                waiter.set_result(None)
                self._this_turn += 1
        if self._this_turn:
            self._at_next_turn()  # this turn's count is reset at the next


__all__ = ["LET_GO_PER_TURN", "Departures"]
