"""Replays: a finished game whose deal is public, move by move, beside the solver's optimal line
(docs/rules.md §4 "Replays").

:class:`ReplayService` decides when a game may be replayed (its deal public: a daily after its
UTC date, a race game after its race finished, a free game once it has ended), reads the game
and its action log from the :class:`~server.storage.games.GameStore`, works out which action
each undo took back and the game's effective line, and asks the solver for the optimal line and
the first action of the effective line that left every optimal path. No I/O of its own.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from server.engine.codes import GameCode
from server.engine.deals import Deal
from server.engine.game import Action, ActionKind, Status
from server.errors import ConflictError, ErrorCode, NotFoundError
from server.services.analysis import Analyzer, DealAnalysis, LineStep
from server.services.daily import DailyService
from server.storage.enums import RaceStatus
from server.storage.games import GameMode, GameRecord, ReplayStore, StoredAction

log = logging.getLogger(__name__)

#: Seconds a replay waits for the solver (the deal's optimal line, then the divergence) before
#: it is answered without them (null); a solve still running goes on and is cached.
SOLVE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ReplayStep:
    """One stored action of a replayed game, as the action log holds it (``at``: UTC).

    Attributes:
        seq: its number in the action log (1, 2, …).
        kind: remove, draw or undo.
        pos: a removal's position; for an undo, the position the card went back to (None when
            it went back onto the stock); None for a draw.
        card: the card removed, turned from the stock, or put back by an undo.
        score_after: the score after it.
        undoes: for an undo, the ``seq`` of the removal or draw it took back; else None.
        undone: whether a later undo took this removal or draw back (it is not on the
            effective line); False for an undo.
    """

    seq: int
    kind: ActionKind
    pos: int | None
    card: str
    score_after: int
    at: dt.datetime
    undoes: int | None
    undone: bool


@dataclass(frozen=True, slots=True)
class Replay:
    """A game to replay: its record, its deal, its actions and the solver's view of them.

    Attributes:
        game: the game's stored row (the code, public here, included).
        deal: every card of the deal: the tableau by position, the waste card, the stock in
            draw order.
        steps: every stored action, in ``seq`` order.
        par: the deal's par; None without the solver, or when it took longer than
            :data:`SOLVE_TIMEOUT_S`.
        line: an optimal line from the deal (the one a daily publishes); None like ``par``.
        diverged_at: the index in ``steps`` of the first action of the effective line after
            which par was out of reach; None when the effective line never left every optimal
            path, or like ``par``.
    """

    game: GameRecord
    deal: Deal
    steps: tuple[ReplayStep, ...]
    par: int | None
    line: list[LineStep] | None
    diverged_at: int | None


def replay_steps(actions: Sequence[StoredAction]) -> tuple[ReplayStep, ...]:
    """The action log with each undo tied to the action it took back (docs/rules.md §2
    "Undo": an undo takes back the most recent removal or draw not yet taken back).

    Args:
        actions: a game's action log in ``seq`` order.
    """
    undoes: dict[int, int] = {}  # index of an undo → index of the action it took back
    kept: list[int] = []  # indexes of the removals and draws not (yet) taken back
    for index, action in enumerate(actions):
        if action.kind is ActionKind.UNDO:
            if kept:  # a stored undo always had one; an empty history would be a broken log
                undoes[index] = kept.pop()
        else:
            kept.append(index)
    undone = set(undoes.values())
    return tuple(
        ReplayStep(
            seq=action.seq,
            kind=action.kind,
            pos=action.pos,
            card=action.card,
            score_after=action.score_after,
            at=action.at,
            undoes=actions[undoes[index]].seq if index in undoes else None,
            undone=index in undone,
        )
        for index, action in enumerate(actions)
    )


def effective_line(steps: Sequence[ReplayStep]) -> list[int]:
    """The indexes in ``steps`` of the game's effective line: its removals and draws that no
    undo took back, in order (the line that leads from the deal to where the game ended)."""
    return [
        i for i, step in enumerate(steps) if step.kind is not ActionKind.UNDO and not step.undone
    ]


class ReplayService:
    """Serves replays of finished games whose deal is public.

    Args:
        store: where games and their action logs are read.
        daily: the daily challenge service (whether a date is over, by the database's clock).
        analyzer: the solver (optimal line, divergence), or None: replays then have neither.
        solve_timeout_s: how long a replay waits for the solver (see :data:`SOLVE_TIMEOUT_S`).
    """

    def __init__(
        self,
        store: ReplayStore,
        daily: DailyService,
        analyzer: Analyzer | None = None,
        *,
        solve_timeout_s: float = SOLVE_TIMEOUT_S,
    ) -> None:
        self._store = store
        self._daily = daily
        self._analyzer = analyzer
        self._timeout_s = solve_timeout_s

    async def replay(self, game_id: int) -> Replay:
        """A game to replay move by move (docs/rules.md §4 "Replays").

        Raises:
            NotFoundError: ``unknown_game``.
            ConflictError: ``replay_not_public``: the deal is not public yet (a daily of a
                date not over, a race not finished, a free game still being played); the
                message says when it will be, and nothing of the deal.
            StorageError: the database failed.
        """
        rows = await self._store.replay_rows(game_id)
        if rows is None:
            raise NotFoundError(f"there is no game {game_id}", code=ErrorCode.UNKNOWN_GAME)
        record, actions = rows
        await self._check_public(record)
        steps = replay_steps(actions)
        par, line, diverged = await self._analysis(record, steps)
        return Replay(record, record.code.deal(), steps, par, line, diverged)

    async def daily_replayable(self, date: dt.date) -> bool:
        """Whether the daily games of ``date`` (UTC) can be replayed: once the date is over by
        the database's clock (docs/rules.md §4 "Replays").

        Raises:
            StorageError: the database failed.
        """
        if self._daily.known_closed(date):  # no query once this process has seen it close
            return True
        return not await self._daily.is_open(date)

    async def _check_public(self, record: GameRecord) -> None:
        """Refuse a game whose deal is not public yet (docs/rules.md §4 "Replays").

        Raises:
            ConflictError: ``replay_not_public``.
        """
        if record.mode is GameMode.DAILY:
            assert record.daily_date is not None
            if await self._daily.is_open(record.daily_date):
                raise ConflictError(
                    f"game {record.id} is a daily game of {record.daily_date.isoformat()}, "
                    "which is still open: it can be replayed once that date is over (UTC)",
                    code=ErrorCode.REPLAY_NOT_PUBLIC,
                )
        elif record.mode is GameMode.RACE:
            if record.race_status is not RaceStatus.FINISHED:
                raise ConflictError(
                    f"game {record.id} is a game of a race that has not finished: it can be "
                    "replayed once the race is over",
                    code=ErrorCode.REPLAY_NOT_PUBLIC,
                )
        elif record.status is Status.PLAYING:
            raise ConflictError(
                f"game {record.id} is still being played: it can be replayed once it has ended",
                code=ErrorCode.REPLAY_NOT_PUBLIC,
            )

    async def _analysis(
        self, record: GameRecord, steps: Sequence[ReplayStep]
    ) -> tuple[int | None, list[LineStep] | None, int | None]:
        """The deal's par and optimal line, and where the effective line left every optimal
        path; None for each that the solver could not give within the time-out."""
        analyzer = self._analyzer
        if analyzer is None:
            return None, None, None
        effective = effective_line(steps)
        actions: list[Action] = []
        for i in effective:
            pos = steps[i].pos
            actions.append(Action.draw() if pos is None else Action.remove(pos))
        code = record.code
        known = analyzer.cached(code)
        if known is not None:
            found, index = analyzer.cached_divergence(code, known.par, actions)
            if found:  # all of it known: no solver work
                return known.par, known.steps(code), _at(effective, index)

        async def solve() -> tuple[DealAnalysis, int | None]:
            analysis = await analyzer.analyse(code)
            return analysis, await analyzer.divergence(code, analysis.par, actions)

        task = analyzer.spare(solve)
        if task is None:
            log.info("replay of game %s: no spare solver capacity", record.id)
            return _partial(known, code)
        try:
            analysis, index = await asyncio.wait_for(asyncio.shield(task), self._timeout_s)
        except TimeoutError:
            log.warning("replay of game %s: the solver took too long", record.id)
            return _partial(analyzer.cached(code), code)
        return analysis.par, analysis.steps(code), _at(effective, index)


def _at(effective: Sequence[int], index: int | None) -> int | None:
    """The index in the replay's steps of the effective line's ``index``-th action."""
    return None if index is None else effective[index]


def _partial(
    known: DealAnalysis | None, code: GameCode
) -> tuple[int | None, list[LineStep] | None, int | None]:
    """What a replay shows of the solver's answers without waiting: the deal's par and line
    when they are cached, never the divergence."""
    return (None, None, None) if known is None else (known.par, known.steps(code), None)


__all__: Sequence[str] = (
    "SOLVE_TIMEOUT_S",
    "Replay",
    "ReplayService",
    "ReplayStep",
    "effective_line",
    "replay_steps",
)
