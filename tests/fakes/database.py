"""The rows the in-memory stores share, the constraints of the schema they rely on, and the
clock that stands in for the database's.

Only what the stores read and write is kept: players and their tokens, the games of the boards
and counters (written by tests, as other writers of ``games`` do in PostgreSQL), the daily
deals, and the events the stores publish (PostgreSQL's NOTIFYs, kept in order).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
from dataclasses import dataclass

from server.engine.codes import GameCode
from server.errors import StorageConflict, StorageUnavailable
from server.services.clock import Clock, SystemClock
from server.storage.events import Event
from server.storage.models import GAME_MODES, GAME_STATUSES


@dataclass(slots=True)
class PlayerRecord:
    """A row of ``players``."""

    id: int
    name: str
    name_key: str
    created_at: dt.datetime
    address_hash: bytes | None = None
    recovery_hash: bytes | None = None


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
    """The columns of a row of ``games`` that the boards and counters read."""

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


@dataclass(frozen=True, slots=True)
class DealRecord:
    """A row of ``daily_challenges``."""

    code: GameCode
    created_at: dt.datetime


class MemoryDatabase:
    """The tables of the in-memory stores, with the constraints of the PostgreSQL schema that
    the stores' contracts depend on (unique name keys and tokens, one daily game per player and
    date, a ranked game's result).

    Args:
        clock: the database's clock (what ``statement_timestamp()`` would say); the real time
            by default.

    Attributes:
        down: while True, every query fails with :class:`StorageUnavailable`, as when the
            database is unreachable.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.players: dict[int, PlayerRecord] = {}
        self.tokens: dict[int, TokenRecord] = {}
        #: Every event published, in order (what PostgreSQL would NOTIFY on commit).
        self.events: list[Event] = []
        self.games: dict[int, GameRecord] = {}
        self.deals: dict[dt.date, DealRecord] = {}
        self.down = False
        self._player_ids = itertools.count(1)
        self._token_ids = itertools.count(1)
        self._game_ids = itertools.count(1)

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
        undos: int = 0,
        elapsed_ms: int | None = None,
        finished_at: dt.datetime | None = None,
    ) -> GameRecord:
        """Add a game with the next id, checked as the schema checks it.

        Raises:
            StorageConflict: the player has no row, already has a daily game on
                ``daily_date``, or a check constraint refuses the row.
        """
        if player_id not in self.players:
            raise StorageConflict("fk_games_player_id_players")
        if mode not in GAME_MODES or status not in GAME_STATUSES:
            raise StorageConflict("ck_games_mode" if mode not in GAME_MODES else "ck_games_status")
        if (mode == "daily") != (daily_date is not None):
            raise StorageConflict("ck_games_daily_date")
        if min(score, moves, undos) < 0:
            raise StorageConflict("ck_games_counters")
        if status in ("won", "blocked") and (
            finished_at is None or elapsed_ms is None or elapsed_ms < 0
        ):
            raise StorageConflict("ck_games_result")
        if mode == "daily" and any(
            g.mode == "daily" and g.daily_date == daily_date and g.player_id == player_id
            for g in self.games.values()
        ):
            raise StorageConflict("uq_games_daily_player")
        game = GameRecord(
            next(self._game_ids),
            player_id,
            mode,
            daily_date,
            status,
            score,
            moves,
            undos,
            elapsed_ms,
            finished_at,
        )
        self.games[game.id] = game
        return game

    def restart_player_ids(self, start: int) -> None:
        """Give the next players ids from ``start`` on (``ALTER … RESTART WITH``)."""
        self._player_ids = itertools.count(start)

    def clear(self) -> None:
        """Delete every player, token and game (the deals stay)."""
        self.games.clear()
        self.tokens.clear()
        self.players.clear()
