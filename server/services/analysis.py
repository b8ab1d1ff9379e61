"""Deal analysis with the solver, run off the event loop in a process pool and cached.

A slow deal never delays other players: solving happens in worker processes, and each deal's
answer is kept (per game code, which names the deal and the rule set). So does grading a
daily's candidate (:meth:`Analyzer.grade`: the solve and the difficulty measure of
:mod:`server.engine.difficulty`, one task in one worker).

Work that only adds to what a page shows — a replay's optimal line and its divergence, a
profile's pars — runs on the solver's spare capacity (:meth:`Analyzer.spare`): at most
:data:`SPARE_SOLVES` such jobs at once per process, whoever asks and however many leave before
the answer, so anonymous requests never queue more than that ahead of a player's hint or the
daily's preparation; beyond it the page is answered without them.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from server.engine.codes import GameCode
from server.engine.difficulty import Difficulty
from server.engine.game import Action, ActionKind, Game

log = logging.getLogger(__name__)

#: How a deal's analysis was found: in the cache, by waiting for the same deal's solve already
#: running, or by solving it.
Lookup = Literal["hit", "shared", "miss"]
#: A solver task: a whole deal's analysis, the best action of a position (a hint), where a
#: replayed game first left every optimal path, or a daily candidate's solve and difficulty.
Task = Literal["analyse", "hint", "divergence", "grade"]
#: Optional solver jobs (replays, profiles) running at once, per process.
SPARE_SOLVES = 2

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LineStep:
    """One action of a line, with the card it moves (``pos`` for a removal)."""

    action: ActionKind
    pos: int | None
    card: str


@dataclass(frozen=True, slots=True)
class DealAnalysis:
    """What perfect play can make of a deal (docs/rules.md §2 scoring, no undo).

    Attributes:
        winnable: whether all 28 cards can be cleared.
        par: the highest final score reachable.
        line: one line of actions reaching it, from the deal.
    """

    winnable: bool
    par: int
    line: tuple[Action, ...]

    def steps(self, code: GameCode) -> list[LineStep]:
        """The line with the cards it moves (replayed through the engine)."""
        game = Game.new(code, ranked=True)
        steps = []
        for action in self.line:
            applied = game.apply(action)
            steps.append(LineStep(applied.kind, applied.pos, str(applied.card)))
        return steps


@dataclass(frozen=True, slots=True)
class DealGrade:
    """A deal's analysis and, when it is winnable, its difficulty (docs/rules.md §4
    "Difficulty")."""

    analysis: DealAnalysis
    difficulty: Difficulty | None


def _encode(actions: Sequence[Action]) -> list[tuple[str, int | None]]:
    return [(a.kind.value, a.pos) for a in actions]


def _decode(actions: Sequence[tuple[str, int | None]]) -> tuple[Action, ...]:
    return tuple(Action(ActionKind(kind), pos) for kind, pos in actions)


def _solve_code(code_text: str) -> tuple[bool, int, list[tuple[str, int | None]]]:
    from server.engine.solver import solve

    code = GameCode.parse(code_text)
    solution = solve(code.deal(), code.rules)
    return solution.winnable, solution.par, _encode(solution.line)


Graded = tuple[bool, int, list[tuple[str, int | None]], Difficulty | None]


def grade_code(code_text: str) -> Graded:
    """In a solver process: solve a deal and, when it is winnable, measure its difficulty
    (:func:`server.engine.difficulty.measure`, from its par). What :meth:`Analyzer.grade` runs,
    and what ``benchmarks/daily_difficulty.py`` times.

    Returns:
        Winnable, par, the line encoded, and the :class:`Difficulty` or None.
    """
    from server.engine.difficulty import measure
    from server.engine.solver import solve

    code = GameCode.parse(code_text)
    deal = code.deal()
    solution = solve(deal, code.rules)
    difficulty = measure(deal, code.rules, solution.par) if solution.winnable else None
    return solution.winnable, solution.par, _encode(solution.line), difficulty


def _best_action(
    code_text: str, ranked: bool, actions: list[tuple[str, int | None]]
) -> tuple[str, int | None] | None:
    from server.engine.solver import best_action

    code = GameCode.parse(code_text)
    game = Game.replay(code.deal(), code.rules, _decode(actions), ranked=ranked)
    action = best_action(game)
    return None if action is None else (action.kind.value, action.pos)


def _first_divergence(code_text: str, par: int, line: list[tuple[str, int | None]]) -> int | None:
    from server.engine.solver import Position, solve_position

    code = GameCode.parse(code_text)
    actions = _decode(line)
    deal = code.deal()

    def best_after(count: int) -> int:
        game = Game.replay(deal, code.rules, actions[:count])
        return solve_position(Position.of_game(game)).par

    return first_divergence(len(actions), par, best_after)


def first_divergence(length: int, par: int, best_after: Callable[[int], int]) -> int | None:
    """The index (0-based) of the first action of a line of removals and draws after which the
    best final score still reachable is below ``par``, or None when the whole line stays on an
    optimal path (docs/rules.md §4 "Replays").

    The best final score reachable never rises along a line played without undo (every line
    open after an action was open before it), so a binary search over the prefixes finds it
    with about log2(length) solves.

    Args:
        length: how many actions the line has.
        par: the deal's par (the best final score from the start).
        best_after: the best final score reachable after the first ``n`` actions, for ``n`` in
            ``1..length``.
    """
    if length == 0 or best_after(length) >= par:
        return None
    low, high = 1, length  # best_after(high) < par; every prefix shorter than low stays on par
    while low < high:
        middle = (low + high) // 2
        if best_after(middle) < par:
            high = middle
        else:
            low = middle + 1
    return high - 1


class Analyzer:
    """Solves deals in worker processes, with a bounded cache of whole-deal answers.

    Args:
        workers: worker processes (each solves one deal at a time).
        cache_size: how many deals' answers to keep.
        on_lookup: called with how each analysis asked for was found (operational metrics).
        on_solve: called with each task the worker processes answered and its time in seconds,
            from its submission (waiting for a free worker included) to its answer.
        spare_solves: optional jobs (:meth:`spare`) running at once.
    """

    def __init__(
        self,
        workers: int = 1,
        cache_size: int = 4096,
        *,
        on_lookup: Callable[[Lookup], None] | None = None,
        on_solve: Callable[[Task, float], None] | None = None,
        spare_solves: int = SPARE_SOLVES,
    ) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            # Ctrl-C reaches the whole process group: the server stops its workers itself;
            # and a solver process never outlives this one, however it ends (SIGKILL).
            initializer=_start_solver,
            initargs=(os.getpid(),),
        )
        self._cache: OrderedDict[str, DealAnalysis] = OrderedDict()
        #: Divergences found, by deal, par and line: a replay asked again costs no solve.
        self._divergences: OrderedDict[tuple[str, int, str], int | None] = OrderedDict()
        self._pending: dict[str, asyncio.Future[DealAnalysis]] = {}
        #: Graded deals (daily candidates), by code, and the grades being worked out.
        self._grades: OrderedDict[str, DealGrade] = OrderedDict()
        self._grading: dict[str, asyncio.Future[DealGrade]] = {}
        self._cache_size = cache_size
        self._on_lookup = on_lookup
        self._on_solve = on_solve
        self._spare_solves = spare_solves
        self._spare: set[asyncio.Task[Any]] = set()

    async def analyse(self, code: GameCode) -> DealAnalysis:
        """Winnable, par and an optimal line for a deal (cached; concurrent asks share one
        solve)."""
        key = str(code)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self._looked_up("hit")
            return cached
        self._looked_up("shared" if key in self._pending else "miss")

        async def solve() -> DealAnalysis:
            started = time.perf_counter()
            loop = asyncio.get_running_loop()
            winnable, par, line = await loop.run_in_executor(self._pool, _solve_code, key)
            self._solved("analyse", started)
            result = DealAnalysis(winnable, par, _decode(line))
            self._keep(self._cache, key, result)
            return result

        return await self._shared(self._pending, key, solve)

    async def grade(self, code: GameCode) -> DealGrade:
        """A deal's analysis and, when it is winnable, its difficulty
        (:func:`server.engine.difficulty.measure`), worked out in one task of a worker process
        (:func:`grade_code`); cached, concurrent asks sharing one task. The analysis is kept
        in :meth:`analyse`'s cache too."""
        key = str(code)
        cached = self._grades.get(key)
        if cached is not None:
            self._grades.move_to_end(key)
            return cached

        async def work() -> DealGrade:
            started = time.perf_counter()
            loop = asyncio.get_running_loop()
            winnable, par, line, difficulty = await loop.run_in_executor(
                self._pool, grade_code, key
            )
            self._solved("grade", started)
            analysis = DealAnalysis(winnable, par, _decode(line))
            result = DealGrade(analysis, difficulty)
            self._keep(self._cache, key, analysis)
            self._keep(self._grades, key, result)
            return result

        return await self._shared(self._grading, key, work)

    @staticmethod
    async def _shared(
        pending: dict[str, asyncio.Future[T]],
        key: str,
        work: Callable[[], Coroutine[Any, Any, T]],
    ) -> T:
        """``work()`` for ``key``, unless it is already under way (in ``pending``): concurrent
        asks share one run and its outcome, its result or its exception."""
        running = pending.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        pending[key] = future
        try:
            result = await work()
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: the waiters re-raise it themselves
            raise
        finally:
            pending.pop(key, None)

    def _keep(self, cache: OrderedDict[str, Any], key: str, value: object) -> None:
        """Put ``value`` in ``cache`` as its newest entry, forgetting the oldest beyond the
        cache's size."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    def cached(self, code: GameCode) -> DealAnalysis | None:
        """The deal's analysis if it is in the cache (no solve)."""
        return self._cache.get(str(code))

    def spare(self, job: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T] | None:
        """Run optional solver work (``job()``: a coroutine asking this analyzer) as a task of
        its own when fewer than ``spare_solves`` such tasks are running, else None (no spare
        capacity: answer without it). The task runs to its end whoever waits for it (its
        answers are cached); the caller bounds its own wait (``asyncio.wait_for`` over
        ``asyncio.shield``)."""
        if len(self._spare) >= self._spare_solves:
            return None
        task = asyncio.create_task(job())
        self._spare.add(task)
        task.add_done_callback(self._spare_done)
        return task

    def _spare_done(self, task: asyncio.Task[Any]) -> None:
        self._spare.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("optional solver work failed: %r", task.exception())

    async def best_action(self, code: GameCode, game: Game) -> Action | None:
        """The first action of an optimal line from the game's current position (None when
        no action is possible)."""
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        answer = await loop.run_in_executor(
            self._pool, _best_action, str(code), game.ranked, _encode(game.actions)
        )
        self._solved("hint", started)
        return None if answer is None else Action(ActionKind(answer[0]), answer[1])

    async def divergence(self, code: GameCode, par: int, line: Sequence[Action]) -> int | None:
        """Where a line of removals and draws from the deal first leaves every optimal path:
        :func:`first_divergence` over ``line``, solved in a worker process.

        Args:
            code: the deal.
            par: the deal's par (:meth:`analyse`).
            line: removals and draws from the deal (no undo: a game's effective line).

        Returns:
            The index in ``line`` of the first action after which ``par`` is out of reach, or
            None (kept, as the deals' analyses are: a line asked again is not solved again).
        """
        encoded = _encode(line)
        key = _divergence_key(code, par, encoded)
        if key in self._divergences:
            self._divergences.move_to_end(key)
            return self._divergences[key]
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        answer = await loop.run_in_executor(self._pool, _first_divergence, str(code), par, encoded)
        self._solved("divergence", started)
        self._divergences[key] = answer
        while len(self._divergences) > self._cache_size:
            self._divergences.popitem(last=False)
        return answer

    def cached_divergence(
        self, code: GameCode, par: int, line: Sequence[Action]
    ) -> tuple[bool, int | None]:
        """Whether :meth:`divergence` of this line is cached, and its answer if so."""
        key = _divergence_key(code, par, _encode(line))
        return key in self._divergences, self._divergences.get(key)

    def _looked_up(self, how: Lookup) -> None:
        if self._on_lookup is not None:
            self._on_lookup(how)

    def _solved(self, task: Task, started: float) -> None:
        """Report a task answered, ``started`` being its ``time.perf_counter()`` at submission."""
        if self._on_solve is not None:
            self._on_solve(task, time.perf_counter() - started)

    def close(self) -> None:
        """Stop the worker processes: waiting solves are cancelled, and a process still
        solving or still starting is terminated and waited for (at most
        :data:`CLOSE_WAIT_S` each; killed, and waited for as long again, if it is still
        there). A process still starting when its pool shuts down may
        otherwise never end, and the interpreter's exit waits on the pool for ever (a server
        stopped within a second of its start)."""
        # The executor's processes (CPython's ProcessPoolExecutor keeps them by pid); none are
        # reachable through its public interface.
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(CLOSE_WAIT_S)
            if process.is_alive():  # slow to act on SIGTERM (a loaded machine): SIGKILL
                process.kill()
                process.join(CLOSE_WAIT_S)


def _divergence_key(
    code: GameCode, par: int, encoded: Sequence[tuple[str, int | None]]
) -> tuple[str, int, str]:
    """A divergence's cache key: the deal, its par and the line written out."""
    return str(code), par, " ".join(f"{kind}{'' if pos is None else pos}" for kind, pos in encoded)


#: Seconds a terminated solver process is waited for when the pool closes.
CLOSE_WAIT_S = 2.0


#: ``prctl``'s option naming the signal a process gets when its parent ends (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def _start_solver(parent: int) -> None:
    """In a solver process, first: leave SIGINT (Ctrl-C in the server's terminal) to the
    server, and die with the server process ``parent``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """Have this process killed (SIGKILL) when its parent, ``parent``, ends, however it ends:
    a server process killed outright (a worker of ``serve --workers`` SIGKILLed) must not
    leave its solver processes running, each holding its memory, for ever. They would: a
    spawned pool process holds both ends of its own task queue, so it never sees the parent
    go.

    On Linux this is ``prctl(PR_SET_PDEATHSIG)``, which fires when the *thread* that started
    the process ends: the pool starts its processes from the thread that submits work (the
    event loop's), which lives as long as the server. Elsewhere only the supervisor's sweep of
    a dead worker's process group (:mod:`server.workers`) stops them. A parent already gone
    before the signal was set up (it is not inherited) ends this process at once.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning(
                "solver process: prctl(PR_SET_PDEATHSIG) failed: %s",
                os.strerror(ctypes.get_errno()),
            )
    if os.getppid() != parent:
        os._exit(1)
