"""Sockets that never end, side by side with genuine players: one real ``tripeaks serve`` per
source tree, measured in turn in one run.

    python benchmarks/slowloris.py --tree before=/tmp/oldtree --tree after=. --duration 150

For each tree a server process is started from it (``PYTHONPATH``) over a throw-away database
on the PostgreSQL at ``TRIPEAKS_TEST_PG`` with its default limits (only registration's rate is
raised, for the newcomers), and the run goes through four phases of equal length:

1. calm: ``--players`` genuine players on 127.0.0.1 acting at a human pace (one action a
   second, from the planned send: ack p50/p99), and newcomers on 127.0.0.10 who register, open
   a websocket and say hello (``--newcomers`` a second: welcomed, ``server_busy``, other);
2. attack from one address (127.0.0.2);
3. attack from ``--addresses`` addresses (127.0.0.2 onwards: Linux answers the whole
   127.0.0.0/8 on loopback);
4. calm again (does the memory come back down, or at least stop growing?).

The attack, from each attacking address: ``--half-headers`` connections sending a request's
headers a byte at a time, ``--bodies`` requests whose body never finishes, ``--silent``
websockets that never say hello, and ``--churn`` loops opening a websocket and dropping it at
once; each reopens as soon as the server closes it (at most once every
:data:`REOPEN_EVERY_S`), so silent websockets are opened and closed by the hello deadline by
the thousand. The report: the players' acks and the newcomers' welcomes per phase, the
attack's connections (answered, closed unanswered), the server's RSS over time (read from
``/proc/<pid>/status``) and the ERROR lines of its log.

Every target is on loopback; the run stops by itself after ``--duration`` seconds per tree.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import secrets
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from server.bench import percentile, throwaway_database
from server.bench.crowd import Refused, connect_player, send_action, start_game
from server.bench.process import rss_kb, server_env, server_process
from server.bench.stats import Stats

PHASES = ("calm", "one address", "several addresses", "calm again")
#: Each phase's share of ``--duration``: the attack from several addresses, the longest, shows
#: whether the memory levels off.
SHARES = (0.15, 0.2, 0.45, 0.2)
PLAYERS_IP = "127.0.0.1"
NEWCOMERS_IP = "127.0.0.10"
#: An attacking loop opens its next connection at most this often (s).
REOPEN_EVERY_S = 0.1
#: Seconds between two bytes of a header or body that never ends.
TRICKLE_S = 2.0
#: Seconds between two readings of the server's memory.
RSS_EVERY_S = 5.0
WS_UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


@dataclass
class Run:
    """What one server's run measured, by phase."""

    started: float
    duration_s: float
    acks: dict[str, list[float]] = field(default_factory=dict)
    newcomers: dict[str, Counter[str]] = field(default_factory=dict)
    attack: dict[str, Counter[str]] = field(default_factory=dict)
    rss: list[tuple[float, str, float]] = field(default_factory=list)
    player_errors: Counter[str] = field(default_factory=Counter)

    def starts(self, phase: str) -> float:
        """When ``phase`` starts (monotonic s)."""
        index = PHASES.index(phase)
        return self.started + self.duration_s * sum(SHARES[:index])

    def phase(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        return [p for p in PHASES if self.starts(p) <= now][-1] if now >= self.started else "calm"

    def done(self) -> bool:
        return time.monotonic() >= self.started + self.duration_s


async def _player(http: aiohttp.ClientSession, base: str, run: Run, seed: int) -> None:
    """A genuine player: one action a second (gaps ±50 %, open loop), its ack latency measured
    from the planned send and kept under the phase of that send."""
    rng = random.Random(seed)
    stats = Stats()
    try:
        ws = await connect_player(http, base, "pl", stats)
    except Refused as refused:
        run.player_errors[str(refused)] += 1
        return
    async with ws:
        state = await start_game(ws, "new_game", stats)
        planned = time.monotonic() + rng.uniform(0, 1)
        while not run.done():
            await asyncio.sleep(max(0.0, planned - time.monotonic()))
            if state is None or state["status"] != "playing":
                state = await start_game(ws, "new_game", stats)
                if state is None:
                    run.player_errors.update(stats.errors)
                    return
            else:
                await send_action(ws, state, rng)
                raw = await ws.receive()
                if raw.type is not aiohttp.WSMsgType.TEXT:
                    run.player_errors[f"ws_{raw.type.name.lower()}"] += 1
                    return
                run.acks.setdefault(run.phase(planned), []).append(
                    (time.monotonic() - planned) * 1000
                )
                reply = json.loads(raw.data)
                state = reply["game"] if reply["type"] in ("accepted", "rejected") else None
            planned += rng.uniform(0.5, 1.5)


async def _newcomer(http: aiohttp.ClientSession, base: str, run: Run) -> None:
    """Register, open a websocket, say hello once; count the answer under the phase."""
    phase = run.phase()
    outcome = "other"
    try:
        async with asyncio.timeout(30):
            async with http.post(f"{base}/api/v1/players", json={"name": _name("nc")}) as resp:
                if resp.status != 201:
                    outcome = f"register_{resp.status}"
                    return
                token = (await resp.json())["token"]
            async with http.ws_connect(f"{base.replace('http', 'ws', 1)}/ws") as ws:
                await ws.send_json({"type": "hello", "token": token})
                reply = await ws.receive_json()
                outcome = "welcome" if reply["type"] == "welcome" else reply.get("code", "other")
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        outcome = type(exc).__name__
    finally:
        run.newcomers.setdefault(phase, Counter())[outcome] += 1


def _name(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(5)}"


async def _newcomers(base: str, run: Run, per_second: float) -> None:
    connector = aiohttp.TCPConnector(limit=0, local_addr=(NEWCOMERS_IP, 0), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as http:
        arrivals: set[asyncio.Task[None]] = set()
        while not run.done():
            task = asyncio.create_task(_newcomer(http, base, run))
            arrivals.add(task)
            task.add_done_callback(arrivals.discard)
            await asyncio.sleep(1 / per_second)
        await asyncio.gather(*arrivals, return_exceptions=True)


# ----------------------------------------------------------------------------- the attack


async def _half_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    writer.write(b"GET /api/v1/daily HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    return await _trickle(reader, writer, b"X")


async def _endless_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    writer.write(
        b"POST /api/v1/players HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
        b"\r\nContent-Length: 100000\r\n\r\n{"
    )
    return await _trickle(reader, writer, b" ")


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, byte: bytes) -> str:
    """Send ``byte`` every :data:`TRICKLE_S` until the server answers or closes; how it ended."""
    while True:
        await writer.drain()
        try:
            async with asyncio.timeout(TRICKLE_S):
                # A bounded read keeps what came in when the time runs out (read() would not).
                first = await reader.read(65536)
        except TimeoutError:
            writer.write(byte)
            continue
        return _ended(first + await reader.read())  # the answer, then the close


async def _silent_ws(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    writer.write(WS_UPGRADE)
    return _ended(await reader.read())  # until the server closes it (the hello deadline)


async def _churn_ws(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
    writer.write(WS_UPGRADE)
    answer = await reader.read(12)  # the upgrade's status line (or nothing: refused)
    if not answer:
        return _ended(answer)
    return f"dropped after its answer {answer[9:12].decode(errors='replace')}"


def _ended(answer: bytes) -> str:
    """How a connection ended, by what the server sent on it."""
    if not answer:
        return "closed unanswered"
    status = answer[9:12].decode(errors="replace")
    return f"answered {status}" + (" (websocket's hello deadline)" if status == "101" else "")


Attack = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[str]]


async def _attacker(
    port: int, source: str, kind: str, attack: Attack, until: float, counts: Counter[str]
) -> None:
    """Open connections of one kind from ``source``, one after the other, until ``until``
    (monotonic s); counts each one by how it ended."""
    while time.monotonic() < until:
        opened = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(source, 0)
            )
        except OSError:
            counts[f"{kind}: connect failed"] += 1
        else:
            try:
                async with asyncio.timeout(max(0.1, until - time.monotonic())):
                    counts[f"{kind}: {await attack(reader, writer)}"] += 1
            except TimeoutError:
                counts[f"{kind}: still open at the phase's end"] += 1
            except (ConnectionError, OSError):
                counts[f"{kind}: closed unanswered (reset)"] += 1
            finally:
                writer.transport.abort()
        await asyncio.sleep(max(0.0, opened + REOPEN_EVERY_S - time.monotonic()))


def attack_process(
    port: int, sources: list[str], sizes: dict[str, int], seconds: float
) -> Counter[str]:
    """The attack from ``sources`` for ``seconds``, run in a process of its own (so that its
    work does not delay the players' measurements); ``sizes``: loops of each kind per address.
    Returns its connections counted by how they ended."""
    kinds: dict[str, Attack] = {
        "half-sent headers": _half_headers,
        "endless body": _endless_body,
        "silent websocket": _silent_ws,
        "churn": _churn_ws,
    }
    counts: Counter[str] = Counter()

    async def go() -> None:
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(
                _attacker(port, source, kind, kinds[kind], until, counts)
                for source in sources
                for kind, size in sizes.items()
                for _ in range(size)
            )
        )

    asyncio.run(go())
    return counts


async def _attack(
    port: int, sources: list[str], args: argparse.Namespace, seconds: float
) -> Counter[str]:
    sizes = {
        "half-sent headers": args.half_headers,
        "endless body": args.bodies,
        "silent websocket": args.silent,
        "churn": args.churn,
    }
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return await asyncio.get_running_loop().run_in_executor(
            pool, attack_process, port, sources, sizes, seconds
        )


# ------------------------------------------------------------------------------ the server


async def _watch_memory(pid: int, run: Run) -> None:
    while not run.done():
        kb = rss_kb(pid, descendants=False)
        if kb is not None:
            run.rss.append((time.monotonic() - run.started, run.phase(), kb / 1024))
        await asyncio.sleep(RSS_EVERY_S)


async def measure(name: str, tree: Path, args: argparse.Namespace) -> Run:
    """Start a server from ``tree``, run the four phases against it, print what they did."""
    async with throwaway_database(migrated=False) as url:
        env = server_env(
            url,
            TRIPEAKS_REGISTER_PER_MINUTE="1000000",
            TRIPEAKS_LOG_FORMAT="json",
            **dict(setting.split("=", 1) for setting in args.env),
        )
        with tempfile.TemporaryDirectory() as folder:
            async with server_process(tree, env, Path(folder) / "server.log") as server:
                run = await _phases(server.pid, server.port, args)
            _print(name, tree, args, run, server.text().splitlines())
            return run


async def _phases(pid: int, port: int, args: argparse.Namespace) -> Run:
    base = f"http://127.0.0.1:{port}"
    connector = aiohttp.TCPConnector(limit=0, local_addr=(PLAYERS_IP, 0))
    async with aiohttp.ClientSession(connector=connector) as http:
        # Seated before the clock starts (a few at a time: the newcomers are measured apart).
        run = Run(started=float("inf"), duration_s=args.duration)
        seated = asyncio.Event()
        players = [
            asyncio.create_task(_seated_player(http, base, run, seed, seated))
            for seed in range(args.players)
        ]
        await asyncio.sleep(min(10.0, args.players / 20))
        run.started = time.monotonic()
        seated.set()
        tasks = [
            *players,
            asyncio.create_task(_newcomers(base, run, args.newcomers)),
            asyncio.create_task(_watch_memory(pid, run)),
        ]
        sources = {
            "one address": ["127.0.0.2"],
            "several addresses": [f"127.0.0.{2 + i}" for i in range(args.addresses)],
        }
        for phase, addresses in sources.items():
            await asyncio.sleep(max(0.0, run.starts(phase) - time.monotonic()))
            ends = run.starts(PHASES[PHASES.index(phase) + 1])
            run.attack[phase] = await _attack(port, addresses, args, ends - time.monotonic())
        await asyncio.gather(*tasks)
        kb = rss_kb(pid, descendants=False)
        if kb is not None:
            run.rss.append((time.monotonic() - run.started, "end", kb / 1024))
        return run


async def _seated_player(
    http: aiohttp.ClientSession, base: str, run: Run, seed: int, seated: asyncio.Event
) -> None:
    await asyncio.sleep(random.Random(seed).uniform(0, 5))
    await seated.wait()
    await _player(http, base, run, seed)


def _print(name: str, tree: Path, args: argparse.Namespace, run: Run, log: list[str]) -> None:
    lengths = ", ".join(
        f"{p} {args.duration * share:.0f} s" for p, share in zip(PHASES, SHARES, strict=True)
    )
    print(f"\n=== {name}: {tree}; {lengths}")
    print(
        f"attack per address: {args.half_headers} half-sent headers, {args.bodies} endless "
        f"bodies, {args.silent} silent websockets, {args.churn} churn loops; "
        f"{args.addresses} addresses in phase 3"
    )
    print("phase                 acks   p50 ms   p99 ms  newcomers: welcomed / server_busy / other")
    for phase in PHASES:
        lat = run.acks.get(phase, [])
        came = run.newcomers.get(phase, Counter())
        other = sum(came.values()) - came["welcome"] - came["server_busy"]
        p50 = statistics.median(lat) if lat else float("nan")
        print(
            f"{phase:18} {len(lat):7d} {p50:8.2f} {percentile(lat, 0.99):8.2f}"
            f"  {came['welcome']:6d} / {came['server_busy']:6d} / {other:6d}"
        )
    for phase in PHASES:
        came = run.newcomers.get(phase, Counter())
        odd = {k: v for k, v in came.items() if k not in ("welcome", "server_busy")}
        if odd:
            print(f"  newcomers' other answers ({phase}): {odd}")
    if run.player_errors:
        print(f"  players' errors: {dict(run.player_errors)}")
    for phase in PHASES[1:3]:
        counts = run.attack.get(phase, Counter())
        print(f"attack connections, {phase} ({sum(counts.values())}):")
        for what, count in sorted(counts.items()):
            print(f"  {what}: {count}")
    print("server RSS (MiB) over time:")
    print("  " + "  ".join(f"{t:.0f}s {mib:.0f}" for t, _, mib in run.rss))
    for phase in (*PHASES, "end"):
        seen = [mib for _, p, mib in run.rss if p == phase]
        if seen:
            print(f"  {phase:18} first {seen[0]:6.1f}  max {max(seen):6.1f}  last {seen[-1]:6.1f}")
    errors = [line for line in log if _is_error(line)]
    print(f"ERROR lines in the server's log: {len(errors)}")
    for line in errors[:5]:
        print(f"  {line[:300]}")


def _is_error(line: str) -> bool:
    try:
        record: dict[str, Any] = json.loads(line)
    except ValueError:
        return " ERROR " in line or "Traceback" in line
    return str(record.get("level", "")).lower() in ("error", "critical")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--duration", type=float, default=120.0, help="Seconds per tree.")
    parser.add_argument("--players", type=int, default=60)
    parser.add_argument("--newcomers", type=float, default=2.0, help="Arrivals a second.")
    parser.add_argument("--addresses", type=int, default=8, help="Attacking addresses, phase 3.")
    parser.add_argument("--half-headers", type=int, default=100)
    parser.add_argument("--bodies", type=int, default=50)
    parser.add_argument("--silent", type=int, default=120)
    parser.add_argument("--churn", type=int, default=5)
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="A setting for the servers (repeat), e.g. TRIPEAKS_HTTP_HEADER_TIMEOUT_S=10.",
    )  # fmt: skip
    args = parser.parse_args()
    if not 1 <= args.addresses <= 8:
        parser.error("--addresses must be 1 to 8 (127.0.0.2 to 127.0.0.9)")
    named = [t.split("=", 1) for t in args.tree] or [["this", str(Path(__file__).parent.parent)]]
    trees = [(name, Path(path).resolve()) for name, path in named]

    async def go() -> None:
        for name, tree in trees:
            await measure(name, tree, args)

    asyncio.run(go())


if __name__ == "__main__":
    main()
