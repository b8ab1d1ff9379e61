"""Races at the service level: invite codes, the order of the results, and a room's consistency
when several callers (as from several server processes) change it at the same moment — on
either store (in memory and PostgreSQL: the ``backend`` fixture), whose row locks make them take
turns."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from server.engine import GameCode
from server.errors import ConflictError, ForbiddenError, InvalidInputError, ServiceError
from server.protocol.race_room import RaceResult
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.game_views import Outcome
from server.services.games import GameService
from server.services.moderation import ModerationService
from server.services.players import PlayerInfo, PlayerService
from server.services.races import (
    INVITE_ALPHABET,
    RaceLimits,
    RaceService,
    normalize_invite,
    rank_results,
)
from server.services.rooms import new_invite, results_of, shown_results
from server.storage.seats import RacerGameRow
from tests.backends import Backend
from tests.helpers import find_winning_line

CODE = GameCode.parse("TP1-E-AAAAAAB")
LOOK_ALIKES = "0O1IL5S2Z8B"

# ------------------------------------------------------------------------------ invite codes


def test_the_invite_alphabet_has_no_look_alikes() -> None:
    assert len(set(INVITE_ALPHABET)) == len(INVITE_ALPHABET)
    assert INVITE_ALPHABET.isascii() and INVITE_ALPHABET.isupper() and INVITE_ALPHABET.isalnum()
    assert not set(LOOK_ALIKES) & set(INVITE_ALPHABET)


def test_new_invites_are_six_characters_of_the_alphabet() -> None:
    invites = {new_invite() for _ in range(500)}
    assert len(invites) > 490  # random, not a sequence
    assert all(normalize_invite(i) == i and len(i) == 6 for i in invites)


@hypothesis_settings(deadline=None)  # a busy machine may be slow: no time limit per example
@given(st.text(alphabet=INVITE_ALPHABET, min_size=6, max_size=6), st.data())
def test_an_invite_read_aloud_and_typed_back_normalizes_to_itself(
    invite: str, data: st.DataObject
) -> None:
    typed = "".join(
        data.draw(st.sampled_from([c, c.lower()])) + data.draw(st.sampled_from(["", "-", " "]))
        for c in invite
    )
    assert normalize_invite(typed) == invite
    assert normalize_invite(f" {invite[:3]}-{invite[3:]} ".lower()) == invite


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "ACDEF",
        "ACDEFGH",
        "------",
        *(f"ACDEF{c}" for c in LOOK_ALIKES),
        "acdef" + "0",
        "ACDÉFG",
        "ACDEF\u0661",  # an Arabic-Indic digit
        "ACD\u00a0EFG",  # a no-break space is not a separator
        "ACDEF\n",
    ],
)
def test_malformed_invites_are_refused_as_bad_invite(raw: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        normalize_invite(raw)
    assert caught.value.code == "bad_invite"


def test_a_bad_invite_message_does_not_echo_a_long_input() -> None:
    with pytest.raises(InvalidInputError) as caught:
        normalize_invite("X" * 10_000)
    assert len(str(caught.value)) < 200


# ------------------------------------------------------------------------------- the results


def _row(
    pid: int,
    status: str,
    score: int,
    cards: int,
    elapsed: int | None,
    last_removal: int | None = None,
) -> dict[str, Any]:
    return {
        "player_id": pid,
        "name": f"P{pid}",
        "status": status,
        "score": score,
        "cards_left": cards,
        "moves": 40,
        "elapsed_ms": elapsed,
        "last_removal_ms": last_removal,
    }


def test_results_rank_winners_by_time_then_the_rest_by_cards_removed_score_and_last_removal() -> (
    None
):
    rows = [
        _row(1, "blocked", 700, 5, 90_000, 88_000),
        _row(2, "won", 900, 0, 80_000, 80_000),
        _row(3, "playing", 700, 3, None, 50_000),
        _row(4, "won", 650, 0, 60_000, 60_000),  # a lower score, but it finished first
        _row(5, "resigned", 800, 12, 30_000, 29_000),  # the best score, but 16 removed
        _row(6, "won", 990, 0, 70_000, 70_000),
        _row(7, "playing", 700, 3, None, 40_000),  # as 3, but it got there first
        _row(8, "resigned", 690, 3, 20_000, 10_000),  # as 3 and 7 but for the score
    ]
    ranked = rank_results(rows)
    assert [r["player_id"] for r in ranked] == [4, 6, 2, 7, 3, 8, 1, 5]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [r["cleared"] for r in ranked] == [True] * 3 + [False] * 5
    assert [r["cards_removed"] for r in ranked] == [28, 28, 28, 25, 25, 25, 23, 16]
    assert all(set(r) == set(rows[0]) | {"rank", "cleared", "cards_removed"} for r in ranked)
    assert "rank" not in rows[0]  # the input is not changed


def test_resigning_at_once_ranks_below_playing_on() -> None:
    # The old order put the racer who resigned at once (500) above one who played 30 moves
    # to 470 without clearing; now the cards removed come first.
    quitter = _row(1, "resigned", 500, 28, 1_000, None)
    player = _row(2, "resigned", 470, 24, 90_000, 85_000)
    blocked = _row(3, "blocked", 449, 27, 60_000, 2_000)
    ranked = rank_results([quitter, player, blocked])
    assert [(r["player_id"], r["rank"]) for r in ranked] == [(2, 1), (3, 2), (1, 3)]


def test_racers_who_removed_nothing_are_equal_whatever_their_score() -> None:
    # A racer who drew a card and resigned (499) is not below one who never took their seat
    # (500, resigned when the grace ran out): neither got anywhere.
    absent = _row(1, "resigned", 500, 28, 60_000, None)
    drew = _row(2, "resigned", 499, 28, 5_000, None)
    drew_more = _row(3, "blocked", 476, 28, 9_000, None)
    removed_one = _row(4, "resigned", 470, 27, 9_000, 8_000)
    ranked = rank_results([absent, drew, drew_more, removed_one])
    assert [(r["rank"], r["player_id"]) for r in ranked] == [(1, 4), (2, 1), (2, 2), (2, 3)]


def test_equal_results_share_a_rank_and_the_next_counts_those_ahead() -> None:
    rows = [
        _row(5, "won", 760, 0, 40_000, 40_000),
        _row(2, "won", 770, 0, 40_000, 40_000),  # the same time, whatever the score: shared
        _row(9, "won", 790, 0, 41_000, 41_000),
        _row(4, "resigned", 500, 28, 100, None),  # both resigned at once: shared
        _row(3, "resigned", 500, 28, 900, None),
        _row(7, "playing", 497, 25, None, 7_000),  # equal on all three: shared
        _row(6, "blocked", 497, 25, 9_000, 7_000),
        _row(8, "blocked", 497, 25, 9_000, 7_001),  # a millisecond later
    ]
    ranked = rank_results(rows)
    assert [(r["rank"], r["player_id"]) for r in ranked] == [
        (1, 2),  # equal results are listed by player id
        (1, 5),
        (3, 9),
        (4, 6),
        (4, 7),
        (6, 8),
        (7, 3),
        (7, 4),
    ]


def test_no_results_for_no_racers() -> None:
    assert rank_results([]) == []


def test_results_of_a_races_games_count_the_last_removal_from_the_start() -> None:
    starts_at = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
    at = starts_at + dt.timedelta(seconds=4, microseconds=2_999)
    games = [
        RacerGameRow(1, "Ann", "resigned", 500, 28, 0, 300, 11, None),
        RacerGameRow(2, "Bob", "playing", 497, 25, 3, None, 12, at),
    ]
    assert [
        (r["player_id"], r["rank"], r["game_id"], r["cards_removed"], r["last_removal_ms"])
        for r in results_of(games, starts_at)
    ] == [(2, 1, 12, 3, 4_002), (1, 2, 11, 0, None)]


def test_results_are_shown_as_results_with_their_cards_removed_old_ones_as_stored() -> None:
    fresh = rank_results([_row(1, "resigned", 500, 28, 300, None) | {"game_id": 11}])
    shown = msgspec.json.decode(msgspec.json.encode(msgspec.convert(fresh, list[RaceResult])))
    assert shown == fresh  # every member, a null last removal included
    assert shown[0]["last_removal_ms"] is None and shown[0]["cards_removed"] == 0
    # Results stored before the order by progress: their ranks as they were, the cards removed
    # worked out, no time of a last removal (nor a game before replays).
    old = {
        "name": "Ben",
        "rank": 2,
        "moves": 2,
        "score": 498,
        "status": "resigned",
        "cleared": False,
        "player_id": 12,
        "cards_left": 26,
        "elapsed_ms": 498,
    }
    as_shown = shown_results([old])
    assert as_shown == [old | {"cards_removed": 2}]
    encoded = msgspec.json.encode(msgspec.convert(as_shown, list[RaceResult]))
    assert msgspec.json.decode(encoded) == [old | {"cards_removed": 2}]
    assert shown_results(None) is None


_STATUSES = ("won", "blocked", "resigned", "playing")


@st.composite
def _racers(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Racers' games as a race's end finds them, from few values so that many are equal."""
    rows = []
    for pid in range(1, draw(st.integers(0, 10)) + 1):
        status = draw(st.sampled_from(_STATUSES))
        score = draw(st.sampled_from([449, 470, 497, 498, 500, 700]))
        time = draw(st.sampled_from([0, 1_000, 2_000, 30_000]))
        if status == "won":
            rows.append(_row(pid, status, score, 0, time, time))
            continue
        cards = draw(st.sampled_from([1, 3, 25, 27, 28]))
        last = None if cards == 28 else draw(st.sampled_from([0, 500, 1_000, 2_000]))
        end = None if status == "playing" else max(time, last or 0)
        rows.append(_row(pid, status, score, cards, end, last))
    return rows


def _ahead(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether racer ``a`` ranks strictly ahead of ``b`` (docs/rules.md §4 "Results order"),
    written out apart from the service's key."""
    if a["status"] == "won" or b["status"] == "won":
        if a["status"] != "won":
            return False
        return b["status"] != "won" or bool(a["elapsed_ms"] < b["elapsed_ms"])
    if a["cards_left"] != b["cards_left"]:
        return bool(a["cards_left"] < b["cards_left"])  # more removed
    if a["cards_left"] == 28:
        return False  # nothing removed, either: equal whatever the scores
    if a["score"] != b["score"]:
        return bool(a["score"] > b["score"])
    if a["last_removal_ms"] is None or b["last_removal_ms"] is None:
        return a["last_removal_ms"] is not None and b["last_removal_ms"] is None
    return bool(a["last_removal_ms"] < b["last_removal_ms"])


@hypothesis_settings(deadline=None)
@given(_racers(), st.randoms(use_true_random=False))
def test_results_are_one_agreed_order_whatever_order_the_rows_come_in(
    rows: list[dict[str, Any]], rnd: random.Random
) -> None:
    ranked = rank_results(rows)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert rank_results(shuffled) == ranked  # every process computes the same order
    assert sorted(r["player_id"] for r in ranked) == [r["player_id"] for r in rows]
    # Listed by rank, equal ranks by player id.
    assert [(r["rank"], r["player_id"]) for r in ranked] == sorted(
        (r["rank"], r["player_id"]) for r in ranked
    )
    for a in ranked:
        # A rank is 1 + the number of racers strictly ahead (1, 1, 3).
        assert a["rank"] == 1 + sum(_ahead(b, a) for b in ranked)
        assert a["cleared"] is (a["status"] == "won")
        assert a["cards_removed"] == 28 - a["cards_left"]
        for b in ranked:
            # A total preorder: any two compare one way, the other, or equal (a shared rank).
            assert (a["rank"] < b["rank"]) is _ahead(a, b)
            assert (a["rank"] == b["rank"]) is (not _ahead(a, b) and not _ahead(b, a))
            if a["cleared"] and not b["cleared"]:
                assert a["rank"] < b["rank"]
            if not a["cleared"] and not b["cleared"] and a["cards_removed"] > b["cards_removed"]:
                assert a["rank"] < b["rank"]  # removing more ranks ahead, whatever the score


@hypothesis_settings(deadline=None)
@given(_racers(), st.data())
def test_removing_more_cards_without_clearing_never_ranks_a_racer_lower(
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Whatever the others did, a racer who removed more cards (without clearing them all), at
    any score and time, ranks no lower than had they removed fewer."""

    def me(removed: int) -> dict[str, Any]:
        status = data.draw(st.sampled_from(_STATUSES[1:]))
        score = data.draw(st.sampled_from([449, 470, 500, 700]))
        last = None if removed == 0 else data.draw(st.sampled_from([0, 1_000, 30_000]))
        end = None if status == "playing" else 30_000
        return _row(99, status, score, 28 - removed, end, last)

    fewer = data.draw(st.integers(0, 26))
    more = data.draw(st.integers(fewer + 1, 27))
    before = {r["player_id"]: r["rank"] for r in rank_results([*rows, me(fewer)])}[99]
    after = {r["player_id"]: r["rank"] for r in rank_results([*rows, me(more)])}[99]
    assert after <= before


# ------------------------------------------------------------------- rooms under contention


@dataclass(frozen=True, slots=True)
class Services:
    """The services a race needs, over one backend's stores."""

    players: PlayerService
    games: GameService
    races: RaceService


@pytest.fixture
async def services(backend: Backend, clock: FakeClock) -> AsyncIterator[Services]:
    daily = DailyService(backend.daily, clock, b"test-daily-key-0123456789abcdefghij")
    games = GameService(backend.games, backend.committer, clock, daily)
    limits = RaceLimits(max_players=3, max_rooms=2, countdown_s=1, lobby_ttl_s=600)
    races = RaceService(backend.races, backend.presence, clock, games, limits)
    try:
        yield Services(PlayerService(backend.players, clock), games, races)
    finally:
        await games.close()


async def _players(services: Services, *names: str) -> list[PlayerInfo]:
    return [(await services.players.register(name)).player for name in names]


async def _settled(*calls: Any) -> tuple[list[Any], list[str]]:
    """Run calls at once; their results and the codes of the service errors they raised."""
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, ServiceError):
            raise outcome
    return (
        [o for o in outcomes if not isinstance(o, BaseException)],
        sorted(o.code for o in outcomes if isinstance(o, ServiceError)),
    )


async def test_concurrent_joins_never_overfill_a_room(services: Services) -> None:
    host, *others = await _players(services, "Host", "Al", "Bo", "Cy", "Di", "Ed")
    room = await services.races.create(host, CODE)
    joined, errors = await _settled(*(services.races.join(p, room.invite) for p in others))
    assert len(joined) == 2 and errors == ["room_full"] * 3
    after = await services.races.room(room.invite)
    assert [s.seat for s in after.seats] == [1, 2, 3]
    assert after.version == 3  # one change per seat taken


async def test_concurrent_creates_and_joins_keep_the_rooms_per_player_limit(
    services: Services,
) -> None:
    ann, *hosts = await _players(services, "Ann", "Host1", "Host2", "Host3")
    rooms = [await services.races.create(h) for h in hosts]
    joined, errors = await _settled(
        *(services.races.join(ann, r.invite) for r in rooms), services.races.create(ann)
    )
    assert len(joined) == 2 and errors == ["too_many_rooms"] * 2
    assert len(await services.races.active_for(ann.id)) == 2


async def test_a_double_start_starts_once(services: Services, clock: FakeClock) -> None:
    host, ann = await _players(services, "Host", "Ann")
    room = await services.races.create(host, CODE)
    await services.races.join(ann, room.invite)
    started, errors = await _settled(*(services.races.start(host, room.invite) for _ in range(4)))
    assert len(started) == 1 and errors == ["already_started"] * 3
    running = await services.races.room(room.invite)
    assert running.status == "running" and running.version == started[0].version
    assert running.starts_at == clock.now() + dt.timedelta(seconds=1)
    assert len({s.game_id for s in running.seats}) == 2


async def test_a_host_banned_after_opening_the_lobby_cannot_start_it(
    services: Services, backend: Backend
) -> None:
    """The ban came after the lobby was opened: the host's seat is kept, but starting would
    deal ranked games, so it is refused and the room stays a lobby until the unban."""
    host, ann = await _players(services, "Host", "Ann")
    room = await services.races.create(host, CODE)
    await services.races.join(ann, room.invite)
    await backend.ban(host.id, "bot play")
    with pytest.raises(ForbiddenError) as refused:
        await services.races.start(host, room.invite)
    assert refused.value.code == "banned" and "bot play" in refused.value.message
    lobby = await services.races.room(room.invite)
    assert lobby.status == "lobby" and lobby.version == room.version + 1  # Ann's seat alone
    assert all(s.game_id is None for s in lobby.seats)
    # Anyone else is told they are not the host, as before.
    with pytest.raises(ForbiddenError) as not_host:
        await services.races.start(ann, room.invite)
    assert not_host.value.code == "not_host"

    await ModerationService(backend.moderation).unban(f"id:{host.id}", "tests")
    assert (await services.races.start(host, room.invite)).status == "running"


async def test_simultaneous_final_actions_finish_the_race_once_with_a_shared_rank(
    services: Services, clock: FakeClock
) -> None:
    line = find_winning_line(CODE.deal(), CODE.rules)
    assert line is not None
    players = await _players(services, "Host", "Ann", "Bob")
    room = await services.races.create(players[0], CODE)
    for p in players[1:]:
        await services.races.join(p, room.invite)
    started = await services.races.start(players[0], room.invite)
    games: dict[int, int] = {}
    for seat in started.seats:
        assert seat.game_id is not None
        games[seat.player_id] = seat.game_id
    with pytest.raises(InvalidInputError) as early:  # the countdown is not over
        await services.games.act(players[0].id, games[players[0].id], 0, line[0])
    assert early.value.code == "race_not_started"
    clock.advance(seconds=2)

    async def play_all_but_last(p: PlayerInfo) -> None:
        for seq, action in enumerate(line[:-1]):
            result = await services.games.act(p.id, games[p.id], seq, action)
            assert result.outcome is Outcome.ACCEPTED, result

    await asyncio.gather(*(play_all_but_last(p) for p in players))
    finals, finishers = await asyncio.gather(
        asyncio.gather(
            *(services.games.act(p.id, games[p.id], len(line) - 1, line[-1]) for p in players)
        ),
        asyncio.gather(*(services.races.maybe_finish(started.id) for _ in range(3))),
    )
    assert all(r.outcome is Outcome.ACCEPTED for r in finals)
    assert finishers.count(True) <= 1  # if not the last action's own call, one of these
    done = await services.races.room(room.invite)
    assert done.status == "finished" and done.results is not None
    # The same finish time (the clock stood still): one shared first place, by player id.
    assert [r["rank"] for r in done.results] == [1, 1, 1]
    assert [r["player_id"] for r in done.results] == sorted(p.id for p in players)
    assert {(r["cleared"], r["cards_removed"], r["elapsed_ms"]) for r in done.results} == {
        (True, 28, 1000)
    }
    # Finishing again changes nothing.
    assert await services.races.maybe_finish(started.id) is False
    assert (await services.races.room(room.invite)).results == done.results


async def test_a_racer_who_removed_cards_and_resigned_ranks_above_those_who_resigned_at_once(
    services: Services, clock: FakeClock
) -> None:
    line = find_winning_line(CODE.deal(), CODE.rules)
    assert line is not None and [a.kind.value for a in line[:3]] == ["remove"] * 3
    host, ann, bob = await _players(services, "Host", "Ann", "Bob")
    room = await services.races.create(host, CODE)
    for p in (ann, bob):
        await services.races.join(p, room.invite)
    started = await services.races.start(host, room.invite)
    assert started.starts_at is not None
    games = {s.player_id: s.game_id for s in started.seats if s.game_id is not None}
    clock.advance(seconds=2)  # one second into the race
    for seq, action in enumerate(line[:3]):
        clock.advance(seconds=1)
        await services.games.act(ann.id, games[ann.id], seq, action)
    clock.advance(seconds=5)
    for p in (host, bob, ann):
        await services.games.resign(p.id, games[p.id])
    done = await services.races.room(room.invite)
    assert done.status == "finished" and done.results is not None
    assert [
        (r["player_id"], r["rank"], r["status"], r["cards_removed"], r["score"])
        for r in done.results
    ] == [
        (ann.id, 1, "resigned", 3, 497),
        (host.id, 2, "resigned", 0, 500),  # equal results: a shared rank, by player id
        (bob.id, 2, "resigned", 0, 500),
    ]
    # Ann's third removal came 4 s after starts_at; her game ended 5 s after it.
    assert [(r["last_removal_ms"], r["elapsed_ms"]) for r in done.results] == [
        (4_000, 9_000),
        (None, 9_000),
        (None, 9_000),
    ]


async def test_concurrent_finishers_at_the_time_limit_finish_it_exactly_once(
    services: Services, clock: FakeClock
) -> None:
    host, ann = await _players(services, "Host", "Ann")
    room = await services.races.create(host, CODE, time_limit_s=60)
    await services.races.join(ann, room.invite)
    started = await services.races.start(host, room.invite)
    clock.advance(seconds=30)
    assert await services.races.maybe_finish(started.id) is False  # not over yet
    clock.advance(seconds=40)
    finished = await asyncio.gather(
        *(services.races.maybe_finish(started.id) for _ in range(5)), services.races.sweep()
    )
    assert finished[:5].count(True) <= 1
    done = await services.races.room(room.invite)
    assert done.status == "finished" and done.finished_at == done.ends_at
    assert done.version == started.version + 1
    assert [r["status"] for r in done.results or []] == ["playing", "playing"]


async def test_leaving_and_closed_rooms(services: Services, clock: FakeClock) -> None:
    host, ann, stranger = await _players(services, "Host", "Ann", "Stranger")
    room = await services.races.create(host, CODE)
    with pytest.raises(ConflictError) as caught:
        await services.races.leave(stranger, room.invite)
    assert caught.value.code == "not_in_race"
    watched = await services.races.leave(stranger, room.invite, watching=True)
    assert watched.version == room.version  # a spectator leaving changes nothing

    await services.races.join(ann, room.invite)
    after = await services.races.leave(host, room.invite)
    assert after.host_id == ann.id and [s.player_id for s in after.seats] == [ann.id]
    closed = await services.races.leave(ann, room.invite)
    assert closed.status == "closed" and closed.seats == ()
    for watch in (False, True):
        with pytest.raises(ConflictError) as caught:
            await services.races.join(stranger, room.invite, watch=watch)
        assert caught.value.code == "race_closed"


async def test_the_sweep_closes_lobbies_never_started(services: Services, clock: FakeClock) -> None:
    (host,) = await _players(services, "Host")
    old = await services.races.create(host)
    clock.advance(seconds=400)
    fresh = await services.races.create(host)
    clock.advance(seconds=300)  # old is 700 s old, fresh 300 s
    await services.races.sweep()
    assert (await services.races.room(old.invite)).status == "closed"
    assert (await services.races.room(fresh.invite)).status == "lobby"
    assert [r.invite for r in await services.races.active_for(host.id)] == [fresh.invite]


async def test_a_race_has_started_once_its_countdown_is_over(
    services: Services, clock: FakeClock
) -> None:
    (host,) = await _players(services, "Host")
    lobby = await services.races.create(host, CODE)
    assert not services.races.started(lobby)
    running = await services.races.start(host, lobby.invite)
    assert running.status == "running" and not services.races.started(running)
    clock.advance(ms=999)
    assert not services.races.started(running)
    clock.advance(ms=1)  # the countdown is 1 s
    assert services.races.started(running)
