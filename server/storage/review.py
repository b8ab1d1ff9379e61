"""The reads of the review of a day's suspicious results (``tripeaks admin suspicious``): a
date's ranked daily results with what the signals need, and the action logs of some games.

:class:`ReviewStore` is the contract :class:`server.services.review.ReviewService` depends on;
:class:`PostgresReviewStore` keeps it in PostgreSQL. It only reads, takes no lock, and each
method is one short session of its own: the solver's line is worked out between the two reads,
with no connection held. The signals themselves are the service's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from sqlalchemy import select

from server.storage.models import DailyChallenge, Game, GameAction, Player
from server.storage.sessions import Sessions

RANKED_STATUSES = ("won", "blocked")

#: An action of a game's log as the review compares it: its kind and position.
Step: TypeAlias = tuple[str, int | None]


@dataclass(frozen=True, slots=True)
class DayResult:
    """A ranked daily result (won or blocked) of one date, hidden or not, with what the review
    of suspicious results needs."""

    game_id: int
    player_id: int
    player_name: str
    status: str
    score: int
    moves: int
    undos: int
    seq: int
    elapsed_ms: int
    finished_at: dt.datetime
    hidden: bool
    banned: bool
    address_hash: bytes | None


@dataclass(frozen=True, slots=True)
class ReviewDay:
    """A date's daily for the review: its stored game code and its ranked results, hidden ones
    included, in board order."""

    code: str
    results: list[DayResult]


class ReviewStore(Protocol):
    """Where the review reads. Every method may raise :class:`~server.errors.StorageError`."""

    async def day(self, date: dt.date) -> ReviewDay | None:
        """The date's daily code and every ranked result of it (won or blocked), hidden ones
        included, in board order; None when the date has no daily."""
        ...

    async def action_logs(self, game_ids: Sequence[int]) -> dict[int, list[Step]]:
        """The action logs of some games: each action's kind and position, in order."""
        ...


_DAY_RESULTS = (
    select(
        Game.id,
        Game.player_id,
        Player.name,
        Game.status,
        Game.score,
        Game.moves,
        Game.undos,
        Game.seq,
        Game.elapsed_ms,
        Game.finished_at,
        Game.hidden_at.is_not(None),
        Player.banned_at.is_not(None),
        Player.address_hash,
    )
    .join(Player, Player.id == Game.player_id)
    .where(Game.mode == "daily", Game.status.in_(RANKED_STATUSES))
    .order_by(Game.score.desc(), Game.moves, Game.elapsed_ms, Game.finished_at, Game.player_id)
)


def _day_result(row: Any) -> DayResult:
    """A row of :data:`_DAY_RESULTS` (elapsed and finish time are set for every ranked result:
    ``ck_games_result``)."""
    return DayResult(
        game_id=row[0],
        player_id=row[1],
        player_name=row[2],
        status=row[3],
        score=row[4],
        moves=row[5],
        undos=row[6],
        seq=row[7],
        elapsed_ms=row[8],
        finished_at=row[9],
        hidden=bool(row[10]),
        banned=bool(row[11]),
        address_hash=None if row[12] is None else bytes(row[12]),
    )


class PostgresReviewStore:
    """:class:`ReviewStore` over PostgreSQL's ``daily_challenges``, ``games``, ``players`` and
    ``game_actions``.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def day(self, date: dt.date) -> ReviewDay | None:
        """The date's daily code and ranked results (one session), or None without a daily.

        Raises:
            StorageError: the database failed.
        """
        async with self._sessions() as session:
            code: str | None = await session.scalar(
                select(DailyChallenge.code).where(DailyChallenge.date == date)
            )
            if code is None:
                return None
            rows = await session.execute(_DAY_RESULTS.where(Game.daily_date == date))
            return ReviewDay(code, [_day_result(row) for row in rows])

    async def action_logs(self, game_ids: Sequence[int]) -> dict[int, list[Step]]:
        """The games' action logs in ``seq`` order (no query for no games).

        Raises:
            StorageError: the database failed.
        """
        if not game_ids:
            return {}
        logs: dict[int, list[Step]] = {game_id: [] for game_id in game_ids}
        query = (
            select(GameAction.game_id, GameAction.kind, GameAction.pos)
            .where(GameAction.game_id.in_(list(game_ids)))
            .order_by(GameAction.game_id, GameAction.seq)
        )
        async with self._sessions() as session:
            for game_id, kind, pos in await session.execute(query):
                logs[game_id].append((kind, pos))
        return logs


__all__ = [
    "RANKED_STATUSES",
    "DayResult",
    "PostgresReviewStore",
    "ReviewDay",
    "ReviewStore",
    "Step",
]
