"""Closed connections let go a few at a time (:mod:`server.web.departures`): a cut that ends
many connections at once is spread over turns of the event loop."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import ClientSession

from server.bench.storm import cut_off
from server.web.departures import Departures
from server.web.keys import DEPARTURES, PLAYER_SOCKETS, SERVICES, SOCKETS
from tests.conftest import ServerFactory
from tests.helpers import WsPlayer, eventually


class _Turns:
    """Counts the turns of the running loop: one callback a turn, scheduled again each time."""

    def __init__(self) -> None:
        self.now = 0
        self._stopped = False
        asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        if not self._stopped:
            self.now += 1
            asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        self._stopped = True


async def test_at_most_per_turn_are_let_go_in_a_turn_of_the_loop_in_the_order_they_closed() -> None:
    departures = Departures(per_turn=3)
    turns = _Turns()
    let_go: list[tuple[int, int]] = []

    async def closed(n: int) -> None:
        await departures.turn()
        let_go.append((turns.now, n))

    await asyncio.gather(*(closed(n) for n in range(10)))
    turns.stop()
    assert [n for _, n in let_go] == list(range(10))
    per_turn: dict[int, int] = {}
    for turn, _ in let_go:
        per_turn[turn] = per_turn.get(turn, 0) + 1
    assert max(per_turn.values()) == 3 and len(per_turn) == 4  # 3 + 3 + 3 + 1
    assert departures.waited_total == 7 and departures.waiting == 0
    assert departures.last_waited_at > 0  # on the loop's clock: the collector's storm


async def test_a_closed_connection_is_let_go_at_once_while_the_turn_has_room() -> None:
    departures = Departures(per_turn=2)
    first, second, third = departures.turn(), departures.turn(), departures.turn()
    for coroutine in (first, second):
        with pytest.raises(StopIteration):  # returned without waiting
            coroutine.send(None)
    waiter = third.send(None)  # the turn is full: it waits
    assert departures.waiting == 1 and not waiter.done()
    await asyncio.sleep(0)  # the next turn gives it its turn
    assert waiter.done() and departures.waiting == 0
    with pytest.raises(StopIteration):
        third.send(None)
    assert departures.waited_total == 1
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    again = departures.turn()  # a later turn with nobody waiting: at once again
    with pytest.raises(StopIteration):
        again.send(None)


async def test_a_connection_cancelled_while_it_waits_gives_its_place_to_the_next() -> None:
    departures = Departures(per_turn=1)
    let_go: list[str] = []

    async def closed(name: str) -> None:
        await departures.turn()
        let_go.append(name)

    tasks = {name: asyncio.create_task(closed(name)) for name in ("a", "b", "c", "d")}
    await asyncio.sleep(0)  # they all closed in one turn: "a" is let go, the others wait
    assert departures.waiting == 3
    tasks["c"].cancel()
    await asyncio.gather(tasks["a"], tasks["b"], tasks["d"])
    assert let_go == ["a", "b", "d"] and tasks["c"].cancelled() and departures.waiting == 0


def test_a_turn_lets_go_at_least_one() -> None:
    with pytest.raises(ValueError, match="per_turn must be at least 1, not 0"):
        Departures(per_turn=0)


#: Connections cut at once in the test on a live server.
CUT = 40


async def test_sockets_cut_at_once_are_all_let_go_while_a_player_who_stayed_is_served(
    make_server: ServerFactory,
) -> None:
    server = await make_server()
    app = server.app
    app[DEPARTURES]._per_turn = 1  # any two closes seen in one turn: the second waits
    base = str(server.make_url("")).rstrip("/")
    friends = app[SERVICES].friends
    async with ClientSession() as http:
        tokens, ids = [], []
        for n in range(CUT + 1):
            async with http.post(f"{base}/api/v1/players", json={"name": f"Cut {n}"}) as resp:
                assert resp.status == 201
                tokens.append((await resp.json())["token"])
                ids.append((await resp.json())["id"])
        players = [WsPlayer(await http.ws_connect(f"{base}/ws")) for _ in tokens]
        for player, token in zip(players, tokens, strict=True):
            welcome = await player.request({"type": "hello", "token": token})
            assert welcome["type"] == "welcome"
        stayed, cut = players[0], players[1:]
        for followed in ids[1:4]:
            await friends.follow(ids[0], followed)
        assert all(p.online for p in await friends.following(ids[0]))
        await eventually(lambda: len(app[SOCKETS]) == CUT + 1, "every socket is open")
        for player in cut:
            cut_off(player.ws)
        await eventually(lambda: len(app[SOCKETS]) == 1, "every cut connection is let go")
        assert app[DEPARTURES].waited_total > 0 and app[DEPARTURES].waiting == 0
        # Their closes were not waited for; a write asked for now follows theirs.
        await friends.disconnected("ws-never-opened")
        assert not any(p.online for p in await friends.following(ids[0]))
        pong = await stayed.request({"type": "ping"})
        assert pong["type"] == "pong"
        game = await stayed.request({"type": "new_game"})
        assert game["type"] == "game"
        await stayed.ws.close()


async def test_a_player_cut_off_gets_back_in_while_their_closed_connections_wait_their_turn(
    make_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A closed connection gives its place among its player's connections back before it waits
    to be let go: a page that comes back at once is not refused ``too_many_connections``."""
    server = await make_server(max_sockets_per_player=2)
    app = server.app
    let_go = asyncio.Event()
    waiting: list[int] = []

    async def held_turn() -> None:  # every closed connection waits until the test says
        waiting.append(1)
        await let_go.wait()

    monkeypatch.setattr(app[DEPARTURES], "turn", held_turn)
    base = str(server.make_url("")).rstrip("/")
    async with ClientSession() as http:
        async with http.post(f"{base}/api/v1/players", json={"name": "Back"}) as resp:
            assert resp.status == 201
            token = (await resp.json())["token"]
            player_id = (await resp.json())["id"]

        async def page() -> WsPlayer:
            player = WsPlayer(await http.ws_connect(f"{base}/ws"))
            welcome = await player.request({"type": "hello", "token": token})
            assert welcome["type"] == "welcome", welcome
            return player

        before = [await page(), await page()]  # as many as the player may hold
        for player in before:
            cut_off(player.ws)
        await eventually(lambda: len(waiting) == 2, "both closed connections wait their turn")
        assert len(app[SOCKETS]) == 2  # not let go yet
        after = [await page(), await page()]
        let_go.set()
        await eventually(lambda: len(app[SOCKETS]) == 2, "the closed connections are let go")
        assert app[PLAYER_SOCKETS].open(player_id) == 2  # each place given back once
        for player in after:
            await player.ws.close()
        await eventually(lambda: app[PLAYER_SOCKETS].open(player_id) == 0, "all given back")
