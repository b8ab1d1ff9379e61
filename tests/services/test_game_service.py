"""GameService's rules on either store (in memory and PostgreSQL, each with its committer):
games created and played action by action, every accepted action stored before it is answered,
seq checks, undo, resigning, hints, what a summary shows to whom, the games still playable,
one daily per player and date and none for a banned player, and a game rebuilt from its stored
actions. (Over websockets and REST on real servers: ``tests/web/test_ws_play.py`` and
``test_rest.py``; a commit cancelled under the caller: ``test_game_cancellation.py``.)"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest

from server.engine import FACE_DOWN, Action, ActionKind, Game, GameCode, RuleSet, Status
from server.errors import (
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageError,
)
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.game_views import GameSnapshot, Outcome
from server.services.games import GameService
from server.storage.daily import DailyCounts
from server.storage.games import GameMode
from tests.backends import Backend
from tests.helpers import blocking_line, find_winning_line

SECRET = b"test-daily-key-0123456789abcdefghij"
#: A winnable deal (a winning line exists), dealt in free play by most tests.
CODE = GameCode.parse("TP1-E-AAAAAAB")
#: The date of the ``clock`` fixture's start.
TODAY = dt.date(2026, 3, 14)
TOMORROW = TODAY + dt.timedelta(days=1)

#: A request to the service, made when called.
Call = Callable[[], Awaitable[object]]


@functools.cache
def _line() -> tuple[Action, ...]:
    """A line of play that wins :data:`CODE` (found once)."""
    line = find_winning_line(CODE.deal(), CODE.rules)
    assert line is not None and len(line) > 10
    return tuple(line)


@pytest.fixture
def daily(backend: Backend, clock: FakeClock) -> DailyService:
    return DailyService(backend.daily, clock, SECRET)


def _service(
    backend: Backend, clock: FakeClock, daily: DailyService, analyzer: Analyzer | None = None
) -> GameService:
    """A game service over the backend's stores, with a cache of its own: a new one is
    another process (or this one after its cache was dropped)."""
    return GameService(backend.games, backend.committer, clock, daily, analyzer=analyzer)


@pytest.fixture
async def games(
    backend: Backend, clock: FakeClock, daily: DailyService
) -> AsyncIterator[GameService]:
    service = _service(backend, clock, daily)
    yield service
    await service.close()


@pytest.fixture
async def ids(backend: Backend) -> list[int]:
    """Three players: Ada, Bob and Cyd."""
    return await backend.add_players(["Ada", "Bob", "Cyd"])


async def _play(
    games: GameService, player_id: int, game_id: int, actions: Sequence[Action]
) -> GameSnapshot:
    """Play ``actions`` in order, each accepted; the last snapshot."""
    snapshot = await games.resume(player_id, game_id)
    for action in actions:
        result = await games.act(player_id, game_id, snapshot.seq, action)
        assert result.outcome is Outcome.ACCEPTED, (action, result.code)
        snapshot = result.snapshot
    return snapshot


def _midnight(clock: FakeClock) -> None:
    clock.set(dt.datetime(2026, 3, 15, 0, 0, 0, 1000, tzinfo=dt.UTC))


# -------------------------------------------------------------------------------- creating


async def test_a_new_free_game_is_stored_and_shown_whole_to_its_player(
    games: GameService, backend: Backend, clock: FakeClock, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    assert (game.player_id, game.mode, game.code, game.daily_date) == (
        ada,
        GameMode.FREE,
        CODE,
        None,
    )
    assert game.code_visible and game.seq == 0 and game.race_id is None
    assert (game.view.status, game.view.moves, game.view.cards_left) == (Status.PLAYING, 0, 28)
    assert (game.created_at, game.finished_at, game.elapsed_ms) == (clock.now(), None, 0)

    record = await backend.games.record(game.id)
    assert record is not None
    assert (record.player_id, record.player_name, record.mode, record.code) == (
        ada,
        "Ada",
        GameMode.FREE,
        CODE,
    )
    assert (record.status, record.seq, record.score, record.hinted) == (
        Status.PLAYING,
        0,
        game.view.score,
        False,
    )
    assert record.created_at == clock.now()
    assert await backend.games.actions(game.id) == ()

    clock.advance(seconds=3)
    again = await games.resume(ada, game.id)
    assert again == dataclasses.replace(game, elapsed_ms=3000)

    random = await games.new_free_game(ada, rules=RuleSet.CLASSIC)
    assert random.id != game.id and random.code.rules is RuleSet.CLASSIC


# --------------------------------------------------------------------------------- playing


async def test_an_accepted_action_is_stored_before_it_is_answered(
    games: GameService, backend: Backend, clock: FakeClock, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    first = _line()[0]
    clock.advance(ms=250)
    result = await games.act(ada, game.id, 0, first)
    assert result.outcome is Outcome.ACCEPTED and result.code is None
    assert result.applied is not None and result.applied.kind is first.kind
    assert result.snapshot.seq == 1 and result.snapshot.view.moves == 1

    head = await backend.games.head(game.id)
    assert head is not None and (head.seq, head.status) == (1, Status.PLAYING)
    (stored,) = await backend.games.actions(game.id)
    assert (stored.seq, stored.kind, stored.pos) == (1, first.kind, first.pos)
    assert (stored.card, stored.score_after) == (
        str(result.applied.card),
        result.applied.score_after,
    )
    assert stored.at == clock.now()
    record = await backend.games.record(game.id)
    assert record is not None
    assert (record.seq, record.moves, record.score) == (1, 1, result.snapshot.view.score)


async def test_a_repeat_is_acknowledged_once_and_a_stale_or_illegal_action_changes_nothing(
    games: GameService, backend: Backend, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    draw = Action.draw()
    accepted = await games.act(ada, game.id, 0, draw)
    assert accepted.outcome is Outcome.ACCEPTED and accepted.snapshot.seq == 1

    # The same request again (a client retrying after a lost answer): acknowledged, not re-applied.
    repeat = await games.act(ada, game.id, 0, draw)
    assert repeat.outcome is Outcome.ACCEPTED and repeat.applied is None
    assert repeat.snapshot == accepted.snapshot

    for seq, action in ((0, Action.undo()), (5, draw), (-1, draw), (2, draw)):
        stale = await games.act(ada, game.id, seq, action)
        assert (stale.outcome, stale.code) == (Outcome.REJECTED, "stale_seq"), (seq, action)
        assert stale.snapshot == accepted.snapshot

    # Position 0 is a peak's top card, covered by two others: the engine refuses it.
    illegal = await games.act(ada, game.id, 1, Action.remove(0))
    assert (illegal.outcome, illegal.code) == (Outcome.REJECTED, "blocked")
    assert illegal.snapshot == accepted.snapshot
    assert [a.seq for a in await backend.games.actions(game.id)] == [1]
    head = await backend.games.head(game.id)
    assert head is not None and head.seq == 1


async def test_undo_is_stored_as_an_action_and_counted(
    games: GameService, backend: Backend, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    nothing = await games.act(ada, game.id, 0, Action.undo())
    assert (nothing.outcome, nothing.code) == (Outcome.REJECTED, "nothing_to_undo")

    before = await _play(games, ada, game.id, [Action.draw()])
    after = await _play(games, ada, before.id, [Action.draw(), Action.undo()])
    assert after.seq == 3 and after.view.undos == 1 and after.view.moves == 2
    assert after.view.stock_count == before.view.stock_count
    assert after.view.waste == before.view.waste and after.view.score == before.view.score
    stored = await backend.games.actions(game.id)
    assert [a.kind for a in stored] == [ActionKind.DRAW, ActionKind.DRAW, ActionKind.UNDO]
    assert stored[2].card == stored[1].card  # the undone card
    record = await backend.games.record(game.id)
    assert record is not None and (record.seq, record.moves, record.undos) == (3, 2, 1)


async def test_someone_elses_game_is_refused_and_an_unknown_one_is_not_found(
    games: GameService, backend: Backend, ids: list[int]
) -> None:
    ada, bob = ids[:2]
    game = await games.new_free_game(ada, CODE)
    theirs: list[Call] = [
        lambda: games.resume(bob, game.id),
        lambda: games.act(bob, game.id, 0, Action.draw()),
        lambda: games.resign(bob, game.id),
    ]
    for call in theirs:
        with pytest.raises(ForbiddenError) as forbidden:
            await call()
        assert forbidden.value.code == "not_your_game"
    unknown_id = game.id + 1000
    nobodys: list[Call] = [
        lambda: games.resume(ada, unknown_id),
        lambda: games.act(ada, unknown_id, 0, Action.draw()),
        lambda: games.resign(ada, unknown_id),
        lambda: games.summary(unknown_id, ada),
    ]
    for call in nobodys:
        with pytest.raises(NotFoundError) as unknown:
            await call()
        assert unknown.value.code == "unknown_game"
    head = await backend.games.head(game.id)
    assert head is not None and (head.seq, head.status) == (0, Status.PLAYING)


async def test_a_resigned_game_is_over_and_stored_so(
    games: GameService, backend: Backend, clock: FakeClock, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    played = await _play(games, ada, game.id, _line()[:3])
    clock.advance(seconds=42)
    resigned = await games.resign(ada, game.id)
    assert resigned.view.status is Status.RESIGNED and resigned.seq == played.seq
    assert (resigned.finished_at, resigned.elapsed_ms) == (clock.now(), 42_000)
    record = await backend.games.record(game.id)
    assert record is not None
    assert (record.status, record.finished_at, record.elapsed_ms) == (
        Status.RESIGNED,
        clock.now(),
        42_000,
    )

    with pytest.raises(InvalidInputError) as again:
        await games.resign(ada, game.id)
    assert again.value.code == "game_over"
    late = await games.act(ada, game.id, resigned.seq, Action.draw())
    assert (late.outcome, late.code) == (Outcome.REJECTED, "game_over")
    assert len(await backend.games.actions(game.id)) == 3
    clock.advance(seconds=5)  # its clock has stopped
    assert (await games.resume(ada, game.id)).elapsed_ms == 42_000


async def test_a_hint_is_a_legal_action_and_marks_the_free_game_hinted(
    backend: Backend, clock: FakeClock, daily: DailyService, analyzer: Analyzer, ids: list[int]
) -> None:
    ada = ids[0]
    games = _service(backend, clock, daily, analyzer)
    game = await games.new_free_game(ada, CODE)
    assert not (await games.summary(game.id, ada)).hinted

    hint = await games.hint(ada, game.id)
    assert hint is not None
    record = await backend.games.record(game.id)
    assert record is not None and record.hinted
    assert (await games.summary(game.id, ada)).hinted
    taken = await games.act(ada, game.id, 0, hint)
    assert taken.outcome is Outcome.ACCEPTED

    todays = await games.join_daily(ada)
    with pytest.raises(InvalidInputError) as ranked:
        await games.hint(ada, todays.id)
    assert ranked.value.code == "hints_not_allowed"
    record = await backend.games.record(todays.id)
    assert record is not None and not record.hinted

    without_solver = _service(backend, clock, daily)
    other = await without_solver.new_free_game(ada, CODE)
    with pytest.raises(InvalidInputError) as unavailable:
        await without_solver.hint(ada, other.id)
    assert unavailable.value.code == "hints_not_allowed"
    record = await backend.games.record(other.id)
    assert record is not None and not record.hinted


# --------------------------------------------------------------------------------- reading


async def test_a_free_games_summary_shows_its_cards_to_its_owner_and_to_all_once_over(
    games: GameService, ids: list[int]
) -> None:
    ada, bob = ids[:2]
    game = await games.new_free_game(ada, CODE)
    await _play(games, ada, game.id, _line()[:2])

    mine = await games.summary(game.id, ada)
    assert mine.revealed and mine.actions is not None and len(mine.actions) == 2
    assert (mine.player_name, mine.status, mine.seq, mine.code) == ("Ada", Status.PLAYING, 2, CODE)
    for viewer in (bob, None):
        theirs = await games.summary(game.id, viewer)
        assert not theirs.revealed and theirs.actions is None, viewer
        assert (theirs.score, theirs.moves) == (mine.score, mine.moves)

    await games.resign(ada, game.id)
    for viewer in (ada, bob, None):
        over = await games.summary(game.id, viewer)
        assert over.revealed and over.actions == mine.actions, viewer
        assert over.status is Status.RESIGNED


async def test_a_dailys_code_and_hidden_cards_stay_secret_until_its_date_is_over(
    games: GameService, clock: FakeClock, ids: list[int]
) -> None:
    ada, bob = ids[:2]
    game = await games.join_daily(ada)
    assert (game.mode, game.daily_date) == (GameMode.DAILY, TODAY)
    assert not game.code_visible
    assert game.view.tableau.count(FACE_DOWN) == 18  # only the bottom row is face up

    line = blocking_line(game.code.deal(), game.code.rules)
    assert line is not None
    over = await _play(games, ada, game.id, line)
    assert over.view.status is Status.BLOCKED and not over.code_visible

    # Ended, but the date is open: its owner sees their own actions, never the code; nobody
    # else sees either.
    mine = await games.summary(game.id, ada)
    assert not mine.revealed and mine.actions is not None and len(mine.actions) == len(line)
    for viewer in (bob, None):
        theirs = await games.summary(game.id, viewer)
        assert not theirs.revealed and theirs.actions is None, viewer
        assert (theirs.status, theirs.score) == (Status.BLOCKED, over.view.score)

    _midnight(clock)
    for viewer in (ada, bob, None):
        public = await games.summary(game.id, viewer)
        assert public.revealed and public.actions == mine.actions, viewer
    assert (await games.resume(ada, game.id)).code_visible


async def test_unfinished_games_are_the_playable_ones_newest_first(
    games: GameService, clock: FakeClock, ids: list[int]
) -> None:
    ada, bob = ids[:2]
    resigned = await games.new_free_game(ada, CODE)
    clock.advance(seconds=1)
    blocked = await games.new_free_game(ada, CODE)
    line = blocking_line(CODE.deal(), CODE.rules)
    assert line is not None
    assert (await _play(games, ada, blocked.id, line)).view.status is Status.BLOCKED
    clock.advance(seconds=1)
    playing = await games.new_free_game(ada, CODE)
    clock.advance(seconds=1)
    todays = await games.join_daily(ada)
    await games.new_free_game(bob, CODE)
    await games.resign(ada, resigned.id)

    listed = await games.unfinished(ada)
    assert [g.id for g in listed] == [todays.id, playing.id, blocked.id]
    assert listed[2].view.status is Status.BLOCKED and listed[2].seq == len(line)
    assert [g.id for g in await games.unfinished(ada, limit=2)] == [todays.id, playing.id]

    _midnight(clock)  # yesterday's daily can no longer be played
    assert [g.id for g in await games.unfinished(ada)] == [playing.id, blocked.id]


# ---------------------------------------------------------------------------------- dailies


async def test_the_daily_is_one_game_per_player_and_date(
    games: GameService, backend: Backend, clock: FakeClock, ids: list[int]
) -> None:
    ada, bob, cyd = ids
    first = await games.join_daily(ada)
    again = await games.join_daily(ada)
    assert again.id == first.id and again.code == first.code
    assert await backend.games.daily_game_id(ada, TODAY) == first.id

    # Joined at once (several connections of one player): one game, the same for all.
    joined = await asyncio.gather(*(games.join_daily(bob) for _ in range(4)))
    assert len({j.id for j in joined}) == 1 and joined[0].id != first.id
    assert joined[0].code == first.code
    assert await backend.daily.counts(TODAY) == DailyCounts(players=2, ranked=0)

    _midnight(clock)
    tomorrows = await games.join_daily(ada)
    assert tomorrows.daily_date == TOMORROW and tomorrows.id != first.id
    assert await backend.games.daily_game_id(ada, TOMORROW) == tomorrows.id
    # Yesterday's is closed: no action, no resignation, and nothing stored.
    closed = await games.act(ada, first.id, 0, Action.draw())
    assert (closed.outcome, closed.code) == (Outcome.REJECTED, "daily_closed")
    with pytest.raises(InvalidInputError) as resign:
        await games.resign(ada, first.id)
    assert resign.value.code == "daily_closed"
    assert await backend.games.actions(first.id) == ()
    assert await backend.games.daily_game_id(cyd, TODAY) is None


async def test_a_banned_player_is_refused_the_daily_with_the_reason(
    games: GameService, backend: Backend, ids: list[int]
) -> None:
    ada, bob = ids[:2]
    reason = "a bot's timings"
    since = await backend.ban(ada, reason)
    with pytest.raises(ForbiddenError) as refused:
        await games.join_daily(ada)
    assert refused.value.code == "banned"
    assert reason in refused.value.message
    assert since.date().isoformat() in refused.value.message
    assert await backend.games.daily_game_id(ada, TODAY) is None
    # Free play stays open to them; another player is not refused.
    assert (await games.new_free_game(ada, CODE)).mode is GameMode.FREE
    assert (await games.join_daily(bob)).daily_date == TODAY


async def test_a_daily_played_to_its_end_is_on_the_shared_board(
    games: GameService, backend: Backend, clock: FakeClock, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.join_daily(ada)
    line = blocking_line(game.code.deal(), game.code.rules)
    assert line is not None
    clock.advance(seconds=90)
    over = await _play(games, ada, game.id, line)
    assert over.view.status is Status.BLOCKED and over.elapsed_ms == 90_000

    board = await backend.leaderboards.page(TODAY, 10, None)
    (row,) = board.rows
    assert (row.player_id, row.name, row.status) == (ada, "Ada", "blocked")
    assert (row.score, row.moves, row.undos) == (over.view.score, len(line), 0)
    assert (row.elapsed_ms, row.finished_at) == (90_000, clock.now())
    assert await backend.daily.counts(TODAY) == DailyCounts(players=1, ranked=1)


# ------------------------------------------------------------------- stored and other processes


async def test_a_game_rebuilt_from_its_stored_actions_is_the_same_game(
    games: GameService, backend: Backend, clock: FakeClock, daily: DailyService, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    line = _line()
    played = await _play(games, ada, game.id, [*line[:6], Action.undo(), *line[5:9]])
    assert played.seq == 11 and played.view.undos == 1

    fresh = _service(backend, clock, daily)  # nothing cached: rebuilt by replaying the log
    rebuilt = await fresh.resume(ada, game.id)
    assert rebuilt == played
    stored = await backend.games.load(game.id)
    assert stored is not None and stored.seq == 11
    assert stored.actions[6] == ("undo", None) and len(stored.actions) == 11
    following = await fresh.act(ada, game.id, 11, line[9])
    assert following.outcome is Outcome.ACCEPTED and following.snapshot.seq == 12


async def test_a_copy_behind_the_stored_game_is_answered_from_the_stored_state(
    games: GameService, backend: Backend, clock: FakeClock, daily: DailyService, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    other = _service(backend, clock, daily)  # another process serving the same player
    assert (await other.resume(ada, game.id)).seq == 0

    moved = await games.act(ada, game.id, 0, Action.draw())
    assert moved.outcome is Outcome.ACCEPTED
    # Its copy still at seq 0, the other process writes, finds the row moved on, and reloads.
    removal = next(a for a in Game.new(CODE).legal_actions() if a.kind is ActionKind.REMOVE)
    behind = await other.act(ada, game.id, 0, removal)
    assert (behind.outcome, behind.code) == (Outcome.REJECTED, "stale_seq")
    assert behind.snapshot == moved.snapshot
    # The exact action that moved it, repeated there, is acknowledged, not stored twice.
    repeat = await other.act(ada, game.id, 0, Action.draw())
    assert repeat.outcome is Outcome.ACCEPTED and repeat.snapshot == moved.snapshot
    assert [a.seq for a in await backend.games.actions(game.id)] == [1]

    # Resigning there, the copy is refreshed first.
    await games.act(ada, game.id, 1, Action.draw())
    resigned = await other.resign(ada, game.id)
    assert resigned.seq == 2 and resigned.view.status is Status.RESIGNED


async def test_an_action_on_a_copy_that_missed_a_resignation_elsewhere_is_game_over(
    games: GameService, backend: Backend, clock: FakeClock, daily: DailyService, ids: list[int]
) -> None:
    ada = ids[0]
    game = await games.new_free_game(ada, CODE)
    other = _service(backend, clock, daily)
    assert (await other.resume(ada, game.id)).view.status is Status.PLAYING
    await games.resign(ada, game.id)  # the row's status moves on, its seq does not

    late = await other.act(ada, game.id, 0, Action.draw())
    assert (late.outcome, late.code) == (Outcome.REJECTED, "game_over")
    assert late.snapshot.view.status is Status.RESIGNED
    assert await backend.games.actions(game.id) == ()
    head = await backend.games.head(game.id)
    assert head is not None and (head.seq, head.status) == (0, Status.RESIGNED)


async def test_a_failing_database_is_let_through_as_a_storage_error(
    backend: Backend, clock: FakeClock, daily: DailyService, ids: list[int]
) -> None:
    ada = ids[0]
    await backend.go_down()
    games = _service(backend, clock, daily)
    calls: list[Call] = [
        lambda: games.new_free_game(ada, CODE),
        lambda: games.resume(ada, 1),
        lambda: games.unfinished(ada),
    ]
    for call in calls:
        with pytest.raises(StorageError):
            await call()
