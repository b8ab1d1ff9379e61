"""Load generator: simulated players over real websockets against a server on this machine.

Each simulated player registers, opens a websocket, starts a free game (or joins the daily) and
plays legal actions (removals, draws, some undos) as fast as the acks arrive, starting a new
game when one ends, until the duration is over. The same run can measure the ceiling: a bare
aiohttp websocket echo server on this machine, answered with frames of the same sizes, driven
by the same number of clients; our throughput is then printed as a share of it.

Targets are loopback addresses only; every loop is bounded by the duration and stops by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import random
import secrets
import socket
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from server.bench import percentile
from server.engine.cards import Card, Rank

ECHO_SERVER = """
import sys
from aiohttp import web, WSMsgType

async def ws(request):
    sock = web.WebSocketResponse(max_msg_size=1 << 20)
    await sock.prepare(request)
    reply = None
    async for msg in sock:
        if msg.type is WSMsgType.TEXT:
            if reply is None:
                reply = "x" * int(msg.data.split(":", 1)[0])
            await sock.send_str(reply)
    return sock

app = web.Application()
app.router.add_get("/ws", ws)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""


def require_loopback(url: str) -> None:
    """Refuse any target that is not a loopback address.

    Raises:
        ValueError: the URL's host is not ``localhost`` or a loopback IP.
    """
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(f"load tests target loopback addresses only, not {host!r}")


@dataclass
class Stats:
    """What the simulated players measured."""

    latencies_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    reply_bytes: list[int] = field(default_factory=list)
    request_bytes: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    games: int = 0
    server_cpu_s: float | None = None
    #: Paced play: actions sent later than planned (the previous ack was late), and how late.
    late: int = 0
    late_ms: list[float] = field(default_factory=list)
    #: Times a simulated player was told ``server_busy`` while getting in, and came back.
    busy_retries: int = 0

    def merge(self, other: Stats) -> None:
        self.busy_retries += other.busy_retries
        self.late += other.late
        self.late_ms += other.late_ms
        self.latencies_ms += other.latencies_ms
        self.outcomes.update(other.outcomes)
        self.reply_bytes += other.reply_bytes
        self.request_bytes += other.request_bytes
        self.errors.update(other.errors)
        self.games += other.games


def _rank(card: str) -> int:
    return int(Card.parse(card).rank)


def choose_action(state: dict[str, Any], rng: random.Random, undo_share: float) -> dict[str, Any]:
    """A legal action for a STATE: a removal when one fits (random among them), else a draw;
    now and then an undo."""
    if state["can_undo"] and rng.random() < undo_share:
        return {"action": "undo"}
    waste = _rank(state["waste"])
    wrap = state["rules"] == "E"
    options = []
    for pos, card in enumerate(state["tableau"]):
        if card is None or card == "down":
            continue
        diff = abs(_rank(card) - waste)
        if diff == 1 or (wrap and diff == int(Rank.KING) - int(Rank.ACE)):
            options.append(pos)
    if options:
        return {"action": "remove", "pos": rng.choice(options)}
    if state["stock_count"]:
        return {"action": "draw"}
    return {"action": "undo"}


@dataclass
class _Start:
    """The moment every simulated player is connected: play (and the clock) starts then."""

    waiting: int
    go: asyncio.Event = field(default_factory=asyncio.Event)
    deadline: float = 0.0
    seconds: float = 0.0
    pid: int | None = None
    cpu_at_go: float | None = None

    def ready(self) -> None:
        """One player is connected (or gave up); the last one starts the clock."""
        self.waiting -= 1
        if self.waiting == 0:
            self.deadline = time.monotonic() + self.seconds
            self.cpu_at_go = cpu_s(self.pid) if self.pid else None
            self.go.set()


class _Refused(Exception):
    """The server refused a simulated player (registration or hello); the message says why."""


#: Longest a simulated player keeps coming back when told ``server_busy`` (s).
PATIENCE_S = 120.0


async def _connect_player(
    http: aiohttp.ClientSession, base: str, prefix: str, stats: Stats | None = None
) -> aiohttp.ClientWebSocketResponse:
    """Register a new player, open a websocket and say hello; returns the open socket. Told
    ``server_busy`` (a crowd arriving), it comes back when told to, as a real client does, for
    up to :data:`PATIENCE_S`; each such return is counted in ``stats.busy_retries``.

    Raises:
        _Refused: ``register_<status>`` or the hello's error code.
    """
    deadline = time.monotonic() + PATIENCE_S
    name = f"{prefix}{secrets.token_hex(5)}"
    while True:
        async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
            if resp.status == 201:
                token = (await resp.json())["token"]
                break
            busy = resp.status == 503 and "Retry-After" in resp.headers
            if not busy or time.monotonic() > deadline:
                raise _Refused(f"register_{resp.status}")
            wait_s = float(resp.headers["Retry-After"])
        if stats is not None:
            stats.busy_retries += 1
        await asyncio.sleep(wait_s)
    ws = await http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws", max_msg_size=1 << 20)
    try:
        reply = await _ask(ws, {"type": "hello", "token": token}, stats, deadline)
        if reply.get("type") != "welcome":
            raise _Refused(reply.get("code", "hello_refused"))
    except BaseException:
        await ws.close()
        raise
    return ws


async def _ask(
    ws: aiohttp.ClientWebSocketResponse,
    request: dict[str, Any],
    stats: Stats | None,
    deadline: float | None = None,
) -> dict[str, Any]:
    """Send a request and return its reply, coming back when told ``server_busy`` (after the
    ``retry_after_ms`` it says; each return counted in ``stats.busy_retries``) until
    ``deadline`` (monotonic s; by default :data:`PATIENCE_S` from now)."""
    if deadline is None:
        deadline = time.monotonic() + PATIENCE_S
    while True:
        await ws.send_json(request)
        reply: dict[str, Any] = await ws.receive_json()
        if reply.get("code") != "server_busy" or time.monotonic() > deadline:
            return reply
        if stats is not None:
            stats.busy_retries += 1
        await asyncio.sleep(reply.get("retry_after_ms", 1000) / 1000)


async def _player(
    http: aiohttp.ClientSession, base: str, start: _Start, mode: str, seed: int, stats: Stats
) -> None:
    rng = random.Random(seed)
    try:
        ws = await _connect_player(http, base, "load", stats)
    except _Refused as refused:
        stats.errors[str(refused)] += 1
        return
    finally:
        start.ready()
    async with ws:
        await start.go.wait()
        state: dict[str, Any] | None = None
        while time.monotonic() < start.deadline:
            if state is None or state["status"] != "playing":
                kind = "join_daily" if mode == "daily" and stats.games == 0 else "new_game"
                reply = await _ask(ws, {"type": kind}, stats)
                if reply.get("type") != "game":
                    stats.errors[reply.get("code", "bad_reply")] += 1
                    return
                state = reply["game"]
                stats.games += 1
                if state["status"] != "playing":
                    state = None
                    continue
            message = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
            message.update(choose_action(state, rng, undo_share=0.05))
            text = json.dumps(message)
            started = time.perf_counter()
            await ws.send_str(text)
            raw = await ws.receive()
            elapsed = (time.perf_counter() - started) * 1000
            if raw.type is not aiohttp.WSMsgType.TEXT:
                stats.errors[f"ws_{raw.type.name.lower()}"] += 1
                return
            reply = json.loads(raw.data)
            stats.latencies_ms.append(elapsed)
            stats.request_bytes.append(len(text))
            stats.reply_bytes.append(len(raw.data))
            stats.outcomes[reply["type"]] += 1
            if reply["type"] in ("accepted", "rejected"):
                state = reply["game"]
            else:
                stats.errors[reply.get("code", "bad_reply")] += 1
                state = None


#: A paced send this much later than planned counts as late (ms).
LATE_MS = 1.0


async def _paced_player(
    http: aiohttp.ClientSession,
    base: str,
    start: _Start,
    pace: float,
    jitter: float,
    seed: int,
    stats: Stats,
) -> None:
    """A player at a human rate (open loop): one action every ``1 / pace`` s on average, each
    gap drawn uniformly within ``± jitter`` of it, on a schedule fixed in advance. An ack that
    comes after the next planned send delays it (a late send, counted); latency is measured
    from the planned send, so a slow server is not hidden by players who wait for it."""
    rng = random.Random(seed)
    state: dict[str, Any] | None = None
    try:
        ws = await _connect_player(http, base, "pace", stats)
        # Seated before the clock starts: the figures are those of steady play, not of the
        # crowd sitting down (the arrival is measured apart, with its server_busy returns).
        reply = await _ask(ws, {"type": "new_game"}, stats)
        if reply.get("type") != "game":
            stats.errors[reply.get("code", "bad_reply")] += 1
            await ws.close()
            return
        state = reply["game"]
        stats.games += 1
    except _Refused as refused:
        stats.errors[str(refused)] += 1
        return
    finally:
        start.ready()
    async with ws:
        await start.go.wait()
        mean_gap = 1.0 / pace
        planned = time.monotonic() + rng.uniform(0, mean_gap)  # players spread over a gap
        while planned < start.deadline:
            now = time.monotonic()
            if now < planned:
                await asyncio.sleep(planned - now)
            elif (now - planned) * 1000 > LATE_MS:
                stats.late += 1
                stats.late_ms.append((now - planned) * 1000)
            if state is None or state["status"] != "playing":
                reply = await _ask(ws, {"type": "new_game"}, stats)
                if reply.get("type") != "game":
                    stats.errors[reply.get("code", "bad_reply")] += 1
                    return
                state = reply["game"]
                stats.games += 1
            else:
                message = {"type": "action", "game_id": state["game_id"], "seq": state["seq"]}
                message.update(choose_action(state, rng, undo_share=0.05))
                await ws.send_str(json.dumps(message))
                raw = await ws.receive()
                if raw.type is not aiohttp.WSMsgType.TEXT:
                    stats.errors[f"ws_{raw.type.name.lower()}"] += 1
                    return
                stats.latencies_ms.append((time.monotonic() - planned) * 1000)
                reply = json.loads(raw.data)
                stats.outcomes[reply["type"]] += 1
                if reply["type"] in ("accepted", "rejected"):
                    state = reply["game"]
                else:
                    stats.errors[reply.get("code", "bad_reply")] += 1
                    state = None
            planned += mean_gap * rng.uniform(1 - jitter, 1 + jitter)


async def run_paced(
    base: str, players: int, seconds: float, pace: float, jitter: float, pid: int | None = None
) -> tuple[Stats, float]:
    """Run ``players`` players at a human rate for ``seconds`` (after all are connected);
    returns their stats (with the server's CPU time when ``pid`` is given) and the time spent.

    Raises:
        ValueError: ``pace`` not positive or ``jitter`` outside 0..1.
    """
    if pace <= 0 or not 0 <= jitter < 1:
        raise ValueError(f"pace must be > 0 and jitter in 0..1, not {pace}, {jitter}")

    def player(http: aiohttp.ClientSession, start: _Start, seed: int, stats: Stats) -> Any:
        return _paced_player(http, base, start, pace, jitter, seed, stats)

    return await _crowd(players, seconds, pid, player)


PlayerLoop = Callable[[aiohttp.ClientSession, _Start, int, Stats], Awaitable[None]]


async def _crowd(
    players: int, seconds: float, pid: int | None, player: PlayerLoop
) -> tuple[Stats, float]:
    """Run ``players`` copies of ``player`` (each with its seed and its stats), the clock
    starting when the last one is connected; their merged stats (with the server's CPU time
    while they played, given its ``pid``) and the time spent playing (s)."""
    stats = Stats()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        start = _Start(waiting=players, seconds=seconds, pid=pid)
        per_player = [Stats() for _ in range(players)]
        results = await asyncio.gather(
            *(player(http, start, seed, s) for seed, s in enumerate(per_player)),
            return_exceptions=True,
        )
        spent = time.monotonic() - (start.deadline - seconds)
        if pid:
            stats.server_cpu_s = cpu_since(pid, start.cpu_at_go)
    for result in results:
        if isinstance(result, BaseException):
            stats.errors[type(result).__name__] += 1
    for s in per_player:
        stats.merge(s)
    return stats, spent


@dataclass(frozen=True)
class PacedRow:
    """One player count of a paced ladder: ack latency from the planned send (ms)."""

    players: int
    acks: int
    p50: float
    p95: float
    p99: float
    late_share: float
    errors: int
    server_cpu_share: float | None
    client_cpu_share: float | None


async def paced_ladder(
    base: str,
    counts: list[int],
    seconds: float,
    pace: float,
    jitter: float,
    pid: int | None,
    target_p99_ms: float,
) -> list[PacedRow]:
    """Run :func:`run_paced` for each player count, print a table row for each, and the
    largest count whose ack p99 stays under ``target_p99_ms`` with no errors."""
    rows: list[PacedRow] = []
    print(
        f"human pace: {pace:g} action/s per player, gaps ±{jitter:.0%}, {seconds:g} s per step; "
        "ack latency from the planned send"
    )
    print(" players    acks    p50 ms    p95 ms    p99 ms   late  errors  server CPU  client CPU")
    for count in counts:
        client_before = cpu_s(os.getpid(), descendants=False)
        stats, spent = await run_paced(base, count, seconds, pace, jitter, pid)
        client_after = cpu_s(os.getpid(), descendants=False)
        client_cpu = (
            None if client_before is None or client_after is None else client_after - client_before
        )
        lat = stats.latencies_ms
        acks = len(lat)
        row = PacedRow(
            players=count,
            acks=acks,
            p50=statistics.median(lat) if lat else float("nan"),
            p95=percentile(lat, 0.95),
            p99=percentile(lat, 0.99),
            late_share=stats.late / max(1, acks + stats.games),
            errors=sum(stats.errors.values()),
            server_cpu_share=None if stats.server_cpu_s is None else stats.server_cpu_s / spent,
            client_cpu_share=None if client_cpu is None else client_cpu / spent,
        )
        rows.append(row)
        server = "-" if row.server_cpu_share is None else f"{row.server_cpu_share:.0%}"
        client = "-" if row.client_cpu_share is None else f"{row.client_cpu_share:.0%}"
        print(
            f"{count:8d} {acks:7d} {row.p50:9.2f} {row.p95:9.2f} {row.p99:9.2f} "
            f"{row.late_share:6.1%} {row.errors:7d} {server:>11} {client:>11}"
        )
        if stats.errors:
            print(f"          errors: {dict(stats.errors)}")
        if stats.busy_retries:
            print(f"          told server_busy while getting in, came back: {stats.busy_retries}")
    within = [r.players for r in rows if r.p99 < target_p99_ms and not r.errors]
    best = max(within) if within else None
    print(
        f"largest count with ack p99 under {target_p99_ms:g} ms: "
        + (f"{best} players" if best is not None else "none of those tried")
    )
    return rows


async def _echo_client(url: str, deadline: float, request: str, stats: Stats) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await ws.send_str(request)
            msg = await ws.receive()
            if msg.type is not aiohttp.WSMsgType.TEXT:
                stats.errors["echo_closed"] += 1
                return
            stats.latencies_ms.append((time.perf_counter() - started) * 1000)
            stats.outcomes["accepted"] += 1


def rss_kb(pid: int, *, descendants: bool = True) -> int | None:
    """Resident memory of a process and (unless told not to) its living descendants (the
    workers of ``serve --workers``) in KiB (Linux), or None if it cannot be read."""
    total = None
    for member in _family(pid) if descendants else {pid}:
        try:
            with open(f"/proc/{member}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total = (total or 0) + int(line.split()[1])
        except OSError:
            continue
    return total


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_s(pid: int, *, descendants: bool = True) -> float | None:
    """CPU time (user + system) a process and (unless told not to) its living descendants
    (the workers of ``serve --workers``, solver processes) have used so far, in seconds
    (Linux), or None."""
    fields = _stat(pid)
    if fields is None:
        return None
    if not descendants:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    ticks = 0
    for member in _family(pid):
        member_fields = fields if member == pid else _stat(member)
        if member_fields is not None:
            ticks += int(member_fields[11]) + int(member_fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _family(pid: int) -> set[int]:
    """``pid`` and its living descendants (Linux)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (other := _stat(int(entry))) is not None:
            parents[int(entry)] = int(other[1])
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        family.update(children)
        frontier += children
    return family


def cpu_since(pid: int, before: float | None) -> float | None:
    """CPU seconds a process has used since it had used ``before`` (from :func:`cpu_s`), or
    None when either reading is missing."""
    now = cpu_s(pid)
    return None if before is None or now is None else now - before


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (free when asked; bind it soon)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def run_players(
    base: str, players: int, seconds: float, mode: str, pid: int | None = None
) -> tuple[Stats, float]:
    """Run ``players`` simulated players for ``seconds``; returns their stats and the time
    actually spent playing (s).

    Every player registers and connects first; the clock starts when the last one is
    connected, so the figures are those of steady play, not of the ramp-up. With the server's
    ``pid``, the CPU time it used while they played is recorded too."""

    def player(http: aiohttp.ClientSession, start: _Start, seed: int, stats: Stats) -> Any:
        return _player(http, base, start, mode, seed, stats)

    return await _crowd(players, seconds, pid, player)


async def run_echo(players: int, seconds: float, request_bytes: int, reply_bytes: int) -> Stats:
    """The ceiling: the same clients against a bare aiohttp echo server (its own process)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", ECHO_SERVER, str(port))
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            await asyncio.sleep(0.1)
        request = f"{reply_bytes}:" + "x" * max(0, request_bytes - len(str(reply_bytes)) - 1)
        stats = Stats()
        deadline = time.monotonic() + seconds
        per_client = [Stats() for _ in range(players)]
        cpu_at_go = cpu_s(proc.pid)
        await asyncio.gather(
            *(_echo_client(f"ws://127.0.0.1:{port}/ws", deadline, request, s) for s in per_client)
        )
        stats.server_cpu_s = cpu_since(proc.pid, cpu_at_go)
        for s in per_client:
            stats.merge(s)
        return stats
    finally:
        proc.terminate()
        await proc.wait()


def report(title: str, stats: Stats, seconds: float) -> float:
    """Print throughput and latency figures; returns actions per second."""
    done = sum(stats.outcomes.values())
    rate = done / seconds if seconds else 0.0
    lat = stats.latencies_ms
    print(f"{title}: {done} replies in {seconds:.1f} s = {rate:,.0f}/s")
    if lat:
        print(
            f"  latency ms: p50 {statistics.median(lat):.2f}  p95 {percentile(lat, 0.95):.2f}  "
            f"p99 {percentile(lat, 0.99):.2f}  max {max(lat):.2f}"
        )
    if stats.outcomes:
        print(f"  outcomes: {dict(stats.outcomes)}")
    if stats.games:
        print(f"  games started: {stats.games} ({done / stats.games:.1f} replies each)")
    print(f"  errors: {dict(stats.errors) or 0}")
    if stats.server_cpu_s is not None and done:
        print(
            f"  server CPU: {stats.server_cpu_s / seconds:.0%} of one core, "
            f"{stats.server_cpu_s / done * 1e6:,.0f} us per reply"
        )
    return rate


#: Seconds the server's CPU time is watched while the idle connections stay open.
IDLE_WATCH_S = 10.0


async def idle_connections(base: str, count: int, pid: int | None) -> None:
    """Open ``count`` idle websockets, each authenticated as a player of its own (as real
    players are) and read all along (so the server's pings are answered, as a browser does),
    and report the server's memory per connection and the CPU it spends on them while nothing
    happens (pings and timers only) over :data:`IDLE_WATCH_S`."""
    before = rss_kb(pid) if pid else None
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:
        sockets: list[aiohttp.ClientWebSocketResponse] = []
        readers: list[asyncio.Task[None]] = []
        try:
            for start in range(0, count, 200):
                opened = await asyncio.gather(
                    *(_connect_player(http, base, "idle") for _ in range(min(200, count - start)))
                )
                sockets += opened
                readers += [asyncio.create_task(_drain(ws)) for ws in opened]
            await asyncio.sleep(2)
            after = rss_kb(pid) if pid else None
            print(f"idle connections open: {len(sockets)}")
            if before is not None and after is not None:
                per = (after - before) / max(1, len(sockets))
                print(
                    f"  server RSS {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB: "
                    f"{per:.1f} KiB per connection"
                )
            if pid:
                cpu_before, started = cpu_s(pid), time.monotonic()
                await asyncio.sleep(IDLE_WATCH_S)
                used = cpu_since(pid, cpu_before)
                if used is not None:
                    print(
                        f"  server CPU while idle: {used / (time.monotonic() - started):.2%} of "
                        f"one core over {IDLE_WATCH_S:g} s"
                    )
            closed = Counter(ws.close_code for ws in sockets if ws.closed)
            if closed:
                print(f"  closed by the server meanwhile (by close code): {dict(closed)}")
        finally:
            for task in readers:
                task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await asyncio.gather(*(ws.close() for ws in sockets))


async def _drain(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Read a socket until it closes (answering pings on the way)."""
    async for _ in ws:
        pass


async def main_async(
    url: str,
    players: int,
    seconds: float,
    mode: str,
    echo: bool,
    pid: int | None,
    idle: int,
    paced: list[int] | None = None,
    pace: float = 1.0,
    jitter: float = 0.5,
    target_p99_ms: float = 50.0,
) -> int:
    """The ``tripeaks loadtest`` command; returns how many requests failed (0: all answered)."""
    require_loopback(url)
    base = url.rstrip("/")
    if idle:
        await idle_connections(base, idle, pid)
        return 0
    if paced:
        rows = await paced_ladder(base, paced, seconds, pace, jitter, pid, target_p99_ms)
        return sum(row.errors for row in rows)
    before = rss_kb(pid) if pid else None
    stats, spent = await run_players(base, players, seconds, mode, pid)
    after = rss_kb(pid) if pid else None
    rate = report(f"tripeaks ({players} players, mode {mode})", stats, spent)
    if before is not None and after is not None:
        print(f"  server RSS: {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after")
    if echo and stats.request_bytes:
        req = int(statistics.median(stats.request_bytes))
        rep = int(statistics.median(stats.reply_bytes))
        echo_stats = await run_echo(players, seconds, req, rep)
        ceiling = report(
            f"echo ceiling ({players} clients, {req} B -> {rep} B)", echo_stats, seconds
        )
        if ceiling:
            print(f"throughput vs echo ceiling: {rate / ceiling:.1%}")
    return sum(stats.errors.values())
