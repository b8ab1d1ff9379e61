"""Ratings of rated races (docs/rules.md §4 "Ratings"): a rated race moves every racer's rating
exactly as OpenSkill's Plackett–Luce model computes it from the results order, in the
transaction that finishes it (on PostgreSQL); an absence widens sigma; a race on a host's deal
rates nobody; and ratings order simulated players of known strength."""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from openskill.models import PlackettLuce
from sqlalchemy import func, select

from server.engine import GameCode
from server.engine.actions import ActionKind
from server.engine.codes import RuleSet
from server.engine.game import Game
from server.errors import ErrorCode, InvalidInputError
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.games import GameService
from server.services.players import PlayerInfo, PlayerService
from server.services.races import RaceLimits, RaceService
from server.services.ratings import RatingModel, RatingRules, RatingService
from server.storage.models import PlayerRating, Race, RatingChange
from server.storage.ratings import PostgresRatingStore, RatingRow
from server.storage.sessions import Sessions
from tests.backends import PostgresBackend, open_backend

HOST_CODE = GameCode.parse("TP1-E-AAAAAAB")
POSITIONS = 28


@dataclass(frozen=True, slots=True)
class Rated:
    """The services of a rated race over PostgreSQL."""

    backend: PostgresBackend
    players: PlayerService
    games: GameService
    races: RaceService
    ratings: RatingService


@pytest.fixture
async def rated(database_url: str, clock: FakeClock) -> AsyncIterator[Rated]:
    async with open_backend("postgres", database_url) as backend:
        assert isinstance(backend, PostgresBackend)
        daily = DailyService(backend.daily, clock, b"test-daily-key-0123456789abcdefghij")
        games = GameService(backend.games, backend.committer, clock, daily)
        ratings = RatingService(PostgresRatingStore(Sessions(backend.engine)), RatingRules())
        limits = RaceLimits(countdown_s=1)
        races = RaceService(backend.races, backend.presence, clock, games, limits, ratings)
        try:
            yield Rated(backend, PlayerService(backend.players, clock), games, races, ratings)
        finally:
            await games.close()


async def _players(rated: Rated, *names: str) -> list[PlayerInfo]:
    return [(await rated.players.register(name)).player for name in names]


async def _race(
    rated: Rated, clock: FakeClock, racers: list[PlayerInfo], removals: list[int], *, host: bool
) -> int:
    """Run a race of ``racers`` (rated on a random deal, or unrated on the host's deal): each
    removes ``removals[i]`` cards (drawing when nothing can be removed), then resigns; returns
    the race's id."""
    room = await rated.races.create(racers[0], HOST_CODE if host else None, rated=not host)
    for p in racers[1:]:
        await rated.races.join(p, room.invite, rated=not host)
    started = await rated.races.start(racers[0], room.invite)
    games = {s.player_id: s.game_id for s in started.seats if s.game_id is not None}
    async with rated.backend.engine.connect() as conn:
        stored_code = await conn.scalar(select(Race.code).where(Race.id == room.id))
    assert stored_code is not None
    code = GameCode.parse(stored_code)
    clock.advance(seconds=2)
    for p, wanted in zip(racers, removals, strict=True):
        game, seq = Game.new(code, ranked=True), 0
        while POSITIONS - game.cards_left < wanted:
            actions = game.legal_actions()
            action = next((a for a in actions if a.kind is ActionKind.REMOVE), actions[-1])
            assert action.kind is not ActionKind.UNDO, "a deal with no removal to make"
            game.apply(action)
            clock.advance(seconds=1)
            await rated.games.act(p.id, games[p.id], seq, action)
            seq += 1
    for p in racers:
        await rated.games.resign(p.id, games[p.id])
    return room.id


async def _stored(rated: Rated) -> dict[int, tuple[float, float, int, int]]:
    async with rated.backend.engine.connect() as conn:
        rows = await conn.execute(select(PlayerRating))
        return {r.player_id: (r.mu, r.sigma, r.races, r.wins) for r in rows}


async def test_a_rated_race_moves_every_racer_as_the_library_computes_from_the_results(
    rated: Rated, clock: FakeClock
) -> None:
    ann, bob, cy, di = await _players(rated, "Ann", "Bob", "Cy", "Di")
    race_id = await _race(rated, clock, [ann, bob, cy, di], [0, 3, 1, 0], host=False)
    assert await rated.races.active_for(ann.id) == []  # finished
    changes = await rated.ratings.race_changes(race_id)
    # Results: Bob (3 removed), Cy (1), then Ann and Di sharing third place.
    assert [(c.player_id, c.rank, c.racers) for c in changes] == [
        (bob.id, 1, 4),
        (cy.id, 2, 4),
        (ann.id, 3, 4),
        (di.id, 3, 4),
    ]
    model = PlackettLuce()
    order = [bob.id, cy.id, ann.id, di.id]
    expected = model.rate([[model.rating()] for _ in order], ranks=[1.0, 2.0, 3.0, 3.0])
    stored = await _stored(rated)
    for player_id, (new,) in zip(order, expected, strict=True):
        won = 1 if player_id == bob.id else 0
        assert stored[player_id] == (new.mu, new.sigma, 1, won)
    assert stored[ann.id] == (*stored[di.id][:2], 1, 0)  # a tie moves both alike
    assert stored[bob.id][0] > stored[cy.id][0] > stored[ann.id][0]
    shown = await rated.ratings.ratings_of(bob.id)
    assert [(r.rules, r.races, r.wins, r.provisional) for r in shown] == [
        (RuleSet.EASY, 1, 1, True)
    ]
    bob_mu, bob_sigma = stored[bob.id][:2]
    assert shown[0].shown == round((bob_mu - 3 * bob_sigma) * RatingRules().scale)

    # Three days later the same four race again: sigma first grows by tau² a day, as taken.
    clock.advance(days=3)
    before = await _stored(rated)
    second = await _race(rated, clock, [ann, bob, cy, di], [2, 0, 0, 1], host=False)
    changes = await rated.ratings.race_changes(second)
    order = [ann.id, di.id, bob.id, cy.id]
    assert [(c.player_id, c.rank) for c in changes] == [
        (ann.id, 1),
        (di.id, 2),
        (bob.id, 3),
        (cy.id, 3),
    ]
    taken = [
        model.rating(
            mu=before[i][0], sigma=min(model.sigma, math.sqrt(before[i][1] ** 2 + 3 * model.tau**2))
        )
        for i in order
    ]
    assert [(c.mu_before, c.sigma_before) for c in changes] == [(t.mu, t.sigma) for t in taken]
    expected = model.rate([[t] for t in taken], ranks=[1.0, 2.0, 3.0, 3.0])
    after = await _stored(rated)
    for player_id, (new,) in zip(order, expected, strict=True):
        assert after[player_id][:3] == (new.mu, new.sigma, 2)
    assert [c.player_id for c in await rated.ratings.history(ann.id, RuleSet.EASY)] == [ann.id] * 2
    assert [c.race_id for c in await rated.ratings.history(ann.id, RuleSet.EASY)] == [
        second,
        race_id,
    ]


async def test_a_race_on_a_hosts_deal_changes_no_rating(rated: Rated, clock: FakeClock) -> None:
    ann, bob, cy = await _players(rated, "Ann", "Bob", "Cy")
    with pytest.raises(InvalidInputError, match="never rated") as refused:
        await rated.races.create(ann, HOST_CODE, rated=True)
    assert refused.value.code is ErrorCode.RATED_HOST_DEAL
    await _race(rated, clock, [ann, bob, cy], [2, 1, 0], host=True)
    assert await _stored(rated) == {}
    async with rated.backend.engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(RatingChange)) == 0
        assert await conn.scalar(select(func.count()).select_from(Race)) == 1


async def test_a_rated_race_in_which_nobody_moved_changes_no_rating(
    rated: Rated, clock: FakeClock
) -> None:
    ann, bob, cy = await _players(rated, "Ann", "Bob", "Cy")
    race_id = await _race(rated, clock, [ann, bob, cy], [0, 0, 0], host=False)
    assert await rated.ratings.race_changes(race_id) == []
    assert await _stored(rated) == {}


async def test_finishing_a_rated_race_again_rates_it_once(rated: Rated, clock: FakeClock) -> None:
    ann, bob = await _players(rated, "Ann", "Bob")
    race_id = await _race(rated, clock, [ann, bob], [1, 0], host=False)
    assert await rated.races.maybe_finish(race_id) is False
    stored = await _stored(rated)
    assert [stored[p.id][2:] for p in (ann, bob)] == [(1, 1), (1, 0)]
    assert len(await rated.ratings.race_changes(race_id)) == 2


# --------------------------------------------------------------------- ordering simulation


def _row(player_id: int, mu: float, sigma: float, at: dt.datetime) -> RatingRow:
    return RatingRow(player_id, RuleSet.CLASSIC, mu, sigma, 0, 0, at)


def test_ratings_order_simulated_players_of_known_strength() -> None:
    """Ten players whose race performance is their strength plus noise (as wide as the gap
    between two neighbours) race in groups of 2 to 6; after 600 races the ratings order them
    as their strengths do."""
    service = RatingModel()
    rng = random.Random(27)
    strengths = {player_id: player_id * 1.0 for player_id in range(1, 11)}
    at = dt.datetime(2026, 3, 14, tzinfo=dt.UTC)
    ratings = {i: _row(i, *service.start, at) for i in strengths}
    for race_id in range(600):
        group = rng.sample(sorted(strengths), rng.randint(2, 6))
        performance = {i: strengths[i] + rng.gauss(0, 1.0) for i in group}
        ordered = sorted(group, key=lambda i: -performance[i])
        ranks = {i: n + 1 for n, i in enumerate(ordered)}
        new, _ = service.rate(race_id, RuleSet.CLASSIC, ranks, ratings, at)
        ratings |= {r.player_id: r for r in new}
    by_rating = sorted(strengths, key=lambda i: service.shown(ratings[i].mu, ratings[i].sigma))
    assert by_rating == sorted(strengths, key=lambda i: strengths[i])


def test_an_absence_widens_sigma_up_to_the_start() -> None:
    service = RatingModel()
    since = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    tau = service.model.tau
    assert service.returning_sigma(2.0, since, since + dt.timedelta(hours=23)) == 2.0
    assert service.returning_sigma(2.0, since, since + dt.timedelta(days=10)) == math.sqrt(
        4.0 + 10 * tau**2
    )
    assert service.returning_sigma(2.0, since, since + dt.timedelta(days=100_000)) == (
        service.model.sigma
    )


def test_rating_a_race_of_one_or_a_racer_without_a_rating_is_refused() -> None:
    service = RatingModel()
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    one = {1: _row(1, *service.start, at)}
    with pytest.raises(ValueError, match="two racers"):
        service.rate(1, RuleSet.EASY, {1: 1}, one, at)
    with pytest.raises(ValueError, match=r"no stored rating for racers \[2\]"):
        service.rate(1, RuleSet.EASY, {1: 1, 2: 2}, one, at)
