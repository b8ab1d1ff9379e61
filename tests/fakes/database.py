"""The rows the in-memory stores share, the constraints of the schema they rely on, and the
clock that stands in for the database's.

Only what the stores read and write is kept: players (their tokens, their bans, whom they
follow, their open connections), games and their
action logs (written by the game store and committer, or by tests, as other writers of ``games``
do in PostgreSQL), the windows of races, the daily deals, and the events committed writes and
the stores publish (PostgreSQL's NOTIFYs, kept in order). One table serves every store: a game
the game service stores is on the leaderboard fake's board and in the daily fake's counts.
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
    """The columns of a row of ``games`` that the in-memory stores read and write (not the
    moderation's ``hidden_at`` / ``hidden_by``)."""

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
    """The columns of a row of ``races`` that the game store reads."""

    id: int
    status: str
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class DealRecord:
    """A row of ``daily_challenges``."""

    code: GameCode
    created_at: dt.datetime


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
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.players: dict[int, PlayerRecord] = {}
        self.tokens: dict[int, TokenRecord] = {}
        self.games: dict[int, GameRecord] = {}
        self.actions: dict[tuple[int, int], ActionRecord] = {}
        self.races: dict[int, RaceRecord] = {}
        self.deals: dict[dt.date, DealRecord] = {}
        #: ``follows``: when each ``(follower_id, followed_id)`` was followed.
        self.follows: dict[tuple[int, int], dt.datetime] = {}
        #: ``player_connections``: the player of each ``(instance, connection)``.
        self.connections: dict[tuple[str, str], int] = {}
        self.events: list[Event] = []
        self.down = False
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
        self.races[race.id] = race
        return race

    def ban(self, player_id: int, reason: str) -> dt.datetime:
        """Ban a player from now by the database's clock (the player's row only: the daily
        games a ban hides in PostgreSQL are not kept apart here); returns the ban's time.

        Raises:
            KeyError: there is no such player.
        """
        player = self.players[player_id]
        player.banned_at = self.now()
        player.ban_reason = reason
        player.ban_action_id = next(self._moderation_ids)
        return player.banned_at

    def restart_player_ids(self, start: int) -> None:
        """Give the next players ids from ``start`` on (``ALTER … RESTART WITH``)."""
        self._player_ids = itertools.count(start)

    def clear(self) -> None:
        """Delete every player, token, follow, connection, game, action and race, and the
        events (the deals stay)."""
        self.actions.clear()
        self.follows.clear()
        self.connections.clear()
        self.games.clear()
        self.races.clear()
        self.tokens.clear()
        self.players.clear()
        self.events.clear()
