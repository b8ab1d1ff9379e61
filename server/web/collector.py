"""The garbage collector of a server process: short pauses however many players are connected.

Python's collector looks at its oldest generation (a *full* collection) whenever a quarter more
objects than it kept at its last full collection have reached it, and walks every object there.
A connected player holds about a hundred objects (their socket, its reader and writer, their
session, its tasks and buffers), so with 10,000 players a full collection walks a million
objects, some 0.5 s during which nobody's action is answered; and a reconnect storm, which adds
long-lived objects quickly, sets off one full collection after another, each walking everything
again (a storm of 5,000 reconnecting pages spent 4.6 s of its 17.6 s of CPU in 11 of them).

So the objects a full collection finds alive are moved out of its reach at once
(:func:`gc.freeze`): the next full collection walks only what reached the oldest generation
since, and each object is walked there about once. Reference cycles among frozen objects that
die later (a closed connection's transport, an exception's traceback and its frames) are not
freed by refcounting alone; they wait for a *reclaim*: every object is given back to the
collector (:func:`gc.unfreeze`), collected in one full collection and the survivors frozen
again. A reclaim walks the whole heap, so it is rare: once the process's memory has grown to
``reclaim_growth`` times what it was after the last reclaim (what frozen garbage costs; the
memory is read from ``/proc/self/statm``, a few µs, where counting the frozen objects would walk
them all), no sooner than ``reclaim_every_s`` after it, and only while the process is quiet (a
storm is not the time). Churn that never lets the process be quiet (connections cut and made
again without end keep it in a storm) would let frozen garbage grow without bound, so once the
memory reaches ``reclaim_force_growth`` times the baseline the reclaim is made whatever the
process is doing: a pause of most of a second once in a while, rather than a process killed
for its memory with every player on it.

In a storm (``in_storm()``: until :data:`STORM_LINGER_S` after a connection last waited at the
door or to be let go, the time a storm's pages take to come back) the collector pauses: at its
first collection in the storm everything alive is frozen and the collector is turned off
(:func:`gc.disable`); once the storm is over (asked every ``watch`` step) what the storm made
is frozen as it is, without a walk, and the collector is turned on again. A storm's objects are
nearly all long-lived (reconnected players' connections and sessions): each was walked by a
young and a middle collection before it was frozen: about a tenth of a storm's CPU, in pauses
of up to 380 ms that every player's acks waited behind. What a storm makes and drops in a cycle
waits for the next reclaim. A reconnect storm is over within seconds, but churn that never
ends (connections opened and closed without end, an attack of half-sent requests from many
addresses) keeps the process in a storm for as long as it lasts, and made without a collector
its garbage grew twice as fast (2.4 MiB a second against 1.1, ``benchmarks/slowloris.py``'s
eight addresses): so a pause ends after :data:`STORM_PAUSE_MOST_S` however long the storm goes
on, and for the rest of that storm only the survivors of the middle generation's collections
are frozen (as they are in every storm without a pause: each object walked in the oldest
generation once). Outside a storm the collector runs as usual: connections that closed before
a full collection reached them (a slow client's, cut at its hello deadline) are freed by it,
not kept until a reclaim.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: The longest the collector stays paused in one storm (s; asked every ``watch`` step, so up to
#: one step more): a reconnect storm is over well within it (10,000 pages on two workers, and
#: :data:`STORM_LINGER_S` after them), churn that never ends is not.
STORM_PAUSE_MOST_S = 20.0

#: Allocations the collector lets pass before it looks at the youngest generation (Python's
#: default is 700). At 700 the objects of the requests in flight at each look survive into the
#: older generations, and their growth sets off full collections of the whole heap, each a
#: pause of every player's acks: at 2,000 players acting once a second, ack p99 144 ms at 700,
#: 12 ms at 10,000, 10 ms with the collector off (one run each, benchmarks/action_path.py's
#: human pace, after 300 and 1,000 players). Objects that wait longer cost a little memory.
GC_YOUNG_THRESHOLD = 10_000

#: Collections of the youngest generation after which the collector looks at the middle one
#: (Python's default is 10). A storm of new connections keeps most of what each young
#: collection sees, and the middle generation grew to some 100,000 objects between its
#: collections, each a pause of 50 to 180 ms; at 2 it holds a fifth of that.
GC_MIDDLE_THRESHOLD = 2

#: Collections of the middle generation after which the collector may look at the oldest
#: (Python's default is 10): none to wait for, so that the oldest generation is collected as
#: soon as a quarter more objects than it kept at its last collection have reached it (the
#: collector's own rule, which it applies on top of this count). With the youngest generation
#: at 10,000 the default count meant a full collection only every 1.1 million allocations or
#: so: the objects of connections that lived long enough to reach the oldest generation (every
#: websocket that waits for its hello, a request whose body is slow) and were closed since
#: waited there until then, in reference cycles only a full collection frees (exceptions'
#: tracebacks, the frames they hold, the transports those hold): 250,000 objects, 60 MiB more
#: memory that never came back, under benchmarks/slowloris.py's attack from 8 addresses.
GC_OLDEST_THRESHOLD = 0

#: How long a storm lasts after a connection last waited at the door or to be let go (s): its
#: pages are still coming back and saying hello for seconds after the door stopped holding them.
STORM_LINGER_S = 10.0

#: A reclaim is due once the process's memory is this many times what it was after the last.
RECLAIM_GROWTH = 1.5
#: A reclaim is made even while the process is busy or in a storm once its memory is this
#: many times what it was after the last (at most one every :data:`RECLAIM_EVERY_S` too).
RECLAIM_FORCE_GROWTH = 3.0
#: The shortest time between two reclaims (s).
RECLAIM_EVERY_S = 300.0
#: How often the process asks whether a reclaim is due (s).
RECLAIM_CHECK_S = 5.0


def resident_bytes() -> int:
    """The process's resident memory (bytes): ``/proc/self/statm`` where there is one, else
    the most it ever had (:func:`resource.getrusage`)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Collector:
    """Owns the collector's settings of one server process (see the module's docstring).

    Args:
        reclaim_growth: a reclaim is due once the process's memory is this many times what it
            was after the last reclaim (or the start), at least 1.
        reclaim_force_growth: a due reclaim is made whatever the process is doing once its
            memory is this many times the baseline, at least ``reclaim_growth``.
        reclaim_every_s: the shortest time between two reclaims (s).
        clock: the monotonic clock reclaims are timed on (s).
        memory: the process's memory now (bytes; :func:`resident_bytes`).
        in_storm: whether the process is in a storm now, when the collector pauses for
            ``storm_pause_most_s`` at most, then freezes the survivors of its middle
            collections (called after each of its collections and at each ``watch`` step; a
            few attribute reads at most).
        storm_pause_most_s: the longest pause in one storm (s).

    Raises:
        ValueError: a growth under 1, a forced growth under the growth, or a negative time.
    """

    def __init__(
        self,
        reclaim_growth: float = RECLAIM_GROWTH,
        reclaim_force_growth: float = RECLAIM_FORCE_GROWTH,
        reclaim_every_s: float = RECLAIM_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        memory: Callable[[], int] = resident_bytes,
        in_storm: Callable[[], bool] = lambda: False,
        storm_pause_most_s: float = STORM_PAUSE_MOST_S,
    ) -> None:
        if reclaim_growth < 1 or reclaim_every_s < 0:
            raise ValueError(
                f"reclaim_growth must be at least 1 and reclaim_every_s not negative, not "
                f"{reclaim_growth} and {reclaim_every_s}"
            )
        if storm_pause_most_s < 0:
            raise ValueError(f"storm_pause_most_s must not be negative, not {storm_pause_most_s}")
        if reclaim_force_growth < reclaim_growth:
            raise ValueError(
                f"reclaim_force_growth must be at least reclaim_growth ({reclaim_growth}), "
                f"not {reclaim_force_growth}"
            )
        self._growth = reclaim_growth
        self._force_growth = reclaim_force_growth
        self._every_s = reclaim_every_s
        self._clock = clock
        self._memory = memory
        self._in_storm = in_storm
        self._pause_most_s = storm_pause_most_s
        self._paused_at = 0.0
        #: The storm going on has had its pause (it outlasted it).
        self._paused_this_storm = False
        #: The process's memory after the start or the last reclaim (bytes).
        self.baseline = 0
        self._reclaimed_at = -float("inf")
        #: Full collections whose survivors were frozen, storms the collector paused for,
        #: pauses ended while their storm went on, middle collections whose survivors were
        #: frozen in a storm, reclaims done, and those of them made while the process was busy
        #: or in a storm, so far.
        self.frozen_collections = 0
        self.storm_pauses = 0
        self.pauses_outlasted = 0
        self.frozen_in_storm = 0
        #: Whether the collector is paused for a storm now.
        self.paused = False
        self.reclaims = 0
        self.forced_reclaims = 0
        self._started = False

    def start(self) -> None:
        """Collect, freeze every object alive now (modules, the schema, compiled statements:
        some hundreds of thousands), set the thresholds (:data:`GC_YOUNG_THRESHOLD`,
        :data:`GC_MIDDLE_THRESHOLD`, :data:`GC_OLDEST_THRESHOLD`) and freeze the survivors
        of every full collection from now on."""
        gc.collect()
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, GC_OLDEST_THRESHOLD)
        self.baseline = self._memory()
        self._reclaimed_at = self._clock()
        gc.callbacks.append(self._after_collection)
        self._started = True
        log.info(
            "%d objects alive after start moved out of the collector's reach",
            gc.get_freeze_count(),
        )

    def stop(self) -> None:
        """Stop freezing the survivors of full collections and turn a paused collector on
        again (what is frozen stays so)."""
        if self._started:
            gc.callbacks.remove(self._after_collection)
            self._started = False
            self._resume()

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        """A full collection's survivors leave the collector's reach as it ends; at the first
        collection of a storm every survivor does, and the collector pauses (see
        :meth:`watch`); in a storm that outlasted its pause, a middle collection's survivors
        do."""
        if phase != "stop":
            return
        if info["generation"] == 2:
            gc.freeze()
            self.frozen_collections += 1
        if self.paused or not self._in_storm():
            return
        if not self._paused_this_storm:
            gc.freeze()
            gc.disable()
            self.paused = True
            self._paused_this_storm = True
            self._paused_at = self._clock()
            self.storm_pauses += 1
        elif info["generation"] == 1:
            gc.freeze()
            self.frozen_in_storm += 1

    def _resume(self) -> None:
        """After a storm: what it made leaves the collector's reach as it is (no walk), and
        the collector runs again."""
        if self.paused:
            gc.freeze()
            gc.enable()
            self.paused = False

    @property
    def due(self) -> bool:
        """Whether a reclaim is due: ``reclaim_every_s`` passed since the last reclaim (or
        the start), and the process's memory grew to ``reclaim_growth`` times the
        baseline."""
        return (
            self._clock() - self._reclaimed_at >= self._every_s
            and self._memory() >= self._growth * self.baseline
        )

    @property
    def pressing(self) -> bool:
        """Whether the process's memory reached ``reclaim_force_growth`` times the baseline."""
        return self._memory() >= self._force_growth * self.baseline

    def reclaim(self) -> int:
        """Give every frozen object back to the collector, collect them all and freeze the
        survivors again (a pause that walks the whole heap); returns the objects freed."""
        began = time.perf_counter()
        gc.unfreeze()
        freed = gc.collect()  # its survivors are frozen as it ends (_after_collection)
        gc.freeze()
        self.baseline = self._memory()
        self._reclaimed_at = self._clock()
        self.reclaims += 1
        log.info(
            "collector: reclaimed %d unreachable objects in %.0f ms; %d MiB resident",
            freed,
            (time.perf_counter() - began) * 1000,
            self.baseline >> 20,
        )
        return freed

    async def watch(self, every_s: float, quiet: Callable[[], bool]) -> None:
        """Every ``every_s`` seconds until cancelled: turn the collector on again if it was
        paused for a storm that is over, or that has lasted ``storm_pause_most_s``; reclaim
        if one is :attr:`due`, the process is ``quiet()`` (nobody waiting, its loop on time)
        and not in a storm (``in_storm``: a reclaim's pause of most of a second is not for
        then), or if one is due and :attr:`pressing` whatever the process is doing."""
        while True:
            await asyncio.sleep(every_s)
            if not self._in_storm():
                self._resume()
                self._paused_this_storm = False
            elif self.paused and self._clock() - self._paused_at >= self._pause_most_s:
                self._resume()
                self.pauses_outlasted += 1
                log.info(
                    "collector: a storm outlasted its pause (%.0f s): running again",
                    self._pause_most_s,
                )
            if not self.due:
                continue
            if quiet() and not self._in_storm():
                self.reclaim()
            elif self.pressing:
                log.warning(
                    "collector: memory at %.1f times its baseline while the process is busy: "
                    "reclaiming now",
                    self._memory() / max(1, self.baseline),
                )
                self.forced_reclaims += 1
                self.reclaim()


__all__ = [
    "GC_MIDDLE_THRESHOLD",
    "GC_OLDEST_THRESHOLD",
    "GC_YOUNG_THRESHOLD",
    "RECLAIM_CHECK_S",
    "RECLAIM_FORCE_GROWTH",
    "STORM_LINGER_S",
    "STORM_PAUSE_MOST_S",
    "Collector",
    "resident_bytes",
]
