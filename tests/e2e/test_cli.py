"""The ``tripeaks`` command as a user runs it: real processes, real ports."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path

import aiohttp
import asyncpg
import pytest
from sqlalchemy.engine import make_url

from server.bench.process import free_port
from server.engine import GameCode
from tests.conftest import ADMIN_URL
from tests.helpers import RawWs, Samples, eventually, metric, metric_samples

TRIPEAKS = [sys.executable, "-m", "server"]


def _on_database(tmp_path: Path, port: int, database_url: str, **extra: str) -> dict[str, str]:
    """The environment of ``tripeaks serve`` on ``port`` over the test's database."""
    return _env(
        TRIPEAKS_PORT=str(port),
        TRIPEAKS_DATA_DIR=str(tmp_path / "data"),
        DATABASE_URL=database_url,
        TRIPEAKS_DAILY_SECRET="cli-daily-key-0123456789abcdefghijkl",
        **extra,
    )


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPEAKS_")}
    env.pop("DATABASE_URL", None)
    env.update(extra)
    return env


def test_deal_prints_rows_waste_and_stock() -> None:
    out = subprocess.run(
        [*TRIPEAKS, "deal", "TP1-E-AAAAAAA"], capture_output=True, text=True, check=True
    ).stdout
    lines = out.splitlines()
    assert lines[0].startswith("TP1-E-AAAAAAA")
    assert lines[1].split() == ["3H", "7H", "8D"]
    assert lines[4].split() == ["4S", "7S", "9H", "TS", "9D", "TD", "5H", "TH", "6D", "QS"]
    assert "waste: 4H" in out
    assert "stock: KH 7C 9C" in out


def test_deal_json_matches_the_engine() -> None:
    out = subprocess.run(
        [*TRIPEAKS, "deal", "tp1-c-hellowo", "--json"], capture_output=True, text=True, check=True
    ).stdout
    data = json.loads(out)
    deal = GameCode.parse("TP1-C-HELLOWO").deal()
    assert data == {
        "code": "TP1-C-HELLOWO",
        "rules": "C",
        "tableau": [str(c) for c in deal.tableau],
        "waste": str(deal.waste),
        "stock": [str(c) for c in deal.stock],
    }


def test_deal_rejects_a_bad_code_naming_it() -> None:
    result = subprocess.run([*TRIPEAKS, "deal", "TP1-Q-AAAAAAA"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "TP1-Q-AAAAAAA" in result.stderr


def _start(
    env: dict[str, str], port: int, log: Path, *, new_session: bool = False
) -> subprocess.Popen[str]:
    """Run ``tripeaks serve`` (output to ``log``; in a process group of its own with
    ``new_session``) and wait until it accepts connections."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*TRIPEAKS, "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=new_session,
        )
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait(10)
                pytest.fail(f"server did not start:\n{log.read_text()}")
            time.sleep(0.2)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    """Server processes started by a test, killed afterwards if still running."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def _play_a_little(base: str, name: str = "Cli Player") -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as resp:
            assert resp.status == 200
        async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
            assert resp.status == 201
            token = (await resp.json())["token"]
        async with http.ws_connect(f"{base}/ws") as ws:
            await ws.send_json({"type": "hello", "token": token})
            assert (await ws.receive_json())["type"] == "welcome"
            await ws.send_json({"type": "join_daily"})
            game = (await ws.receive_json())["game"]
            await ws.send_json(
                {"type": "action", "game_id": game["game_id"], "seq": 0, "action": "draw"}
            )
            assert (await ws.receive_json())["type"] == "accepted"


async def test_serve_without_database_url_starts_an_embedded_postgres(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    env = _env(TRIPEAKS_PORT=str(port), TRIPEAKS_DATA_DIR=str(tmp_path / "data"))
    proc = _start(env, port, tmp_path / "server.log")
    processes.append(proc)
    await _play_a_little(f"http://127.0.0.1:{port}")
    assert (tmp_path / "data" / "pg" / "PG_VERSION").exists()
    assert (tmp_path / "data" / "daily_secret").exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0


async def _welcomed(
    http: aiohttp.ClientSession, base: str, name: str
) -> aiohttp.ClientWebSocketResponse:
    """A new player's websocket on ``base``, welcomed."""
    async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
        token = (await resp.json())["token"]
    ws = await http.ws_connect(f"{base}/ws")
    await ws.send_json({"type": "hello", "token": token})
    assert (await ws.receive_json())["type"] == "welcome"
    return ws


async def test_serve_with_database_url_and_sigterm_closes_sockets_with_1001(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    env = _on_database(tmp_path, port, database_url)
    proc = _start(env, port, tmp_path / "server.log")
    processes.append(proc)
    # What is alive once started is frozen out of the collector's full collections.
    assert "objects alive after start moved out" in (tmp_path / "server.log").read_text()
    base = f"http://127.0.0.1:{port}"
    await _play_a_little(base)
    async with aiohttp.ClientSession() as http, await _welcomed(http, base, "Sigterm") as ws:
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        msg = await ws.receive(timeout=10)
        assert msg.type is aiohttp.WSMsgType.CLOSE and msg.data == 1001
    assert proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 10
    # The whole clean-up ran (aiohttp stops by cancelling its main task): the process took its
    # presence record away with it.
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM server_instances") == 0
    finally:
        await conn.close()


async def test_serve_answers_health_and_metrics_on_the_operations_port_of_each_worker(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    ops_port = free_port()
    proc, port = await _two_workers(
        database_url,
        tmp_path,
        processes,
        TRIPEAKS_OPS_PORT=str(ops_port),
        TRIPEAKS_OPS_HOST="127.0.0.2",  # an address of its own (the main port's: 127.0.0.1)
    )
    await _play_a_little(f"http://127.0.0.1:{port}")
    ops = f"http://127.0.0.2:{ops_port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:
        for _ in range(20):  # new connections each: they land on either worker
            async with http.get(f"{ops}/readyz") as resp:
                assert resp.status == 200
                assert await resp.json() == {"status": "ok", "database": "ok"}
            async with http.get(f"{ops}/metrics") as resp:
                assert resp.status == 200
                assert "tripeaks_" in await resp.text()
        async with http.get(f"{ops}/api/v1/daily") as resp:
            assert resp.status == 404
        with pytest.raises(aiohttp.ClientConnectionError):  # not on the main port's address
            await http.get(f"http://127.0.0.1:{ops_port}/healthz")
    assert f"health and metrics also on {ops}" in (tmp_path / "server.log").read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


async def test_a_request_held_open_on_the_operations_port_does_not_hold_up_the_shutdown(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """The operations port is closed first and gives its requests in flight a second: a client
    that keeps one going (its body never ends, and the body time-out is long) does not keep
    the players from being told the server is going away."""
    port, ops_port = free_port(), free_port()
    env = _on_database(
        tmp_path,
        port,
        database_url,
        TRIPEAKS_OPS_PORT=str(ops_port),
        TRIPEAKS_HTTP_BODY_TIMEOUT_S="300",
    )
    proc = _start(env, port, tmp_path / "server.log")
    processes.append(proc)
    base = f"http://127.0.0.1:{port}"
    await _play_a_little(base)
    reader, writer = await asyncio.open_connection("127.0.0.1", ops_port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc")
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")  # answered; its body lingers
    async with aiohttp.ClientSession() as http, await _welcomed(http, base, "Going") as ws:
        proc.send_signal(signal.SIGTERM)
        msg = await ws.receive(timeout=30)  # aiohttp's own wait would be 60 s
        assert msg.type is aiohttp.WSMsgType.CLOSE and msg.data == 1001
    assert proc.wait(timeout=30) == 0
    await asyncio.wait_for(reader.read(), 30)  # what is left of the answer, then the end
    assert reader.at_eof()  # closed by the server going
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


def test_serve_refuses_an_operations_port_listened_on(database_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ops_port = taken.getsockname()[1]
        for workers in ("1", "2"):
            env = _on_database(
                tmp_path,
                free_port(),
                database_url,
                TRIPEAKS_OPS_PORT=str(ops_port),
                TRIPEAKS_WORKERS=workers,
                TRIPEAKS_SOLVER_WORKERS="0",
            )
            done = subprocess.run(
                [*TRIPEAKS, "serve"], env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode != 0, workers
            assert f"cannot listen on 127.0.0.1:{ops_port}" in done.stderr, done.stderr
            assert "TRIPEAKS_OPS_PORT" in done.stderr


@pytest.mark.parametrize("how", ["with its group at once", "during the shutdown"])
async def test_a_second_sigterm_does_not_cut_the_shutdown_short(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]], how: str
) -> None:
    """``timeout`` and process managers send SIGTERM to the process and to its group at once,
    and a supervisor may send it again while the server stops: the shutdown runs to its end
    all the same (a second signal ended it with status 1, its clean-up undone and its presence
    record left behind)."""
    port = free_port()
    log = tmp_path / "server.log"
    proc = _start(_on_database(tmp_path, port, database_url), port, log, new_session=True)
    processes.append(proc)
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as http, await _welcomed(http, base, "Twice") as ws:
        os.kill(proc.pid, signal.SIGTERM)
        if how == "with its group at once":
            os.killpg(proc.pid, signal.SIGTERM)
        msg = await ws.receive(timeout=30)
        assert msg.type is aiohttp.WSMsgType.CLOSE and msg.data == 1001
        if how == "during the shutdown":
            for _ in range(5):  # again and again while it stops
                os.kill(proc.pid, signal.SIGTERM)
                await asyncio.sleep(0)
    assert proc.wait(timeout=30) == 0
    assert "stopped" in log.read_text()
    assert await _instances(database_url) == 0


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_serve_runs_on_the_event_loop_chosen(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]], loop: str
) -> None:
    pytest.importorskip("uvloop")
    port = free_port()
    env = _on_database(tmp_path, port, database_url, TRIPEAKS_EVENT_LOOP=loop)
    proc = _start(env, port, tmp_path / "server.log")
    processes.append(proc)
    await _play_a_little(f"http://127.0.0.1:{port}")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    assert f"event loop: {loop}" in (tmp_path / "server.log").read_text()


def test_deal_and_solve_take_tp2_codes_with_or_without_group_hyphens() -> None:
    out = subprocess.run(
        [*TRIPEAKS, "deal", "tp2-e-aaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["code"] == "TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA"
    assert data["tableau"][:3] == ["AC", "JD", "6D"] and data["waste"] == "QD"
    solved = subprocess.run(
        [*TRIPEAKS, "solve", "TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA", "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(solved)["code"] == "TP2-E-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA"
    bad = subprocess.run(
        [*TRIPEAKS, "deal", "TP2-E-AAAAAAA-AAAAAAA"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert "TP2-E-AAAAAAA-AAAAAAA" in bad.stderr


@pytest.mark.parametrize(
    ("secret", "complaint"),
    [
        (None, "TRIPEAKS_DAILY_SECRET is not set"),
        ("short-secret-0123456789", "23 bytes long; at least 32"),
        ("change-me-to-a-long-random-secret", "placeholder"),
        ("CHANGE-ME-TO-A-LONG-RANDOM-SECRET", "placeholder"),
        ("ab" * 20, "distinct"),
    ],
)
def test_serve_refuses_an_external_database_without_a_good_daily_secret(
    tmp_path: Path, secret: str | None, complaint: str
) -> None:
    extra = {} if secret is None else {"TRIPEAKS_DAILY_SECRET": secret}
    env = _env(
        TRIPEAKS_PORT=str(free_port()),
        TRIPEAKS_DATA_DIR=str(tmp_path / "data"),
        # Never reached: the secret is checked before anything else starts.
        DATABASE_URL="postgresql://nobody@127.0.0.1:9/none",
        **extra,
    )
    result = subprocess.run(
        [*TRIPEAKS, "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert complaint in result.stderr
    assert "TRIPEAKS_DAILY_SECRET" in result.stderr
    assert "secrets.token_hex(32)" in result.stderr
    assert not (tmp_path / "data" / "daily_secret").exists()


@pytest.mark.parametrize(
    ("database", "complaint"),
    [
        ("postgresql://nobody@127.0.0.1:9/none", "the database does not answer"),
        ("NO_SUCH_DATABASE", "the database refused the connection"),
    ],
)
def test_serve_says_in_one_line_when_its_database_cannot_be_reached(
    tmp_path: Path, database: str, complaint: str
) -> None:
    url = (
        _db_url_named(f"tripeaks_test_missing_{os.getpid()}")
        if database == "NO_SUCH_DATABASE"
        else database
    )
    env = _on_database(tmp_path, free_port(), url)
    result = subprocess.run(
        [*TRIPEAKS, "serve"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert complaint in result.stderr
    assert "Traceback" not in result.stderr


def _db_url_named(name: str) -> str:
    """A database of the test PostgreSQL that does not exist."""
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _children(pid: int) -> set[int]:
    """The pids of a process's living worker children (Linux ``/proc``; multiprocessing's
    resource tracker, also a child, is not one)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) != pid or fields[0] == "Z":
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in command:
            found.add(int(entry.name))
    return found


async def _instances(database_url: str) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM server_instances")
        return count
    finally:
        await conn.close()


async def test_serve_with_workers_runs_processes_on_one_port_and_restarts_a_dead_one(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc, port = await _two_workers(database_url, tmp_path, processes)
    workers = _children(proc.pid)
    assert len(workers) == 2
    base = f"http://127.0.0.1:{port}"
    for i in range(4):  # connections land on either worker
        await _play_a_little(base, f"Worker Player {i}")

    # A worker that dies is started again; the service answers meanwhile.
    dead = min(workers)
    os.kill(dead, signal.SIGKILL)
    await eventually(lambda: len(_children(proc.pid) - {dead}) == 2, "a new worker", every_s=0.1)
    await _play_a_little(base, "After Restart")
    log = (tmp_path / "server.log").read_text()
    assert "exited with -9" in log and "started again" in log

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not _children(proc.pid)
    # Both workers took their presence records away (the killed one's is left to the
    # others' time-out; the one started again replaced it with its own).
    assert await _instances(database_url) <= 1


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def _two_workers(
    database_url: str,
    tmp_path: Path,
    processes: list[subprocess.Popen[str]],
    port: int | None = None,
    **extra: str,
) -> tuple[subprocess.Popen[str], int]:
    """``tripeaks serve`` with two workers on the test's database (on ``port``, else a free
    one; ``extra`` overrides its environment), once both are up; the supervisor's process and
    the port."""
    port = port or free_port()
    env = _on_database(
        tmp_path,
        port,
        database_url,
        **{
            "TRIPEAKS_WORKERS": "2",
            "TRIPEAKS_SOLVER_WORKERS": "0",
            # The workers' metrics directory, left behind by a supervisor killed outright.
            "TMPDIR": str(tmp_path),
            **extra,
        },
    )
    proc = _start(env, port, tmp_path / "server.log")
    processes.append(proc)
    await eventually(
        lambda: _equals(_instances(database_url), 2), "both workers to be up", every_s=0.1
    )
    return proc, port


async def test_workers_stop_when_their_supervisor_is_killed(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc, _port = await _two_workers(database_url, tmp_path, processes)
    workers = _children(proc.pid)
    proc.kill()
    proc.wait(10)

    def stopped() -> bool:
        return not any(Path(f"/proc/{pid}").exists() for pid in workers)

    await eventually(stopped, "the orphaned workers to stop")
    # They stopped cleanly: their presence records went with them.
    assert await _instances(database_url) == 0


#: TCP states (``/proc/net/tcp``) of a connection its own side closed first: FIN-WAIT-1,
#: FIN-WAIT-2, TIME-WAIT. The port's side of such a connection holds a plain ``bind`` to the port
#: off for up to a minute.
CLOSED_FIRST = {"04", "05", "06"}


def _closed_first_on(port: int) -> int:
    """How many connections to 127.0.0.1:``port`` that port's side closed first linger."""
    found = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and fields[3] in CLOSED_FIRST:
            found += 1
    return found


async def test_serve_with_workers_starts_again_at_once_after_closing_connections_itself(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    """Stopped with keep-alive connections open, the service closes them itself, and they
    linger on the port (FIN-WAIT-2, TIME-WAIT); the same port is listened on again at once."""
    proc, port = await _two_workers(database_url, tmp_path, processes)
    held = []
    for _ in range(4):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 200")
        held.append(writer)
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert _closed_first_on(port) > 0  # what held a restart up for a minute
        again, _port = await _two_workers(database_url, tmp_path, processes, port)
        await _play_a_little(f"http://127.0.0.1:{port}", "Again")
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0
    finally:
        for writer in held:
            writer.close()


def test_the_address_check_still_refuses_a_port_listened_on() -> None:
    """The check binds with SO_REUSEADDR, as the listeners do: a port with a listener on it
    (with SO_REUSEADDR and SO_REUSEPORT, as a running worker's) is still refused."""
    from server.workers import PortTaken, check_port

    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if hasattr(socket, "SO_REUSEPORT"):
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(PortTaken, match="in use"):
            check_port("127.0.0.1", port)
    check_port("127.0.0.1", port)


async def _solvers_of(workers: set[int]) -> dict[int, set[int]]:
    """Each worker's solver processes, once every worker has its own (started with the
    daily's deal, analysed as soon as a worker starts)."""
    found: dict[int, set[int]] = {}

    def each_has_one() -> bool:
        found.update({pid: _children(pid) for pid in workers})
        return all(found.values())

    await eventually(each_has_one, "each worker's solver process", every_s=0.1)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
async def test_a_killed_worker_takes_its_solver_processes_with_it(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc, port = await _two_workers(database_url, tmp_path, processes, TRIPEAKS_SOLVER_WORKERS="1")
    solvers = await _solvers_of(_children(proc.pid))
    dead = min(solvers)
    os.kill(dead, signal.SIGKILL)

    def alive(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state != "Z"

    try:
        await eventually(
            lambda: not any(alive(pid) for pid in solvers[dead]),
            "the killed worker's solver process to end",
        )
        # The one started again has its own; the other worker's is untouched.
        again = await _solvers_of(_children(proc.pid) - {dead})
        survivor = next(iter(solvers.keys() - {dead}))
        assert again[survivor] == solvers[survivor]
        await _play_a_little(f"http://127.0.0.1:{port}", "After The Kill")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        everyone = {pid for pids in (*solvers.values(), *again.values()) for pid in pids}
        assert not any(alive(pid) for pid in everyone)
    finally:
        for pid in solvers[dead]:  # never left behind by the test run
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_serve_refuses_a_worker_count_below_one(tmp_path: Path) -> None:
    env = _env(TRIPEAKS_DATA_DIR=str(tmp_path / "data"), TRIPEAKS_WORKERS="0")
    result = subprocess.run(
        [*TRIPEAKS, "serve"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "TRIPEAKS_WORKERS" in result.stderr


def _metrics_directory(workers: set[int]) -> Path:
    """The metrics directory the workers were given (``PROMETHEUS_MULTIPROC_DIR``): one for
    all of them, made for them, private."""
    found = set()
    for pid in workers:
        for entry in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
            name, _, value = entry.partition(b"=")
            if name == b"PROMETHEUS_MULTIPROC_DIR":
                found.add(Path(value.decode()))
    assert len(found) == 1, found
    directory = found.pop()
    assert directory.is_dir() and directory.name.startswith("tripeaks-metrics-")
    assert directory.stat().st_mode & 0o077 == 0
    return directory


def _metrics_directory_gone(directory: Path) -> bool:
    return not directory.exists()


def _holder(port: int, client_port: int, pids: set[int]) -> int | None:
    """Which of ``pids`` holds the server's end of the connection from ``client_port`` to
    ``port`` on 127.0.0.1 (from ``/proc``: the socket's inode, then the process whose file
    descriptors hold it); None until one has accepted it."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == client_port:
            inodes.add(f"socket:[{inode}]")
    for pid in pids:
        try:
            links = {os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()}
        except OSError:
            continue
        if links & inodes:
            return pid
    return None


async def _held_by(port: int, client_port: int, pids: set[int]) -> int:
    """The worker that accepted the connection from ``client_port``, once one has."""
    found: list[int] = []

    def accepted() -> bool:
        pid = _holder(port, client_port, pids)
        if pid is not None:
            found.append(pid)
        return pid is not None

    await eventually(accepted, "a worker to accept the connection")
    return found[0]


async def _scrape_through_a_worker(port: int, pids: set[int]) -> tuple[int, Samples]:
    """Scrape ``/metrics`` on a connection of its own; the worker that answered, and what it
    answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        pid = await _held_by(port, writer.get_extra_info("sockname")[1], pids)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return pid, metric_samples(body.decode())


async def test_the_metrics_of_workers_add_up_whichever_worker_is_scraped(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    proc, port = await _two_workers(database_url, tmp_path, processes)
    workers = _children(proc.pid)
    directory = _metrics_directory(workers)

    base = f"http://127.0.0.1:{port}"
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{base}/api/v1/players", json={"name": "Many"}) as resp,
    ):
        token = (await resp.json())["token"]
    # Websockets until each worker holds two of them (the kernel spreads new connections);
    # the others are closed unused.
    sockets: dict[int, list[RawWs]] = {pid: [] for pid in workers}
    for _attempt in range(60):
        if min(len(held) for held in sockets.values()) >= 2:
            break
        raw = await RawWs.connect("127.0.0.1", port)
        held = sockets[await _held_by(port, raw.local_port, workers)]
        if len(held) < 2:
            held.append(raw)
        else:
            raw.close()
    else:
        pytest.fail(f"the kernel put nearly every connection on one worker: {sockets}")
    everyone = [raw for held in sockets.values() for raw in held]
    for n, raw in enumerate(everyone):
        assert (await raw.request({"type": "hello", "token": token}, f"h{n}"))["type"] == "welcome"
        game = (await raw.request({"type": "new_game"}, f"g{n}"))["game"]
        action = {"type": "action", "game_id": game["game_id"], "seq": 0, "action": "draw"}
        assert (await raw.request(action, f"a{n}"))["type"] == "accepted"
    assert (await everyone[0].request({"type": "join_daily"}, "d"))["type"] == "game"

    async def settled() -> bool:  # the unused sockets' closes seen
        _pid, samples = await _scrape_through_a_worker(port, workers)
        return metric(samples, "tripeaks_websockets_open") == len(everyone)

    await eventually(settled, "the unused sockets to be closed")
    # Whichever worker answers, the figures are both workers' together.
    answered: dict[int, Samples] = {}
    for _attempt in range(60):
        if len(answered) == 2:
            break
        pid, samples = await _scrape_through_a_worker(port, workers)
        answered[pid] = samples
    assert len(answered) == 2, "every scrape reached the same worker"
    for samples in answered.values():
        assert metric(samples, "tripeaks_actions_total", outcome="accepted", code="") == len(
            everyone
        )
        assert metric(samples, "tripeaks_action_ack_seconds_count") == len(everyone)
        assert metric(samples, "tripeaks_group_commit_batch_writes_sum") == len(everyone)
        assert metric(samples, "tripeaks_websockets_open") == len(everyone)
        assert metric(samples, "tripeaks_db_pool_size") == 2 * 10  # two pools of 10
        assert metric(samples, "tripeaks_daily_players") == 1  # the database's, not summed

    # A worker killed: its counts stay, its open sockets leave the sum.
    dead = next(iter(workers))
    os.kill(dead, signal.SIGKILL)
    survivors = workers - {dead}
    await eventually(lambda: len(_children(proc.pid) - {dead}) == 2, "a new worker", every_s=0.1)

    async def only_the_survivors_sockets() -> bool:
        _pid, samples = await _scrape_through_a_worker(port, _children(proc.pid))
        return metric(samples, "tripeaks_websockets_open") == sum(
            len(sockets[pid]) for pid in survivors
        ) and metric(samples, "tripeaks_actions_total", outcome="accepted", code="") == len(
            everyone
        )

    await eventually(only_the_survivors_sockets, "the dead worker's sockets to leave the sum")
    for raw in everyone:
        raw.close()

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert _metrics_directory_gone(directory)  # removed with the service


async def test_serve_logs_json_lines_when_told(
    database_url: str, tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    env = _on_database(tmp_path, port, database_url, TRIPEAKS_LOG_FORMAT="json")
    log = tmp_path / "server.log"
    proc = _start(env, port, log)
    processes.append(proc)
    await _play_a_little(f"http://127.0.0.1:{port}", "Json Logger")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines if line.startswith("{")]
    others = [line for line in lines if not line.startswith("{")]
    assert all(line.startswith(("======== Running on", "(Press CTRL+C")) for line in others), others
    assert {"event", "level", "logger", "timestamp"} <= set(records[0])
    events = [record["event"] for record in records]
    assert any("objects alive after start moved out" in event for event in events)
    assert any(
        record["logger"] == "server.web.app" and record["event"].startswith("shutting down")
        for record in records
    )


def test_sigterm_while_starting_stops_the_embedded_postgres_too(tmp_path: Path) -> None:
    """SIGTERM as soon as the embedded database runs, before the server listens: the process
    unwinds as on Ctrl-C and takes its PostgreSQL with it."""
    port = free_port()
    env = _env(TRIPEAKS_PORT=str(port), TRIPEAKS_DATA_DIR=str(tmp_path / "data"))
    pid_file = tmp_path / "data" / "pg" / "postmaster.pid"
    log = tmp_path / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([*TRIPEAKS, "serve"], env=env, stdout=out, stderr=subprocess.STDOUT)
    postmaster: int | None = None
    try:
        deadline = time.monotonic() + 120
        while postmaster is None:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the embedded PostgreSQL never started"
            if pid_file.exists() and (first := pid_file.read_text().split("\n", 1)[0]).isdigit():
                postmaster = int(first)
            else:
                time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{postmaster}").exists():
            assert time.monotonic() < deadline, f"PostgreSQL still runs:\n{log.read_text()}"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if postmaster is not None and Path(f"/proc/{postmaster}").exists():
            os.kill(postmaster, signal.SIGQUIT)
