"""Games: create, resume, play and resign, every accepted action committed before it is reported.

The engine validates; storage stores, through what the service is given: its
:class:`~server.storage.games.GameStore` (creating, reading back, resigning) and a
:class:`~server.services.committer.Committer` that stores each accepted action (the group
commit, :class:`~server.storage.commits.GroupCommitter`, in production; an in-memory one in
``tests/fakes/games.py``). The live games and their locks are :mod:`server.services.live`.
Each game has one in-process lock, so actions of one game are applied in order; across
processes the ``games.seq`` check of each write (and the ``(game_id, seq)`` primary key of the
action log) lets only one writer win (docs/rules.md §5).

At about 600 lines this module is above the house's 400 on purpose: the action path (the
checks, the write, the outcome the cached game then follows, cancellation held until the commit
is settled) and resignation share one lock discipline and one set of race and daily checks, and
read best as one unit; what could stand alone (the answers' types, the cache, the queries, the
committer's contract) has moved out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from server.engine.codes import GameCode, RuleSet
from server.engine.errors import IllegalActionError
from server.engine.game import Action, ActionKind, AppliedAction, Game, Status
from server.errors import (
    ConflictError,
    ErrorCode,
    InvalidInputError,
    NotFoundError,
    StorageConflict,
    StorageError,
    UnauthorizedError,
    UnavailableError,
)
from server.services.analysis import Analyzer
from server.services.bans import ban_refusal
from server.services.clock import Clock, elapsed_ms
from server.services.committer import Committer
from server.services.completion import settled, to_completion
from server.services.daily import DailyService
from server.services.game_views import ActionResult, GameSnapshot, GameSummary, Outcome
from server.services.live import LiveGame, LiveGames
from server.storage.commits import (
    ActionWrite,
    DailyClosed,
    GameBusy,
    GameMovedOn,
    SignedOut,
)
from server.storage.enums import RaceStatus
from server.storage.events import RaceProgress
from server.storage.games import (
    GameHead,
    GameMode,
    GameStore,
)
from server.storage.transactions import Transaction

#: Tries of a daily join whose date closes between reading "today" and storing the game.
JOIN_ATTEMPTS = 3

#: Tries of a resignation whose game row keeps moving on under it (the player acting on
#: another process at the same moment) before it is answered with ``stale_seq``.
RESIGN_ATTEMPTS = 3

T = TypeVar("T")

log = logging.getLogger(__name__)


#: Called after a race game ended (won, blocked, resigned) was committed, with the race id.
RaceGameEnded = Callable[[int], Awaitable[object]]


class GameService:
    """Plays games for players: the only path from a request to the engine and the database.

    Args:
        store: where games are created and read back, resigned and marked hinted.
        committer: what stores each accepted action (closed by :meth:`close`).
        clock: the UTC clock (elapsed times are server time).
        daily: the daily challenge service.
        cache_size: how many games to keep in memory (least recently used are dropped).
        analyzer: the solver (par in summaries, hints); None disables both.
    """

    def __init__(
        self,
        store: GameStore,
        committer: Committer,
        clock: Clock,
        daily: DailyService,
        *,
        cache_size: int = 10_000,
        analyzer: Analyzer | None = None,
    ) -> None:
        self._analyzer = analyzer
        self._committer = committer
        self._store = store
        self._live = LiveGames(store, cache_size)
        self._clock = clock
        self._daily = daily
        self._race_game_ended: list[RaceGameEnded] = []

    async def close(self) -> None:
        """Stop the committer (the group committer's writer task)."""
        await self._committer.close()

    def on_race_game_ended(self, callback: RaceGameEnded) -> None:
        """Register ``callback(race_id)``, awaited after a race game's end is committed."""
        self._race_game_ended.append(callback)

    async def _notify_race_ended(self, live: LiveGame) -> None:
        if live.race is None or not live.game.is_over:
            return
        for callback in self._race_game_ended:
            try:
                await callback(live.race.race_id)
            except Exception:
                log.exception("race %s: handling a finished game failed", live.race.race_id)

    # ----------------------------------------------------------------------------- creating

    async def new_free_game(
        self, player_id: int, code: GameCode | None = None, rules: RuleSet = RuleSet.EASY
    ) -> GameSnapshot:
        """Start a free-play game of ``code``, or of a random deal under ``rules`` when None.

        Raises:
            StorageError: the database failed; no game was created.
        """
        chosen = code if code is not None else GameCode.random(rules)
        live = await self._create(player_id, GameMode.FREE, chosen, None)
        return self._snapshot(live)

    async def join_daily(self, player_id: int) -> GameSnapshot:
        """Create the player's one attempt at today's daily, or return the existing one.

        "Today" is the database's date; a game is stored only while it still is (a join that
        crosses midnight joins the new date).

        Raises:
            ForbiddenError: ``banned``: a banned player starts no ranked game.
            StorageError: the database failed.
        """
        ban = await self._store.ban_of(player_id)
        if ban is not None:
            raise ban_refusal(ban)
        for _ in range(JOIN_ATTEMPTS):
            today = await self._daily.today()
            code = await self._daily.challenge(today, today=today)
            existing = await self._store.daily_game_id(player_id, today)
            if existing is None:
                try:
                    live = await self._create(player_id, GameMode.DAILY, code, today)
                    return self._snapshot(live)
                except _DateClosed:
                    self._daily.note_closed(today)
                    continue
                except StorageConflict:  # another connection of the player created it first
                    existing = await self._store.daily_game_id(player_id, today)
            assert existing is not None
            return await self.resume(player_id, existing)
        raise UnavailableError(
            "the daily challenge is changing date; try again", code=ErrorCode.UNAVAILABLE
        )

    async def _create(
        self, player_id: int, mode: GameMode, code: GameCode, daily_date: dt.date | None
    ) -> LiveGame:
        """Store a new game and keep it live.

        Raises:
            _DateClosed: a daily whose date is over by the database's clock (nothing stored).
            StorageConflict: the player already has a game of that daily date.
            StorageError: the database failed.
        """
        game = Game.new(code, ranked=mode.ranked)
        now = self._clock.now()
        pinned = None if daily_date is None else self._daily.pinned_today()
        game_id = await self._store.create(
            player_id,
            mode,
            code,
            game.status,
            game.score,
            now,
            daily_date=daily_date,
            pinned_today=pinned,
        )
        if game_id is None:
            raise _DateClosed
        live = LiveGame(game_id, player_id, mode, code, daily_date, now, None, None, game)
        self._live.remember(live)
        return live

    async def create_race_games(
        self,
        tx: Transaction,
        race_id: int,
        code: GameCode,
        player_ids: Sequence[int],
        starts_at: dt.datetime,
    ) -> dict[int, int]:
        """Insert one race game per player in the race's transaction ``tx`` (not committed
        here).

        Each game starts at ``starts_at`` (its elapsed time counts from there).

        Returns:
            ``{player_id: game_id}``.
        """
        fresh = Game.new(code, ranked=True)
        return await self._store.insert_race_games(
            tx, race_id, code, fresh.status, fresh.score, player_ids, starts_at
        )

    # ----------------------------------------------------------------------------- reading

    async def resume(
        self,
        player_id: int,
        game_id: int,
        *,
        release: bool = False,
        acknowledged_seq: int | None = None,
    ) -> GameSnapshot:
        """The current state of one of the player's games, as stored.

        A race game's cards are not shown before its race starts: everyone gets the deal at
        the same moment (``release`` is for the one who hands it out at that moment).

        Args:
            acknowledged_seq: the newest seq the client was acknowledged for the game; a
                stored game behind it is never shown as if nothing had happened.

        Raises:
            NotFoundError: ``unknown_game``.
            ForbiddenError: ``not_your_game``.
            InvalidInputError: ``race_not_started`` before the race's countdown is over.
            ConflictError: ``behind_acknowledged``: the stored game's seq is below
                ``acknowledged_seq`` (acknowledged actions were lost with a database, or the
                client is mistaken); the message names both. A ``resume`` without ``seq``
                shows the stored state.
        """
        await self._live.refresh(game_id)
        live = await self._live.owned(player_id, game_id)
        if not release:
            self._check_started(live)
        if acknowledged_seq is not None and live.game.seq < acknowledged_seq:
            log.warning(
                "game %d is stored at seq %d, behind the seq %d its player was acknowledged",
                game_id,
                live.game.seq,
                acknowledged_seq,
            )
            raise ConflictError(
                f"the stored game is at seq {live.game.seq}, older than the seq "
                f"{acknowledged_seq} this client was acknowledged: actions acknowledged were "
                "lost; resume without seq to see the stored state",
                code=ErrorCode.BEHIND_ACKNOWLEDGED,
            )
        return self._snapshot(live)

    async def unfinished(self, player_id: int, limit: int = 20) -> list[GameSnapshot]:
        """The player's games that can still be played, newest first (at most ``limit``)."""
        today = await self._daily.today()
        heads = await self._store.unfinished(player_id, today, self._clock.now(), limit)
        return await self.snapshots(heads)

    async def snapshots(self, heads: Sequence[GameHead]) -> list[GameSnapshot]:
        """The games as far as their stored rows are (a copy in memory that is not is read
        again), in the order given.

        Raises:
            NotFoundError: ``unknown_game``: one of them does not exist.
            StorageError: the database failed.
        """
        for head in heads:
            self._live.forget_if_stale(head.id, head.seq, head.status)
        return [self._snapshot(await self._live.load(head.id)) for head in heads]

    async def summary(self, game_id: int, viewer_id: int | None) -> GameSummary:
        """A stored game for the REST API.

        The action log (which names cards) and the code are included when the game's cards may
        be revealed: to its owner at any time; to anyone once the game has ended, except a daily
        game, which is revealed only after its date is over.

        Raises:
            NotFoundError: ``unknown_game``.
        """
        record = await self._store.record(game_id)
        if record is None:
            raise NotFoundError(f"there is no game {game_id}", code=ErrorCode.UNKNOWN_GAME)
        ended = record.status is not Status.PLAYING
        owner = viewer_id == record.player_id
        if record.mode is GameMode.DAILY:
            assert record.daily_date is not None
            # A daily's code reveals every hidden card: never before its date is over.
            code_revealed = public = not await self._daily.is_open(record.daily_date)
        elif record.mode is GameMode.RACE:
            # Nor a race's before the race is over (others may still be playing it).
            code_revealed = public = record.race_status is RaceStatus.FINISHED
            ended = ended or public
        else:
            public = ended
            code_revealed = public or owner
        actions = await self._store.actions(game_id) if public or owner else None
        par = None
        if self._analyzer is not None and code_revealed and ended:
            par = (await self._analyzer.analyse(record.code)).par
        return GameSummary(
            hinted=record.hinted,
            par=par,
            id=record.id,
            player_id=record.player_id,
            player_name=record.player_name,
            mode=record.mode,
            code=record.code,
            revealed=code_revealed,
            daily_date=record.daily_date,
            status=record.status,
            score=record.score,
            moves=record.moves,
            undos=record.undos,
            seq=record.seq,
            elapsed_ms=record.elapsed_ms,
            created_at=record.created_at,
            finished_at=record.finished_at,
            actions=actions,
        )

    # ----------------------------------------------------------------------------- playing

    async def act(
        self,
        player_id: int,
        game_id: int,
        seq: int,
        action: Action,
        *,
        token_id: int | None = None,
    ) -> ActionResult:
        """Apply one action, committing it before returning ``accepted``.

        Args:
            player_id: the acting player (must own the game).
            game_id: the game.
            seq: how many actions the client has seen applied.
            action: the removal, draw or undo.
            token_id: the bearer token of the device that sent it (``player_tokens.id``): the
                action is stored only while that token exists (None: not checked).

        Returns:
            ``accepted`` with the new state; ``accepted`` without applying when the request
            repeats the last applied action exactly (same seq and content); ``rejected`` with
            the current state and a code otherwise (nothing changes).

        Raises:
            NotFoundError, ForbiddenError: unknown or someone else's game.
            UnauthorizedError: ``unauthorized``: the device's token was revoked (signed out,
                or replaced) before the action was stored; nothing was applied.
            UnavailableError: the game's row stayed locked past the write timeout; nothing
                was applied.
            StorageOutcomeUnknown: the write was sent and the database stopped answering
                before its commit was confirmed: it may have been applied (``resume`` tells).
            StorageError: the database failed; nothing was applied.
        """
        # Once its write is queued, the action runs to its end even if the caller is cancelled
        # (a client vanishing), and the lock is released only then: the next request on the
        # game waits for the commit's outcome instead of racing it (see _act_locked).
        async with self._live.locked(player_id, game_id) as live:
            if seq == live.game.seq:
                result = await self._act_locked(live, seq, action, token_id, last_try=False)
                if result is not None:
                    return result
        # A mismatch, or a copy found behind its stored row when writing, is answered from the
        # stored state, which another process may have moved on since this copy was read (an
        # exact repeat of the action that moved it is then acknowledged, as on any process).
        await self._live.refresh(game_id)
        async with self._live.locked(player_id, game_id) as live:
            result = await self._act_locked(live, seq, action, token_id, last_try=True)
            assert result is not None
            return result

    async def _act_locked(
        self, live: LiveGame, seq: int, action: Action, token_id: int | None, *, last_try: bool
    ) -> ActionResult | None:
        """Apply ``action`` to a locked game; None when the write found the stored row moved on
        and this is not the ``last_try`` (the caller reloads and tries again).

        Once the write is queued, a cancellation of the caller waits for the commit's outcome,
        which the cached game then follows (moved on, or reloaded next time), and is raised
        after that: a commit is never left unaccounted for."""
        game = live.game
        self._check_started(live)
        if seq != game.seq:
            if self._repeats_last(game, seq, action):
                return ActionResult(Outcome.ACCEPTED, self._snapshot(live))
            return ActionResult(Outcome.REJECTED, self._snapshot(live), ErrorCode.STALE_SEQ)
        if self._closed(live):
            return ActionResult(Outcome.REJECTED, self._snapshot(live), ErrorCode.DAILY_CLOSED)
        if self._race_over(live):
            return ActionResult(Outcome.REJECTED, self._snapshot(live), ErrorCode.RACE_OVER)
        trial = game.copy()
        try:
            applied = trial.apply(action)
        except IllegalActionError as exc:
            return ActionResult(Outcome.REJECTED, self._snapshot(live), exc.code.value)
        now = self._clock.now()
        finished_at, elapsed = self._ending(live, trial.status, now)
        write = ActionWrite(
            game_id=live.id,
            expected_seq=game.seq,
            seq=trial.seq,
            kind=applied.kind.value,
            pos=applied.pos,
            card=str(applied.card),
            score_after=applied.score_after,
            at=now,
            status=trial.status.value,
            score=trial.score,
            moves=trial.moves,
            undos=trial.undos,
            finished_at=finished_at,
            elapsed_ms=elapsed,
            cards_left=trial.cards_left,
            expected_status=game.status.value,
            event=self._progress_event(live, trial, now),
            pinned_today=None if live.daily_date is None else self._daily.pinned_today(),
            token_id=token_id,
        )
        stored = self._committer.submit(write)
        cancelled = await settled(stored)
        try:
            result = await self._after_write(
                live, trial, applied, (finished_at, elapsed), stored, last_try=last_try
            )
        finally:
            if cancelled:
                raise asyncio.CancelledError
        return result

    @staticmethod
    def _repeats_last(game: Game, seq: int, action: Action) -> bool:
        """Whether a request is an exact repeat of the game's last applied action (docs/rules.md
        §5 "Sequence numbers"). An undo in a ranked game never is: ranked play refuses every
        undo (§4 "Ranked play"), even one that repeats an undo stored before that rule."""
        if game.ranked and action.kind is ActionKind.UNDO:
            return False
        return seq == game.seq - 1 and bool(game.actions) and game.actions[-1] == action

    async def _after_write(
        self,
        live: LiveGame,
        trial: Game,
        applied: AppliedAction,
        ending: tuple[dt.datetime | None, int | None],
        stored: asyncio.Future[None],
        *,
        last_try: bool,
    ) -> ActionResult | None:
        """The result of an action whose write is settled (``stored`` done): the cached game
        moves on to ``trial`` (ending at ``ending``: finish time, elapsed ms) when it was
        committed; see :meth:`_act_locked`."""
        try:
            stored.result()
        except DailyClosed:
            assert live.daily_date is not None
            self._daily.note_closed(live.daily_date)
            return ActionResult(Outcome.REJECTED, self._snapshot(live), ErrorCode.DAILY_CLOSED)
        except SignedOut:
            # Nothing was written: the cached copy still matches the stored row.
            raise UnauthorizedError(
                "this device was signed out; nothing was changed", code=ErrorCode.UNAUTHORIZED
            ) from None
        except GameBusy:
            # Nothing was written: the cached copy still matches the stored row.
            raise UnavailableError(
                "this game is busy in the database; nothing was changed, try again shortly",
                code=ErrorCode.UNAVAILABLE,
            ) from None
        except (StorageConflict, GameMovedOn):
            # Another writer (another process) applied an action first: reload and resync.
            self._live.forget(live.id)
            if not last_try:
                return None
            fresh = await self._live.load(live.id)
            return ActionResult(Outcome.REJECTED, self._snapshot(fresh), ErrorCode.STALE_SEQ)
        except StorageError:
            self._live.forget(live.id)  # the commit's fate is unknown: reload on next use
            raise
        live.game = trial
        live.finished_at, live.elapsed_ms = ending
        if live.race is not None and trial.is_over:  # the race hears of it, come what may
            await to_completion(self._notify_race_ended(live))
        return ActionResult(Outcome.ACCEPTED, self._snapshot(live), applied=applied)

    async def resign(self, player_id: int, game_id: int) -> GameSnapshot:
        """Give up a game (it does not rank).

        Raises:
            NotFoundError, ForbiddenError: unknown or someone else's game.
            InvalidInputError: ``game_over`` when the game has already ended, ``daily_closed``
                for a daily whose date is over.
            StorageError: the database failed; nothing changed.
        """
        # The cached copy may be behind its stored row (another process served the player
        # since); a row that moves on while resigning is reloaded and the resignation retried.
        await self._live.refresh(game_id)
        for attempt in range(RESIGN_ATTEMPTS):
            try:
                async with self._live.locked(player_id, game_id) as live:
                    await to_completion(self._resign_locked(live))
                break
            except _Conflict:
                if attempt == RESIGN_ATTEMPTS - 1:
                    raise InvalidInputError(
                        "the game moved on; resume it and try again", code=ErrorCode.STALE_SEQ
                    ) from None
        await self._notify_race_ended(live)
        return self._snapshot(live)

    async def _resign_locked(self, live: LiveGame) -> None:
        """Resign a locked game: once begun, it runs to its end (see :meth:`act`)."""
        if live.daily_date is not None and not await self._daily.is_open(live.daily_date):
            raise InvalidInputError("this daily challenge is closed", code=ErrorCode.DAILY_CLOSED)
        self._check_started(live)
        if self._race_over(live):
            raise InvalidInputError("the race is over", code=ErrorCode.RACE_OVER)
        trial = live.game.copy()
        try:
            trial.resign()
        except IllegalActionError as exc:
            raise InvalidInputError(
                "the game is already over", code=ErrorCode(exc.code.value)
            ) from None
        now = self._clock.now()
        finished_at, elapsed = self._ending(live, trial.status, now)
        try:
            stored = await self._store.resign(
                live.id,
                seq=trial.seq,
                status=live.game.status,
                resigned=trial.status,
                finished_at=finished_at,
                elapsed_ms=elapsed,
                pinned_today=self._daily.pinned_today(),
                # A row locked elsewhere delays only this resignation, and not for ever.
                lock_timeout_ms=max(1, int(self._committer.timeout_s * 1000)),
                event=self._progress_event(live, trial, now),
            )
        except StorageError:
            self._live.forget(live.id)
            raise
        if not stored:
            self._live.forget(live.id)  # reloaded from the stored row by the next attempt
            raise _Conflict
        live.game = trial
        live.finished_at, live.elapsed_ms = finished_at, elapsed

    async def hint(self, player_id: int, game_id: int) -> Action | None:
        """The best next action from the game's current position (free play only); the game
        is marked as hinted.

        Returns:
            The first action of an optimal line, or None when no action is possible.

        Raises:
            NotFoundError, ForbiddenError: unknown or someone else's game.
            InvalidInputError: ``hints_not_allowed`` (a daily or race game, or no solver),
                ``game_over`` (the game has ended).
        """
        if self._analyzer is None:
            raise InvalidInputError("hints are not available", code=ErrorCode.HINTS_NOT_ALLOWED)
        async with self._live.locked(player_id, game_id) as live:
            if live.mode is not GameMode.FREE:
                raise InvalidInputError(
                    "hints are given in free play only", code=ErrorCode.HINTS_NOT_ALLOWED
                )
            if live.game.is_over or live.game.status is not Status.PLAYING:
                raise InvalidInputError("the game is over", code=ErrorCode.GAME_OVER)
            game = live.game.copy()
            if not live.hinted:
                await self._store.mark_hinted(live.id)
                live.hinted = True
        return await self._analyzer.best_action(live.code, game)

    # ----------------------------------------------------------------------------- helpers

    def _check_started(self, live: LiveGame) -> None:
        """Refuse any request on a race game before its start, without showing its state: the
        deal is released to every racer at the same moment.

        Raises:
            InvalidInputError: ``race_not_started``.
        """
        if live.race is not None and self._clock.now() < live.race.starts_at:
            raise InvalidInputError(
                "the race has not started yet; the deal comes at the end of the countdown",
                code=ErrorCode.RACE_NOT_STARTED,
            )

    def _race_over(self, live: LiveGame) -> bool:
        """Whether a race game's time is up (its race may not be marked finished yet)."""
        return live.race is not None and self._clock.now() >= live.race.ends_at

    def _progress_event(self, live: LiveGame, game: Game, now: dt.datetime) -> RaceProgress | None:
        """A race game's progress, for every process to pass on (never its cards)."""
        if live.race is None:
            return None
        return RaceProgress(
            race_id=live.race.race_id,
            player_id=live.player_id,
            game_id=live.id,
            seq=game.seq,
            cards_left=game.cards_left,
            score=game.score,
            moves=game.moves,
            status=game.status.value,
            elapsed_ms=elapsed_ms(live.created_at, now),
        )

    def _closed(self, live: LiveGame) -> bool:
        """Whether a daily game's date is known to be over (the database's clock decides each
        write regardless, see :class:`~server.storage.commits.DailyClosed`)."""
        return live.daily_date is not None and self._daily.known_closed(live.daily_date)

    def _ending(
        self, live: LiveGame, status: Status, now: dt.datetime
    ) -> tuple[dt.datetime | None, int | None]:
        if status is Status.PLAYING:
            return None, None
        return now, elapsed_ms(live.created_at, now)

    def _snapshot(self, live: LiveGame) -> GameSnapshot:
        now = self._clock.now()
        until = now if live.race is None else min(now, live.race.ends_at)  # a race's clock stops
        elapsed = (
            live.elapsed_ms if live.elapsed_ms is not None else elapsed_ms(live.created_at, until)
        )
        if live.race is not None:  # revealed when the race's time is over
            code_visible = now >= live.race.ends_at
        else:
            code_visible = live.daily_date is None or self._daily.known_closed(live.daily_date)
        return GameSnapshot(
            id=live.id,
            player_id=live.player_id,
            mode=live.mode,
            code=live.code,
            code_visible=code_visible,
            daily_date=live.daily_date,
            seq=live.game.seq,
            view=live.game.view(),
            elapsed_ms=elapsed,
            created_at=live.created_at,
            finished_at=live.finished_at,
            race_id=None if live.race is None else live.race.race_id,
        )


class _Conflict(Exception):
    """Another writer changed the game first."""


class _DateClosed(Exception):
    """A daily game was not stored: its date is over by the database's clock."""


__all__: Sequence[str] = ("GameService",)
