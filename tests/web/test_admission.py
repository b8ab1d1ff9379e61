"""Admission: newcomers take turns for part of the database pool; one who would wait too long
is told ``server_busy`` and when to come back, and nothing is done."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client import REGISTRY
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from server.errors import (
    ConflictError,
    ServerBusyError,
    ServiceError,
    StorageConflict,
    StorageError,
    StorageUnavailable,
    UnavailableError,
    refusal,
)
from server.storage.sessions import as_storage_error, storage_errors
from server.web.admission import GREETING_LIMIT, SHED_AFTER_MEASURES, Admission
from server.web.keys import ADMISSION
from tests.conftest import ServerFactory
from tests.helpers import eventually, register


async def test_turns_are_taken_in_arrival_order_up_to_the_limit() -> None:
    gate = Admission(limit=2, wait_s=30)
    order: list[int] = []
    release = asyncio.Event()

    async def arrive(n: int) -> None:
        async with gate.turn():
            order.append(n)
            await release.wait()

    tasks = [asyncio.create_task(arrive(n)) for n in range(5)]
    await eventually(lambda: len(order) == 2 and gate.waiting == 3, "two in, three waiting")
    assert order == [0, 1]
    release.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]


async def test_a_newcomer_waiting_too_long_or_beyond_the_queue_is_turned_away() -> None:
    gate = Admission(limit=1, wait_s=0.1, queue=1, retry_after_s=3)
    hold = asyncio.Event()

    async def holder() -> None:
        async with gate.turn():
            await hold.wait()

    task = asyncio.create_task(holder())
    await eventually(lambda: gate.waiting == 0 and gate._slots.locked(), "the slot held")
    with pytest.raises(ServerBusyError) as waited:
        async with gate.turn():
            pass
    assert waited.value.retry_after_s == 3 and "try again in 3 s" in waited.value.message
    waiter = asyncio.create_task(gate.turn().__aenter__())
    await eventually(lambda: gate.waiting == 1, "one waiting")
    with pytest.raises(ServerBusyError):  # the queue (1) is full: turned away at once
        async with gate.turn():
            pass
    with pytest.raises(ServerBusyError):
        await waiter
    assert gate.turned_away == 3
    hold.set()
    await task


def test_an_admission_that_admits_nobody_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Admission(limit=0)


async def test_a_crowd_beyond_its_turn_is_told_server_busy_and_nothing_is_done(
    make_server: ServerFactory,
) -> None:
    server = await make_server(db_pool_size=2, admission_wait_s=0.2)
    gate = server.app[ADMISSION]
    async with TestClient(server) as client:
        known = await register(client, "Known")
        seated = await client.ws_connect("/ws")
        await seated.send_json({"type": "hello", "token": known["token"]})
        assert (await seated.receive_json())["type"] == "welcome"
        held = gate.turn()
        await held.__aenter__()  # every slot taken (half a pool of 2)
        greetings = [gate.turn(greeting=True) for _ in range(GREETING_LIMIT)]
        for greeting in greetings:  # and every hello's
            await greeting.__aenter__()
        try:
            resp = await client.post("/api/v1/players", json={"name": "Latecomer"})
            assert resp.status == 503
            assert resp.headers["Retry-After"] == "2"
            body: dict[str, Any] = await resp.json()
            assert body["error"]["code"] == "server_busy"
            ws = await client.ws_connect("/ws")
            await ws.send_json({"type": "hello", "token": known["token"], "id": "h"})
            reply = await ws.receive_json()
            assert (reply["type"], reply["code"], reply["id"]) == ("error", "server_busy", "h")
            assert reply["retry_after_ms"] == 2000
            # A new table is part of getting in too; playing players' other requests are not.
            await seated.send_json({"type": "new_game", "id": "n"})
            reply = await seated.receive_json()
            assert (reply["code"], reply["id"]) == ("server_busy", "n")
            await seated.send_json({"type": "ping", "id": "p"})
            assert (await seated.receive_json())["type"] == "pong"
        finally:
            await held.__aexit__(None, None, None)
            for greeting in greetings:
                await greeting.__aexit__(None, None, None)
        # Nothing was done: the latecomer's name is free, and the hello works now.
        assert (await register(client, "Latecomer"))["name"] == "Latecomer"
        await ws.send_json({"type": "hello", "token": known["token"], "id": "h2"})
        assert (await ws.receive_json())["type"] == "welcome"
        await ws.close()
        await seated.send_json({"type": "new_game", "id": "n2"})
        assert (await seated.receive_json())["type"] == "game"
        await seated.close()


def _refused(exc: Exception) -> ServiceError:
    """What a player is told for ``exc`` raised under a storage session."""
    with pytest.raises(StorageError) as caught, storage_errors():
        raise exc
    return refusal(caught.value)


def test_a_pool_with_no_connection_free_is_answered_server_busy_not_unavailable() -> None:
    busy = _refused(PoolTimeout("QueuePool limit of size 10 overflow 10 reached"))
    assert isinstance(busy, ServerBusyError) and busy.code == "server_busy"
    assert busy.retry_after_s > 0 and "nothing was changed" in busy.message
    down = _refused(OperationalError("SELECT 1", {}, ConnectionRefusedError()))
    assert isinstance(down, UnavailableError) and down.code == "unavailable"
    refused = ConnectionRefusedError()
    assert isinstance(as_storage_error(refused), StorageUnavailable)
    assert as_storage_error(refused).__cause__ is refused
    assert isinstance(refusal(StorageConflict("players_name_key_key")), ConflictError)
    unrelated = KeyError("x")
    assert as_storage_error(unrelated) is unrelated


def _hold_up_the_loop(seconds: float) -> None:
    """Keep the running event loop busy computing for ``seconds`` (on purpose: the lag under
    test, the process's own work)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        sum(range(1000))


def _stall_the_loop(seconds: float) -> None:
    """Hold the running event loop for ``seconds`` without computing (on purpose: a process
    the machine does not run, which uses no CPU)."""
    time.sleep(seconds)


class _FrozenCpu:
    """A process CPU clock that stands still: a process the machine schedules late, which
    uses no CPU while it waits."""

    def __call__(self) -> float:
        return 0.0


def _late_measures() -> tuple[float, float]:
    """The loop lag histogram's measures, and those later than 0.5 s."""
    name = "tripeaks_event_loop_lag_seconds"
    count = REGISTRY.get_sample_value(f"{name}_count") or 0.0
    within = REGISTRY.get_sample_value(f"{name}_bucket", {"le": "0.5"}) or 0.0
    return count, count - within


async def test_every_measure_of_the_loop_goes_into_its_lag_histogram() -> None:
    gate = Admission(limit=5, wait_s=30, shed_lag_s=0.3, retry_after_s=3)
    watcher = asyncio.create_task(gate.watch_loop(0.01))
    try:
        await eventually(lambda: gate.measures > 0, "the loop measured")
        count, late = _late_measures()
        measured = gate.measures
        _hold_up_the_loop(0.6)
        await eventually(lambda: gate.measures > measured, "the lag measured")
        assert gate.lag_s >= 0.5
        now_count, now_late = _late_measures()
        assert now_count >= count + 1 and now_late == late + 1
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def test_newcomers_are_turned_away_at_once_while_the_event_loop_runs_late() -> None:
    gate = Admission(limit=5, wait_s=30, shed_lag_s=0.3, retry_after_s=3)
    watcher = asyncio.create_task(gate.watch_loop(0.01))

    async def storm() -> None:  # as a storm's hellos would: the loop late, measure after measure
        while True:
            _hold_up_the_loop(0.6)
            await asyncio.sleep(0)

    try:
        await eventually(
            lambda: gate.measures > 0 and not gate.shedding and gate.lag_s < 0.3,
            "the loop measured on time",
        )
        async with gate.turn():
            pass
        _hold_up_the_loop(0.6)  # one late measure alone: the machine, as often as not
        measured = gate.measures
        await eventually(lambda: gate.measures > measured, "the lag measured")
        assert gate.lag_s >= 0.3 and not gate.shedding
        async with gate.turn():
            pass
        stormer = asyncio.create_task(storm())
        try:
            await eventually(lambda: gate.shedding, "the lag measured again and again")
        finally:
            stormer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stormer
        with pytest.raises(ServerBusyError) as refused:
            async with gate.turn():
                pass
        assert refused.value.retry_after_s == 3 and gate.turned_away == 1
        await eventually(lambda: not gate.shedding, "the loop on time again")
        async with gate.turn():
            pass
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    assert not Admission(limit=1).shedding  # no limit given: never for the lag
    assert gate.cpu_share > 0


async def test_a_loop_late_while_its_process_has_no_cpu_turns_nobody_away() -> None:
    """The machine running other work first makes the loop late with the process idle:
    turning newcomers away would not make it sooner."""
    gate = Admission(limit=5, wait_s=30, shed_lag_s=0.3, cpu_clock=_FrozenCpu())
    watcher = asyncio.create_task(gate.watch_loop(0.01))

    async def machine_busy() -> None:  # the loop late at every measure, the process waiting
        while True:
            _stall_the_loop(0.4)
            await asyncio.sleep(0)

    late = asyncio.create_task(machine_busy())
    try:
        measured = gate.measures
        await eventually(
            lambda: gate.measures > measured + 2 * SHED_AFTER_MEASURES,
            "the lag measured again and again",
        )
        assert gate.lag_s >= 0.3 and gate.cpu_share == 0 and not gate.shedding
        async with gate.turn():
            pass
        assert gate.turned_away == 0
    finally:
        for task in (late, watcher):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    with pytest.raises(ValueError, match="shed_lag_s"):
        Admission(limit=1, shed_lag_s=0)


async def test_a_hello_while_the_server_sheds_is_told_server_busy_and_nothing_is_done(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One newcomer turned away a 10 s: the second is told to wait about 10 s longer.
    server = await make_server(admission_shed_lag_ms=100, admission_retry_spread_per_s=0.1)
    async with TestClient(server) as client:
        known = await register(client, "Known")
        seated = await client.ws_connect("/ws")
        await seated.send_json({"type": "hello", "token": known["token"]})
        assert (await seated.receive_json())["type"] == "welcome"
        monkeypatch.setattr(Admission, "shedding", property(lambda self: True))
        ws = await client.ws_connect("/ws")
        await ws.send_json({"type": "hello", "token": known["token"], "id": "h"})
        reply = await ws.receive_json()
        assert (reply["type"], reply["code"], reply["id"]) == ("error", "server_busy", "h")
        assert reply["retry_after_ms"] == 2000
        second = await client.ws_connect("/ws")
        await second.send_json({"type": "hello", "token": known["token"], "id": "h"})
        reply = await second.receive_json()
        assert (reply["type"], reply["code"]) == ("error", "server_busy")
        assert 2000 < reply["retry_after_ms"] <= 12_000
        await second.close()
        # The player already in is served as before.
        await seated.send_json({"type": "ping", "id": "p"})
        assert (await seated.receive_json())["type"] == "pong"
        monkeypatch.undo()
        await ws.send_json({"type": "hello", "token": known["token"], "id": "h2"})
        assert (await ws.receive_json())["type"] == "welcome"
        await ws.close()
        await seated.close()


async def test_hellos_beyond_the_queue_wait_their_turn_instead_of_being_turned_away() -> None:
    # Each connection has at most one hello waiting: a storm's hellos are bounded by the
    # connections, and are greeted in turn rather than told to come back later.
    gate = Admission(limit=1, wait_s=30, queue=2, greeting_limit=1)
    hold = asyncio.Event()
    greeted: list[int] = []

    async def greet(n: int) -> None:
        async with gate.turn(greeting=True):
            greeted.append(n)
            await hold.wait()

    hellos = [asyncio.create_task(greet(n)) for n in range(20)]
    await eventually(lambda: greeted == [0] and gate.waiting == 19, "one greeted, 19 waiting")
    # Registrations and new tables still have their queue (2 here), hellos waiting or not.
    admitted: list[int] = []

    async def admit(n: int) -> None:
        async with gate.turn():
            admitted.append(n)
            await hold.wait()

    admissions = [asyncio.create_task(admit(n)) for n in range(3)]
    await eventually(lambda: admitted == [0] and gate.waiting == 21, "one in, two waiting")
    with pytest.raises(ServerBusyError):
        async with gate.turn():
            pass
    assert gate.turned_away == 1
    hold.set()
    await asyncio.gather(*hellos, *admissions)
    assert greeted == list(range(20)) and admitted == [0, 1, 2] and gate.turned_away == 1


async def test_a_bound_on_waiting_hellos_turns_the_one_beyond_it_away() -> None:
    gate = Admission(limit=1, wait_s=30, greeting_limit=1, greeting_queue=1)
    hold = asyncio.Event()

    async def greet() -> None:
        async with gate.turn(greeting=True):
            await hold.wait()

    first, second = asyncio.create_task(greet()), asyncio.create_task(greet())
    await eventually(lambda: gate.waiting == 1, "one greeted, one waiting")
    with pytest.raises(ServerBusyError):
        async with gate.turn(greeting=True):
            pass
    hold.set()
    await asyncio.gather(first, second)
    with pytest.raises(ValueError, match="negative"):
        Admission(limit=1, greeting_queue=-1)
    with pytest.raises(ValueError, match="at least 1"):
        Admission(limit=1, greeting_limit=0)


async def test_the_retry_time_grows_with_how_many_are_turned_away_and_is_bounded() -> None:
    now = [100.0]
    gate = Admission(
        limit=1,
        wait_s=30,
        queue=0,
        retry_after_s=2,
        retry_spread_per_s=100,
        retry_max_s=2.5,
        clock=lambda: now[0],
    )

    async def refused_retry_s() -> float:
        with pytest.raises(ServerBusyError) as refused:
            async with gate.turn():
                pass
        return refused.value.retry_after_s

    # Turned away together: each told to come back 10 ms after the one before, from 2 s on,
    # until the longest retry time; nothing was admitted.
    waits = [await refused_retry_s() for _ in range(80)]
    assert waits[:3] == [2.0, pytest.approx(2.01), pytest.approx(2.02)]
    assert waits[50] == pytest.approx(2.5) and waits[79] == 2.5
    assert all(b >= a for a, b in itertools.pairwise(waits))
    assert gate.turned_away == 80 and gate.waiting == 0
    # 0.2 s later the appointments given are 0.2 s nearer: the next is 10 ms after the last;
    # once they are all past, a newcomer turned away waits the shortest time again.
    now[0] += 0.2
    assert await refused_retry_s() == pytest.approx(2.5 - 0.2 + 0.01)
    now[0] += 10.0
    assert await refused_retry_s() == 2.0
    with pytest.raises(ValueError, match="retry_max_s"):
        Admission(limit=1, retry_after_s=2, retry_max_s=1)
    with pytest.raises(ValueError, match="retry_spread_per_s"):
        Admission(limit=1, retry_spread_per_s=0)
