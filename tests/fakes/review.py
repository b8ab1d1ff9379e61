"""An in-memory :class:`~server.storage.review.ReviewStore`: a date's ranked daily results,
hidden ones included, and games' action logs, read from a :class:`MemoryDatabase`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from server.storage.leaderboards import order_key
from server.storage.review import RANKED_STATUSES, DayResult, ReviewDay, Step
from tests.fakes.database import MemoryDatabase


class MemoryReviewStore:
    """The review's reads over a :class:`MemoryDatabase` (its deals, games, players and action
    logs); it only reads.

    Args:
        database: the tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database

    async def day(self, date: dt.date) -> ReviewDay | None:
        await self._db.query()
        deal = self._db.deals.get(date)
        if deal is None:
            return None
        results = []
        for g in self._db.games.values():
            if g.mode != "daily" or g.daily_date != date or g.status not in RANKED_STATUSES:
                continue
            assert g.elapsed_ms is not None and g.finished_at is not None  # ck_games_result
            player = self._db.players[g.player_id]
            results.append(
                DayResult(
                    game_id=g.id,
                    player_id=g.player_id,
                    player_name=player.name,
                    status=g.status,
                    score=g.score,
                    moves=g.moves,
                    undos=g.undos,
                    seq=g.seq,
                    elapsed_ms=g.elapsed_ms,
                    finished_at=g.finished_at,
                    hidden=g.hidden_at is not None,
                    banned=player.banned_at is not None,
                    address_hash=player.address_hash,
                )
            )
        return ReviewDay(str(deal.code), sorted(results, key=order_key))

    async def action_logs(self, game_ids: Sequence[int]) -> dict[int, list[Step]]:
        if not game_ids:
            return {}
        await self._db.query()
        return {
            game_id: [(a.kind, a.pos) for a in self._db.game_actions(game_id)]
            for game_id in game_ids
        }
