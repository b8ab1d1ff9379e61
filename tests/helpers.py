"""Test helpers: registering players, websocket players, and finding lines of play for a deal."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import functools
import inspect
import json
import os
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import ClientSession, ClientWebSocketResponse
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from server.engine import (
    COVERED_BY,
    POSITION_COUNT,
    Action,
    ActionKind,
    Deal,
    Game,
    GameCode,
    RuleSet,
)
from server.services.daily import MAX_CANDIDATES, derive_daily_code, level_for
from server.storage.models import Race
from server.web import arrivals as door
from server.web.admission import Admission
from server.web.arrivals import Arrivals
from server.web.keys import ARRIVALS, SERVICES

TIMEOUT = 10.0
#: Longest a test polls for a condition to come about (see :func:`eventually`): generous, as a
#: busy machine may be slow, and free when the condition holds early.
WAIT_S = 60.0


async def eventually(
    condition: Callable[[], object],
    what: str,
    *,
    within_s: float = WAIT_S,
    every_s: float = 0.01,
) -> None:
    """Return as soon as ``condition()`` (a plain or an async callable) is truthy, polling it
    every ``every_s``; fail naming ``what`` when it is still false after ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        holds = condition()
        if inspect.isawaitable(holds):
            holds = await holds
        if holds:
            return
        assert time.monotonic() < deadline, f"timed out after {within_s} s waiting for {what}"
        await asyncio.sleep(every_s)


#: The samples of one scrape of ``/metrics``: each series (its sample's name and labels) and
#: its value.
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def metric_samples(text: str) -> Samples:
    """Parse a scrape's text as Prometheus does, checking that no series appears twice."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"{key} appears twice"
            samples[key] = sample.value
    return samples


def metric(samples: Samples, name: str, **labels: str) -> float:
    """A series' value in a scrape (0 when the scrape does not have it)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def register(client: TestClient[Any, Any], name: str) -> dict[str, Any]:
    """Register a player over REST and return ``{"id", "name", "token", "recovery_code"}``."""
    resp = await client.post("/api/v1/players", json={"name": name})
    assert resp.status == 201, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def race_code(server: TestServer, invite: str) -> GameCode:
    """The deal of the race room ``invite`` on ``server``, read from its database (a quick
    race's is sealed: its racers are not told it while it runs)."""
    async with server.app[SERVICES].db.connect() as conn:
        return GameCode.parse(
            str(await conn.scalar(select(Race.code).where(Race.invite == invite)))
        )


class WsPlayer:
    """A real websocket client speaking the protocol."""

    def __init__(self, ws: ClientWebSocketResponse) -> None:
        self.ws = ws
        self._next_id = 0
        self.inbox: deque[dict[str, Any]] = deque()  # pushed messages read while awaiting replies
        self.player_id = 0
        self.token = ""

    @classmethod
    async def connect(
        cls, client: TestClient[Any, Any], token: str, **hello: Any
    ) -> tuple[WsPlayer, dict[str, Any]]:
        ws = await client.ws_connect("/ws")
        player = cls(ws)
        welcome = await player.request({"type": "hello", "token": token, **hello})
        assert welcome["type"] == "welcome", welcome
        player.player_id = welcome["player"]["id"]
        player.token = token
        return player, welcome

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(message))

    async def send_raw(self, frame: str) -> None:
        await self.ws.send_str(frame)

    async def _receive(self) -> dict[str, Any]:
        msg = await asyncio.wait_for(self.ws.receive(), TIMEOUT)
        assert msg.type.name == "TEXT", msg
        data: dict[str, Any] = json.loads(msg.data)
        return data

    async def recv(self) -> dict[str, Any]:
        """The next message: a pushed one set aside earlier, else the next from the socket."""
        if self.inbox:
            return self.inbox.popleft()
        return await self._receive()

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its reply; pushed messages meanwhile go to ``inbox``."""
        self._next_id += 1
        rid = f"r{self._next_id}"
        await self.send({**message, "id": rid})
        while True:
            reply = await self._receive()
            if reply.get("id") == rid:
                return reply
            assert "id" not in reply, (message, reply)
            self.inbox.append(reply)

    async def until(self, kind: str, **match: Any) -> dict[str, Any]:
        """Read messages until one of ``kind`` (with fields equal to ``match``) arrives."""
        while True:
            message = await self.recv()
            if message["type"] == kind and all(message.get(k) == v for k, v in match.items()):
                return message

    async def act(
        self, game: dict[str, Any], action: str, pos: int | None = None
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "type": "action",
            "game_id": game["game_id"],
            "seq": game["seq"],
            "action": action,
        }
        if pos is not None:
            message["pos"] = pos
        return await self.request(message)

    async def play(self, game: dict[str, Any], line: list[Action]) -> dict[str, Any]:
        """Play a line of actions, each of which must be accepted; return the last state."""
        for action in line:
            reply = await self.act(game, action.kind.value, action.pos)
            assert reply["type"] == "accepted", (action, reply)
            game = reply["game"]
        return game

    async def remove_a_card(self, code: GameCode, game: dict[str, Any]) -> dict[str, Any]:
        """In the fresh ranked game ``game`` (its state as the server sent it) of the deal
        ``code``, draw until a card can be removed, then remove it (a race's winning line:
        one card removed); return the last state.

        Raises:
            AssertionError: an action was refused, or the stock ran out with no card removed.
        """
        engine = Game.new(code, ranked=True)
        while engine.cards_left == POSITION_COUNT:
            legal = [a for a in engine.legal_actions() if a.kind is not ActionKind.UNDO]
            assert legal, f"no card of {code} could be removed before the stock ran out"
            action = next((a for a in legal if a.kind is ActionKind.REMOVE), legal[0])
            engine.apply(action)
            game = await self.play(game, [action])
        return game

    async def close(self) -> None:
        await self.ws.close()


async def connect_player(http: ClientSession, base: str, name: str) -> WsPlayer:
    """Register ``name`` on the server at ``base`` (its HTTP address) and say hello on a
    websocket there; the player's id and token are set on the :class:`WsPlayer`."""
    async with http.post(f"{base}/api/v1/players", json={"name": name}) as resp:
        assert resp.status == 201, await resp.text()
        token = (await resp.json())["token"]
    player = WsPlayer(await http.ws_connect(f"{base}/ws"))
    welcome = await player.request({"type": "hello", "token": token})
    assert welcome["type"] == "welcome", welcome
    player.player_id = welcome["player"]["id"]
    player.token = token
    return player


def _adjacent(a: int, b: int, wrap: bool) -> bool:
    d = abs(a - b)
    return d == 1 or (wrap and d == 12)


def find_winning_line(
    deal: Deal, rules: RuleSet, *, max_nodes: int = 2_000_000
) -> list[Action] | None:
    """A line of removals and draws that clears the tableau, by depth-first search (or None).

    Independent of the engine's rules code: it uses only the cover map.
    """
    wrap = rules is RuleSet.EASY
    ranks = [int(c.rank) for c in deal.tableau]
    stock = [int(c.rank) for c in deal.stock]
    seen: set[tuple[int, int, int]] = set()
    line: list[Action] = []
    nodes = 0

    def playable(removed: int) -> list[int]:
        return [
            p
            for p in range(28)
            if not removed >> p & 1 and all(removed >> c & 1 for c in COVERED_BY[p])
        ]

    def search(removed: int, drawn: int, waste: int) -> bool:
        nonlocal nodes
        if removed == (1 << 28) - 1:
            return True
        key = (removed, drawn, waste)
        if key in seen or nodes > max_nodes:
            return False
        seen.add(key)
        nodes += 1
        for p in playable(removed):
            if _adjacent(ranks[p], waste, wrap):
                line.append(Action.remove(p))
                if search(removed | 1 << p, drawn, ranks[p]):
                    return True
                line.pop()
        if drawn < len(stock):
            line.append(Action.draw())
            if search(removed, drawn + 1, stock[drawn]):
                return True
            line.pop()
        return False

    return list(line) if search(0, 0, int(deal.waste.rank)) else None


def blocking_line(deal: Deal, rules: RuleSet) -> list[Action] | None:
    """Draw the whole stock, then remove greedily until nothing is playable: a line ending
    blocked (None when that happens to win)."""
    wrap = rules is RuleSet.EASY
    line = [Action.draw() for _ in deal.stock]
    removed = 0
    waste = int(deal.stock[-1].rank)
    while True:
        moves = [
            p
            for p in range(28)
            if not removed >> p & 1
            and all(removed >> c & 1 for c in COVERED_BY[p])
            and _adjacent(int(deal.tableau[p].rank), waste, wrap)
        ]
        if not moves:
            break
        p = moves[0]
        removed |= 1 << p
        waste = int(deal.tableau[p].rank)
        line.append(Action.remove(p))
    return None if removed == (1 << 28) - 1 else line


@functools.cache
def daily_code(secret: bytes, date: dt.date, rules: RuleSet) -> GameCode:
    """The code a server with the solver and ``secret`` deals on ``date``: the first candidate
    that is winnable and of the level the date's weekday asks for (graded as the solver's
    processes grade it)."""
    from server.services.analysis import grade_code

    wanted = level_for(date)
    for candidate in range(MAX_CANDIDATES):
        code = derive_daily_code(secret, date, rules, candidate)
        difficulty = grade_code(str(code))[3]
        if difficulty is not None and difficulty.level is wanted:
            return code
    raise AssertionError(f"no {wanted.value} daily candidate on {date}")


class RawWs:
    """A websocket client on a bare socket, which reads only when told to: a receiver that
    stalls (with a small receive buffer, TCP window and all) or vanishes (a reset, no closing
    handshake) for real."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = b""

    @property
    def local_port(self) -> int:
        """The client's own port (how the server's side of the connection knows it)."""
        port: int = self.sock.getsockname()[1]
        return port

    @classmethod
    async def connect(cls, host: str, port: int, rcvbuf: int | None = None) -> RawWs:
        """Open ``/ws`` on ``host:port`` (the upgrade done, nothing sent yet), with a receive
        buffer of ``rcvbuf`` bytes (the system's when None)."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect: the window
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        raw = cls(sock)
        try:
            await loop.sock_connect(sock, (host, port))
            key = base64.b64encode(os.urandom(16)).decode()
            await loop.sock_sendall(
                sock,
                (
                    f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                ).encode(),
            )
            head = await raw._read_until(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101"), head
        except BaseException:  # cancelled or refused on the way: leave no socket open
            raw.abort()
            raise
        return raw

    async def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        chunk = await asyncio.wait_for(loop.sock_recv(self.sock, 65536), TIMEOUT)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self._buf += chunk

    async def _read_until(self, marker: bytes) -> bytes:
        while marker not in self._buf:
            await self._fill()
        head, _, self._buf = self._buf.partition(marker)
        return head

    async def _read(self, n: int) -> bytes:
        while len(self._buf) < n:
            await self._fill()
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    async def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        mask = os.urandom(4)
        if len(payload) < 126:
            header = struct.pack("!BB", 0x81, 0x80 | len(payload))
        else:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, len(payload))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        await asyncio.get_running_loop().sock_sendall(self.sock, header + mask + masked)

    async def frame(self) -> tuple[int, bytes]:
        """The next frame: (opcode, payload)."""
        first, second = await self._read(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", await self._read(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await self._read(8))
        return first & 0x0F, await self._read(length)

    async def recv(self) -> dict[str, Any]:
        """The next text message (a close frame raises, naming its code)."""
        while True:
            opcode, payload = await self.frame()
            if opcode == 0x1:
                data: dict[str, Any] = json.loads(payload)
                return data
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise ConnectionAbortedError(code)

    async def request(self, message: dict[str, Any], rid: str) -> dict[str, Any]:
        await self.send({**message, "id": rid})
        while True:
            reply = await self.recv()
            if reply.get("id") == rid:
                return reply

    async def close_frame(self) -> int | None:
        """Read on until the server's close frame and answer it; its close code."""
        while True:
            try:
                await self.recv()
            except ConnectionAbortedError as closed:
                code: int | None = closed.args[0]
                await self.send_close(code or 1000)
                return code

    async def send_close(self, code: int) -> None:
        mask = os.urandom(4)
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(struct.pack("!H", code)))
        await asyncio.get_running_loop().sock_sendall(self.sock, b"\x88\x82" + mask + payload)

    def abort(self) -> None:
        """Vanish: reset the connection (RST), no close handshake."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self) -> None:
        self.sock.close()


def hold_the_door(app: Any, monkeypatch: Any) -> list[bool]:
    """Make ``app``'s door (:mod:`server.web.arrivals`) hold every new connection and let
    nobody in while the returned flag's one item is True (the process busy with its own work);
    set it to False to let them in at the next measure."""
    busy = [True]
    monkeypatch.setattr(Arrivals, "_busy", lambda self: busy[0])
    monkeypatch.setattr(Admission, "late_for_own_work", lambda self, lag_s: busy[0])
    monkeypatch.setattr(door, "LET_IN_LEAST", 0)  # nobody let in while it is busy
    app[ARRIVALS]._let_in = 0
    return busy
