"""The race rooms in PostgreSQL: :class:`PostgresRaceStore` keeps
:class:`~server.storage.races.RaceStore` (its contract, rows, transactions, locks and errors are
described there) in ``races``, and ``race_players`` through
:class:`~server.storage.seats.PostgresSeatStore`; every change of a room is announced
on the room's channel (:mod:`server.storage.events`) once the transaction that makes it commits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import Row, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.codes import GameCode, RuleSet
from server.storage import moderation
from server.storage.enums import OPEN_RACE_STATUSES, RaceStatus
from server.storage.events import RaceFinished, RaceRoomChanged, RaceStarted, publish
from server.storage.models import Game, Race, RacePlayer
from server.storage.moderation import PlayerRecord
from server.storage.races import RaceRow, RoomDigest
from server.storage.seats import PostgresSeatStore
from server.storage.sessions import Sessions
from server.storage.transactions import Transaction, session_of

_RACE = tuple(Race.__table__.c)


def _race(row: Row[Any]) -> RaceRow:
    return RaceRow(
        id=row.id,
        invite=row.invite,
        host_id=row.host_id,
        code=GameCode.parse(row.code),
        rules=RuleSet(row.rules),
        status=RaceStatus(row.status),
        host_deal=row.host_deal,
        rated=row.rated,
        time_limit_s=row.time_limit_s,
        max_players=row.max_players,
        version=row.version,
        created_at=row.created_at,
        starts_at=row.starts_at,
        ends_at=row.ends_at,
        finished_at=row.finished_at,
        results=row.results,
    )


class PostgresRaceStore:
    """:class:`~server.storage.races.RaceStore` in PostgreSQL (``races``, and ``race_players``
    through :class:`~server.storage.seats.PostgresSeatStore`).

    Args:
        sessions: the session factory (its failures leave as StorageError).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions
        #: The rooms' seats and what a room shows.
        self.seats = PostgresSeatStore()

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self._sessions()

    async def ban_of(self, tx: Transaction, player_id: int) -> PlayerRecord | None:
        return await moderation.ban_of(session_of(tx), player_id)

    async def limit_lock_waits(self, tx: Transaction, seconds: float) -> None:
        session = session_of(tx)
        await session.execute(text(f"SET LOCAL lock_timeout = {max(1, int(seconds * 1000))}"))

    # ------------------------------------------------------------------------- reading rooms

    async def find(self, tx: Transaction, invite: str, *, lock: bool = False) -> RaceRow | None:
        session = session_of(tx)
        query = select(*_RACE).where(Race.invite == invite)
        row = (await session.execute(query.with_for_update() if lock else query)).one_or_none()
        return None if row is None else _race(row)

    async def digests(self, tx: Transaction, race_ids: Iterable[int]) -> dict[int, RoomDigest]:
        ids = sorted(set(race_ids))
        if not ids:
            return {}
        session = session_of(tx)
        query = (
            select(
                Race.id,
                Race.version,
                func.coalesce(func.sum(Game.moves), 0),
                func.count(Game.id).filter(Game.status != "playing"),
            )
            .outerjoin(Game, Game.race_id == Race.id)
            .where(Race.id.in_(ids))
            .group_by(Race.id, Race.version)
        )
        rows = (await session.execute(query)).all()
        return {row[0]: (row[1], int(row[2]), row[3]) for row in rows}

    async def lock(self, tx: Transaction, race_id: int) -> RaceRow | None:
        session = session_of(tx)
        rows = await self.lock_all(session, [race_id])
        return rows[0] if rows else None

    async def lock_all(self, tx: Transaction, race_ids: Iterable[int]) -> list[RaceRow]:
        session = session_of(tx)
        ids = sorted(set(race_ids))
        if not ids:
            return []
        rows = await session.execute(
            select(*_RACE).where(Race.id.in_(ids)).order_by(Race.id).with_for_update()
        )
        return [_race(row) for row in rows]

    async def open_rooms_of(self, tx: Transaction, player_id: int) -> list[RaceRow]:
        session = session_of(tx)
        rows = await session.execute(
            select(*_RACE)
            .join(RacePlayer, RacePlayer.race_id == Race.id)
            .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_RACE_STATUSES))
            .order_by(Race.created_at.desc(), Race.id.desc())
        )
        return [_race(row) for row in rows]

    async def due(self, tx: Transaction, now: dt.datetime) -> list[int]:
        session = session_of(tx)
        return list(
            (
                await session.scalars(
                    select(Race.id).where(Race.status == RaceStatus.RUNNING, Race.ends_at <= now)
                )
            ).all()
        )

    # --------------------------------------------------------------------- writing the race

    async def create(
        self,
        tx: Transaction,
        *,
        invite: str,
        host_id: int,
        code: GameCode,
        host_deal: bool,
        time_limit_s: int,
        max_players: int,
        now: dt.datetime,
        rated: bool = False,
    ) -> RaceRow:
        session = session_of(tx)
        row = (
            await session.execute(
                insert(Race)
                .values(
                    invite=invite,
                    host_id=host_id,
                    code=str(code),
                    rules=code.rules.value,
                    status=RaceStatus.LOBBY,
                    host_deal=host_deal,
                    rated=rated,
                    time_limit_s=time_limit_s,
                    max_players=max_players,
                    version=1,
                    created_at=now,
                )
                .returning(*_RACE)
            )
        ).one()
        race = _race(row)
        await self.seats.add(session, race.id, host_id, now)
        publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def set_host(self, tx: Transaction, race: RaceRow, host_id: int) -> RaceRow:
        session = session_of(tx)
        return await self._update(session, race, host_id=host_id)

    async def close(self, tx: Transaction, race: RaceRow, at: dt.datetime) -> RaceRow:
        session = session_of(tx)
        return await self._update(session, race, status=RaceStatus.CLOSED, finished_at=at)

    async def announce(self, tx: Transaction, race: RaceRow) -> RaceRow:
        session = session_of(tx)
        race = await self._update(session, race, version=Race.version + 1)
        publish(session, RaceRoomChanged(race.id, race.invite, race.version))
        return race

    async def start(
        self,
        tx: Transaction,
        race: RaceRow,
        starts_at: dt.datetime,
        ends_at: dt.datetime,
        games: Mapping[int, int],
    ) -> RaceRow:
        session = session_of(tx)
        for player_id, game_id in games.items():
            await session.execute(
                update(RacePlayer)
                .where(RacePlayer.race_id == race.id, RacePlayer.player_id == player_id)
                .values(game_id=game_id)
            )
        race = await self._update(
            session,
            race,
            status=RaceStatus.RUNNING,
            starts_at=starts_at,
            ends_at=ends_at,
            version=Race.version + 1,
        )
        publish(session, RaceStarted(race.id, race.invite, race.version, starts_at, dict(games)))
        return race

    async def finish(
        self,
        tx: Transaction,
        race: RaceRow,
        finished_at: dt.datetime,
        results: list[dict[str, Any]],
    ) -> RaceRow:
        session = session_of(tx)
        race = await self._update(
            session,
            race,
            status=RaceStatus.FINISHED,
            finished_at=finished_at,
            results=results,
            version=Race.version + 1,
        )
        publish(session, RaceFinished(race.id, race.invite, race.version))
        return race

    async def close_lobbies(
        self, tx: Transaction, created_before: dt.datetime, now: dt.datetime
    ) -> list[int]:
        session = session_of(tx)
        closed = (
            await session.execute(
                update(Race)
                .where(Race.status == RaceStatus.LOBBY, Race.created_at <= created_before)
                .values(status=RaceStatus.CLOSED, finished_at=now, version=Race.version + 1)
                .returning(Race.id, Race.invite)
            )
        ).all()
        for race_id, invite in closed:
            publish(session, RaceRoomChanged(race_id, invite))
        return [race_id for race_id, _ in closed]

    async def _update(self, session: AsyncSession, race: RaceRow, **values: Any) -> RaceRow:
        row = (
            await session.execute(
                update(Race).where(Race.id == race.id).values(**values).returning(*_RACE)
            )
        ).one()
        return _race(row)
