"""The two stores the services' tests run on, behind one harness: in memory (``tests/fakes``)
or PostgreSQL (``server/storage``), with the same way of putting rows in place and reading
them back.

A test takes the ``backend`` fixture (defined here, parametrized ``memory`` / ``postgres``;
``tests/services/conftest.py`` and ``tests/storage/conftest.py`` offer it), builds its service
over ``backend.players``, ``backend.daily``, ``backend.leaderboards``, ``backend.moderation``,
``backend.review``, ``backend.games`` with ``backend.committer``, ``backend.races`` and
``backend.presence`` (with a game service over ``backend.games``), or ``backend.profiles``,
and seeds games with :meth:`Backend.add_games` (their logs with :meth:`Backend.add_actions`,
their race's status and results with :meth:`Backend.set_race`) and bans with
:meth:`Backend.ban` (through the moderation service, on both), and ages server processes
with :meth:`Backend.set_seen`, as other writers of those rows would have stored them;
:meth:`Backend.moderation_state` reads back what moderation writes, and
:meth:`Backend.stored_presence` a presence row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, null, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.names import name_key
from server.services.committer import Committer
from server.services.credentials import hash_token
from server.services.moderation import ModerationService
from server.storage.commits import GroupCommitter
from server.storage.daily import DailyStore, PostgresDailyStore
from server.storage.db import create_engine
from server.storage.enums import RaceStatus
from server.storage.events import Event, Outgoing, decode_event
from server.storage.follows import FollowStore, PostgresFollowStore
from server.storage.games import GameStore, PostgresGameStore
from server.storage.leaderboards import LeaderboardStore, PostgresLeaderboardStore
from server.storage.models import (
    DailyChallenge,
    Game,
    GameAction,
    ModerationAction,
    Player,
    PlayerToken,
    Race,
    RacePresence,
    ServerInstance,
)
from server.storage.moderation import ModerationStore, PostgresModerationStore
from server.storage.online import OnlineStore, PostgresOnlineStore
from server.storage.players import PlayerStore, PostgresPlayerStore
from server.storage.presence import PresenceStore
from server.storage.presence_postgres import PostgresPresenceStore
from server.storage.profiles import PostgresProfileStore, ProfileStore
from server.storage.races import RaceStore
from server.storage.races_postgres import PostgresRaceStore
from server.storage.review import PostgresReviewStore, ReviewStore, Step
from server.storage.sessions import Sessions
from tests.fakes.daily import MemoryDailyStore
from tests.fakes.database import ActionRecord, MemoryDatabase
from tests.fakes.follows import MemoryFollowStore, MemoryOnlineStore
from tests.fakes.games import MemoryCommitter, MemoryGameStore
from tests.fakes.leaderboards import MemoryLeaderboardStore
from tests.fakes.moderation import MemoryModerationStore
from tests.fakes.players import MemoryPlayerStore
from tests.fakes.profiles import MemoryProfileStore
from tests.fakes.races import MemoryPresenceStore, MemoryRaceStore
from tests.fakes.review import MemoryReviewStore

KINDS = ("memory", "postgres")
#: The deal and deal time of a seeded game.
SEED_CODE = "TP1-E-AAAAAAA"
SEED_AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
#: Where no database listens: PostgreSQL stores over it fail as over a database that is down.
NOWHERE_URL = "postgresql://postgres@127.0.0.1:9/nowhere"


@dataclass(frozen=True, slots=True)
class Seed:
    """A game to put straight into the store (a daily one of ``daily_date`` by default)."""

    player_id: int
    score: int
    moves: int
    elapsed_ms: int | None
    finished_at: dt.datetime | None
    status: str = "won"
    undos: int = 0
    mode: str = "daily"
    daily_date: dt.date | None = None


@dataclass(frozen=True, slots=True)
class StoredGame:
    """What moderation reads and writes of a stored game."""

    id: int
    player_id: int
    mode: str
    daily_date: dt.date | None
    status: str
    hidden_at: dt.datetime | None
    hidden_by: int | None


@dataclass(frozen=True, slots=True)
class ModerationState:
    """Everything a moderator's command may change (a refused one must leave it as it was):
    the audit trail (each row's columns, in id order),
    the players' bans (id, since, why, by which row), the games' hidden marks (id, since, by
    which row) and, in PostgreSQL, the counters its triggers keep (on memory the counts are
    counted from the games, so they follow them)."""

    actions: list[tuple[object, ...]]
    bans: list[tuple[object, ...]]
    hidden: list[tuple[object, ...]]
    counters: list[tuple[object, ...]]


@dataclass(frozen=True, slots=True)
class StoredPlayer:
    """A player's row as stored, with the hashes of their tokens (by token id)."""

    name: str
    name_key: str
    token_hashes: list[bytes]
    recovery_hash: bytes | None


class Backend:
    """The stores of one test and a way to seed and inspect their rows.

    Attributes:
        kind: ``"memory"`` or ``"postgres"``.
        players, daily, leaderboards, moderation, review, games, races, presence, follows,
            online, profiles: the stores.
        committer: what stores the game service's actions beside ``games`` (closed with the
            backend).
    """

    kind: str
    players: PlayerStore
    daily: DailyStore
    leaderboards: LeaderboardStore
    moderation: ModerationStore
    review: ReviewStore
    games: GameStore
    races: RaceStore
    presence: PresenceStore
    follows: FollowStore
    online: OnlineStore
    profiles: ProfileStore
    committer: Committer

    async def add_players(
        self, names: Sequence[str], tokens: Sequence[str] | None = None
    ) -> list[int]:
        """Store players with these names directly, each with a token (``tokens``, one per
        name, else random ones nobody knows) and no recovery code; their ids in order."""
        raise NotImplementedError

    async def add_games(self, seeds: Sequence[Seed]) -> list[int]:
        """Store games directly (of :data:`SEED_CODE`, dealt at :data:`SEED_AT`, their ``seq``
        their moves and undos, with no action log; race games in one finished race); their
        ids in order."""
        raise NotImplementedError

    async def ban(self, player_id: int, reason: str) -> dt.datetime:
        """Ban a player from ranked play, as a moderator does (:class:`ModerationService`
        over :attr:`moderation`); returns since when (UTC, by the database's clock)."""
        banned = await ModerationService(self.moderation).ban(f"id:{player_id}", reason, "tests")
        return banned.action.at

    async def set_race(
        self, game_id: int, *, status: str, results: list[dict[str, Any]] | None
    ) -> None:
        """Give the race a stored race game is in this status and these results (each racer's
        object with ``player_id`` and ``rank``, as :func:`server.services.rooms.rank_results`
        makes them)."""
        raise NotImplementedError

    async def stored_presence(
        self, race_id: int, player_id: int
    ) -> tuple[str, str, dt.datetime] | None:
        """A player's presence row in a room as stored: role, state, since (None without one)."""
        raise NotImplementedError

    async def set_seen(self, instances: Sequence[str], ago_s: float) -> None:
        """Make these server processes last seen ``ago_s`` seconds before the database's clock,
        as a process that stalled would be."""
        raise NotImplementedError

    async def add_actions(
        self, game_id: int, steps: Sequence[Step], times: Sequence[dt.datetime] | None = None
    ) -> None:
        """Store a game's action log straight: ``steps`` (kind, position) as seqs 1, 2, …,
        made at ``times`` (one per step; all at ``SEED_AT`` when None)."""
        raise NotImplementedError

    async def set_address(self, player_id: int, address_hash: bytes) -> None:
        """Give a player the hash of the address they registered from."""
        raise NotImplementedError

    async def set_result(
        self,
        game_id: int,
        *,
        status: str,
        score: int,
        moves: int,
        finished_at: dt.datetime,
        elapsed_ms: int,
    ) -> None:
        """End a stored game with this result straight, as its last action would."""
        raise NotImplementedError

    async def stored_games(self, player_id: int | None = None) -> list[StoredGame]:
        """The stored games (of one player), in id order."""
        raise NotImplementedError

    async def moderation_state(self) -> ModerationState:
        """Everything moderation may change, as stored."""
        raise NotImplementedError

    async def clear(self) -> None:
        """Delete every game and player."""
        raise NotImplementedError

    async def deals(self) -> dict[dt.date, str]:
        """Every stored daily deal: its date and code."""
        raise NotImplementedError

    async def stored_player(self, player_id: int) -> StoredPlayer | None:
        """A player's stored row, or None."""
        raise NotImplementedError

    async def restart_player_ids(self, start: int) -> None:
        """Give the next players ids from ``start`` on."""
        raise NotImplementedError

    async def last_used(self, token_id: int) -> dt.datetime | None:
        """A token's ``last_used_at``."""
        raise NotImplementedError

    def events(self) -> AbstractAsyncContextManager[list[Event]]:
        """For the time of the block, the events the stores publish (committed ones, in
        order), appended to the list yielded as they are delivered."""
        raise NotImplementedError

    async def go_down(self) -> None:
        """From now on the stores fail as over a database that cannot be reached."""
        raise NotImplementedError


class MemoryBackend(Backend):
    """The in-memory stores over one :class:`MemoryDatabase`."""

    kind = "memory"

    def __init__(self, database: MemoryDatabase) -> None:
        self.database = database
        self.players = MemoryPlayerStore(database)
        self.daily = MemoryDailyStore(database)
        self.leaderboards = MemoryLeaderboardStore(database)
        self.moderation = MemoryModerationStore(database)
        self.review = MemoryReviewStore(database)
        self.games = MemoryGameStore(database)
        self.races = MemoryRaceStore(database)
        self.presence = MemoryPresenceStore(database)
        self.follows = MemoryFollowStore(database)
        self.online = MemoryOnlineStore(database)
        self.profiles = MemoryProfileStore(database)
        self.committer = MemoryCommitter(database)

    async def add_players(
        self, names: Sequence[str], tokens: Sequence[str] | None = None
    ) -> list[int]:
        now = self.database.now()
        hashes = _token_hashes(names, tokens)
        return [
            self.database.insert_player(n, name_key(n), h, now)[0].id
            for n, h in zip(names, hashes, strict=True)
        ]

    async def add_games(self, seeds: Sequence[Seed]) -> list[int]:
        race_id = None
        if any(s.mode == "race" for s in seeds):
            race_id = self.database.insert_race("finished").id
        return [
            self.database.insert_game(
                s.player_id,
                mode=s.mode,
                daily_date=s.daily_date,
                status=s.status,
                score=s.score,
                moves=s.moves,
                undos=s.undos,
                seq=s.moves + s.undos,
                code=SEED_CODE,
                created_at=SEED_AT,
                elapsed_ms=s.elapsed_ms,
                finished_at=s.finished_at,
                race_id=race_id if s.mode == "race" else None,
            ).id
            for s in seeds
        ]

    async def set_race(
        self, game_id: int, *, status: str, results: list[dict[str, Any]] | None
    ) -> None:
        race_id = self.database.games[game_id].race_id
        assert race_id is not None
        race = self.database.races[race_id]
        race.status, race.results = status, results

    async def stored_presence(
        self, race_id: int, player_id: int
    ) -> tuple[str, str, dt.datetime] | None:
        row = self.database.presence.get((race_id, player_id))
        return None if row is None else (row.role, row.state, row.since)

    async def set_seen(self, instances: Sequence[str], ago_s: float) -> None:
        seen = self.database.now() - dt.timedelta(seconds=ago_s)
        for instance in instances:
            row = self.database.instances[instance]
            self.database.instances[instance] = dataclasses.replace(row, seen_at=seen)

    async def add_actions(
        self, game_id: int, steps: Sequence[Step], times: Sequence[dt.datetime] | None = None
    ) -> None:
        logged = zip(steps, _times(steps, times), strict=True)
        for seq, ((kind, pos), at) in enumerate(logged, start=1):
            action = ActionRecord(game_id, seq, kind, pos, "AS", 0, at)
            self.database.check_action(action)
            self.database.actions[(game_id, seq)] = action

    async def set_address(self, player_id: int, address_hash: bytes) -> None:
        self.database.players[player_id].address_hash = address_hash

    async def set_result(
        self,
        game_id: int,
        *,
        status: str,
        score: int,
        moves: int,
        finished_at: dt.datetime,
        elapsed_ms: int,
    ) -> None:
        game = self.database.games[game_id]
        self.database.update_game(
            dataclasses.replace(
                game,
                status=status,
                score=score,
                moves=moves,
                finished_at=finished_at,
                elapsed_ms=elapsed_ms,
            )
        )

    async def stored_games(self, player_id: int | None = None) -> list[StoredGame]:
        return [
            StoredGame(g.id, g.player_id, g.mode, g.daily_date, g.status, g.hidden_at, g.hidden_by)
            for g in sorted(self.database.games.values(), key=lambda g: g.id)
            if player_id is None or g.player_id == player_id
        ]

    async def moderation_state(self) -> ModerationState:
        db = self.database
        return ModerationState(
            actions=[
                dataclasses.astuple(a)
                for a in sorted(db.moderation_actions.values(), key=lambda a: a.id)
            ],
            bans=[
                (p.id, p.banned_at, p.ban_reason, p.ban_action_id)
                for p in sorted(db.players.values(), key=lambda p: p.id)
            ],
            hidden=[
                (g.id, g.hidden_at, g.hidden_by)
                for g in sorted(db.games.values(), key=lambda g: g.id)
            ],
            counters=[],
        )

    async def clear(self) -> None:
        self.database.clear()

    async def deals(self) -> dict[dt.date, str]:
        return {date: str(deal.code) for date, deal in self.database.deals.items()}

    async def stored_player(self, player_id: int) -> StoredPlayer | None:
        p = self.database.players.get(player_id)
        if p is None:
            return None
        tokens = sorted(
            (t for t in self.database.tokens.values() if t.player_id == player_id),
            key=lambda t: t.id,
        )
        return StoredPlayer(p.name, p.name_key, [t.token_hash for t in tokens], p.recovery_hash)

    async def restart_player_ids(self, start: int) -> None:
        self.database.restart_player_ids(start)

    async def go_down(self) -> None:
        self.database.down = True

    async def last_used(self, token_id: int) -> dt.datetime | None:
        return self.database.tokens[token_id].last_used_at

    @asynccontextmanager
    async def events(self) -> AsyncIterator[list[Event]]:
        seen: list[Event] = []
        before, self.database.events = self.database.events, seen
        try:
            yield seen
        finally:
            before.extend(seen)
            self.database.events = before


class _Published:
    """The PostgreSQL stores' publisher: what they hand over once committed, decoded, for
    :meth:`PostgresBackend.events` (their delivery between processes is tested apart:
    tests/storage/test_events.py, tests/web/test_event_channels.py)."""

    def __init__(self) -> None:
        self.watching: list[list[Event]] = []

    def send(self, message: Outgoing) -> None:
        event = decode_event(message.payload)
        for seen in self.watching:
            seen.append(event)


class PostgresBackend(Backend):
    """The PostgreSQL stores over one engine."""

    kind = "postgres"

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._published = _Published()
        self._committers: list[GroupCommitter] = []
        self._use(engine)
        self._down: AsyncEngine | None = None

    def _use(self, engine: AsyncEngine) -> None:
        sessions = Sessions(engine, self._published)
        self.players = PostgresPlayerStore(sessions)
        self.daily = PostgresDailyStore(sessions)
        self.leaderboards = PostgresLeaderboardStore(sessions)
        self.moderation = PostgresModerationStore(sessions)
        self.review = PostgresReviewStore(sessions)
        self.games = PostgresGameStore(sessions)
        self.races = PostgresRaceStore(sessions)
        self.presence = PostgresPresenceStore(sessions)
        self.follows = PostgresFollowStore(sessions)
        self.online = PostgresOnlineStore(sessions)
        self.profiles = PostgresProfileStore(sessions)
        self.committer = GroupCommitter(engine, publisher=self._published)
        self._committers.append(self.committer)

    async def add_players(
        self, names: Sequence[str], tokens: Sequence[str] | None = None
    ) -> list[int]:
        if not names:
            return []
        hashes = _token_hashes(names, tokens)
        async with self.engine.begin() as conn:
            result = await conn.execute(
                insert(Player).returning(Player.id, sort_by_parameter_order=True),
                [{"name": n} for n in names],
            )
            ids = list(result.scalars())
            await conn.execute(
                insert(PlayerToken),
                [{"player_id": i, "token_hash": h} for i, h in zip(ids, hashes, strict=True)],
            )
            return ids

    async def add_games(self, seeds: Sequence[Seed]) -> list[int]:
        if not seeds:
            return []
        async with self.engine.begin() as conn:
            race_id = None
            if any(s.mode == "race" for s in seeds):
                race_id = await conn.scalar(
                    insert(Race)
                    .values(
                        invite=secrets.token_hex(3).upper(),
                        host_id=seeds[0].player_id,
                        code=SEED_CODE,
                        rules="E",
                        status="finished",
                        time_limit_s=600,
                        max_players=8,
                        version=1,
                        created_at=SEED_AT,
                    )
                    .returning(Race.id)
                )
            result = await conn.execute(
                insert(Game).returning(Game.id, sort_by_parameter_order=True),
                [
                    {
                        "player_id": s.player_id,
                        "code": SEED_CODE,
                        "rules": "E",
                        "deal_version": "TP1",
                        "mode": s.mode,
                        "daily_date": s.daily_date,
                        "race_id": race_id if s.mode == "race" else None,
                        "status": s.status,
                        "score": s.score,
                        "moves": s.moves,
                        "undos": s.undos,
                        "seq": s.moves + s.undos,
                        "elapsed_ms": s.elapsed_ms,
                        "created_at": SEED_AT,
                        "finished_at": s.finished_at,
                    }
                    for s in seeds
                ],
            )
            return list(result.scalars())

    async def set_race(
        self, game_id: int, *, status: str, results: list[dict[str, Any]] | None
    ) -> None:
        async with self.engine.begin() as conn:
            race_id = select(Game.race_id).where(Game.id == game_id).scalar_subquery()
            await conn.execute(
                update(Race)
                .where(Race.id == race_id)
                .values(status=RaceStatus(status), results=null() if results is None else results)
            )

    async def stored_presence(
        self, race_id: int, player_id: int
    ) -> tuple[str, str, dt.datetime] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(RacePresence.role, RacePresence.state, RacePresence.since).where(
                        RacePresence.race_id == race_id, RacePresence.player_id == player_id
                    )
                )
            ).first()
        return None if row is None else (row.role, row.state, row.since)

    async def set_seen(self, instances: Sequence[str], ago_s: float) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(ServerInstance)
                .where(ServerInstance.id.in_(instances))
                .values(seen_at=func.statement_timestamp() - dt.timedelta(seconds=ago_s))
            )

    async def add_actions(
        self, game_id: int, steps: Sequence[Step], times: Sequence[dt.datetime] | None = None
    ) -> None:
        if not steps:
            return
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(GameAction),
                [
                    {"game_id": game_id, "seq": seq, "kind": kind, "pos": pos}
                    | {"card": "AS", "score_after": 0, "created_at": at}
                    for seq, ((kind, pos), at) in enumerate(
                        zip(steps, _times(steps, times), strict=True), start=1
                    )
                ],
            )

    async def set_address(self, player_id: int, address_hash: bytes) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(Player).where(Player.id == player_id).values(address_hash=address_hash)
            )

    async def set_result(
        self,
        game_id: int,
        *,
        status: str,
        score: int,
        moves: int,
        finished_at: dt.datetime,
        elapsed_ms: int,
    ) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(Game)
                .where(Game.id == game_id)
                .values(
                    status=status,
                    score=score,
                    moves=moves,
                    finished_at=finished_at,
                    elapsed_ms=elapsed_ms,
                )
            )

    async def stored_games(self, player_id: int | None = None) -> list[StoredGame]:
        query = select(
            Game.id,
            Game.player_id,
            Game.mode,
            Game.daily_date,
            Game.status,
            Game.hidden_at,
            Game.hidden_by,
        ).order_by(Game.id)
        if player_id is not None:
            query = query.where(Game.player_id == player_id)
        async with self.engine.connect() as conn:
            return [StoredGame(*row) for row in await conn.execute(query)]

    async def moderation_state(self) -> ModerationState:
        async with self.engine.connect() as conn:
            tables = []
            for query in (
                "SELECT id, at, moderator, action, player_id, game_id, daily_date, reason, "
                "details FROM moderation_actions ORDER BY id",
                "SELECT id, banned_at, ban_reason, ban_action_id FROM players ORDER BY id",
                "SELECT id, hidden_at, hidden_by FROM games ORDER BY id",
                "SELECT 'board', * FROM leaderboard_counts ORDER BY 2, 3, 4, 5, 6",
                "SELECT 'players', * FROM daily_players ORDER BY 2",
                "SELECT 'periods', * FROM period_totals ORDER BY 2, 3, 4",
                "SELECT 'period counts', * FROM period_counts ORDER BY 2, 3, 4, 5, 6, 7",
            ):
                tables.append([tuple(row) for row in await conn.execute(text(query))])
        actions, bans, hidden, *counters = tables
        return ModerationState(actions, bans, hidden, [row for rows in counters for row in rows])

    async def clear(self) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                update(Player).values(ban_action_id=None, banned_at=None, ban_reason=None)
            )
            await conn.execute(delete(Game))
            await conn.execute(delete(Race))
            await conn.execute(delete(ModerationAction))
            await conn.execute(delete(PlayerToken))
            await conn.execute(delete(Player))

    async def deals(self) -> dict[dt.date, str]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(DailyChallenge.date, DailyChallenge.code))
            return {row.date: row.code for row in rows}

    async def stored_player(self, player_id: int) -> StoredPlayer | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    select(Player.name, Player.name_key, Player.recovery_hash).where(
                        Player.id == player_id
                    )
                )
            ).first()
            tokens = await conn.scalars(
                select(PlayerToken.token_hash)
                .where(PlayerToken.player_id == player_id)
                .order_by(PlayerToken.id)
            )
            hashes = [bytes(h) for h in tokens]
        if row is None:
            return None
        recovery = None if row.recovery_hash is None else bytes(row.recovery_hash)
        return StoredPlayer(row.name, row.name_key, hashes, recovery)

    async def restart_player_ids(self, start: int) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(text(f"ALTER TABLE players ALTER COLUMN id RESTART WITH {start}"))

    async def go_down(self) -> None:
        self._down = create_engine(NOWHERE_URL, pool_size=1)
        self._use(self._down)

    async def last_used(self, token_id: int) -> dt.datetime | None:
        async with self.engine.connect() as conn:
            return await conn.scalar(
                select(PlayerToken.last_used_at).where(PlayerToken.id == token_id)
            )

    @asynccontextmanager
    async def events(self) -> AsyncIterator[list[Event]]:
        seen: list[Event] = []
        self._published.watching.append(seen)
        try:
            yield seen
        finally:
            self._published.watching.remove(seen)

    async def close(self) -> None:
        for committer in self._committers:
            await committer.close()
        if self._down is not None:
            await self._down.dispose()


@asynccontextmanager
async def open_backend(
    kind: str, database_url: str | None, database: MemoryDatabase | None = None
) -> AsyncIterator[Backend]:
    """The stores of one kind, for the time of the block.

    Args:
        kind: ``"memory"`` or ``"postgres"``.
        database_url: the (empty, migrated) database of a ``postgres`` backend.
        database: the tables of a ``memory`` backend (new ones over the real clock by default).
    """
    if kind == "memory":
        memory = MemoryBackend(database or MemoryDatabase())
        try:
            yield memory
        finally:
            await memory.committer.close()
        return
    assert kind == "postgres" and database_url is not None
    engine = create_engine(database_url, pool_size=5)
    backend = PostgresBackend(engine)
    try:
        yield backend
    finally:
        await backend.close()
        await engine.dispose()


@pytest.fixture(params=KINDS)
def backend_url(request: pytest.FixtureRequest) -> str | None:
    """The kind of store: None for memory, else a fresh database's URL (made only for
    ``postgres``)."""
    if request.param == "memory":
        return None
    url: str = request.getfixturevalue("database_url")
    return url


@pytest.fixture
async def backend(backend_url: str | None) -> AsyncIterator[Backend]:
    """The stores of one test, in memory or in PostgreSQL."""
    async with open_backend("memory" if backend_url is None else "postgres", backend_url) as b:
        yield b


def _times(steps: Sequence[Step], times: Sequence[dt.datetime] | None) -> Sequence[dt.datetime]:
    """When each of ``steps`` was made: ``times`` (one each), or all at ``SEED_AT``."""
    if times is None:
        return [SEED_AT] * len(steps)
    return times


def _token_hashes(names: Sequence[str], tokens: Sequence[str] | None) -> list[bytes]:
    """The token hashes to store for players ``names``: of ``tokens``, else random."""
    if tokens is None:
        return [secrets.token_bytes(32) for _ in names]
    return [hash_token(token) for token in tokens]
