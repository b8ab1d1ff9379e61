"""The rows the in-memory stores share, the constraints of the schema they rely on, and the
clock that stands in for the database's.

Only what the stores read and write is kept: players (their tokens, their bans, whom they
follow, their open connections), games and their
action logs (written by the game store and committer, or by tests, as other writers of ``games``
do in PostgreSQL), whether a game is hidden and by which row of the moderation audit trail, the
races with their seats, presence rows and the connections following them, the server
processes, the daily deals, and the events committed writes and the stores publish
(PostgreSQL's NOTIFYs, kept in order). One table serves every store: a game the game service
stores is on the leaderboard fake's board and in the daily fake's counts, until moderation hides
it.

Stores whose callers hold one transaction across several steps (moderation's commands, a race
room's operations) run them in a :class:`MemoryTransaction`: its writes are undone unless it
commits, its events are delivered by the commit, and the rows it locks stay locked, to every
other transaction, until it commits or ends.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

from server.engine.codes import GameCode
from server.errors import StorageConflict, StorageUnavailable
from server.services.clock import Clock, SystemClock
from server.storage.daily import DailyDifficulty
from server.storage.events import Event, encode_event
from server.storage.models import GAME_MODES, GAME_STATUSES, MODERATION_ACTIONS
from server.storage.transactions import Transaction

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: ``game_actions.kind``'s allowed values.
ACTION_KINDS = ("remove", "draw", "undo")


@dataclass(slots=True)
class PlayerRecord:
    """A row of ``players``."""

    id: int
    name: str
    name_key: str
    created_at: dt.datetime
    address_hash: bytes | None = None
    recovery_hash: bytes | None = None
    banned_at: dt.datetime | None = None
    ban_reason: str | None = None
    ban_action_id: int | None = None


@dataclass(slots=True)
class TokenRecord:
    """A row of ``player_tokens``."""

    id: int
    player_id: int
    token_hash: bytes
    created_at: dt.datetime
    last_used_at: dt.datetime | None = None


@dataclass(slots=True)
class GameRecord:
    """The columns of a row of ``games`` that the in-memory stores read and write
    (``hidden_at`` / ``hidden_by``: hidden, by that row of the audit trail, or neither)."""

    id: int
    player_id: int
    mode: str
    daily_date: dt.date | None
    status: str
    score: int
    moves: int
    undos: int
    elapsed_ms: int | None
    finished_at: dt.datetime | None
    code: str
    seq: int
    created_at: dt.datetime
    cards_left: int = 28
    hinted: bool = False
    race_id: int | None = None
    hidden_at: dt.datetime | None = None
    hidden_by: int | None = None

    @property
    def on_board(self) -> bool:
        """A ranked daily result that is not hidden (``BOARD_WHERE``)."""
        return self.mode == "daily" and self.status in ("won", "blocked") and self.hidden_at is None


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """A row of ``game_actions`` (its key: ``game_id`` and ``seq``)."""

    game_id: int
    seq: int
    kind: str
    pos: int | None
    card: str
    score_after: int
    created_at: dt.datetime


@dataclass(slots=True)
class RaceRecord:
    """A row of ``races`` (the race fake writes whole rows; a seeded race has only a status, and
    a start and end when it ran)."""

    id: int
    status: str
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    invite: str = ""
    host_id: int = 0
    code: str = "TP1-E-AAAAAAA"
    host_deal: bool = False
    rated: bool = False
    time_limit_s: int = 600
    max_players: int = 8
    version: int = 1
    created_at: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    finished_at: dt.datetime | None = None
    results: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class SeatRecord:
    """A row of ``race_players`` (its key: ``race_id`` and ``player_id``)."""

    race_id: int
    player_id: int
    seat: int
    joined_at: dt.datetime
    game_id: int | None = None


@dataclass(frozen=True, slots=True)
class PresenceRecord:
    """A row of ``race_presence`` (its key: ``race_id`` and ``player_id``)."""

    race_id: int
    player_id: int
    role: str
    state: str
    since: dt.datetime


@dataclass(frozen=True, slots=True)
class ConnectionRecord:
    """A row of ``race_connections`` (its key: ``race_id``, ``instance_id``, ``connection``)."""

    race_id: int
    instance_id: str
    connection: str
    player_id: int
    connected_at: dt.datetime


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    """A row of ``server_instances`` (times by the database's clock)."""

    id: str
    started_at: dt.datetime
    seen_at: dt.datetime


@dataclass(frozen=True, slots=True)
class ModerationActionRecord:
    """A row of ``moderation_actions`` (``at``: the database's clock, UTC)."""

    id: int
    at: dt.datetime
    moderator: str
    action: str
    player_id: int | None
    game_id: int | None
    daily_date: dt.date | None
    reason: str | None
    details: Any | None


@dataclass(frozen=True, slots=True)
class DealRecord:
    """A row of ``daily_challenges``."""

    code: GameCode
    created_at: dt.datetime
    difficulty: DailyDifficulty | None = None


class MemoryDatabase:
    """The tables of the in-memory stores, with the constraints of the PostgreSQL schema that
    the stores' contracts depend on (unique name keys and tokens, one daily game per player and
    date, a ranked game's result, one action per game and seq).

    Args:
        clock: the database's clock (what ``statement_timestamp()`` would say); the real time
            by default.

    Attributes:
        down: while True, every query fails with :class:`StorageUnavailable`, as when the
            database is unreachable.
        actions: the action logs, by ``(game_id, seq)``.
        events: the events published by committed writes, in commit order (what every
            process's listener hears).
        moderation_actions: the audit trail, by id.
        seats, presence, connections: ``race_players`` and ``race_presence`` by race and
            player, ``race_connections`` by race, process and connection key.
        instances: ``server_instances`` by id.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.players: dict[int, PlayerRecord] = {}
        self.tokens: dict[int, TokenRecord] = {}
        self.games: dict[int, GameRecord] = {}
        self.actions: dict[tuple[int, int], ActionRecord] = {}
        self.races: dict[int, RaceRecord] = {}
        self.seats: dict[tuple[int, int], SeatRecord] = {}
        self.presence: dict[tuple[int, int], PresenceRecord] = {}
        self.connections: dict[tuple[int, str, str], ConnectionRecord] = {}
        self.instances: dict[str, InstanceRecord] = {}
        self.deals: dict[dt.date, DealRecord] = {}
        self.moderation_actions: dict[int, ModerationActionRecord] = {}
        #: ``follows``: when each ``(follower_id, followed_id)`` was followed.
        self.follows: dict[tuple[int, int], dt.datetime] = {}
        #: ``player_connections``: the player of each ``(instance, connection)``.
        self.player_connections: dict[tuple[str, str], int] = {}
        self.events: list[Event] = []
        self.down = False
        #: The row locks (by table and id) and the transaction holding each.
        self._locks: dict[tuple[str, Hashable], asyncio.Lock] = {}
        self._player_ids = itertools.count(1)
        self._token_ids = itertools.count(1)
        self._game_ids = itertools.count(1)
        self._race_ids = itertools.count(1)
        self._moderation_ids = itertools.count(1)

    async def query(self) -> None:
        """Begin one query: fail when the database is down, and give other tasks their turn
        (as waiting for a real database does). A query's own reads and writes follow without
        another await, so each is atomic, as one statement is."""
        if self.down:
            raise StorageUnavailable("database failure: the in-memory database is down")
        await asyncio.sleep(0)
        if self.down:
            raise StorageUnavailable("database failure: the in-memory database is down")

    def now(self) -> dt.datetime:
        """The database's clock, UTC."""
        return self.clock.now().astimezone(dt.UTC)

    def today(self, pinned: dt.date | None = None) -> dt.date:
        """The daily boundary's current UTC date: ``pinned`` (a simulated clock's) when given,
        else the database's clock's (``today_sql`` in PostgreSQL)."""
        return pinned if pinned is not None else self.now().date()

    def insert_player(
        self,
        name: str,
        name_key: str,
        token_hash: bytes,
        created_at: dt.datetime,
        address_hash: bytes | None = None,
        recovery_hash: bytes | None = None,
    ) -> tuple[PlayerRecord, TokenRecord]:
        """Add a player with the next id, and their first token.

        Raises:
            StorageConflict: ``uq_players_name_key`` or ``uq_player_tokens_token_hash`` is
                taken (nothing is added).
        """
        if any(p.name_key == name_key for p in self.players.values()):
            raise StorageConflict("uq_players_name_key")
        self._check_token_hash(token_hash)
        if len(name) > 24:  # VARCHAR(24)
            raise StorageUnavailable("database failure: the name does not fit its column")
        player = PlayerRecord(
            next(self._player_ids), name, name_key, created_at, address_hash, recovery_hash
        )
        self.players[player.id] = player
        return player, self.insert_token(player.id, token_hash, created_at)

    def insert_token(
        self, player_id: int, token_hash: bytes, created_at: dt.datetime
    ) -> TokenRecord:
        """Add a token of a player with the next id.

        Raises:
            StorageConflict: ``fk_player_tokens_player_id_players`` (no such player) or
                ``uq_player_tokens_token_hash``.
        """
        if player_id not in self.players:
            raise StorageConflict("fk_player_tokens_player_id_players")
        self._check_token_hash(token_hash)
        token = TokenRecord(next(self._token_ids), player_id, token_hash, created_at)
        self.tokens[token.id] = token
        return token

    def _check_token_hash(self, token_hash: bytes) -> None:
        if any(t.token_hash == token_hash for t in self.tokens.values()):
            raise StorageConflict("uq_player_tokens_token_hash")
        if len(token_hash) != 32:
            raise StorageConflict("ck_player_tokens_token_hash")

    def insert_game(
        self,
        player_id: int,
        *,
        mode: str,
        daily_date: dt.date | None,
        status: str,
        score: int,
        moves: int,
        code: str,
        created_at: dt.datetime,
        undos: int = 0,
        seq: int = 0,
        elapsed_ms: int | None = None,
        finished_at: dt.datetime | None = None,
        race_id: int | None = None,
    ) -> GameRecord:
        """Add a game with the next id, checked as the schema checks it.

        Raises:
            StorageConflict: see :meth:`check_game`.
        """
        game = GameRecord(
            id=next(self._game_ids),
            player_id=player_id,
            mode=mode,
            daily_date=daily_date,
            status=status,
            score=score,
            moves=moves,
            undos=undos,
            elapsed_ms=elapsed_ms,
            finished_at=finished_at,
            code=code,
            seq=seq,
            created_at=created_at,
            race_id=race_id,
        )
        player = self.players.get(player_id)
        if mode == "daily" and player is not None and player.ban_action_id is not None:
            # games_hide_banned: a daily game stored for a banned player is hidden by the ban.
            game.hidden_at, game.hidden_by = self.now(), player.ban_action_id
        self.check_game(game)
        self.games[game.id] = game
        return game

    def update_game(self, game: GameRecord) -> None:
        """Store ``game`` (a changed copy of a stored row) in place of its row, checked as the
        schema checks it; nothing changes when it is refused.

        Raises:
            StorageConflict: see :meth:`check_game`.
        """
        assert game.id in self.games
        self.check_game(game)
        self.games[game.id] = game

    def check_game(self, game: GameRecord) -> None:
        """Refuse a row of ``games`` as PostgreSQL's constraints would.

        Raises:
            StorageConflict: the player or the race has no row, another game of the player
                has the same daily date, or a check constraint refuses the row (its mode,
                status, counters, race, or a ranked result without its time).
        """
        if game.player_id not in self.players:
            raise StorageConflict("fk_games_player_id_players")
        if game.race_id is not None and game.race_id not in self.races:
            raise StorageConflict("fk_games_race_id_races")
        if game.mode not in GAME_MODES or game.status not in GAME_STATUSES:
            constraint = "ck_games_mode" if game.mode not in GAME_MODES else "ck_games_status"
            raise StorageConflict(constraint)
        if (game.mode == "daily") != (game.daily_date is not None):
            raise StorageConflict("ck_games_daily_date")
        if (game.mode == "race") != (game.race_id is not None):
            raise StorageConflict("ck_games_race_id")
        if min(game.score, game.moves, game.undos, game.seq) < 0:
            raise StorageConflict("ck_games_counters")
        if (game.hidden_at is None) != (game.hidden_by is None):
            raise StorageConflict("ck_games_hidden")
        if game.hidden_by is not None and game.hidden_by not in self.moderation_actions:
            raise StorageConflict("fk_games_hidden_by_moderation_actions")
        if game.status in ("won", "blocked") and (
            game.finished_at is None or game.elapsed_ms is None or game.elapsed_ms < 0
        ):
            raise StorageConflict("ck_games_result")
        if game.mode == "daily" and any(
            g.mode == "daily"
            and g.daily_date == game.daily_date
            and g.player_id == game.player_id
            and g.id != game.id
            for g in self.games.values()
        ):
            raise StorageConflict("uq_games_daily_player")

    def check_action(self, action: ActionRecord) -> None:
        """Refuse a new row of ``game_actions`` as PostgreSQL's constraints would.

        Raises:
            StorageConflict: its game has no row, the game already has an action of that
                ``seq``, or a check constraint refuses it (its kind, seq or position).
        """
        if action.game_id not in self.games:
            raise StorageConflict("fk_game_actions_game_id_games")
        if (action.game_id, action.seq) in self.actions:
            raise StorageConflict("pk_game_actions")
        if action.kind not in ACTION_KINDS:
            raise StorageConflict("ck_game_actions_kind")
        if action.seq < 1:
            raise StorageConflict("ck_game_actions_seq")
        if action.pos is not None and not 0 <= action.pos < 28:
            raise StorageConflict("ck_game_actions_pos")

    def game_actions(self, game_id: int) -> list[ActionRecord]:
        """A game's action log, in ``seq`` order."""
        return sorted(
            (a for (g, _), a in self.actions.items() if g == game_id), key=lambda a: a.seq
        )

    def insert_race(
        self, status: str, starts_at: dt.datetime | None = None, ends_at: dt.datetime | None = None
    ) -> RaceRecord:
        """Add a race with the next id (only what the game store reads of it)."""
        race = RaceRecord(next(self._race_ids), status, starts_at, ends_at)
        race.invite = f"R{race.id:05}"
        self.races[race.id] = race
        return race

    def next_race_id(self) -> int:
        """The next id of ``races`` (a sequence: never given twice, even when rolled back)."""
        return next(self._race_ids)

    def insert_moderation_action(
        self,
        *,
        moderator: str,
        action: str,
        player_id: int,
        game_id: int | None,
        daily_date: dt.date | None,
        reason: str | None,
        details: Any | None,
    ) -> ModerationActionRecord:
        """Add a row to the audit trail with the next id, at the database's clock.

        Raises:
            StorageConflict: a check constraint of ``moderation_actions`` refuses it.
        """
        if action not in MODERATION_ACTIONS:
            raise StorageConflict("ck_moderation_actions_action")
        if not 1 <= len(moderator.strip()) <= 100:
            raise StorageConflict("ck_moderation_actions_moderator")
        if action in ("hide", "restore") and game_id is None:
            raise StorageConflict("ck_moderation_actions_target")
        if action in ("ban", "hide") and not (reason or "").strip():
            raise StorageConflict("ck_moderation_actions_reason")
        row = ModerationActionRecord(
            next(self._moderation_ids),
            self.now(),
            moderator,
            action,
            player_id,
            game_id,
            daily_date,
            reason,
            details,
        )
        self.moderation_actions[row.id] = row
        return row

    def transaction(self) -> MemoryTransaction:
        """A new transaction over these tables (see :class:`MemoryTransaction`)."""
        return MemoryTransaction(self)

    def row_lock(self, table: str, row_id: Hashable) -> asyncio.Lock:
        """The lock of one row (made on first use)."""
        return self._locks.setdefault((table, row_id), asyncio.Lock())

    def restart_player_ids(self, start: int) -> None:
        """Give the next players ids from ``start`` on (``ALTER … RESTART WITH``)."""
        self._player_ids = itertools.count(start)

    def clear(self) -> None:
        """Delete every player, token, follow, player connection, game, action, race (its seats,
        presence and connections) and audit row, and the events (the deals and the server
        processes stay)."""
        self.actions.clear()
        self.moderation_actions.clear()
        self.follows.clear()
        self.player_connections.clear()
        self.connections.clear()
        self.presence.clear()
        self.seats.clear()
        self.games.clear()
        self.races.clear()
        self.tokens.clear()
        self.players.clear()
        self.events.clear()


class MemoryTransaction:
    """One transaction over a :class:`MemoryDatabase`, as a PostgreSQL session's.

    Writes are made in place at once, each with a step that undoes it (:meth:`undo`); they
    stay when :meth:`commit` is called, and are undone, newest first, when the transaction
    ends without it (:meth:`end`), by an exception or not. Events (:meth:`publish`) are
    delivered to the database's ``events`` only by the commit. Rows locked (:meth:`lock`) stay
    locked until the commit or the end, so another transaction locking one waits for it (as
    ``SELECT … FOR UPDATE`` does). After :meth:`commit` the transaction goes on as a new one,
    as a SQLAlchemy session begins again on its next statement.

    A reader that takes no lock sees a write before its commit (PostgreSQL would show it the
    committed row): the stores' callers read what they change under the lock of its row.

    Args:
        database: the tables.
    """

    def __init__(self, database: MemoryDatabase) -> None:
        self._db = database
        self._undo: list[Callable[[], object]] = []
        self._events: list[Event] = []
        self._held: list[asyncio.Lock] = []
        self._held_keys: set[tuple[str, Hashable]] = set()
        #: Longest wait for a row lock, in seconds (None: for ever).
        self.lock_timeout_s: float | None = None

    async def lock(self, table: str, row_id: Hashable) -> None:
        """Lock one row until the transaction ends or commits (a row it holds already is
        granted at once).

        Raises:
            StorageUnavailable: :attr:`lock_timeout_s` passed before the lock was granted
                (``lock_timeout``).
        """
        key = (table, row_id)
        if key in self._held_keys:
            return
        row_lock = self._db.row_lock(table, row_id)
        try:
            await asyncio.wait_for(row_lock.acquire(), self.lock_timeout_s)
        except TimeoutError:
            raise StorageUnavailable(
                f"database failure: a lock on {table} {row_id} was not granted in time"
            ) from None
        self._held.append(row_lock)
        self._held_keys.add(key)

    def undo(self, step: Callable[[], object]) -> None:
        """Note how to undo a write just made."""
        self._undo.append(step)

    def put(self, table: MutableMapping[K, V], key: K, row: V) -> None:
        """Insert or replace a row (``table[key] = row``), undone on rollback."""
        had, old = key in table, table.get(key)
        table[key] = row

        def undo() -> None:
            if had:
                table[key] = old  # type: ignore[assignment]  # present before: a V
            else:
                del table[key]

        self._undo.append(undo)

    def delete(self, table: MutableMapping[K, V], key: K) -> V | None:
        """Delete a row (nothing when there is none), undone on rollback; the row deleted."""
        if key not in table:
            return None
        row = table.pop(key)
        self._undo.append(lambda: table.__setitem__(key, row))
        return row

    def publish(self, event: Event) -> None:
        """Deliver ``event`` when the transaction commits (``pg_notify``)."""
        encode_event(event)  # too large: refused as by pg_notify
        self._events.append(event)

    async def commit(self) -> None:
        """Keep the writes, deliver the events, release the locks.

        Raises:
            StorageUnavailable: the database is down (then nothing is kept).
        """
        await self._db.query()
        self._db.events.extend(self._events)
        self._undo.clear()
        self._events.clear()
        self._release()
        self.lock_timeout_s = None  # SET LOCAL lasts until the transaction ends

    def end(self) -> None:
        """Undo what was written since the last commit, drop its events, release the locks."""
        for step in reversed(self._undo):
            step()
        self._undo.clear()
        self._events.clear()
        self._release()
        self.lock_timeout_s = None

    def _release(self) -> None:
        for row_lock in self._held:
            row_lock.release()
        self._held.clear()
        self._held_keys.clear()


def memory_transaction(tx: Transaction) -> MemoryTransaction:
    """The :class:`MemoryTransaction` an in-memory store handed out as ``tx``.

    Raises:
        TypeError: ``tx`` is another store's transaction.
    """
    if not isinstance(tx, MemoryTransaction):
        raise TypeError(f"an in-memory store was given a {type(tx).__name__}")
    return tx
