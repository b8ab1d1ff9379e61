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

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from server.engine import GameCode
from server.errors import ConflictError, InvalidInputError, ServiceError
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.game_views import Outcome
from server.services.games import GameService
from server.services.players import PlayerInfo, PlayerService
from server.services.races import (
    INVITE_ALPHABET,
    RaceLimits,
    RaceService,
    normalize_invite,
    rank_results,
)
from server.services.rooms import new_invite
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


def _row(pid: int, status: str, score: int, cards: int, elapsed: int | None) -> dict[str, Any]:
    return {
        "player_id": pid,
        "name": f"P{pid}",
        "status": status,
        "score": score,
        "cards_left": cards,
        "moves": 40,
        "elapsed_ms": elapsed,
    }


def test_results_rank_winners_by_finish_time_then_the_rest_by_score_then_cards_left() -> None:
    rows = [
        _row(1, "blocked", 700, 5, 90_000),
        _row(2, "won", 900, 0, 80_000),
        _row(3, "playing", 700, 3, None),
        _row(4, "won", 650, 0, 60_000),  # a lower score, but it finished first
        _row(5, "resigned", 800, 12, 30_000),
        _row(6, "won", 990, 0, 60_000),  # the same time as 4: the lower player id first
        _row(7, "playing", 700, 3, None),  # ties 3 on everything: player id
    ]
    ranked = rank_results(rows)
    assert [r["player_id"] for r in ranked] == [4, 6, 2, 5, 3, 7, 1]
    assert [r["rank"] for r in ranked] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["cleared"] for r in ranked] == [True] * 3 + [False] * 4
    assert all(set(r) == set(rows[0]) | {"rank", "cleared"} for r in ranked)
    assert "rank" not in rows[0]  # the input is not changed


def test_no_results_for_no_racers() -> None:
    assert rank_results([]) == []


_rows = st.lists(
    st.builds(
        lambda status, score, cards, elapsed: (status, score, cards, elapsed),
        st.sampled_from(["won", "blocked", "resigned", "playing"]),
        st.integers(0, 3000),
        st.integers(1, 28),
        st.integers(0, 10_000),
    ),
    max_size=12,
)


@hypothesis_settings(deadline=None)
@given(_rows, st.randoms(use_true_random=False))
def test_results_are_one_agreed_order_whatever_order_the_rows_come_in(
    specs: list[tuple[str, int, int, int]], rnd: random.Random
) -> None:
    rows = [
        _row(
            pid,
            status,
            score,
            0 if status == "won" else cards,
            None if status == "playing" else elapsed,
        )
        for pid, (status, score, cards, elapsed) in enumerate(specs, 1)
    ]
    ranked = rank_results(rows)
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert rank_results(shuffled) == ranked  # every process computes the same order
    assert [r["rank"] for r in ranked] == list(range(1, len(rows) + 1))  # no shared ranks
    winners = [r for r in ranked if r["cleared"]]
    assert ranked[: len(winners)] == winners  # those who cleared all 28 come first
    assert [(r["elapsed_ms"], r["player_id"]) for r in winners] == sorted(
        (r["elapsed_ms"], r["player_id"]) for r in winners
    )
    rest = ranked[len(winners) :]
    assert [(-r["score"], r["cards_left"], r["player_id"]) for r in rest] == sorted(
        (-r["score"], r["cards_left"], r["player_id"]) for r in rest
    )


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


async def test_simultaneous_final_actions_finish_the_race_once_with_distinct_ranks(
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
    assert [r["rank"] for r in done.results] == [1, 2, 3]
    assert [r["player_id"] for r in done.results] == sorted(p.id for p in players)
    # Finishing again changes nothing.
    assert await services.races.maybe_finish(started.id) is False
    assert (await services.races.room(room.invite)).results == done.results


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
