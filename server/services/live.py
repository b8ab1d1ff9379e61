"""The live-game cache: games being played, kept in memory, one lock each.

A game is read from its stored row and action log once, replayed by the engine, and kept
(least recently used dropped past the cache's size). Every request on a game takes the game's
lock, so its actions apply in order; another process may serve the same player meanwhile, so
a copy found behind its stored row is dropped and read again (docs/rules.md §5).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from server.engine.codes import GameCode
from server.engine.game import Action, Game, Status
from server.errors import ErrorCode, ForbiddenError, NotFoundError
from server.storage.games import GameMode, GameStore, RaceWindow, StoredGame

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LiveGame:
    """A game in memory: its stored facts and the engine's game, guarded by ``lock``.

    Attributes:
        finished_at: when it ended (UTC), None while it goes on.
        elapsed_ms: its elapsed time once ended, in ms.
        race: the race's window for a race game.
    """

    id: int
    player_id: int
    mode: GameMode
    code: GameCode
    daily_date: dt.date | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
    elapsed_ms: int | None
    game: Game
    race: RaceWindow | None = None
    hinted: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def rebuild(stored: StoredGame) -> LiveGame:
    """Replay a stored game's action log with the engine (docs/rules.md §2, §5).

    A row that disagrees with its replayed log is logged as an error; the log wins.
    """
    actions = [Action.from_record(kind, pos) for kind, pos in stored.actions]
    game = Game.replay(stored.code.deal(), stored.code.rules, actions, ranked=stored.mode.ranked)
    if stored.status is Status.RESIGNED:
        game.resign()
    if game.seq != stored.seq or game.status is not stored.status or game.score != stored.score:
        log.error("game %s: stored row disagrees with its replayed action log", stored.id)
    return LiveGame(
        stored.id,
        stored.player_id,
        stored.mode,
        stored.code,
        stored.daily_date,
        stored.created_at,
        stored.finished_at,
        stored.elapsed_ms,
        game,
        stored.race,
        stored.hinted,
    )


class LiveGames:
    """The games of this process in memory.

    Args:
        store: where games are read from.
        size: how many games to keep (least recently used are dropped; a locked one stays).
    """

    def __init__(self, store: GameStore, size: int = 10_000) -> None:
        self._store = store
        self._cache: OrderedDict[int, LiveGame] = OrderedDict()
        self._size = size
        self._loading: dict[int, asyncio.Lock] = {}

    def remember(self, live: LiveGame) -> None:
        """Keep ``live`` (the most recently used now)."""
        self._cache[live.id] = live
        self._cache.move_to_end(live.id)
        while len(self._cache) > self._size:
            oldest_id, oldest = next(iter(self._cache.items()))
            if oldest.lock.locked():
                self._cache.move_to_end(oldest_id)
                break
            del self._cache[oldest_id]

    def cached(self, game_id: int) -> LiveGame | None:
        """The copy of a game held in memory, if any (not read)."""
        return self._cache.get(game_id)

    def forget(self, game_id: int) -> None:
        """Drop the copy of a game (read again on its next use)."""
        self._cache.pop(game_id, None)

    def forget_if_stale(self, game_id: int, seq: int, status: Status) -> None:
        """Drop the cached copy of a game if it is not at the stored ``seq`` and ``status``
        (another process served its player since)."""
        cached = self._cache.get(game_id)
        if cached is not None and (cached.game.seq, cached.game.status) != (seq, status):
            self.forget(game_id)

    async def refresh(self, game_id: int) -> None:
        """Drop the cached copy of a game if its stored row has moved on.

        Raises:
            StorageError: the database failed.
        """
        if game_id not in self._cache:
            return
        head = await self._store.head(game_id)
        if head is not None:
            self.forget_if_stale(game_id, head.seq, head.status)

    async def load(self, game_id: int) -> LiveGame:
        """The game, read and replayed once if it is not in memory (concurrent loads of one game
        read it once).

        Raises:
            NotFoundError: ``unknown_game``.
            StorageError: the database failed.
        """
        cached = self._cache.get(game_id)
        if cached is not None:
            self._cache.move_to_end(game_id)
            return cached
        loading = self._loading.setdefault(game_id, asyncio.Lock())
        try:
            async with loading:
                cached = self._cache.get(game_id)
                if cached is not None:
                    return cached
                stored = await self._store.load(game_id)
                if stored is None:
                    raise NotFoundError(f"there is no game {game_id}", code=ErrorCode.UNKNOWN_GAME)
                live = rebuild(stored)
                self.remember(live)
                return live
        finally:
            if not loading.locked():
                self._loading.pop(game_id, None)

    async def owned(self, player_id: int, game_id: int) -> LiveGame:
        """The player's game.

        Raises:
            NotFoundError: ``unknown_game``.
            ForbiddenError: ``not_your_game``.
            StorageError: the database failed.
        """
        live = await self.load(game_id)
        if live.player_id != player_id:
            raise ForbiddenError(f"game {game_id} is not yours", code=ErrorCode.NOT_YOUR_GAME)
        return live

    def locked(self, player_id: int, game_id: int) -> LockedGame:
        """The player's game with its lock held, as ``async with``: the copy the cache holds
        at that moment.

        Raises:
            NotFoundError, ForbiddenError, StorageError: see :meth:`owned` (on entering).
        """
        return LockedGame(self, player_id, game_id)


class LockedGame:
    """``async with`` a player's game and its lock (see :meth:`LiveGames.locked`): a class
    rather than a generator, the lock being taken on every action."""

    __slots__ = ("_game_id", "_games", "_live", "_player_id")

    def __init__(self, games: LiveGames, player_id: int, game_id: int) -> None:
        self._games = games
        self._player_id = player_id
        self._game_id = game_id
        self._live: LiveGame | None = None

    async def __aenter__(self) -> LiveGame:
        games = self._games
        while True:
            live = await games.owned(self._player_id, self._game_id)
            await live.lock.acquire()
            if games.cached(self._game_id) is live:
                break
            live.lock.release()  # reloaded by another request while we waited: use the new copy
        self._live = live
        return live

    async def __aexit__(self, *exc_info: object) -> None:
        live = self._live
        assert live is not None
        self._live = None
        live.lock.release()
