"""An in-memory :class:`~server.storage.profiles.ProfileStore`: a player's profile read from
the :class:`MemoryDatabase` tables in one step with no await inside, so a read is one
consistent snapshot (as PostgreSQL's REPEATABLE READ transaction is): every finish stored
meanwhile is wholly before or wholly after it. Ranks come from the leaderboard fake's board
(:func:`~tests.fakes.leaderboards.daily_board`, :func:`~tests.fakes.leaderboards.ranked_better`),
so a profile's rank is the board's by construction."""

from __future__ import annotations

import datetime as dt

from server.engine.actions import Status
from server.storage.enums import RaceStatus
from server.storage.leaderboards import MAX_PLAYER_ID
from server.storage.profiles import DailyResult, StoredProfile
from tests.fakes.database import GameRecord, MemoryDatabase
from tests.fakes.leaderboards import daily_board, ranked_better


class MemoryProfileStore:
    """Profiles read from a :class:`MemoryDatabase`'s players, games and races.

    Args:
        database: the in-memory tables (shared with the other in-memory stores).
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def read(self, player_id: int, pinned_today: dt.date | None) -> StoredProfile | None:
        await self._db.query()
        # From here on nothing awaits: every part of the profile comes from the same tables.
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        player = self._db.players.get(player_id)
        if player is None:
            return None
        games = sorted(
            (g for g in self._db.games.values() if g.player_id == player_id),
            key=lambda g: g.id,
        )
        days = tuple(
            self._day(g)
            for g in sorted(
                (g for g in games if g.mode == "daily" and g.hidden_at is None),
                key=lambda g: (g.daily_date, g.id),
            )
        )
        finished = [g for g in games if g.mode == "race" and self._finished_race(g)]
        return StoredProfile(
            player_id=player_id,
            name=player.name,
            created_at=player.created_at,
            today=self._db.today(pinned_today),
            days=days,
            races_played=len(finished),
            races_won=sum(self._won(g) for g in finished),
        )

    def _day(self, game: GameRecord) -> DailyResult:
        """A daily game not hidden, with its rank on its date's board when it is an entry."""
        assert game.daily_date is not None
        rank = None
        if game.on_board:
            board = daily_board(self._db, game.daily_date)
            entry = next(e for e in board if e.player_id == game.player_id)
            rank = ranked_better(board, entry) + 1
        return DailyResult(
            date=game.daily_date,
            status=Status(game.status),
            score=game.score,
            moves=game.moves,
            elapsed_ms=game.elapsed_ms,
            code=game.code,
            rank=rank,
        )

    def _finished_race(self, game: GameRecord) -> bool:
        race = None if game.race_id is None else self._db.races.get(game.race_id)
        return race is not None and race.status == RaceStatus.FINISHED

    def _won(self, game: GameRecord) -> bool:
        """The race's results rank the game's player first (``results @> [{player_id,
        rank: 1}]``)."""
        assert game.race_id is not None
        results = self._db.races[game.race_id].results or []
        return any(r.get("player_id") == game.player_id and r.get("rank") == 1 for r in results)
