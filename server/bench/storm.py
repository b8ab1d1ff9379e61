"""A reconnect storm: players with games in progress, connected, every socket cut at once (a
network blip, a proxy restarted), every page reconnecting as the browser's code does
(:func:`page_backoff_ms`, the same schedule as ``static/js/connection.js``), resuming its game
and playing on at a human pace; beside them players whose sockets were not cut keep playing,
and their acks are timed throughout (in a process of their own: the storm's client, busy with
thousands of pages, would otherwise time itself). The cut players' pages run in one or more
processes of their own (a storm's pages are many machines, each writing its request as soon as
its connection opens) and connect from many loopback addresses (:data:`PAGE_ADDRESSES`), as
players' pages come from many addresses.

Printed: the time from the cut until 50 %, 99 % and 100 % of the cut players are back in play
(their ``resume`` answered with the STATE they had) and how many came back in each second, the
``server_busy`` answers they got and the requests refused otherwise (``errors``), the server's
own counts that moved (``/metrics``: ``server_busy`` by reason, connections held at the door)
and the p99 of its own times meanwhile (the bucket bound of its histograms: each action from its
frame's parsing to its reply, each group commit's statement, the event loop's lateness), how
many resumed a STATE other than the one acknowledged, the ack p50/p99/max of the players who
stayed connected for the actions they sent from the cut until the last was back (and their p99
by the second), everyone's ack p50/p99 as they play on for a few seconds after it, the server's
CPU time during the storm per hello answered, and the CPU the storm's client processes used
meanwhile with the share of the machine's cores in use.

:func:`cut` is the cut alone: every socket cut and nobody coming back, and the server's CPU
time to let go of the closed connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import multiprocessing.connection
import os
import random
import statistics
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from server.bench import percentile
from server.bench.burst import REGISTER_CONCURRENCY, register
from server.bench.crowd import choose_action
from server.bench.process import cpu_s, cpu_since, machine_busy, shares, spawned, spawned_each

#: The page's reconnection delays (ms) by attempt, before its jitter (connection.js).
BACKOFF_MS = (250, 500, 1000, 2000, 4000, 8000)
#: The page's jitter: a step is drawn between (1 - JITTER) and 1 times itself, a retry time
#: between 1 and (1 + JITTER) times itself.
JITTER = 0.5
#: Longest a cut player keeps trying to come back (s).
GIVE_UP_S = 120.0


#: Loopback addresses the storm's pages connect from (127.0.0.2 on), a few dozen pages each,
#: so that what a server counts by address sees many players' addresses, as in a real storm.
PAGE_ADDRESSES = 250


def page_addresses(base: str) -> list[tuple[str, int] | None]:
    """The local addresses the storm's pages connect from: :data:`PAGE_ADDRESSES` loopback
    ones when the server is at 127.0.0.1, else the system's choice (one None)."""
    if urllib.parse.urlsplit(base).hostname != "127.0.0.1":
        return [None]
    return [(f"127.0.{n // 256}.{n % 256}", 0) for n in range(2, 2 + PAGE_ADDRESSES)]


def page_backoff_ms(attempt: int, retry_after_ms: float | None, rng: random.Random) -> float:
    """How long the page waits before its reconnection number ``attempt`` (0 first), in ms:
    its step of :data:`BACKOFF_MS` jittered down by up to :data:`JITTER`, and at least the
    ``retry_after_ms`` a ``server_busy`` hello was answered, jittered up (connection.js
    ``reconnectDelay``)."""
    delay = BACKOFF_MS[min(attempt, len(BACKOFF_MS) - 1)] * (1 - JITTER * rng.random())
    if retry_after_ms is not None:
        delay = max(delay, retry_after_ms * (1 + JITTER * rng.random()))
    return delay


@dataclass
class _Player:
    """One simulated page: its token, its game and what the server acknowledged of it."""

    token: str
    rng: random.Random
    #: The session its page connects through (from an address of its own, for a cut player).
    http: aiohttp.ClientSession
    ws: aiohttp.ClientWebSocketResponse | None = None
    state: dict[str, Any] | None = None
    #: When it was back in play after the cut (monotonic s), None while it is not.
    back_at: float | None = None


@dataclass
class StormResult:
    """What a storm measured; times in s from the cut, latencies in ms."""

    cut: int
    back_s: list[float] = field(default_factory=list)
    busy: int = 0
    #: ``server_busy`` answers to players in play (stayed or back), by request type, and
    #: after the storm their other refusals.
    busy_in_play: Counter[str] = field(default_factory=Counter)
    hellos: int = 0
    #: Cut players whose resumed STATE was not the one they had been acknowledged.
    lost: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    stayed_acks_ms: list[float] = field(default_factory=list)
    #: When each of ``stayed_acks_ms`` was sent, in s from the cut.
    stayed_sent_s: list[float] = field(default_factory=list)
    server_cpu_s: float | None = None
    #: CPU time of the cut players' client processes during the storm (s).
    client_cpu_s: float = 0.0
    #: Share of the machine's CPU (every core) used during the storm, by anything.
    machine_share: float = 0.0
    storm_s: float = 0.0
    #: Whether hellos name the game the page holds (``hello.games``); a server from before
    #: it refuses them, and is greeted as the page of its time did.
    says_games: bool = True
    #: The server's own counts over the storm (``/metrics``): ``server_busy`` answers by
    #: reason, connections held at the door; empty when it does not serve them.
    server_counts: dict[str, float] = field(default_factory=dict)
    #: At the end, each player's game on the table and the ``(seq, status)`` of its last
    #: STATE the server sent.
    acked: dict[int, tuple[int, str]] = field(default_factory=dict)


async def _ask(ws: aiohttp.ClientWebSocketResponse, request: dict[str, Any]) -> dict[str, Any]:
    await ws.send_str(json.dumps(request))
    while True:
        raw = await ws.receive()
        if raw.type is not aiohttp.WSMsgType.TEXT:
            return {"type": "error", "code": f"ws_{raw.type.name.lower()}"}
        reply: dict[str, Any] = json.loads(raw.data)
        if reply.get("id") == request.get("id") or "id" not in reply:
            return reply


async def _seat(http: aiohttp.ClientSession, ws_url: str, player: _Player) -> None:
    """Connect, say hello, start a free game and play one action in it (a game in progress)."""
    player.ws = await http.ws_connect(ws_url, max_msg_size=1 << 20)
    for _ in range(100):
        welcome = await _ask(player.ws, {"type": "hello", "token": player.token, "id": "h"})
        if welcome.get("code") != "server_busy":
            break
        await asyncio.sleep(welcome.get("retry_after_ms", 1000) / 1000)
    if welcome.get("type") != "welcome":
        raise RuntimeError(f"hello refused: {welcome}")
    player.state = {"status": "none"}
    await _act(player)  # a new game
    await _act(player)  # an action in it


async def _seat_all(players: list[_Player], ws_url: str) -> None:
    """:func:`_seat` every player through its page's session, :data:`REGISTER_CONCURRENCY` at
    a time."""
    gate = asyncio.Semaphore(REGISTER_CONCURRENCY)

    async def seat(player: _Player) -> None:
        async with gate:
            await _seat(player.http, ws_url, player)

    await asyncio.gather(*(seat(p) for p in players))


async def _act(player: _Player, busy: Counter[str] | None = None) -> float:
    """One legal action on the player's game (a new game once it is over); its ack time (ms),
    waits after ``server_busy`` included (each counted in ``busy`` by request type).

    Raises:
        RuntimeError: the request was refused otherwise.
    """
    assert player.ws is not None and player.state is not None
    if player.state["status"] != "playing":
        message: dict[str, Any] = {"type": "new_game", "id": 2}
    else:
        message = {"type": "action", "id": 2, "game_id": player.state["game_id"]}
        message["seq"] = player.state["seq"]
        message.update(choose_action(player.state, player.rng, undo_share=0.0))
    began = time.perf_counter()
    while True:
        reply = await _ask(player.ws, message)
        if reply.get("code") != "server_busy":
            break
        if busy is not None:
            busy[message["type"]] += 1
        await asyncio.sleep(reply.get("retry_after_ms", 1000) / 1000)
    elapsed = (time.perf_counter() - began) * 1000
    if reply.get("type") not in ("accepted", "rejected", "game"):
        raise RuntimeError(f"{message['type']} refused: {reply.get('code', reply.get('type'))}")
    player.state = reply["game"]
    return elapsed


def cut_off(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Cut a socket as a network would: no close frame, the connection just ends."""
    connection = ws._response.connection
    if connection is not None and connection.transport is not None:
        connection.transport.abort()


async def _come_back(
    http: aiohttp.ClientSession, ws_url: str, player: _Player, cut_at: float, result: StormResult
) -> None:
    """Reconnect as the page does after its socket dropped: wait, open, hello naming the game
    it holds and its ``seq``; refused (``server_busy``, a failed connection), wait longer and
    again; welcomed, play on with the STATE it holds when the welcome says it is unchanged
    (else the one the welcome sent, else a ``resume``'s) and check it is the STATE the server
    had acknowledged."""
    assert player.state is not None
    had = player.state
    attempt = 0
    retry_after_ms: float | None = None
    while time.monotonic() - cut_at < GIVE_UP_S:
        await asyncio.sleep(page_backoff_ms(attempt, retry_after_ms, player.rng) / 1000)
        attempt += 1
        retry_after_ms = None
        try:
            ws = await http.ws_connect(ws_url, max_msg_size=1 << 20)
        except (aiohttp.ClientError, OSError) as exc:
            result.errors[f"connect_{type(exc).__name__}"] += 1
            continue
        hello: dict[str, Any] = {"type": "hello", "token": player.token, "id": "h"}
        if result.says_games:
            hello["games"] = [{"game_id": had["game_id"], "seq": had["seq"]}]
        welcome = await _ask(ws, hello)
        if welcome.get("code") == "invalid_message" and result.says_games:
            # A server from before hello.games: say hello as the page of its time did.
            result.says_games = False
            del hello["games"]
            welcome = await _ask(ws, hello)
        if welcome.get("type") != "welcome":
            if welcome.get("code") == "server_busy":
                result.busy += 1
                retry_after_ms = welcome.get("retry_after_ms")
            else:
                result.errors[f"hello_{welcome.get('code', welcome.get('type'))}"] += 1
            await ws.close()
            continue
        result.hellos += 1
        player.ws = ws
        sent = {game["game_id"]: game for game in welcome.get("games", [])}
        if had["game_id"] in welcome.get("unchanged", []):
            pass  # the page plays on with the STATE it holds
        elif had["game_id"] in sent:
            player.state = sent[had["game_id"]]
        else:
            reply = await _ask(ws, {"type": "resume", "id": 3, "game_id": had["game_id"]})
            if reply.get("type") != "game":
                result.errors[f"resume_{reply.get('code', reply.get('type'))}"] += 1
                return
            player.state = reply["game"]
        if (player.state["seq"], player.state["score"]) != (had["seq"], had["score"]):
            result.lost += 1
        player.back_at = time.monotonic()
        result.back_s.append(player.back_at - cut_at)
        return
    result.errors["gave_up"] += 1


async def _paced(
    player: _Player, until: float, pace: float, acks: list[float], busy: Counter[str]
) -> None:
    """Play on at a human pace (``pace`` actions per second, jittered) until ``until``; the
    ack times (ms) go into ``acks``, the ``server_busy`` answers into ``busy``."""
    while True:
        gap = player.rng.uniform(0.5, 1.5) / pace
        if time.monotonic() + gap >= until:
            return
        await asyncio.sleep(gap)
        try:
            acks.append(await _act(player, busy))
        except RuntimeError as refused:  # counted; the same request is sent at the next turn
            busy[str(refused)] += 1
        except (aiohttp.ClientError, ConnectionError) as lost:  # counted; this one stops
            busy[f"connection_{type(lost).__name__}"] += 1
            return


async def _settle(players: list[_Player], acked: dict[int, tuple[int, str]]) -> None:
    """At the end: note in ``acked`` each player's game and the ``(seq, status)`` of its last
    acknowledged STATE, and close their sockets."""
    for player in players:
        if player.state is not None:
            state = player.state
            acked[state["game_id"]] = (state["seq"], state["status"])
        if player.ws is not None:
            await player.ws.close()


@dataclass
class _StayedReport:
    """What the players who stayed connected measured, sent back by their own process."""

    acks_ms: list[float] = field(default_factory=list)
    #: When each of ``acks_ms`` was sent (monotonic s, the machine's clock: the parent's too).
    acks_sent_at: list[float] = field(default_factory=list)
    after_acks_ms: list[float] = field(default_factory=list)
    busy: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    acked: dict[int, tuple[int, str]] = field(default_factory=dict)


def _stayed_process(
    base: str, tokens: list[str], pace: float, pipe: multiprocessing.connection.Connection
) -> None:
    """The players who stay connected, in a process of their own so that their acks time the
    server rather than the storm's own client: seat them, tell the parent (``"seated"``), play
    at ``pace`` until it says ``"over"`` (their acks during the storm), then until ``"stop"``
    (their acks after it), and send back a :class:`_StayedReport`."""
    asyncio.run(_stayed(base, tokens, pace, pipe))


async def _stayed(
    base: str, tokens: list[str], pace: float, pipe: multiprocessing.connection.Connection
) -> None:
    ws_url = f"{base.replace('http', 'ws', 1)}/ws"
    report = _StayedReport()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        players = [_Player(token, random.Random(10**6 + i), http) for i, token in enumerate(tokens)]
        await _seat_all(players, ws_url)
        pipe.send("seated")
        acks = report.acks_ms
        said = ""

        async def listen() -> None:
            nonlocal acks, said
            said = await asyncio.to_thread(pipe.recv)  # "over"
            acks = report.after_acks_ms
            said = await asyncio.to_thread(pipe.recv)  # "stop"

        async def play(player: _Player) -> None:
            while said != "stop":
                await asyncio.sleep(player.rng.uniform(0.5, 1.5) / pace)
                try:
                    sent_at = time.monotonic()
                    took = await _act(player, report.busy)
                    acks.append(took)
                    if acks is report.acks_ms:
                        report.acks_sent_at.append(sent_at)
                except RuntimeError as refused:  # counted; sent again at the next turn
                    report.errors[str(refused)] += 1
                except (aiohttp.ClientError, ConnectionError) as lost:  # counted; it stops
                    report.errors[f"stayed_connection_{type(lost).__name__}"] += 1
                    return

        listener = asyncio.create_task(listen())
        await asyncio.gather(*(play(p) for p in players))
        await listener
        await _settle(players, report.acked)
    pipe.send(report)


@dataclass
class _CutShare:
    """A client process's share of the players whose sockets are cut."""

    base: str
    tokens: list[str]
    #: The number of its first player's random stream (the others' follow).
    first: int
    #: The local addresses its pages connect from (see :func:`page_addresses`).
    addresses: list[tuple[str, int] | None]
    #: Actions per second of each player in play.
    pace: float


def _cut_process(share: _CutShare, pipe: multiprocessing.connection.Connection) -> None:
    """A share of the players whose sockets are cut, in a process of its own (a storm's pages
    are many machines; one Python process opening thousands of connections would lag behind
    them): seat them (``"seated"``), cut their sockets at the cut time the parent sends
    (monotonic s), bring them back as the page does and send a :class:`StormResult` of their
    storm; then play on until the time the parent sends and send back ``(after_acks,
    busy_in_play, acked)``."""
    asyncio.run(_cut_share(share, pipe))


async def _cut_share(share: _CutShare, pipe: multiprocessing.connection.Connection) -> None:
    base, tokens, pace = share.base, share.tokens, share.pace
    ws_url = f"{base.replace('http', 'ws', 1)}/ws"
    timeout = aiohttp.ClientTimeout(total=None, sock_read=GIVE_UP_S)
    result = StormResult(cut=len(tokens))
    async with contextlib.AsyncExitStack() as sessions:
        # Each page connects from one of many addresses, as players' pages do.
        pages = [
            await sessions.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=0, local_addr=address),
                    timeout=timeout,
                )
            )
            for address in share.addresses
        ]
        cut = [
            _Player(token, random.Random(share.first + i), pages[i % len(pages)])
            for i, token in enumerate(tokens)
        ]
        await _seat_all(cut, ws_url)
        pipe.send("seated")
        cut_at: float = await asyncio.to_thread(pipe.recv)
        client_before = time.process_time()
        for player in cut:
            assert player.ws is not None
            cut_off(player.ws)
        await asyncio.gather(*(_come_back(p.http, ws_url, p, cut_at, result) for p in cut))
        result.client_cpu_s = time.process_time() - client_before
        pipe.send(result)
        # Everyone plays on at a human pace for a while: the storm leaves nothing behind.
        until: float = await asyncio.to_thread(pipe.recv)
        back = [p for p in cut if p.back_at is not None]
        after_acks: list[float] = []
        busy_in_play: Counter[str] = Counter()
        await asyncio.gather(*(_paced(p, until, pace, after_acks, busy_in_play) for p in back))
        acked: dict[int, tuple[int, str]] = {}
        await _settle(cut, acked)
    pipe.send((after_acks, busy_in_play, acked))


async def storm(
    base: str,
    count: int,
    stayed: int = 100,
    pid: int | None = None,
    pace: float = 1.0,
    after_s: float = 5.0,
    clients: int = 1,
) -> StormResult:
    """Seat ``count + stayed`` registered players in free games in progress, cut the sockets
    of ``count`` of them at once and let them come back as the page does, while ``stayed``
    play on at ``pace`` actions per second; print and return the figures. The cut players'
    pages run in ``clients`` processes of their own, the stayed players in one more (so that
    their acks time the server, not the storm's client).

    Args:
        base: the server's base URL (loopback).
        count: players whose sockets are cut.
        stayed: players whose sockets are not cut (their acks are timed).
        pid: the server's process id (its CPU time is read from ``/proc``), or None.
        pace: actions per second of each player in play.
        after_s: seconds of play after the last cut player is back.
        clients: processes the cut players' pages are spread over (their addresses too).

    Raises:
        RuntimeError: a player could not be seated before the cut.
    """
    result = StormResult(cut=count)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        tokens = await register(http, base, count + stayed)
        addresses = page_addresses(base)
        parts = min(clients, max(count, 1))
        sizes = shares(count, parts)
        firsts = [0, *itertools.accumulate(sizes)][:-1]
        arguments: list[tuple[object, ...]] = [
            (
                _CutShare(
                    base, tokens[first : first + n], first, addresses[k::parts] or addresses, pace
                ),
            )
            for k, (first, n) in enumerate(zip(firsts, sizes, strict=True))
        ]
        async with (
            spawned(_stayed_process, base, tokens[count:], pace) as ours,
            spawned_each(_cut_process, arguments) as pipes,
        ):
            for pipe in [ours, *pipes]:
                if await asyncio.to_thread(pipe.recv) != "seated":
                    raise RuntimeError("the players could not be seated")
            await asyncio.sleep(1.0)  # the stayed players' pace is established
            cpu_before = cpu_s(pid) if pid else None
            counts_before = await _server_counts(http, base)
            machine_before = machine_busy()
            cut_at = time.monotonic()
            for pipe in pipes:
                pipe.send(cut_at)
            for pipe in pipes:
                _merge(result, await asyncio.to_thread(pipe.recv))
            result.storm_s = time.monotonic() - cut_at
            machine_after = machine_busy()
            result.machine_share = (machine_after[0] - machine_before[0]) / max(
                machine_after[1] - machine_before[1], 1e-9
            )
            if cpu_before is not None and pid:
                result.server_cpu_s = cpu_since(pid, cpu_before)
            counts_after = await _server_counts(http, base)
            result.server_counts = {
                name: counts_after[name] - counts_before.get(name, 0.0)
                for name in counts_after
                if counts_after[name] != counts_before.get(name, 0.0)
            }
            ours.send("over")
            until = time.monotonic() + after_s
            after_acks: list[float] = []
            for pipe in pipes:
                pipe.send(until)
            for pipe in pipes:
                acks, busy_in_play, acked = await asyncio.to_thread(pipe.recv)
                after_acks += acks
                result.busy_in_play += busy_in_play
                result.acked.update(acked)
            ours.send("stop")
            report: _StayedReport = await asyncio.to_thread(ours.recv)
    # The players who stayed played from before the cut (while the others were seated):
    # only their acks sent since the cut count.
    during = [
        (at - cut_at, ms)
        for at, ms in zip(report.acks_sent_at, report.acks_ms, strict=True)
        if at >= cut_at
    ]
    result.stayed_sent_s = [sent_s for sent_s, _ in during]
    result.stayed_acks_ms = [ms for _, ms in during]
    after_acks += report.after_acks_ms
    result.busy_in_play += report.busy
    result.errors += report.errors
    result.acked.update(report.acked)
    _print(result, stayed, after_acks, parts)
    return result


def _merge(result: StormResult, share: StormResult) -> None:
    """Add one client process's storm (a share of the cut players) to ``result``."""
    result.back_s += share.back_s
    result.busy += share.busy
    result.hellos += share.hellos
    result.lost += share.lost
    result.errors += share.errors
    result.client_cpu_s += share.client_cpu_s
    result.says_games = result.says_games and share.says_games


#: The server's counters a storm reports (``/metrics`` names, without ``_total``).
SERVER_COUNTERS = ("tripeaks_admission_server_busy", "tripeaks_arrivals_held")
#: The server's histograms a storm reports, each by its buckets' bound: its own time for
#: each action it answered, and the group commit's statement time.
SERVER_HISTOGRAMS = {
    "tripeaks_action_ack_seconds_bucket": (
        "the server's own time for the actions it answered (from their frame's parsing to "
        "their reply's sending)"
    ),
    "tripeaks_group_commit_seconds_bucket": (
        "the group commit's statements (a batch's round trip to the database and its commit)"
    ),
    "tripeaks_event_loop_lag_seconds_bucket": (
        "how late the server's event loops ran (measured every 50 ms)"
    ),
}


async def _server_counts(http: aiohttp.ClientSession, base: str) -> dict[str, float]:
    """The server's :data:`SERVER_COUNTERS` now, each sample by its labels (every worker's,
    summed, when several share the port); empty when ``/metrics`` is not served."""
    try:
        async with http.get(f"{base}/metrics") as resp:
            if resp.status != 200:
                return {}
            text = await resp.text()
    except aiohttp.ClientError:
        return {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith(tuple(f"{c}_total" for c in SERVER_COUNTERS)):
            counts[name.replace("_total", "", 1)] = float(value)
        elif name.startswith(tuple(SERVER_HISTOGRAMS)):
            counts[name] = float(value)
    return counts


def histogram_p99_ms(counts: dict[str, float], histogram: str) -> tuple[int, float | None]:
    """From the moved counts of the buckets of ``histogram`` (``<name>_bucket``, each by its
    ``le`` bound, in s): how many it observed, and the bound (ms) its 99th percentile falls
    within (None above the largest finite bound).

    >>> histogram_p99_ms({'h_bucket{le="0.1"}': 98, 'h_bucket{le="1.0"}': 100,
    ...                   'h_bucket{le="+Inf"}': 100}, "h_bucket")
    (100, 1000.0)
    """
    buckets = sorted(
        (float(name.split('le="', 1)[1].split('"', 1)[0]), n)
        for name, n in counts.items()
        if name.startswith(histogram + "{")
    )
    total = int(buckets[-1][1]) if buckets else 0
    for bound, n in buckets:
        if total and n >= 0.99 * total:
            return total, None if math.isinf(bound) else bound * 1000
    return total, None


def _print(result: StormResult, stayed: int, after_acks: list[float], clients: int) -> None:
    back = sorted(result.back_s)
    print(f"storm: {result.cut} sockets cut at once, {stayed} players stayed connected")

    def at(share: float) -> str:
        needed = max(1, math.ceil(result.cut * share))
        return f"{back[needed - 1]:.2f} s" if len(back) >= needed else "never"

    print(
        f"  back in play: 50% {at(0.5)}  99% {at(0.99)}  100% {at(1.0)}  "
        f"({len(back)} of {result.cut})"
    )
    if back:
        back_in = Counter(int(t) for t in back)
        print(
            "  back in play by the second after the cut: "
            + " ".join(f"{back_in[second]}" for second in range(int(back[-1]) + 1))
        )
    print(
        f"  server_busy answers: {result.busy} to hellos, {dict(result.busy_in_play) or 0} "
        f"to players in play  errors: {dict(result.errors) or 0}"
    )
    counters = {
        k: v for k, v in result.server_counts.items() if not k.startswith(tuple(SERVER_HISTOGRAMS))
    }
    if counters:
        shown = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(counters.items()))
        print(f"  the server's counts: {shown}")
    for histogram, what in SERVER_HISTOGRAMS.items():
        observed, within_ms = histogram_p99_ms(result.server_counts, histogram)
        if observed:
            bound = "above its largest bucket" if within_ms is None else f"within {within_ms:g} ms"
            print(f"  {what} ({observed}): p99 {bound}")
    print(f"  resumed STATE not the one acknowledged: {result.lost}")
    acks = result.stayed_acks_ms
    if acks:
        print(
            f"  stayed players' acks during the storm ({len(acks)}): "
            f"p50 {statistics.median(acks):.1f} ms  p99 {percentile(acks, 0.99):.1f} ms  "
            f"max {max(acks):.1f} ms"
        )
        sent_in: dict[int, list[float]] = {}
        for sent_s, ms in zip(result.stayed_sent_s, acks, strict=True):
            sent_in.setdefault(math.floor(sent_s), []).append(ms)
        print(
            "  their ack p99 (ms) by the second after the cut they were sent in: "
            + " ".join(f"{percentile(sent_in[second], 0.99):.0f}" for second in sorted(sent_in))
        )
    if after_acks:
        print(
            f"  everyone at a human pace after it ({len(after_acks)} acks): "
            f"p50 {statistics.median(after_acks):.1f} ms  p99 {percentile(after_acks, 0.99):.1f} ms"
        )
    if result.server_cpu_s is not None and result.hellos:
        print(
            f"  server CPU during the storm: {result.server_cpu_s:.2f} s over "
            f"{result.storm_s:.2f} s = {result.server_cpu_s / result.hellos * 1e3:.2f} ms "
            f"per hello ({result.hellos} hellos, with their resumes and the stayed players' acts)"
        )
    print(
        f"  meanwhile the cut players' {clients} client process(es) used "
        f"{result.client_cpu_s:.2f} s of CPU, and the "
        f"machine {result.machine_share:.0%} of its {os.cpu_count()} cores"
    )


#: How often the server's CPU is read after the cut (s).
QUIET_EVERY_S = 0.5
#: CPU time the server may use in one :data:`QUIET_EVERY_S` and be quiet (s).
QUIET_CPU_S = 0.02
#: Seconds the seated players are left alone before the cut (their writes settle).
SETTLE_S = 2.0


async def cut(base: str, count: int, pid: int) -> float:
    """Seat ``count`` registered players in free games in progress, cut every socket at once
    and wait until the server (``pid``) is quiet; print and return its CPU time meanwhile per
    closed connection (µs)."""
    ws_url = f"{base.replace('http', 'ws', 1)}/ws"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        tokens = await register(http, base, count)
        players = [_Player(token, random.Random(i), http) for i, token in enumerate(tokens)]
        await _seat_all(players, ws_url)
        await asyncio.sleep(SETTLE_S)
        before = last = cpu_s(pid) or 0.0
        cut_at = time.monotonic()
        for player in players:
            assert player.ws is not None
            cut_off(player.ws)
        while True:
            await asyncio.sleep(QUIET_EVERY_S)
            now = cpu_s(pid) or 0.0
            if now - last < QUIET_CPU_S:
                break
            last = now
        quiet_s = time.monotonic() - cut_at
    per_connection_us = (last - before) / max(count, 1) * 1e6
    print(
        f"cut: {count} sockets cut at once, nobody back: server CPU {last - before:.2f} s = "
        f"{per_connection_us:.0f} us per closed connection (quiet after {quiet_s:.1f} s)"
    )
    return per_connection_us
