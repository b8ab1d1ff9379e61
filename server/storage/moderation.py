"""Moderation's queries: bans, hidden results, the audit trail and a day's results for review.

Every function runs in the caller's session (one transaction per moderator's command, committed
by the service), so that a command's checks and writes see one state under its row locks: the
player's row first, then the game's, in every command. Hiding and restoring are plain updates of
``games.hidden_at`` / ``hidden_by``; the triggers of migration 0009 move the leaderboard
counters and the daily player counts with them. A player's games are hidden or restored one
date after another in date order, so that the counter rows those triggers update are always
locked in one order (the group commit only ever touches today's).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, insert, null, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.storage.models import DailyChallenge, Game, GameAction, ModerationAction, Player

RANKED_STATUSES = ("won", "blocked")


@dataclass(frozen=True, slots=True)
class PlayerRecord:
    """A player as moderation sees them (``banned_at`` UTC; None when not banned)."""

    id: int
    name: str
    banned_at: dt.datetime | None
    ban_reason: str | None
    ban_action_id: int | None


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A game's row as moderation sees it: its result and whether (and by what) it is hidden."""

    id: int
    player_id: int
    mode: str
    daily_date: dt.date | None
    status: str
    score: int
    moves: int
    elapsed_ms: int | None
    hidden_at: dt.datetime | None
    hidden_by: int | None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One row of the audit trail (``at`` UTC), with the name of the player it names when that
    player is still there."""

    id: int
    at: dt.datetime
    moderator: str
    action: str
    player_id: int | None
    player_name: str | None
    game_id: int | None
    daily_date: dt.date | None
    reason: str | None
    details: Any | None


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


_PLAYER_COLUMNS = (
    Player.id,
    Player.name,
    Player.banned_at,
    Player.ban_reason,
    Player.ban_action_id,
)
_GAME_COLUMNS = (
    Game.id,
    Game.player_id,
    Game.mode,
    Game.daily_date,
    Game.status,
    Game.score,
    Game.moves,
    Game.elapsed_ms,
    Game.hidden_at,
    Game.hidden_by,
)


def _player(row: Any) -> PlayerRecord:
    return PlayerRecord(row.id, row.name, row.banned_at, row.ban_reason, row.ban_action_id)


def _game(row: Any) -> GameRecord:
    return GameRecord(
        row.id,
        row.player_id,
        row.mode,
        row.daily_date,
        row.status,
        row.score,
        row.moves,
        row.elapsed_ms,
        row.hidden_at,
        row.hidden_by,
    )


async def player_by_id(
    session: AsyncSession, player_id: int, *, lock: bool = False
) -> PlayerRecord | None:
    """The player with this id (its row locked ``FOR UPDATE`` with ``lock``), or None."""
    query = select(*_PLAYER_COLUMNS).where(Player.id == player_id)
    if lock:
        query = query.with_for_update()
    row = (await session.execute(query)).first()
    return None if row is None else _player(row)


async def player_by_name_key(session: AsyncSession, key: str) -> PlayerRecord | None:
    """The player whose name has this :func:`~server.names.name_key` (unique), or None."""
    row = (await session.execute(select(*_PLAYER_COLUMNS).where(Player.name_key == key))).first()
    return None if row is None else _player(row)


async def ban_of(session: AsyncSession, player_id: int) -> PlayerRecord | None:
    """The player's record when they are banned, else None (also for an unknown player)."""
    row = (
        await session.execute(
            select(*_PLAYER_COLUMNS).where(Player.id == player_id, Player.banned_at.is_not(None))
        )
    ).first()
    return None if row is None else _player(row)


async def game_by_id(
    session: AsyncSession, game_id: int, *, lock: bool = False
) -> GameRecord | None:
    """The game with this id (its row locked ``FOR UPDATE`` with ``lock``), or None."""
    query = select(*_GAME_COLUMNS).where(Game.id == game_id)
    if lock:
        query = query.with_for_update()
    row = (await session.execute(query)).first()
    return None if row is None else _game(row)


async def action_by_id(session: AsyncSession, action_id: int) -> ActionRecord | None:
    """One row of the audit trail, or None."""
    found = await actions(session, action_id=action_id, limit=1)
    return found[0] if found else None


async def record_action(
    session: AsyncSession,
    *,
    moderator: str,
    action: str,
    player_id: int,
    game_id: int | None = None,
    daily_date: dt.date | None = None,
    reason: str | None = None,
    details: Any | None = None,
) -> tuple[int, dt.datetime]:
    """Add a row to the audit trail, stamped by the database's clock.

    Returns:
        The row's id and time (UTC).
    """
    row = (
        await session.execute(
            insert(ModerationAction)
            .values(
                moderator=moderator,
                action=action,
                player_id=player_id,
                game_id=game_id,
                daily_date=daily_date,
                reason=reason,
                details=null() if details is None else details,
            )
            .returning(ModerationAction.id, ModerationAction.at)
        )
    ).one()
    return int(row.id), row.at


async def visible_daily_games(session: AsyncSession, player_id: int) -> list[GameRecord]:
    """The player's daily games that are not hidden (any status), in date order."""
    rows = await session.execute(
        select(*_GAME_COLUMNS)
        .where(Game.player_id == player_id, Game.mode == "daily", Game.hidden_at.is_(None))
        .order_by(Game.daily_date, Game.id)
    )
    return [_game(row) for row in rows]


async def games_hidden_by(
    session: AsyncSession, player_id: int, action_id: int
) -> list[GameRecord]:
    """The player's games that the audit row ``action_id`` hid and that are still hidden by it,
    in date order."""
    rows = await session.execute(
        select(*_GAME_COLUMNS)
        .where(Game.player_id == player_id, Game.hidden_by == action_id)
        .order_by(Game.daily_date, Game.id)
    )
    return [_game(row) for row in rows]


async def set_hidden(
    session: AsyncSession,
    games: Sequence[GameRecord],
    action_id: int | None,
    at: dt.datetime | None,
) -> None:
    """Hide ``games`` as by the audit row ``action_id`` at ``at``, or restore them (both None).

    One statement per game, in the given order (date order: see the module's notes).
    """
    for game in games:
        await session.execute(
            update(Game).where(Game.id == game.id).values(hidden_at=at, hidden_by=action_id)
        )


async def set_ban(
    session: AsyncSession,
    player_id: int,
    action_id: int | None,
    at: dt.datetime | None,
    reason: str | None,
) -> None:
    """Record the player's ban (the audit row, since when, why), or lift it (all None)."""
    await session.execute(
        update(Player)
        .where(Player.id == player_id)
        .values(banned_at=at, ban_reason=reason, ban_action_id=action_id)
    )


async def actions(
    session: AsyncSession,
    *,
    player_id: int | None = None,
    action_id: int | None = None,
    limit: int = 50,
) -> list[ActionRecord]:
    """The audit trail, newest first: all of it, or about one player, or one row."""
    query = (
        select(
            ModerationAction.id,
            ModerationAction.at,
            ModerationAction.moderator,
            ModerationAction.action,
            ModerationAction.player_id,
            Player.name,
            ModerationAction.game_id,
            ModerationAction.daily_date,
            ModerationAction.reason,
            ModerationAction.details,
        )
        .outerjoin(Player, Player.id == ModerationAction.player_id)
        .order_by(ModerationAction.id.desc())
        .limit(limit)
    )
    if player_id is not None:
        query = query.where(ModerationAction.player_id == player_id)
    if action_id is not None:
        query = query.where(ModerationAction.id == action_id)
    return [ActionRecord(*row) for row in await session.execute(query)]


async def daily_code(session: AsyncSession, date: dt.date) -> str | None:
    """The stored game code of a date's daily, or None when the date has none."""
    code: str | None = await session.scalar(
        select(DailyChallenge.code).where(DailyChallenge.date == date)
    )
    return code


async def day_results(session: AsyncSession, date: dt.date) -> list[DayResult]:
    """Every ranked result of a date (won or blocked), hidden ones included, in board order."""
    rows = await session.execute(
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
        .where(
            Game.mode == "daily",
            Game.daily_date == date,
            Game.status.in_(RANKED_STATUSES),
        )
        .order_by(Game.score.desc(), Game.moves, Game.elapsed_ms, Game.finished_at, Game.player_id)
    )
    return [_day_result(row) for row in rows]


def _day_result(row: Any) -> DayResult:
    """A row of :func:`day_results` (elapsed and finish time are set for every ranked result:
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


async def action_logs(
    session: AsyncSession, game_ids: Sequence[int]
) -> dict[int, list[tuple[str, int | None]]]:
    """The action logs of some games: each action's kind and position, in order."""
    if not game_ids:
        return {}
    logs: dict[int, list[tuple[str, int | None]]] = {game_id: [] for game_id in game_ids}
    rows = await session.execute(
        select(GameAction.game_id, GameAction.kind, GameAction.pos)
        .where(GameAction.game_id.in_(list(game_ids)))
        .order_by(GameAction.game_id, GameAction.seq)
    )
    for game_id, kind, pos in rows:
        logs[game_id].append((kind, pos))
    return logs


async def schema_revision(session: AsyncSession) -> str | None:
    """The database's Alembic revision, or None when it has none."""
    if await session.scalar(select(func.to_regclass("alembic_version"))) is None:
        return None
    revision: str | None = await session.scalar(text("SELECT version_num FROM alembic_version"))
    return revision
