"""Reads on a real streaming replica: a primary and a hot standby of the test's own
(``pg_basebackup -R``), and a real server whose ``TRIPEAKS_DATABASE_READ_URLS`` names the
standby. Board reads are answered by the standby; a finisher sees their own rank at once even
while the standby's replay is paused; a standby past the lag bound, stopped or frozen is not
read, and the reads go on on the primary."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from server.bench.process import free_port
from server.engine import RuleSet
from server.services.clock import FakeClock
from tests.boards import BOARD, DATE, get_json
from tests.conftest import ServerFactory
from tests.helpers import (
    WsPlayer,
    blocking_line,
    daily_code,
    eventually,
    metric,
    metric_samples,
    register,
)
from tests.pg import PrivatePostgres, primary_and_standby

Client = TestClient[Any, Any]


@dataclass
class Replicated:
    """A primary and its streaming standby, both running."""

    primary: PrivatePostgres
    standby: PrivatePostgres

    @property
    def replica(self) -> str:
        """The standby's name in the metrics' ``replica`` label."""
        return _name(self.standby)

    async def on_standby(self, sql: str) -> Any:
        """Run one statement on the standby's ``postgres`` database and return its value."""
        conn = await asyncpg.connect(self.standby.admin_url, timeout=10)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()


@pytest.fixture
def replicated() -> Iterator[Replicated]:
    """A primary with an empty ``tripeaks`` database and a hot standby streaming from it, each
    on a free loopback port; both stopped (woken first if frozen) and deleted afterwards."""
    with primary_and_standby() as (primary, standby):
        try:
            yield Replicated(primary, standby)
        finally:
            _resume_processes(standby)


def _processes(server: PrivatePostgres) -> list[int]:
    """The server's postmaster and its children."""
    try:
        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children")
    try:
        return [postmaster, *(int(pid) for pid in children.read_text().split())]
    except OSError:
        return []


def _signal_processes(server: PrivatePostgres, sig: signal.Signals) -> None:
    for pid in _processes(server):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _resume_processes(server: PrivatePostgres) -> None:
    _signal_processes(server, signal.SIGCONT)


async def _scrape(client: Client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    resp = await client.get("/metrics")
    assert resp.status == 200
    return metric_samples(await resp.text())


async def _reads(client: Client, target: str) -> float:
    return metric(await _scrape(client), "tripeaks_db_reads_total", target=target)


async def _fallbacks(client: Client, reason: str) -> float:
    return metric(await _scrape(client), "tripeaks_db_read_fallbacks_total", reason=reason)


async def _usable(client: Client, replica: str) -> float:
    return metric(await _scrape(client), "tripeaks_db_replica_usable", replica=replica)


@contextlib.asynccontextmanager
async def _serving(
    make_server: ServerFactory,
    replicated: Replicated,
    *more: PrivatePostgres,
    **overrides: object,
) -> AsyncIterator[Client]:
    """A client of a server on the primary that reads on the standby (and on the ``more``
    standbys), once each is in use."""
    standbys = [replicated.standby, *more]
    server = await make_server(
        database_url=replicated.primary.url,
        database_read_urls=",".join(standby.url for standby in standbys),
        database_read_probe_s=0.1,
        **overrides,
    )
    async with TestClient(server) as client:
        for standby in standbys:
            await _until_used(client, _name(standby), True, "each standby to be taken into use")
        yield client


def _name(standby: PrivatePostgres) -> str:
    """A standby's name in the metrics' ``replica`` label."""
    return f"127.0.0.1:{standby.port}"


async def _until_used(client: Client, replica: str, used: bool, what: str) -> None:
    async def holds() -> bool:
        return await _usable(client, replica) == (1 if used else 0)

    await eventually(holds, what)


async def _finish_daily(
    client: Client, clock: FakeClock, settings: Any, name: str
) -> dict[str, Any]:
    """Register ``name`` and play today's daily to its end (blocked, a minute after the
    previous one) over a websocket; the player as registered, with ``game_id`` and ``seq``."""
    clock.advance(ms=60_000)
    code = daily_code((settings.daily_secret or "").encode(), DATE, RuleSet.EASY)
    line = blocking_line(code.deal(), code.rules)
    assert line is not None
    player = await register(client, name)
    ws, _ = await WsPlayer.connect(client, player["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    final = await ws.play(game, line)
    assert final["status"] == "blocked"
    await ws.close()
    return {**player, "game_id": game["game_id"], "seq": final["seq"]}


def _names(board: dict[str, Any]) -> list[str]:
    return [entry["name"] for entry in board["entries"]]


async def test_board_reads_go_to_the_replica_and_a_finisher_sees_their_rank_while_it_is_paused(
    make_server: ServerFactory, replicated: Replicated, clock: FakeClock, settings: Any
) -> None:
    async with _serving(make_server, replicated, database_read_max_lag_s=3600) as client:
        alice = await _finish_daily(client, clock, settings, "Alice")

        # The standby has Alice's game once it has replayed it; the page is read there.
        async def alice_on_the_board() -> bool:
            return _names(await get_json(client, BOARD)) == ["Alice"]

        await eventually(alice_on_the_board, "Alice's entry on the board")
        before = await _reads(client, "replica")
        assert _names(await get_json(client, BOARD)) == ["Alice"]
        assert await _reads(client, "replica") == before + 1
        assert await replicated.on_standby(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tripeaks'"
        )

        await replicated.on_standby("SELECT pg_wal_replay_pause()")

        async def paused() -> bool:
            state = await replicated.on_standby("SELECT pg_get_wal_replay_pause_state()")
            return bool(state == "paused")

        await eventually(paused, "the standby's replay to pause")
        missing = await _fallbacks(client, "missing")
        bob = await _finish_daily(client, clock, settings, "Bob")

        # Bob's own rank, at once, though the standby has not replayed his game.
        around = await get_json(client, f"{BOARD}/around/{bob['id']}", radius=0)
        assert [(e["name"], e["rank"]) for e in around["entries"]] == [("Bob", 1)]
        resp = await client.get(
            f"{BOARD}/friends", headers={"Authorization": f"Bearer {bob['token']}"}
        )
        assert resp.status == 200
        assert "Bob" in _names(await resp.json())
        # A player registered meanwhile has a profile at once.
        carl = await register(client, "Carl")
        profile = await get_json(client, f"/api/v1/players/{carl['id']}")
        assert profile["name"] == "Carl"
        assert await _fallbacks(client, "missing") == missing + 3
        # The page, which tolerates lag, is still the paused standby's; so are the daily's
        # counts (Bob joined after the pause).
        assert _names(await get_json(client, BOARD)) == ["Alice"]
        daily = await get_json(client, f"/api/v1/daily/{DATE.isoformat()}")
        assert (daily["players"], daily["ranked"]) == (1, 1)

        # Once the date is over, Alice's replay (her game ended on the standby) is the
        # standby's; Bob's, whose end it has not replayed, is the primary's, whole.
        clock.set(dt.datetime(2026, 3, 15, 0, 0, tzinfo=dt.UTC))
        replica, missing = await _reads(client, "replica"), await _fallbacks(client, "missing")
        for finisher in (alice, bob):
            replay = await get_json(client, f"/api/v1/games/{finisher['game_id']}/replay")
            assert len(replay["actions"]) == finisher["seq"]
        assert await _reads(client, "replica") == replica + 1
        assert await _fallbacks(client, "missing") == missing + 1

        await replicated.on_standby("SELECT pg_wal_replay_resume()")

        async def both_on_the_board() -> bool:
            return sorted(_names(await get_json(client, BOARD))) == ["Alice", "Bob"]

        await eventually(both_on_the_board, "Bob's entry on the standby's board")


async def test_a_replica_past_the_lag_bound_is_not_read(
    make_server: ServerFactory, replicated: Replicated, clock: FakeClock, settings: Any
) -> None:
    async with _serving(make_server, replicated, database_read_max_lag_s=0.5) as client:
        await replicated.on_standby("SELECT pg_wal_replay_pause()")
        await _finish_daily(client, clock, settings, "Carol")

        await _until_used(client, replicated.replica, False, "the paused standby out of use")
        primary, skipped = await _reads(client, "primary"), await _fallbacks(client, "no_replica")
        lag = metric(
            await _scrape(client), "tripeaks_db_replica_lag_seconds", replica=replicated.replica
        )
        assert lag > 0.5
        # The board is the primary's: Carol's entry is on it.
        assert _names(await get_json(client, BOARD)) == ["Carol"]
        assert await _reads(client, "primary") == primary + 1
        assert await _fallbacks(client, "no_replica") == skipped + 1

        await replicated.on_standby("SELECT pg_wal_replay_resume()")
        await _until_used(client, replicated.replica, True, "the standby back in use, caught up")


async def test_a_replica_past_the_lag_bound_leaves_its_reads_to_another(
    make_server: ServerFactory, replicated: Replicated, clock: FakeClock, settings: Any
) -> None:
    second = PrivatePostgres(Path(tempfile.mkdtemp(prefix="tripeaks-pg-")), free_port())
    try:
        second.follow(replicated.primary)
        second.start()
        async with _serving(make_server, replicated, second, database_read_max_lag_s=0.5) as client:
            await replicated.on_standby("SELECT pg_wal_replay_pause()")
            await _finish_daily(client, clock, settings, "Fay")
            await _until_used(client, replicated.replica, False, "the paused standby out of use")

            async def fay_on_the_board() -> bool:
                return _names(await get_json(client, BOARD)) == ["Fay"]

            await eventually(fay_on_the_board, "Fay's entry on the other standby's board")
            replica, primary = await _reads(client, "replica"), await _reads(client, "primary")
            for _ in range(3):
                assert _names(await get_json(client, BOARD)) == ["Fay"]
            assert await _reads(client, "replica") == replica + 3
            assert await _reads(client, "primary") == primary
            await replicated.on_standby("SELECT pg_wal_replay_resume()")
    finally:
        if second.data.exists() and second.running():
            second.stop("immediate")
        shutil.rmtree(second.root, ignore_errors=True)


async def test_a_stopped_replica_is_not_read(
    make_server: ServerFactory, replicated: Replicated, clock: FakeClock, settings: Any
) -> None:
    async with _serving(make_server, replicated) as client:
        await _finish_daily(client, clock, settings, "Dave")
        replicated.standby.stop("immediate")
        primary = await _reads(client, "primary")
        # Whether the probe or this read finds it gone first, the read is the primary's.
        assert _names(await get_json(client, BOARD)) == ["Dave"]
        assert await _reads(client, "primary") == primary + 1

        await _until_used(client, replicated.replica, False, "the stopped standby out of use")
        assert _names(await get_json(client, BOARD)) == ["Dave"]


async def test_a_frozen_replica_is_not_read(
    make_server: ServerFactory, replicated: Replicated, clock: FakeClock, settings: Any
) -> None:
    async with _serving(make_server, replicated, database_read_timeout_s=0.5) as client:
        await _finish_daily(client, clock, settings, "Erin")
        _signal_processes(replicated.standby, signal.SIGSTOP)
        try:
            fallbacks = await _fallbacks(client, "failed") + await _fallbacks(client, "no_replica")
            # The read on the frozen standby misses its deadline and is done on the primary.
            assert _names(await get_json(client, BOARD)) == ["Erin"]

            await _until_used(
                client, replicated.replica, False, "the frozen standby to be taken out of use"
            )
            after = await _fallbacks(client, "failed") + await _fallbacks(client, "no_replica")
            assert after == fallbacks + 1
            assert _names(await get_json(client, BOARD)) == ["Erin"]
        finally:
            _resume_processes(replicated.standby)
        await _until_used(client, replicated.replica, True, "the thawed standby back in use")
