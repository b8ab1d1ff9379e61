"""ReplayService's rules on either store (in memory and PostgreSQL): when a game's deal is public
and its replay served, undos tied to the action they took back, the effective line, and the
first action that left every optimal path (docs/rules.md §4 "Replays"); the binary search of
:func:`first_divergence` against a plain scan. (Over REST on real servers:
``tests/web/test_replays.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
from collections.abc import AsyncIterator

import pytest

from server.engine import Action, ActionKind, Game, GameCode
from server.engine.solver import Position, solve, solve_position
from server.errors import ConflictError, ErrorCode, NotFoundError
from server.services.analysis import Analyzer, first_divergence
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.games import GameService
from server.services.replays import ReplayService, effective_line, replay_steps
from server.storage.games import StoredAction
from tests.backends import Backend

SECRET = b"test-daily-key-0123456789abcdefghij"
CODE = GameCode.parse("TP1-E-AAAAAAB")
AT = dt.datetime(2026, 3, 14, 12, tzinfo=dt.UTC)


def _stored(*kinds: tuple[str, int | None, str]) -> list[StoredAction]:
    return [
        StoredAction(seq, ActionKind(kind), pos, card, 500 - seq, AT)
        for seq, (kind, pos, card) in enumerate(kinds, 1)
    ]


def test_each_undo_takes_back_the_latest_action_not_yet_taken_back() -> None:
    steps = replay_steps(
        _stored(
            ("remove", 24, "5H"),  # 1
            ("draw", None, "KH"),  # 2
            ("remove", 27, "QS"),  # 3
            ("undo", 27, "QS"),  # 4: takes back 3
            ("undo", None, "KH"),  # 5: takes back 2
            ("draw", None, "KH"),  # 6
            ("undo", None, "KH"),  # 7: takes back 6
            ("draw", None, "KH"),  # 8
        )
    )
    assert [s.undoes for s in steps] == [None, None, None, 3, 2, None, 6, None]
    assert [s.undone for s in steps] == [False, True, True, False, False, True, False, False]
    assert effective_line(steps) == [0, 7]


def test_the_binary_search_finds_what_a_plain_scan_finds() -> None:
    rng = random.Random(7)
    for _ in range(500):
        length = rng.randrange(0, 40)
        par = 700
        # A best final score that never rises along the line, as the solver's never does.
        best, values = par, []
        for _ in range(length):
            best -= rng.choice((0, 0, 0, 1, 5))
            values.append(best)
        asked: list[int] = []

        def best_after(n: int, values: list[int] = values, asked: list[int] = asked) -> int:
            asked.append(n)
            return values[n - 1]

        scan = next((i for i, v in enumerate(values) if v < par), None)
        assert first_divergence(length, par, best_after) == scan
        assert len(asked) <= max(1, length.bit_length() + 1)


@pytest.fixture
def daily(backend: Backend, clock: FakeClock) -> DailyService:
    return DailyService(backend.daily, clock, SECRET)


@pytest.fixture
async def games(
    backend: Backend, clock: FakeClock, daily: DailyService
) -> AsyncIterator[GameService]:
    service = GameService(backend.games, backend.committer, clock, daily)
    yield service
    await service.close()


async def _play(games: GameService, player: int, game_id: int, line: list[Action]) -> None:
    for action in line:
        snapshot = await games.resume(player, game_id)
        result = await games.act(player, game_id, snapshot.seq, action)
        assert result.outcome.value == "accepted", (action, result)


async def test_a_free_game_is_replayable_once_it_has_ended(
    backend: Backend, games: GameService, daily: DailyService
) -> None:
    (ada,) = await backend.add_players(["Ada"])
    replays = ReplayService(backend.games, daily)
    game = await games.new_free_game(ada, CODE)
    line = list(solve(CODE.deal(), CODE.rules).line)
    await _play(games, ada, game.id, [*line[:3], Action.undo(), *line[2:4]])
    with pytest.raises(ConflictError) as refused:
        await replays.replay(game.id)
    assert refused.value.code is ErrorCode.REPLAY_NOT_PUBLIC
    assert str(CODE) not in refused.value.message
    await games.resign(ada, game.id)

    replay = await replays.replay(game.id)
    assert replay.game.id == game.id and replay.game.code == CODE
    assert replay.deal == CODE.deal()
    assert [(s.kind, s.pos) for s in replay.steps] == [
        *((a.kind, a.pos) for a in line[:3]),
        (ActionKind.UNDO, replay.steps[2].pos),
        *((a.kind, a.pos) for a in line[2:4]),
    ]
    assert replay.steps[3].undoes == 3 and replay.steps[2].undone
    # Without the solver: no par, no line, no mark.
    assert (replay.par, replay.line, replay.diverged_at) == (None, None, None)
    with pytest.raises(NotFoundError) as unknown:
        await replays.replay(game.id + 1000)
    assert unknown.value.code is ErrorCode.UNKNOWN_GAME


async def test_a_daily_is_replayable_once_its_date_is_over_with_its_divergence(
    backend: Backend,
    games: GameService,
    daily: DailyService,
    clock: FakeClock,
    analyzer: Analyzer,
) -> None:
    (ada,) = await backend.add_players(["Ada"])
    replays = ReplayService(backend.games, daily, analyzer)
    game = await games.join_daily(ada)
    code = game.code
    # Draw the whole stock first: a line that leaves every optimal path somewhere.
    line = [Action.draw()] * len(code.deal().stock)
    await _play(games, ada, game.id, line)
    assert not await replays.daily_replayable(game.daily_date or dt.date.min)
    with pytest.raises(ConflictError) as refused:
        await replays.replay(game.id)
    assert refused.value.code is ErrorCode.REPLAY_NOT_PUBLIC

    clock.advance(days=1)
    assert await replays.daily_replayable(game.daily_date or dt.date.min)
    replay = await replays.replay(game.id)
    par = solve(code.deal(), code.rules).par
    assert replay.par == par
    assert replay.line is not None and len(replay.line) == len(solve(code.deal(), code.rules).line)
    expected = None
    played = Game.new(code, ranked=True)
    for index, action in enumerate(line):
        played.apply(action)
        if solve_position(Position.of_game(played)).par < par:
            expected = index
            break
    assert expected is not None and replay.diverged_at == expected


async def test_a_divergence_asked_again_is_not_solved_again() -> None:
    solved: list[str] = []
    analyzer = Analyzer(1, on_solve=lambda task, _seconds: solved.append(task))
    try:
        par = (await analyzer.analyse(CODE)).par
        line = [Action.draw()] * len(CODE.deal().stock)
        first = await analyzer.divergence(CODE, par, line)
        again = await analyzer.divergence(CODE, par, line)
        other = await analyzer.divergence(CODE, par, line[:1])
    finally:
        analyzer.close()
    assert first == again and first is not None and other is None
    assert solved == ["analyse", "divergence", "divergence"]


async def test_optional_solver_work_runs_only_on_spare_capacity() -> None:
    analyzer = Analyzer(1, spare_solves=2)
    release = asyncio.Event()

    async def held() -> int:
        await release.wait()
        return 1

    try:
        first, second = analyzer.spare(held), analyzer.spare(held)
        assert first is not None and second is not None
        assert analyzer.spare(held) is None  # both busy: none queued behind them
        first.cancel()  # a caller leaving does not free a slot; the job's end does
        with contextlib.suppress(asyncio.CancelledError):
            await first
        third = analyzer.spare(held)
        assert third is not None
        release.set()
        assert await second == await third == 1
        fourth = analyzer.spare(held)
        assert fourth is not None and await fourth == 1
    finally:
        analyzer.close()


async def test_a_replay_with_the_solver_busy_shows_what_is_known_and_no_mark(
    backend: Backend, games: GameService, daily: DailyService
) -> None:
    analyzer = Analyzer(1)  # its own: nothing solved before
    try:
        await _busy_replay(backend, games, daily, analyzer)
    finally:
        analyzer.close()


async def _busy_replay(
    backend: Backend, games: GameService, daily: DailyService, analyzer: Analyzer
) -> None:
    (ada,) = await backend.add_players(["Ada"])
    game = await games.new_free_game(ada, CODE)
    await _play(games, ada, game.id, [Action.draw()] * 3)
    await games.resign(ada, game.id)
    replays = ReplayService(backend.games, daily, analyzer)
    release = asyncio.Event()
    busy = [analyzer.spare(release.wait) for _ in range(2)]  # the spare capacity taken
    try:
        cold = await replays.replay(game.id)
        assert (cold.par, cold.line, cold.diverged_at) == (None, None, None)
        await analyzer.analyse(CODE)  # solved for someone else meanwhile
        known = await replays.replay(game.id)
        assert known.par == solve(CODE.deal(), CODE.rules).par
        assert known.line is not None and known.diverged_at is None
    finally:
        release.set()
        await asyncio.gather(*(b for b in busy if b is not None))
    solved = await replays.replay(game.id)  # capacity again: the whole answer
    assert solved.par == known.par and solved.line == known.line
