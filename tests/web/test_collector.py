"""A server process's garbage collector settings (``create_app(freeze_startup=True)``)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest
from aiohttp.test_utils import TestClient, TestServer

from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.web.app import create_app
from server.web.collector import (
    GC_MIDDLE_THRESHOLD,
    GC_OLDEST_THRESHOLD,
    GC_YOUNG_THRESHOLD,
    Collector,
    resident_bytes,
)
from server.web.keys import SOCKETS
from tests.helpers import eventually


@pytest.fixture
def collector() -> Iterator[None]:
    """Give the test process its collector back as it was."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.enable()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector")
async def test_a_server_process_freezes_its_start_and_lets_the_young_generation_grow(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> None:
    server = TestServer(
        create_app(settings, clock=clock, analyzer=analyzer, freeze_startup=True),
        host="127.0.0.1",
    )
    await server.start_server()
    try:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, GC_MIDDLE_THRESHOLD, GC_OLDEST_THRESHOLD)
    finally:
        await server.close()


#: Objects the test keeps, at most, while it waits for the collector: a few hundred thousand
#: (what a busy server keeps alive for a while); with Python's default count for the oldest
#: generation, the collector would look at it only after some 1.1 million.
KEPT_AT_MOST = 500_000


@pytest.mark.usefixtures("collector")
async def test_closed_connections_that_reached_the_oldest_generation_are_freed_by_the_collector(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> None:
    """The objects of connections that lived long enough to reach the oldest generation, then
    closed, are freed by the collector on its own once the server has kept about a quarter more
    objects since it last looked there: they do not wait for a million allocations."""
    server = TestServer(
        create_app(settings, clock=clock, analyzer=analyzer, freeze_startup=True),
        host="127.0.0.1",
    )
    await server.start_server()
    try:
        async with TestClient(server) as client:
            sockets = [await client.ws_connect("/ws") for _ in range(20)]
            await eventually(lambda: len(server.app[SOCKETS]) == 20, "the sockets are open")
            served = [weakref.ref(socket) for socket in server.app[SOCKETS]]
            gc.collect(1)  # as the young collections of a busy server would, in time
            oldest = {id(o) for o in gc.get_objects(generation=2)}
            assert all(id(ref()) in oldest for ref in served)
            del oldest
            for ws in sockets:
                await ws.close()
            await eventually(lambda: not server.app[SOCKETS], "the server saw the closes")
            assert any(ref() is not None for ref in served)  # only a collection frees them

            kept: list[list[int]] = []
            while any(ref() is not None for ref in served) and len(kept) < KEPT_AT_MOST:
                kept += [[n] for n in range(10_000)]
                await asyncio.sleep(0)
            assert all(ref() is None for ref in served), (
                f"closed connections still held after {len(kept):,} objects kept"
            )
            del kept
    finally:
        await server.close()


class _Cycle:
    """An object in a reference cycle with itself: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.mark.usefixtures("collector")
def test_survivors_of_a_full_collection_leave_its_reach_and_a_reclaim_frees_them_once_dead() -> (
    None
):
    now = [0.0]
    collector = Collector(
        reclaim_growth=1.0, reclaim_every_s=60, clock=lambda: now[0], memory=lambda: 1
    )
    collector.start()
    try:
        alive = _Cycle()
        ref = weakref.ref(alive)
        frozen = gc.get_freeze_count()
        gc.collect()  # a full collection: what it finds alive is frozen as it ends
        assert collector.frozen_collections == 1
        assert gc.get_freeze_count() > frozen and not gc.get_objects(generation=2)
        del alive
        gc.collect()
        assert ref() is not None  # frozen: the full collections walk past it
        assert not collector.due  # too soon after the start
        now[0] = 60.0
        assert collector.due
        assert collector.reclaim() >= 1 and ref() is None
        assert collector.reclaims == 1
        assert not collector.due  # just reclaimed
    finally:
        collector.stop()
    gc.collect()
    assert collector.frozen_collections == 3  # the two above and the reclaim's; none once stopped


@pytest.mark.usefixtures("collector")
def test_a_reclaim_is_due_once_the_memory_grew_enough_and_not_sooner_than_asked() -> None:
    now = [1000.0]
    memory = [100 << 20]
    collector = Collector(
        reclaim_growth=1.5, reclaim_every_s=60, clock=lambda: now[0], memory=lambda: memory[0]
    )
    collector.start()
    try:
        assert collector.baseline == 100 << 20 and not collector.due
        memory[0] = 149 << 20
        now[0] += 600
        assert not collector.due  # not grown enough
        memory[0] = 150 << 20
        assert collector.due
        collector.reclaim()
        assert collector.baseline == 150 << 20 and not collector.due  # the new baseline
        memory[0] = 300 << 20
        assert not collector.due  # grown, but too soon after the last
        now[0] += 60
        assert collector.due
    finally:
        collector.stop()
    with pytest.raises(ValueError, match="reclaim_growth"):
        Collector(reclaim_growth=0.5)


def test_the_memory_read_is_the_process_s() -> None:
    assert resident_bytes() > 10 << 20  # a Python process with the server's modules


@pytest.mark.usefixtures("collector")
async def test_in_a_storm_the_collector_pauses_and_after_it_freezes_what_the_storm_made() -> None:
    storm = [False]
    collector = Collector(memory=lambda: 1, in_storm=lambda: storm[0])
    collector.start()
    watcher = asyncio.create_task(collector.watch(0.001, quiet=lambda: False))
    try:
        calm = _Cycle()
        gc.collect(1)  # no storm: its survivors stay in the collector's reach
        assert not collector.paused and gc.isenabled()
        assert any(o is calm for o in gc.get_objects(generation=2))
        storm[0] = True
        stormy = _Cycle()
        frozen = gc.get_freeze_count()
        gc.collect(0)  # the first collection in the storm: all alive frozen, then a pause
        assert collector.paused and not gc.isenabled() and collector.storm_pauses == 1
        assert gc.get_freeze_count() > frozen
        assert not any(o is stormy or o is calm for o in gc.get_objects())
        assert collector.frozen_collections == 0  # no full collection was asked for
        during = _Cycle()  # made in the storm: in the youngest generation, never walked
        await asyncio.sleep(0.01)
        assert collector.paused and not gc.isenabled()
        assert any(o is during for o in gc.get_objects(generation=0))
        storm[0] = False
        await eventually(lambda: not collector.paused, "the collector back after the storm")
        assert gc.isenabled() and collector.storm_pauses == 1
        assert not any(o is during for o in gc.get_objects())  # frozen as it was
    finally:
        watcher.cancel()
        collector.stop()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector")
async def test_a_storm_that_outlasts_its_pause_has_its_middle_survivors_frozen_instead() -> None:
    """Churn that never ends keeps the process in a storm: the collector runs again after
    ``storm_pause_most_s``, freezes what a middle collection finds alive from then on, and
    pauses again only in the next storm."""
    storm = [True]
    now = [0.0]
    collector = Collector(
        memory=lambda: 1, in_storm=lambda: storm[0], clock=lambda: now[0], storm_pause_most_s=20
    )
    collector.start()
    watcher = asyncio.create_task(collector.watch(0.001, quiet=lambda: False))
    try:
        gc.collect(0)
        assert collector.paused and not gc.isenabled()
        now[0] = 19.9
        await asyncio.sleep(0.01)
        assert collector.paused  # not yet
        now[0] = 20.0
        await eventually(lambda: not collector.paused, "the collector back, the storm going on")
        assert gc.isenabled() and collector.pauses_outlasted == 1
        survivor = _Cycle()
        gc.collect(0)  # a young collection: no second pause in the same storm
        assert not collector.paused and collector.storm_pauses == 1
        gc.collect(1)
        assert collector.frozen_in_storm == 1
        assert not any(o is survivor for o in gc.get_objects())
        storm[0] = False
        await asyncio.sleep(0.01)
        calm = _Cycle()
        gc.collect(1)  # no storm: nothing frozen
        assert collector.frozen_in_storm == 1 and any(o is calm for o in gc.get_objects())
        storm[0] = True  # the next storm has its pause
        gc.collect(0)
        assert collector.paused and collector.storm_pauses == 2
    finally:
        watcher.cancel()
        collector.stop()
    assert gc.isenabled()
    with pytest.raises(ValueError, match="storm_pause_most_s"):
        Collector(storm_pause_most_s=-1)


@pytest.mark.usefixtures("collector")
def test_a_collector_paused_for_a_storm_runs_again_when_it_stops() -> None:
    collector = Collector(memory=lambda: 1, in_storm=lambda: True)
    collector.start()
    gc.collect(0)
    assert collector.paused and not gc.isenabled()
    collector.stop()
    assert not collector.paused and gc.isenabled()


@pytest.mark.usefixtures("collector")
async def test_no_reclaim_is_made_in_a_storm_however_due_and_quiet() -> None:
    storm = [True]
    collector = Collector(
        reclaim_growth=1.0, reclaim_every_s=0, memory=lambda: 1, in_storm=lambda: storm[0]
    )
    collector.start()
    watcher = asyncio.create_task(collector.watch(0.001, quiet=lambda: True))
    try:
        for _ in range(20):
            await asyncio.sleep(0.002)
        assert collector.due and collector.reclaims == 0
        storm[0] = False
        await eventually(lambda: collector.reclaims > 0, "a reclaim once the storm is over")
    finally:
        watcher.cancel()
        collector.stop()


@pytest.mark.usefixtures("collector")
async def test_memory_past_the_ceiling_is_reclaimed_however_busy_the_process_is() -> None:
    """Churn that keeps a process busy and in a storm must not let frozen garbage grow for
    ever: past ``reclaim_force_growth`` times the baseline the due reclaim is made anyway,
    and not before."""
    memory = [100]
    collector = Collector(
        reclaim_growth=1.5,
        reclaim_force_growth=3.0,
        reclaim_every_s=0,
        memory=lambda: memory[0],
        in_storm=lambda: True,
    )
    collector.start()
    watcher = asyncio.create_task(collector.watch(0.001, quiet=lambda: False))
    try:
        memory[0] = 299  # due, but the process is busy and in a storm
        for _ in range(20):
            await asyncio.sleep(0.002)
        assert collector.due and not collector.pressing and collector.reclaims == 0
        memory[0] = 300
        await eventually(lambda: collector.reclaims > 0, "a reclaim at the ceiling")
        assert collector.forced_reclaims == collector.reclaims
        assert collector.baseline == 300  # the new baseline: the next ceiling is 900
    finally:
        watcher.cancel()
        collector.stop()
    with pytest.raises(ValueError, match="reclaim_force_growth"):
        Collector(reclaim_growth=2.0, reclaim_force_growth=1.5)
