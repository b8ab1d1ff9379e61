"""Test helpers: registering players, websocket players, and finding lines of play for a deal."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections import deque
from typing import Any

from aiohttp import ClientWebSocketResponse
from aiohttp.test_utils import TestClient

from server.engine import COVERED_BY, Action, Deal, GameCode, RuleSet
from server.services.daily import MAX_CANDIDATES, derive_daily_code

TIMEOUT = 10.0


async def register(client: TestClient[Any, Any], name: str) -> dict[str, Any]:
    """Register a player over REST and return ``{"id", "name", "token"}``."""
    resp = await client.post("/api/v1/players", json={"name": name})
    assert resp.status == 201, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


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

    async def close(self) -> None:
        await self.ws.close()


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


def daily_code(secret: bytes, date: dt.date, rules: RuleSet) -> GameCode:
    """The code a server with ``secret`` deals on ``date``: the first winnable candidate."""
    from server.engine.solver import is_winnable

    for candidate in range(MAX_CANDIDATES):
        code = derive_daily_code(secret, date, rules, candidate)
        if is_winnable(code.deal(), code.rules):
            return code
    raise AssertionError(f"no winnable daily candidate on {date}")
