"""The solver in the product: winnable dailies, par, optimal lines and hints (real servers)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from server.config import Settings
from server.engine import Action, ActionKind, Game, GameCode, RuleSet
from server.engine.solver import solve
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, daily_code, eventually, register


def _past_midnight(clock: FakeClock) -> None:
    tomorrow = clock.now().date() + dt.timedelta(days=1)
    clock.set(dt.datetime.combine(tomorrow, dt.time(0, 0, 1), tzinfo=dt.UTC))


async def test_the_daily_deal_is_the_first_fitting_candidate_with_its_par(
    client: TestClient[Any, Any], settings: Settings, clock: FakeClock
) -> None:
    assert settings.daily_secret
    expected = daily_code(settings.daily_secret.encode(), clock.now().date(), RuleSet.EASY)
    today = await (await client.get("/api/v1/daily")).json()
    assert today["code"] is None and today["line"] is None
    assert today["par"] == solve(expected.deal(), expected.rules).par
    _past_midnight(clock)
    past = await (await client.get(f"/api/v1/daily/{today['date']}")).json()
    assert past["code"] == str(expected)
    assert past["par"] == today["par"]
    # The published optimal line replays through the engine to exactly the par.
    game = Game.new(expected, ranked=True)
    for step in past["line"]:
        applied = game.apply(Action(ActionKind(step["action"]), step["pos"]))
        assert str(applied.card) == step["card"]
    assert game.status.value == "won" and game.score == past["par"]


async def test_classic_dailies_are_winnable_on_many_dates(
    make_server: ServerFactory, clock: FakeClock, settings: Settings
) -> None:
    server = await make_server(daily_rules="C")
    async with TestClient(server) as client:
        for _ in range(5):
            today = await (await client.get("/api/v1/daily")).json()
            _past_midnight(clock)
            past = await (await client.get(f"/api/v1/daily/{today['date']}")).json()
            code = GameCode.parse(past["code"])
            assert code.rules is RuleSet.CLASSIC
            assert solve(code.deal(), code.rules).winnable
            assert past["par"] == 772 - sum(1 for s in past["line"] if s["action"] == "draw")


async def test_a_finished_games_summary_shows_par_and_share(
    client: TestClient[Any, Any],
) -> None:
    info = await register(client, "Parry")
    ws, _ = await WsPlayer.connect(client, info["token"])
    game = (await ws.request({"type": "new_game", "code": "TP1-E-AAAAAAB"}))["game"]
    summary = await (await client.get(f"/api/v1/games/{game['game_id']}")).json()
    assert summary["par"] is None  # still going
    await ws.request({"type": "resign", "game_id": game["game_id"]})
    summary = await (await client.get(f"/api/v1/games/{game['game_id']}")).json()
    par = solve(GameCode.parse("TP1-E-AAAAAAB").deal(), RuleSet.EASY).par
    assert summary["par"] == par
    assert summary["par_share"] == round(500 / par, 4)


async def test_hints_in_free_play_are_legal_and_mark_the_game(
    client: TestClient[Any, Any], database_url: str
) -> None:
    info = await register(client, "Hinted")
    ws, _ = await WsPlayer.connect(client, info["token"])
    game = (await ws.request({"type": "new_game", "code": "TP1-E-AAAAAAC"}))["game"]
    for _ in range(10):
        hint = await ws.request({"type": "hint", "game_id": game["game_id"]})
        assert hint["type"] == "hint" and hint["action"] in ("remove", "draw")
        reply = await ws.act(game, hint["action"], hint["pos"])
        assert reply["type"] == "accepted", reply
        game = reply["game"]
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT hinted FROM games WHERE id = $1", game["game_id"])
    finally:
        await conn.close()
    summary = await (await client.get(f"/api/v1/games/{game['game_id']}")).json()
    assert summary["hinted"] is True


async def test_following_hints_wins_a_winnable_deal(client: TestClient[Any, Any]) -> None:
    info = await register(client, "Follower")
    ws, _ = await WsPlayer.connect(client, info["token"])
    code = GameCode.parse("TP1-E-AAAAAAD")
    par = solve(code.deal(), code.rules).par
    game = (await ws.request({"type": "new_game", "code": str(code)}))["game"]
    while game["status"] == "playing":
        hint = await ws.request({"type": "hint", "game_id": game["game_id"]})
        game = (await ws.act(game, hint["action"], hint["pos"]))["game"]
    assert game["status"] == "won" and game["score"] == par
    reply = await ws.request({"type": "hint", "game_id": game["game_id"]})
    assert (reply["type"], reply["code"]) == ("error", "game_over")


async def test_hints_are_refused_in_the_daily(client: TestClient[Any, Any]) -> None:
    info = await register(client, "NoHelp")
    ws, _ = await WsPlayer.connect(client, info["token"])
    game = (await ws.request({"type": "join_daily"}))["game"]
    reply = await ws.request({"type": "hint", "game_id": game["game_id"]})
    assert (reply["type"], reply["code"]) == ("error", "hints_not_allowed")


async def test_closing_the_solver_pool_ends_its_processes_even_while_they_start() -> None:
    """A pool closed at once (a server stopped within a second of its start) leaves no solver
    process behind: one still starting would otherwise never end, and the interpreter's exit
    would wait for it for ever."""
    analyzer = Analyzer(2)
    code = GameCode.parse("TP1-E-AAAAAAB")
    solving = asyncio.ensure_future(analyzer.analyse(code))  # makes the pool start its processes
    await asyncio.sleep(0)
    processes = list(analyzer._pool._processes.values())
    assert processes and any(p.is_alive() for p in processes)
    analyzer.close()
    # Ended by close (terminated, else killed); on a loaded machine the kernel may take a
    # moment more to reap one, and the pool's own thread may be reaping it at the same moment
    # (a process it reaped reads as alive here until that thread has noted its exit).
    for process in processes:
        process.join(60)
    await eventually(
        lambda: not any(p.is_alive() for p in processes), "the solver processes ended", within_s=60
    )
    solving.cancel()
    await asyncio.gather(solving, return_exceptions=True)


#: A process that solves one deal with its own solver pool, prints its solver processes' pids
#: and waits to be killed.
_SOLVING_PROCESS = """
import asyncio, sys
from server.engine import GameCode
from server.services.analysis import Analyzer

async def main():
    analyzer = Analyzer(2)
    await asyncio.gather(*(analyzer.analyse(GameCode.parse(c)) for c in sys.argv[1:]))
    print(*analyzer._pool._processes, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a living process (not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
async def test_solver_processes_die_with_a_server_process_killed_outright() -> None:
    """A server process SIGKILLed (a worker of ``serve --workers``) takes its solver processes
    with it: left alone they would wait on their task queue for ever, each holding its
    memory."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SOLVING_PROCESS,
        "TP1-E-AAAAAAC",
        "TP1-E-AAAAAAD",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 120)
        solvers = [int(pid) for pid in line.split()]
        assert solvers and all(_alive(pid) for pid in solvers)
    finally:
        process.kill()
        await process.wait()
    try:
        await eventually(
            lambda: not any(_alive(pid) for pid in solvers), "the solver processes to end"
        )
    finally:
        for pid in filter(_alive, solvers):  # left behind: not by the test run too
            os.kill(pid, signal.SIGKILL)
