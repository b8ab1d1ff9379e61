"""ProfileService over PostgreSQL's store: figures read from the stored games at read time,
and exact when two daily games end at the same moment (one snapshot per profile, never a mix
of before and after a finish).

PostgreSQL alone: ``tests/fakes`` has no in-memory profile store yet, and concurrent
transactions are what is tested here. (The streak rule itself:
``test_streaks.py``; the REST answer over real play: ``tests/web/test_profiles.py``.)"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import pytest

from server.engine import Action, Status
from server.errors import ErrorCode, NotFoundError
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.game_views import GameSnapshot, Outcome
from server.services.games import GameService
from server.services.leaderboards import LeaderboardService
from server.services.profiles import Profile, ProfileService, Streaks
from server.storage.profiles import PostgresProfileStore
from server.storage.sessions import Sessions
from tests.backends import PostgresBackend, Seed, open_backend
from tests.helpers import blocking_line, find_winning_line

SECRET = b"test-daily-key-0123456789abcdefghij"
TODAY = dt.date(2026, 3, 14)


@pytest.fixture
async def backend(database_url: str) -> AsyncIterator[PostgresBackend]:
    async with open_backend("postgres", database_url) as opened:
        assert isinstance(opened, PostgresBackend)
        yield opened


@pytest.fixture
def daily(backend: PostgresBackend, clock: FakeClock) -> DailyService:
    return DailyService(backend.daily, clock, SECRET)


@pytest.fixture
def profiles(backend: PostgresBackend, daily: DailyService) -> ProfileService:
    return ProfileService(PostgresProfileStore(Sessions(backend.engine)), daily)


@pytest.fixture
async def games(
    backend: PostgresBackend, clock: FakeClock, daily: DailyService
) -> AsyncIterator[GameService]:
    service = GameService(backend.games, backend.committer, clock, daily)
    yield service
    await service.close()


def _day(n: int) -> dt.date:
    return TODAY - dt.timedelta(days=n)


def _ranked(player_id: int, date: dt.date, score: int) -> Seed:
    at = dt.datetime.combine(date, dt.time(9), tzinfo=dt.UTC)
    return Seed(player_id, score, 30, 60_000, at, status="won", daily_date=date)


async def test_an_unknown_player_is_not_found(profiles: ProfileService) -> None:
    for player_id in (0, 4242, 2**63 - 1, 2**63):
        with pytest.raises(NotFoundError) as refused:
            await profiles.profile(player_id)
        assert refused.value.code is ErrorCode.UNKNOWN_PLAYER


async def test_figures_come_from_the_stored_games(
    backend: PostgresBackend, profiles: ProfileService
) -> None:
    ada, bob = await backend.add_players(["Ada", "Bob"])
    await backend.add_games(
        [
            _ranked(ada, _day(6), 600),
            _ranked(ada, _day(5), 640),
            _ranked(ada, _day(4), 610),
            _ranked(ada, _day(2), 650),
            _ranked(bob, _day(2), 700),
            Seed(ada, 480, 20, 50_000, None, status="resigned", daily_date=_day(1)),
            Seed(ada, 700, 5, None, None, status="playing", daily_date=_day(0)),
            Seed(ada, 900, 10, 1_000, dt.datetime(2026, 3, 1, tzinfo=dt.UTC), mode="free"),
        ]
    )
    profile = await profiles.profile(ada)
    assert (profile.name, profile.today) == ("Ada", TODAY)
    assert [(d.date, d.status, d.rank) for d in profile.days] == [
        (_day(6), "won", 1),
        (_day(5), "won", 1),
        (_day(4), "won", 1),
        (_day(2), "won", 2),  # bob scored more that date
        (_day(1), "resigned", None),
        (_day(0), "playing", None),
    ]
    # The resigned yesterday broke the run: 2 days ago is too far back to be alive.
    assert profile.streaks == Streaks(current=0, best=3)
    assert (profile.best_score, profile.ranked_days) == (650, 4)  # not the free game's 900
    assert profile.average_par_share is None  # no solver: no par
    assert all(d.par is None and d.par_share is None for d in profile.days)
    assert (profile.races_played, profile.races_won) == (0, 0)


async def _ready_to_finish(games: GameService, player_id: int) -> tuple[GameSnapshot, Action]:
    """Join today's daily and play all but the last action of a line that ends it."""
    game = await games.join_daily(player_id)
    deal = game.code.deal()
    line = find_winning_line(deal, game.code.rules) or blocking_line(deal, game.code.rules)
    assert line is not None and len(line) > 1
    for action in line[:-1]:
        result = await games.act(player_id, game.id, game.seq, action)
        assert result.outcome is Outcome.ACCEPTED
        game = result.snapshot
    return game, line[-1]


def _consistent(profile: Profile) -> bool:
    """Today's result, its rank, the ranked days and the streak agree: all from before the
    finish, or all from after it."""
    today = profile.days[-1]
    assert today.date == TODAY
    if today.status == "playing":
        return today.rank is None and profile.streaks.current == 2 and profile.ranked_days == 2
    return (
        today.status in ("won", "blocked")
        and today.rank is not None
        and profile.streaks == Streaks(3, 3)
        and profile.ranked_days == 3
    )


async def test_two_finishes_at_the_same_moment_are_counted_exactly(
    backend: PostgresBackend, games: GameService, profiles: ProfileService
) -> None:
    """Ada and Bob, each on a streak of 2, end today's daily at the same moment (their last
    actions stored together) while their profiles are being read: every read is wholly before
    or wholly after each finish, and afterwards both have a streak of 3 and the ranks the
    board gives them."""
    ada, bob = await backend.add_players(["Ada", "Bob"])
    await backend.add_games([_ranked(p, _day(n), 600 + n) for p in (ada, bob) for n in (1, 2)])
    ready = {p: await _ready_to_finish(games, p) for p in (ada, bob)}
    assert all([_consistent(await profiles.profile(p)) for p in (ada, bob)])

    finished, reading = asyncio.Event(), asyncio.Event()
    reads: list[Profile] = []

    async def read_meanwhile() -> None:
        """Read both profiles again and again: before, while and after the finishes land."""
        while True:
            done = finished.is_set()
            reads.extend(await asyncio.gather(profiles.profile(ada), profiles.profile(bob)))
            reading.set()
            if done:
                return

    async def finish(player_id: int) -> None:
        game, last = ready[player_id]
        result = await games.act(player_id, game.id, game.seq, last)
        assert result.outcome is Outcome.ACCEPTED
        assert result.snapshot.view.status in (Status.WON, Status.BLOCKED)

    reader = asyncio.create_task(read_meanwhile())
    await reading.wait()
    await asyncio.gather(finish(ada), finish(bob))
    finished.set()
    await reader
    assert all(_consistent(p) for p in reads)
    seen = {p.days[-1].status == "playing" for p in reads}
    assert seen == {True, False}  # reads from before the finishes and from after them

    board = LeaderboardService(backend.leaderboards)
    for player_id in (ada, bob):
        profile = await profiles.profile(player_id)
        assert profile.streaks == Streaks(current=3, best=3) and profile.ranked_days == 3
        entry = await board.rank_of(TODAY, player_id)
        assert entry is not None and profile.days[-1].rank == entry.rank
        assert profile.days[-1].score == entry.score
