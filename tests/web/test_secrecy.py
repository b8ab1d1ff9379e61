"""Nothing secret leaves the server before it is public, checked on everything the clients get.

Every websocket frame (its raw text, as received) and every REST response body that each
participant receives is recorded in a :class:`Transcript`, through a whole daily challenge and
whole races, and then scanned:

- a secret deal's code never appears before it is published: not its canonical text, not its
  letters without hyphens, not any 7-letter group of them, not its number, in any case;
- every card a participant receives (any JSON string value that :meth:`Card.parse` reads) is one
  the rules had shown that participant by then: the face-up tableau cards and waste cards of their
  own game so far, replayed with the engine from the actions they sent. So no face-down card, no
  undrawn stock card, and no other player's card reaches anyone; a spectator, the public, and
  anyone looking at somebody else's game receive no card at all.

Once the code is published, it must be a TP2 code that deals exactly the cards the players saw.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from aiohttp import ClientWebSocketResponse
from aiohttp.test_utils import TestClient, TestServer

from server.config import Settings
from server.engine import (
    FACE_DOWN,
    Action,
    Card,
    Deal,
    DealVersion,
    Game,
    GameCode,
    IllegalActionError,
    InvalidCardError,
    RuleSet,
    is_neighbour,
)
from server.engine.difficulty import Level
from server.services.clock import FakeClock
from server.web.keys import SERVICES
from tests.conftest import ServerFactory
from tests.helpers import (
    TIMEOUT,
    WsPlayer,
    blocking_line,
    daily_code,
    find_winning_line,
    register,
)

Client = TestClient[Any, Any]

#: Tag of a REST body that must carry no card at all whoever fetches it (somebody else's game, an
#: open daily game seen without its owner's token, a race room).
NO_CARDS = "no-cards"
#: Message types that never carry a card (ROOM objects and progress, docs/rules.md §4 "Races" /
#: protocol §11.3).
CARDLESS_TYPES = frozenset({"race_room", "race_progress", "race_results", "race_left", "pong"})

# ----------------------------------------------------------------------------- the scanner


@dataclass(frozen=True, slots=True)
class Received:
    """One frame or body a participant received.

    Attributes:
        who: the participant.
        source: ``"ws"`` for a websocket frame, else ``"GET <path>"`` (or ``"POST <path>"``).
        text: the raw text, as it came off the wire.
        step: how many actions the participant had sent when it was read.
        tag: :data:`NO_CARDS` for a body that must hold no card at all.
        phase: the test's phase when it was read (see :attr:`Transcript.phase`).
        is_json: whether ``text`` is JSON (a REST body may be HTML).
    """

    who: str
    source: str
    text: str
    step: int = 0
    tag: str = ""
    phase: str = ""
    is_json: bool = True

    def parsed(self) -> Any:
        return json.loads(self.text) if self.is_json else None


def _strings(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    """Every string value in a parsed JSON document, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in a parsed document, outermost first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


def cards_in(value: Any) -> Iterator[tuple[str, Card]]:
    """Every string value that reads as a card exactly (``Card.parse`` of the whole string)."""
    for path, text in _strings(value):
        try:
            yield path, Card.parse(text)
        except InvalidCardError:
            continue


def code_forms(code: GameCode) -> list[str]:
    """The texts that would give ``code`` away, upper case: the code itself, its letters without
    hyphens, each 7-letter group, and its number in decimal."""
    letters = code.letters
    groups = [letters[i : i + 7] for i in range(0, len(letters), 7)]
    return [str(code).upper(), letters, *groups, str(code.number)]


def is_room(obj: dict[str, Any]) -> bool:
    """Whether a JSON object is a ROOM (protocol §11.3)."""
    return {"race_id", "invite", "players"} <= obj.keys()


class Transcript:
    """Everything each participant received, in the order it was read, and its checks."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        #: Set by a test to say where it is (e.g. ``"playing"``, ``"over"``); each record keeps
        #: the phase it was read in.
        self.phase = "playing"

    @property
    def frames(self) -> list[Received]:
        return [r for r in self.received if r.source == "ws"]

    @property
    def bodies(self) -> list[Received]:
        return [r for r in self.received if r.source != "ws"]

    def record(
        self, who: str, source: str, text: str, step: int = 0, tag: str = "", is_json: bool = True
    ) -> None:
        self.received.append(Received(who, source, text, step, tag, self.phase, is_json))

    def of(self, who: str) -> list[Received]:
        return [r for r in self.received if r.who == who]

    def assert_no_code(
        self,
        code: GameCode,
        *,
        exempt: Callable[[Received, Any], bool] | None = None,
    ) -> None:
        """No frame or body holds ``code`` in any form (:func:`code_forms`), in any case, except
        those ``exempt(record, parsed_json)`` allows (where the protocol publishes it)."""
        needles = code_forms(code)
        for r in self.received:
            upper = r.text.upper()
            found = [n for n in needles if n in upper]
            if found and not (exempt is not None and exempt(r, r.parsed())):
                raise AssertionError(
                    f"{r.who} received the secret code {code} (as {found[0]!r}) "
                    f"in {r.source} [{r.phase}, step {r.step}]: {r.text[:600]}"
                )

    def assert_only_seen_cards(self, who: str, shown: Sequence[frozenset[Card]]) -> int:
        """Every card in what ``who`` received is one they had been shown by then.

        Args:
            who: the participant.
            shown: ``shown[k]``: the cards shown to ``who`` once they had sent ``k`` actions
                (``[frozenset()]`` for someone who must receive no card at all).

        Returns:
            How many cards were checked (for the test to see that the check bit).
        """
        checked = 0
        for r in self.of(who):
            parsed = r.parsed()
            if parsed is None:
                continue
            assert r.step < len(shown), (who, r.step, len(shown))
            cardless = r.tag == NO_CARDS or (
                isinstance(parsed, dict) and parsed.get("type") in CARDLESS_TYPES
            )
            allowed = frozenset() if cardless else shown[r.step]
            for path, card in cards_in(parsed):
                checked += 1
                if card not in allowed:
                    raise AssertionError(
                        f"{who} received {card} at {path} in {r.source} [{r.phase}, step "
                        f"{r.step}], a card they had not been shown: {r.text[:600]}"
                    )
        return checked

    def rooms(self, who: str | None = None) -> list[dict[str, Any]]:
        """Every ROOM object received (by ``who``, or by anyone)."""
        found = []
        for r in self.received if who is None else self.of(who):
            found += [d for d in _dicts(r.parsed()) if is_room(d)]
        return found


def visible(game: Game) -> set[Card]:
    """The cards a game shows its player now: face-up tableau cards and the waste."""
    view = game.view()
    return {c for c in view.tableau if isinstance(c, Card)} | {view.waste}


def shown_cards(deal: Deal, rules: RuleSet, sent: Sequence[Action]) -> list[frozenset[Card]]:
    """The cards a player of ``deal`` has been shown after each of the actions they sent: entry
    ``k`` is everything visible in any state up to the ``k``-th action (the rules decide; an
    action the engine refuses, as the server must, changes nothing)."""
    game = Game(deal, rules, ranked=True)
    seen = visible(game)
    timeline = [frozenset(seen)]
    for action in sent:
        with contextlib.suppress(IllegalActionError):
            game.apply(action)
        seen |= visible(game)
        timeline.append(frozenset(seen))
    return timeline


def check_states(
    transcript: Transcript,
    who: str,
    game_id: int,
    deal: Deal,
    rules: RuleSet,
    applied: Sequence[Action],
) -> int:
    """Every STATE of game ``game_id`` that ``who`` received is what ``deal`` gives after its
    ``seq`` accepted actions; returns how many were compared."""
    compared = 0
    for r in transcript.of(who):
        for state in _dicts(r.parsed()):
            if state.get("game_id") != game_id or "tableau" not in state:
                continue
            game = Game(deal, rules, ranked=True)
            for action in applied[: state["seq"]]:
                game.apply(action)
            view = game.view()
            expected = [str(c) if isinstance(c, Card) else c for c in view.tableau]
            assert state["tableau"] == expected, (who, state)
            assert state["waste"] == str(view.waste), (who, state)
            assert state["stock_count"] == view.stock_count, (who, state)
            assert state["cards_left"] == view.cards_left, (who, state)
            assert state["score"] == view.score, (who, state)
            compared += 1
    return compared


# -------------------------------------------------------------------------- participants


class RecordingWs(WsPlayer):
    """A :class:`WsPlayer` that records every frame it reads, raw, before parsing it."""

    def __init__(self, ws: ClientWebSocketResponse, owner: Participant) -> None:
        super().__init__(ws)
        self.owner = owner

    async def _receive(self) -> dict[str, Any]:
        msg = await self.ws.receive(timeout=TIMEOUT)
        assert msg.type.name == "TEXT", msg
        self.owner.transcript.record(self.owner.name, "ws", msg.data, self.owner.step)
        data: dict[str, Any] = json.loads(msg.data)
        return data


class Participant:
    """A player (or the anonymous public) whose every received frame and body is recorded.

    ``sent`` is every game action they sent (the engine replays it to know what they were
    shown); ``applied`` those the server accepted (in ``seq`` order).
    """

    def __init__(self, client: Client, transcript: Transcript, name: str) -> None:
        self.client = client
        self.transcript = transcript
        self.name = name
        self.token = ""
        self.id = 0
        self.sent: list[Action] = []
        self.applied: list[Action] = []
        self.sockets: list[RecordingWs] = []

    @property
    def step(self) -> int:
        return len(self.sent)

    async def register(self) -> None:
        resp = await self.client.post("/api/v1/players", json={"name": self.name})
        text = await resp.text()
        self.transcript.record(self.name, "POST /api/v1/players", text, self.step)
        assert resp.status == 201, text
        body = json.loads(text)
        self.token, self.id = body["token"], body["id"]

    async def connect(self, **hello: Any) -> tuple[RecordingWs, dict[str, Any]]:
        sock = RecordingWs(await self.client.ws_connect("/ws"), self)
        self.sockets.append(sock)
        welcome = await sock.request({"type": "hello", "token": self.token, **hello})
        assert welcome["type"] == "welcome", welcome
        sock.player_id, sock.token = welcome["player"]["id"], self.token
        return sock, welcome

    async def get(
        self, path: str, *, auth: bool = True, tag: str = "", **params: str
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if auth and self.token else {}
        resp = await self.client.get(path, headers=headers, params=params)
        text = await resp.text()
        is_json = resp.content_type == "application/json"
        where = f"GET {path}" + (f"?{params}" if params else "") + ("" if headers else " (anon)")
        self.transcript.record(self.name, where, text, self.step, tag, is_json)
        return resp.status, json.loads(text) if is_json else text

    async def act(self, sock: WsPlayer, game: dict[str, Any], action: Action) -> dict[str, Any]:
        """Send one action on ``game`` (one of this participant's own)."""
        self.sent.append(action)
        reply = await sock.act(game, action.kind.value, action.pos)
        if reply["type"] == "accepted":
            self.applied.append(action)
        return reply

    async def play(
        self, sock: WsPlayer, game: dict[str, Any], line: Sequence[Action]
    ) -> dict[str, Any]:
        for action in line:
            reply = await self.act(sock, game, action)
            assert reply["type"] == "accepted", (self.name, action, reply)
            game = reply["game"]
        return game

    async def close(self) -> None:
        for sock in self.sockets:
            await sock.close()


def greedy(state: dict[str, Any], rules: RuleSet) -> Action:
    """A move from what the STATE shows only: the first face-up card that fits, else a draw."""
    waste = Card.parse(state["waste"])
    for pos, shown in enumerate(state["tableau"]):
        if shown not in (None, FACE_DOWN) and is_neighbour(Card.parse(shown), waste, rules):
            return Action.remove(pos)
    return Action.draw()


def _faces(state: dict[str, Any]) -> set[Card]:
    """The cards a STATE shows: face-up tableau cards and the waste."""
    return {c for _, c in cards_in({"tableau": state["tableau"], "waste": state["waste"]})}


def misfit(state: dict[str, Any], rules: RuleSet) -> int | None:
    """A face-up position whose card does not fit on the waste (a refused removal), if any."""
    waste = Card.parse(state["waste"])
    for pos, shown in enumerate(state["tableau"]):
        if shown not in (None, FACE_DOWN) and not is_neighbour(Card.parse(shown), waste, rules):
            return pos
    return None


# ------------------------------------------------------------------- the scanner can fail


def _note_is(text: str) -> Callable[[Received, Any], bool]:
    def exempt(record: Received, message: Any) -> bool:
        return bool(message.get("note") == text)

    return exempt


def test_the_scanner_catches_a_leaked_code_in_any_form_and_unseen_cards() -> None:
    code = GameCode.parse("TP2-E-QWERTYU-ASDFGHJ-ZXCVBNM-POIUYTR")
    letters = code.letters
    leaks = [
        str(code),  # grouped
        letters,  # ungrouped
        str(code).lower(),
        letters.lower(),
        f"see {letters[14:21].lower()} here",  # one group, lower case
        f"TP2-E-{letters}",
        str(code.number),
    ]
    for leak in leaks:
        transcript = Transcript()
        transcript.record("Eve", "ws", json.dumps({"type": "pong", "note": leak}))
        with pytest.raises(AssertionError, match="secret code"):
            transcript.assert_no_code(code)
        # ... unless the test says that message may publish it
        transcript.assert_no_code(code, exempt=_note_is(leak))
    clean = Transcript()
    clean.record("Eve", "ws", json.dumps({"type": "pong", "note": "TP2-E-AAAAAAA-" + letters[:6]}))
    clean.assert_no_code(code)

    deal = code.deal()
    shown = shown_cards(deal, code.rules, [Action.draw()])
    bottom = [str(c) for c in deal.tableau[18:]]
    fresh = ["down"] * 18 + bottom
    ok = {"type": "game", "game": {"game_id": 1, "waste": str(deal.waste), "tableau": fresh}}
    drawn = {"type": "accepted", "game": {"waste": str(deal.stock[0]), "tableau": fresh}}
    transcript = Transcript()
    transcript.record("Eve", "ws", json.dumps(ok), step=0)
    transcript.record("Eve", "ws", json.dumps(drawn), step=1)
    assert transcript.assert_only_seen_cards("Eve", shown) == 2 * 11
    # A face-down card (position 0) in a tableau, a card of the stock not drawn yet, a card
    # drawn later shown too early, a card in a message that never carries one, and any card
    # to a spectator: each one is caught.
    face_down = {
        "type": "game",
        "game": {"waste": str(deal.waste), "tableau": [str(deal.tableau[0])]},
    }
    undrawn = {"type": "accepted", "game": {"waste": str(deal.stock[1]), "tableau": []}}
    bad_cases: list[tuple[dict[str, Any], int, str]] = [
        (face_down, 1, ""),
        (undrawn, 1, ""),
        (drawn, 0, ""),
        ({"type": "race_progress", "note": str(deal.waste)}, 1, ""),
        ({"actions": [{"card": str(deal.waste).lower()}]}, 1, NO_CARDS),
    ]
    for message, step, tag in bad_cases:
        transcript = Transcript()
        transcript.record("Eve", "ws", json.dumps(message), step=step, tag=tag)
        with pytest.raises(AssertionError, match="had not been shown"):
            transcript.assert_only_seen_cards("Eve", shown)
    spectator = Transcript()
    spectator.record("Wes", "ws", json.dumps(ok))
    with pytest.raises(AssertionError, match="had not been shown"):
        spectator.assert_only_seen_cards("Wes", [frozenset()])


# ------------------------------------------------------------------------------ the daily


async def _browse_daily(
    everyone: Sequence[Participant], games: dict[str, int], day: dt.date
) -> None:
    """Everyone fetches every public route about the daily and the games, with their token and
    (the players) without it."""
    iso = day.isoformat()
    ids = [p.id for p in everyone if p.id]
    for p in everyone:
        status, daily = await p.get("/api/v1/daily")
        assert status == 200 and daily["code"] is None and daily["line"] is None, daily
        status, daily = await p.get(f"/api/v1/daily/{iso}")
        assert status == 200 and daily["code"] is None and daily["is_open"], daily
        await p.get(f"/api/v1/daily/{(day - dt.timedelta(days=1)).isoformat()}")
        await p.get(f"/api/v1/daily/{(day + dt.timedelta(days=1)).isoformat()}")
        status, page = await p.get(f"/api/v1/daily/{iso}/leaderboard", limit="1")
        assert status == 200, page
        while page["next_cursor"] is not None:
            status, page = await p.get(
                f"/api/v1/daily/{iso}/leaderboard", limit="1", cursor=page["next_cursor"]
            )
            assert status == 200, page
        await p.get(f"/api/v1/daily/{iso}/leaderboard")
        for player_id in ids:
            await p.get(f"/api/v1/daily/{iso}/leaderboard/around/{player_id}", radius="2")
        for owner, game_id in games.items():
            own = owner == p.name
            status, summary = await p.get(f"/api/v1/games/{game_id}", tag="" if own else NO_CARDS)
            assert status == 200 and summary["code"] is None, summary
            assert ("actions" in summary) == own, (p.name, summary)
            if p.token:
                status, summary = await p.get(f"/api/v1/games/{game_id}", auth=False, tag=NO_CARDS)
                assert status == 200 and "actions" not in summary, summary
        if p.token:
            assert (await p.get("/api/v1/players/me"))[0] == 200
        await p.get("/healthz")
        await p.get("/readyz")
        await p.get("/")


async def test_a_whole_daily_leaks_neither_its_code_nor_a_hidden_card_before_its_date_is_over(
    client: Client, settings: Settings, clock: FakeClock
) -> None:
    assert settings.daily_secret
    secret = settings.daily_secret.encode()
    today = clock.now().date()
    tomorrow = today + dt.timedelta(days=1)
    code = daily_code(secret, today, RuleSet.EASY)
    next_code = daily_code(secret, tomorrow, RuleSet.EASY)  # prepared ahead, maybe: secret too
    deal, rules = code.deal(), code.rules
    win = find_winning_line(deal, rules)
    block = blocking_line(deal, rules)
    assert win is not None and block is not None

    transcript = Transcript()
    public = Participant(client, transcript, "Public")
    ann, ben, cy = (Participant(client, transcript, n) for n in ("Ann", "Ben", "Cy"))
    players = (ann, ben, cy)
    everyone = (public, *players)
    status, daily = await public.get("/api/v1/daily")
    assert status == 200 and daily["code"] is None and daily["is_open"]

    socks: dict[str, RecordingWs] = {}
    games: dict[str, dict[str, Any]] = {}
    for p in players:
        await p.register()
        socks[p.name], welcome = await p.connect()
        assert welcome["games"] == []
        reply = await socks[p.name].request({"type": "join_daily"})
        assert reply["type"] == "game", reply
        games[p.name] = reply["game"]
        assert games[p.name]["mode"] == "daily" and games[p.name]["code"] is None
    game_ids = {name: g["game_id"] for name, g in games.items()}
    clock.advance(seconds=30)
    await _browse_daily(everyone, game_ids, today)

    # Ben: a draw, an undo refused (ranked play has none), a draw again; then refused requests:
    # a face-down card, a card that does not fit, a hint, and Ann's game; then he resigns
    # having seen little.
    sb = socks["Ben"]
    game = await ben.play(sb, games["Ben"], [Action.draw()])
    reply = await ben.act(sb, game, Action.undo())
    assert (reply["type"], reply["code"]) == ("rejected", "ranked_no_undo")
    game = await ben.play(sb, game, [Action.draw()])
    reply = await ben.act(sb, game, Action.remove(0))
    assert (reply["type"], reply["code"]) == ("rejected", "blocked")
    pos = misfit(game, rules)
    if pos is not None:
        reply = await ben.act(sb, game, Action.remove(pos))
        assert (reply["type"], reply["code"]) == ("rejected", "not_adjacent")
    reply = await sb.request({"type": "hint", "game_id": game["game_id"]})
    assert (reply["type"], reply["code"]) == ("error", "hints_not_allowed")
    reply = await sb.request({"type": "resume", "game_id": game_ids["Ann"]})
    assert (reply["type"], reply["code"]) == ("error", "not_your_game")
    reply = await sb.request(
        {"type": "action", "game_id": game_ids["Ann"], "seq": 0, "action": "draw"}
    )
    assert (reply["type"], reply["code"]) == ("error", "not_your_game")

    # Cy: ends blocked (he draws the whole stock first); his undo and resign are refused.
    sc = socks["Cy"]
    game = await cy.play(sc, games["Cy"], block)
    assert game["status"] == "blocked" and game["code"] is None
    reply = await cy.act(sc, game, Action.undo())
    assert (reply["type"], reply["code"]) == ("rejected", "game_over")
    reply = await sc.request({"type": "resign", "game_id": game["game_id"]})
    assert (reply["type"], reply["code"]) == ("error", "game_over")

    # Ann: wins, half on one connection, the rest on a second one after a resume.
    half = len(win) // 2
    game = await ann.play(socks["Ann"], games["Ann"], win[:half])
    await _browse_daily(everyone, game_ids, today)
    sa2, welcome = await ann.connect()
    assert [g["game_id"] for g in welcome["games"]] == [game_ids["Ann"]]
    assert welcome["games"][0]["seq"] == half and welcome["games"][0]["code"] is None
    resumed = (await sa2.request({"type": "resume", "game_id": game_ids["Ann"]}))["game"]
    again = (await sa2.request({"type": "join_daily"}))["game"]
    assert resumed == {**again, "elapsed_ms": resumed["elapsed_ms"]}
    game = await ann.play(sa2, resumed, win[half:])
    assert game["status"] == "won" and game["code"] is None
    assert (await socks["Ann"].request({"type": "join_daily"}))["game"]["status"] == "won"

    reply = await sb.request({"type": "resign", "game_id": game_ids["Ben"]})
    assert reply["game"]["status"] == "resigned" and reply["game"]["code"] is None
    reconnected, welcome = await ben.connect()
    assert welcome["games"] == []
    assert (await reconnected.request({"type": "join_daily"}))["game"]["status"] == "resigned"
    for p in players:  # every socket of everyone: one more exchange each
        for sock in p.sockets:
            assert (await sock.request({"type": "ping"}))["type"] == "pong"
    await _browse_daily(everyone, game_ids, today)

    # Late that evening tomorrow's deal may already be chosen and stored (ahead of midnight):
    # it stays secret too. Everyone looks again, on fresh connections as well.
    clock.set(dt.datetime.combine(today, dt.time(23, 59, 30), tzinfo=dt.UTC))
    assert client.app is not None
    daily_service = client.app[SERVICES].daily
    assert tomorrow in await daily_service.prepare_ahead(dt.timedelta(hours=1))
    for p in players:
        sock, welcome = await p.connect()
        reply = await sock.request({"type": "join_daily"})
        assert reply["game"]["game_id"] == game_ids[p.name] and reply["game"]["code"] is None
    await _browse_daily(everyone, game_ids, today)

    # Before midnight: the scan.
    assert len(transcript.frames) > len(win) + len(block) and len(transcript.bodies) > 100
    transcript.assert_no_code(code)
    transcript.assert_no_code(next_code)
    shown = {p.name: shown_cards(deal, rules, p.sent) for p in players}
    assert not shown["Ann"][-1] <= shown["Ben"][-1]  # Ben saw less: the check can bite
    for p in players:
        assert transcript.assert_only_seen_cards(p.name, shown[p.name]) > 0
    transcript.assert_only_seen_cards(public.name, [frozenset()])

    # After midnight the code is published: a TP2 code dealing exactly what everyone saw.
    transcript.phase = "published"
    clock.set(dt.datetime.combine(tomorrow, dt.time(0, 0, 1), tzinfo=dt.UTC))
    status, past = await public.get(f"/api/v1/daily/{today.isoformat()}")
    assert status == 200 and past["is_open"] is False, past
    published = GameCode.parse(past["code"])
    assert past["code"] == str(published) == str(code)
    assert published.version is DealVersion.TP2 and published.sealed
    assert len(published.letters) == 28 and len(past["code"].split("-")) == 6
    for step in past["line"] or []:
        if step["action"] == "remove":
            assert step["card"] == str(published.deal().tableau[step["pos"]]), step
    for p in players:
        compared = check_states(
            transcript, p.name, game_ids[p.name], published.deal(), published.rules, p.applied
        )
        assert compared > 0, p.name
    status, summary = await public.get(f"/api/v1/games/{game_ids['Ann']}")
    assert summary["code"] == str(code) and len(summary["actions"]) == len(win)
    for p in players:
        await p.close()


async def test_the_dailys_level_and_baselines_name_no_card_nor_code(
    client: Client, settings: Settings, clock: FakeClock
) -> None:
    """What the difficulty adds to the daily's facts (protocol §12.4): while the date is open, a
    level's name and nothing else; once it is over, a status and numbers. No card, no form of
    the code, in either."""
    assert settings.daily_secret
    today = clock.now().date()
    code = daily_code(settings.daily_secret.encode(), today, RuleSet.EASY)
    transcript = Transcript()
    public = Participant(client, transcript, "Public")
    opened = []
    for path in ("/api/v1/daily", f"/api/v1/daily/{today.isoformat()}"):
        status, body = await public.get(path, tag=NO_CARDS)
        assert status == 200, body
        opened.append(body)
    for body in opened:
        assert body["difficulty"] in {level.value for level in Level}
        assert body["baselines"] is None
    transcript.assert_no_code(code)
    transcript.assert_only_seen_cards(public.name, [frozenset()])

    clock.set(dt.datetime.combine(today + dt.timedelta(days=1), dt.time(0, 0, 1), tzinfo=dt.UTC))
    status, past = await public.get(f"/api/v1/daily/{today.isoformat()}")
    assert status == 200 and past["code"] == str(code), past
    added = {"difficulty": past["difficulty"], "baselines": past["baselines"]}
    assert added["difficulty"] == opened[0]["difficulty"]
    assert [text for _, text in _strings(added)] == [
        added["difficulty"],
        past["baselines"]["greedy"]["status"],
    ]
    assert past["baselines"]["greedy"]["status"] in ("won", "blocked")
    assert not list(cards_in(added))
    numbers = json.dumps(added).upper()
    assert not [form for form in code_forms(code) if form in numbers]
    assert {key: type(value) for key, value in past["baselines"]["random"].items()} == {
        "playouts": int,
        "win_rate": float,
        "median_score": int,
    }


# ------------------------------------------------------------------------------ the races


async def _browse_race(
    everyone: Sequence[Participant], invite: str, games: dict[str, int], running: bool
) -> None:
    """Everyone fetches the room, the room's page, and (while running) every racer's game."""
    for p in everyone:
        status, room = await p.get(f"/api/v1/races/{invite}", tag=NO_CARDS)
        assert status == 200 and room["host_deal"] is False, room
        await p.get(f"/race/{invite}", tag=NO_CARDS)
        if not running:
            continue
        for owner, game_id in games.items():
            own = owner == p.name
            status, summary = await p.get(f"/api/v1/games/{game_id}", tag="" if own else NO_CARDS)
            assert status == 200 and summary["code"] is None, summary
            assert ("actions" in summary) == own, (p.name, summary)


def _published(record: Received, message: Any) -> bool:
    """Where a random race's code may appear: once the race is over (the test's phase), in
    its results, a finished ROOM, or a game's STATE."""
    if record.phase != "over" or not isinstance(message, dict):
        return False
    if message.get("type") == "race_results":
        return True
    if message.get("type") in ("accepted", "rejected", "game"):
        return True
    rooms = [d for d in _dicts(message) if is_room(d)]
    return bool(rooms) and all(room["status"] == "finished" for room in rooms)


@pytest.mark.parametrize("ending", ["played_out", "time_limit"])
async def test_a_random_race_leaks_neither_its_code_nor_a_card_before_its_results(
    make_server: ServerFactory, clock: FakeClock, ending: str
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.2, race_sweep_s=0.05)
    async with TestClient(server) as client:
        transcript = Transcript()
        public = Participant(client, transcript, "Public")
        rae, ivo, wes, lu = (
            Participant(client, transcript, n) for n in ("Rae", "Ivo", "Wes", "Lu")
        )
        everyone = (public, rae, ivo, wes, lu)
        for p in (rae, ivo, wes):
            await p.register()
        sr, _ = await rae.connect()
        si, _ = await ivo.connect()
        sw, _ = await wes.connect()

        created = await sr.request({"type": "race_create", "time_limit_s": 60})
        assert created["type"] == "race", created
        invite = created["race"]["invite"]
        assert created["race"]["code"] is None and created["race"]["host_deal"] is False
        await _browse_race(everyone, invite, {}, running=False)
        joined = await si.request({"type": "race_join", "invite": invite})
        assert joined["role"] == "racer" and "game" not in joined
        watching = await sw.request({"type": "race_join", "invite": invite, "watch": True})
        assert watching["role"] == "spectator" and "game" not in watching
        room = (await sr.until("race_room"))["race"]
        while len(room["players"]) < 2:
            room = (await sr.until("race_room"))["race"]

        started = await sr.request({"type": "race_start", "invite": invite})
        assert started["race"]["status"] == "running" and "game" not in started
        games = {"Rae": (await sr.until("race_go"))["game"]}
        games["Ivo"] = (await si.until("race_go"))["game"]
        game_ids = {name: g["game_id"] for name, g in games.items()}
        rules = RuleSet(games["Rae"]["rules"])
        # The fake clock is still in the countdown: nothing more is shown, to anyone, and a
        # racer coming back now gets the room but not the game.
        for sock, game_id in ((si, game_ids["Ivo"]), (sw, game_ids["Rae"])):
            reply = await sock.request({"type": "resume", "game_id": game_id})
            assert reply["type"] == "error", reply
        early, welcome = await ivo.connect()
        assert welcome["games"] == [] and [r["invite"] for r in welcome["races"]] == [invite]
        reply = await early.request({"type": "race_join", "invite": invite})
        assert reply["role"] == "racer" and "game" not in reply
        await _browse_race(everyone, invite, game_ids, running=True)
        clock.advance(seconds=1)
        reply = await sr.request({"type": "hint", "game_id": game_ids["Rae"]})
        assert (reply["type"], reply["code"]) == ("error", "hints_not_allowed")
        # Lu comes in late, without asking to watch: a spectator, like Wes.
        await lu.register()
        sl, _ = await lu.connect()
        late = await sl.request({"type": "race_join", "invite": invite})
        assert late["role"] == "spectator" and "game" not in late

        # Ivo: a draw, an undo refused (ranked play has none), a draw again, a face-down card
        # refused; then he comes back on a second connection, as after a lost one.
        game = await ivo.play(si, games["Ivo"], [Action.draw()])
        reply = await ivo.act(si, game, Action.undo())
        assert (reply["type"], reply["code"]) == ("rejected", "ranked_no_undo")
        game = await ivo.play(si, game, [Action.draw()])
        reply = await ivo.act(si, game, Action.remove(0))
        assert (reply["type"], reply["code"]) == ("rejected", "blocked")
        si2, welcome = await ivo.connect()
        assert [g["game_id"] for g in welcome["games"]] == [game_ids["Ivo"]]
        assert [r["invite"] for r in welcome["races"]] == [invite]
        rejoined = await si2.request({"type": "race_join", "invite": invite})
        assert rejoined["role"] == "racer" and rejoined["game"]["seq"] == game["seq"]
        reply = await sw.request({"type": "resume", "game_id": game_ids["Ivo"]})
        assert (reply["type"], reply["code"]) == ("error", "not_your_game")

        # Rae plays from what she is shown: to the end, or, before time runs out, a few moves
        # and at least until she has seen a card Ivo has not (so the checks below can bite).
        ivo_saw = {c for r in transcript.of("Ivo") for _, c in cards_in(r.parsed())}
        game = games["Rae"]
        moves = 0
        while game["status"] == "playing" and (
            ending == "played_out" or moves < 5 or _faces(game) <= ivo_saw
        ):
            game = await rae.play(sr, game, [greedy(game, rules)])
            moves += 1
            if moves == 3:
                await _browse_race(everyone, invite, game_ids, running=True)
        await sw.until("race_progress", player_id=rae.id, seq=game["seq"])
        await _browse_race(everyone, invite, game_ids, running=True)
        for p in (rae, ivo, wes, lu):
            for sock in p.sockets:
                assert (await sock.request({"type": "ping"}))["type"] == "pong"

        transcript.phase = "over"
        if ending == "played_out":
            assert game["status"] in ("won", "blocked")
            reply = await si2.request({"type": "resign", "game_id": game_ids["Ivo"]})
            assert reply["game"]["status"] == "resigned", reply
        else:
            clock.advance(seconds=120)
        results = [(await s.until("race_results"))["race"] for s in (sr, si, early, si2, sw, sl)]
        assert {r["status"] for r in results} == {"finished"}
        assert len({r["code"] for r in results}) == 1
        code = GameCode.parse(results[0]["code"])
        status, room = await wes.get(f"/api/v1/races/{invite}", tag=NO_CARDS)
        assert status == 200 and room["code"] == str(code) and room["results"]
        if ending == "time_limit":
            # (sent as is, not as Ivo's move: the server refuses it, nothing more is shown)
            refused = await si.request(
                {"type": "action", "game_id": game_ids["Ivo"], "seq": 2, "action": "draw"}
            )
            assert (refused["type"], refused["code"]) == ("rejected", "race_over")
            assert refused["game"]["code"] == str(code)

        # The scan: the code only where it is published, once the race is over.
        transcript.assert_no_code(code, exempt=_published)
        assert code.version is DealVersion.TP2 and code.sealed and str(code) == results[0]["code"]
        shown = {p.name: shown_cards(code.deal(), code.rules, p.sent) for p in (rae, ivo)}
        assert not shown["Rae"][-1] <= shown["Ivo"][-1]  # Ivo saw less: the check can bite
        for p in (rae, ivo):
            assert transcript.assert_only_seen_cards(p.name, shown[p.name]) > 0
            assert check_states(
                transcript, p.name, game_ids[p.name], code.deal(), code.rules, p.applied
            ) > len(p.applied)
        for p in (wes, lu, public):
            transcript.assert_only_seen_cards(p.name, [frozenset()])
        for p in (wes, lu):
            spectated = [
                json.loads(r.text)["type"] for r in transcript.of(p.name) if r.source == "ws"
            ]
            assert {"race", "race_progress", "race_results"} <= set(spectated)
            assert "race_go" not in spectated
        rooms = transcript.rooms()
        assert len(rooms) > 20 and all(room["host_deal"] is False for room in rooms)
        assert all(room["code"] is None for room in rooms if room["status"] != "finished")
        for p in (rae, ivo, wes, lu):
            await p.close()


async def test_a_race_on_a_typed_code_says_host_deal_in_every_room(
    make_server: ServerFactory, clock: FakeClock
) -> None:
    server: TestServer = await make_server(race_countdown_s=0.2, race_sweep_s=0.05)
    async with TestClient(server) as client:
        transcript = Transcript()
        hal, jo, wes = (Participant(client, transcript, n) for n in ("Hal", "Jo", "Wes"))
        for p in (hal, jo, wes):
            await p.register()
        sh, _ = await hal.connect()
        sj, _ = await jo.connect()
        sw, _ = await wes.connect()
        created = await sh.request({"type": "race_create", "code": "tp1-e-aaaaaab"})
        invite = created["race"]["invite"]
        assert created["race"]["host_deal"] is True
        for p in (jo, wes):  # before they join: the room page says so
            status, room = await p.get(f"/api/v1/races/{invite}")
            assert status == 200 and room["host_deal"] is True and room["code"] is None
        assert (await sj.request({"type": "race_join", "invite": invite}))["role"] == "racer"
        watch = await sw.request({"type": "race_join", "invite": invite, "watch": True})
        assert watch["role"] == "spectator"
        await sh.request({"type": "race_start", "invite": invite})
        go = {"Hal": (await sh.until("race_go"))["game"], "Jo": (await sj.until("race_go"))["game"]}
        clock.advance(seconds=1)
        await jo.play(sj, go["Jo"], [Action.draw()])
        sj2, welcome = await jo.connect()
        assert [room["host_deal"] for room in welcome["races"]] == [True]
        assert (await sj2.request({"type": "race_join", "invite": invite}))["race"]["host_deal"]
        for p in (jo, wes):
            status, room = await p.get(f"/api/v1/races/{invite}")
            assert room["host_deal"] is True and room["status"] == "running"
        for sock, name in ((sh, "Hal"), (sj, "Jo")):
            reply = await sock.request({"type": "resign", "game_id": go[name]["game_id"]})
            assert reply["game"]["status"] == "resigned"
        for sock in (sh, sj, sw):
            results = (await sock.until("race_results"))["race"]
            assert results["host_deal"] is True and results["code"] == "TP1-E-AAAAAAB"
        for p in (jo, wes):
            status, room = await p.get(f"/api/v1/races/{invite}")
            assert room["host_deal"] is True and room["status"] == "finished"
            rooms = transcript.rooms(p.name)
            assert len(rooms) >= 6 and all(room["host_deal"] is True for room in rooms), rooms
            first = next(r for r in transcript.of(p.name) if any(map(is_room, _dicts(r.parsed()))))
            assert first.source.startswith("GET /api/v1/races/"), first  # before joining
        spectated = {json.loads(r.text)["type"] for r in transcript.of("Wes") if r.source == "ws"}
        assert {"race", "race_room", "race_results"} <= spectated
        for p in (hal, jo, wes):
            await p.close()


async def test_a_failed_write_logs_no_secret_code(
    make_server: ServerFactory,
    database_url: str,
    settings: Settings,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The database refuses to store a new daily deal and a new race room: the errors are
    logged, and neither the daily's code nor the race's appears in the log."""
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            """CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'refused'; END $$;
               CREATE TRIGGER refuse BEFORE INSERT ON daily_challenges
                   FOR EACH ROW EXECUTE FUNCTION refuse();
               CREATE TRIGGER refuse BEFORE INSERT ON races
                   FOR EACH ROW EXECUTE FUNCTION refuse();"""
        )
    finally:
        await conn.close()
    server = await make_server()
    caplog.set_level(logging.DEBUG)
    async with TestClient(server) as client:
        assert (await client.get("/api/v1/daily")).status == 503
        host = await register(client, "Host")
        ws, _ = await WsPlayer.connect(client, host["token"])
        reply = await ws.request({"type": "race_create"})
        assert (reply["type"], reply["code"]) == ("error", "unavailable")
        await ws.close()
    assert "refused" in caplog.text  # the failures were logged
    daily = daily_code((settings.daily_secret or "").encode(), clock.now().date(), RuleSet.EASY)
    assert str(daily) not in caplog.text and daily.letters not in caplog.text
    assert "TP2-" not in caplog.text  # nor the random race's, whatever it was
