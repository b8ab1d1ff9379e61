"""SQLAlchemy table models. Alembic (``migrations/``) owns the schema; these must match it.

A test (``tests/storage/test_migrations.py``) fails when the models and the migrations drift.
All timestamps are ``timestamptz`` in UTC (docs/rules.md §5).

One module on purpose, past 400 lines: it is the schema, read as a whole (one metadata that
the drift test compares with the migrations, tables whose foreign keys and indexes refer to
each other); it holds declarations only, no behaviour.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Computed,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from server.names import name_key as _name_key
from server.storage.enums import (
    OPEN_RACE_STATUSES,
    EnumText,
    PresenceRole,
    PresenceState,
    RaceStatus,
    one_of,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

GAME_MODES = ("free", "daily", "race")
GAME_STATUSES = ("playing", "won", "blocked", "resigned")
ACTION_KINDS = ("remove", "draw", "undo")
DEAL_VERSIONS = ("TP1", "TP2")
#: A daily game's row is an entry of its date's board (migration 0009): a ranked result that
#: is not hidden.
BOARD_WHERE = "mode = 'daily' AND status IN ('won', 'blocked') AND hidden_at IS NULL"
MODERATION_ACTIONS = ("ban", "unban", "hide", "restore")
#: Longest stored game code: a TP2 code, ``TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB``, is 37.
CODE_MAX = 40


class Base(DeclarativeBase):
    """Declarative base with a stable constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _default_name_key(context: Any) -> str:
    """``name_key`` of the row's ``name``, for inserts that do not give one."""
    return _name_key(context.get_current_parameters()["name"])


class Player(Base):
    """A registered player. Their bearer tokens, one per device, are :class:`PlayerToken` rows;
    of the recovery code only its SHA-256 is kept (``recovery_hash``, None until one is made).

    ``name_key`` (:func:`server.names.name_key` of the name) is unique: no two players have
    names that look alike. Players who already had look-alike names when the key was introduced
    keep them: the oldest has the plain key, each later one the key followed by ``#`` and its id.
    """

    __tablename__ = "players"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(String(24), nullable=False)
    name_key: Mapped[str] = mapped_column(Text, nullable=False, default=_default_name_key)
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    #: SHA-256 of the player's recovery code (docs/rules.md §4 "Players"); None for players
    #: registered before recovery codes who have not made one since.
    recovery_hash: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: HMAC-SHA256 of the address the player registered from, under a key derived from the
    #: daily secret (never the address itself); None for players registered before it was kept.
    address_hash: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    #: While banned (docs/rules.md §4 "Moderation"): since when, why, and the ban's audit row.
    banned_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ban_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    ban_action_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("moderation_actions.id"), nullable=True
    )

    __table_args__ = (
        Index("uq_players_name_key", name_key, unique=True),
        CheckConstraint(
            "(banned_at IS NULL) = (ban_reason IS NULL) "
            "AND (banned_at IS NULL) = (ban_action_id IS NULL)",
            name="ban",
        ),
        CheckConstraint("octet_length(address_hash) = 32", name="address_hash"),
        CheckConstraint("octet_length(recovery_hash) = 32", name="recovery_hash"),
        # The few banned players, for the ladder's ranks (migration 0016).
        Index("ix_players_banned", "id", postgresql_where=text("banned_at IS NOT NULL")),
    )


class PlayerToken(Base):
    """One bearer token of a player: one per device signed in (registration, a sign-in with
    the recovery code, a rotation). Only the token's SHA-256 is stored, unique; deleting the
    row signs that device out. ``last_used_at`` is refreshed by authentication at most once
    an hour (None: not used since it was made)."""

    __tablename__ = "player_tokens"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), nullable=False, index=True
    )
    token_hash: Mapped[bytes] = mapped_column(LargeBinary, nullable=False, unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    __table_args__ = (CheckConstraint("octet_length(token_hash) = 32", name="token_hash"),)


class Game(Base):
    """One player's game of one deal: its code, rule set, mode and current result."""

    __tablename__ = "games"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), nullable=False, index=True
    )
    code: Mapped[str] = mapped_column(String(CODE_MAX), nullable=False)
    rules: Mapped[str] = mapped_column(String(1), nullable=False)
    deal_version: Mapped[str] = mapped_column(String(8), nullable=False)
    mode: Mapped[str] = mapped_column(String(8), nullable=False)
    daily_date: Mapped[dt.date | None] = mapped_column(Date, nullable=True)
    status: Mapped[str] = mapped_column(String(10), nullable=False)
    score: Mapped[int] = mapped_column(Integer, nullable=False)
    moves: Mapped[int] = mapped_column(Integer, nullable=False)
    undos: Mapped[int] = mapped_column(Integer, nullable=False)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    elapsed_ms: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    cards_left: Mapped[int] = mapped_column(SmallInteger, nullable=False, server_default="28")
    hinted: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    race_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("races.id", ondelete="CASCADE"), nullable=True, index=True
    )
    #: A hidden result keeps its row but is on no board and in no counter (docs/rules.md §4
    #: "Moderation"): since when, and the audit row (a ban or a hide) that hid it.
    hidden_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    hidden_by: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("moderation_actions.id"), nullable=True
    )

    __table_args__ = (
        CheckConstraint("(mode = 'race') = (race_id IS NOT NULL)", name="race_id"),
        CheckConstraint("(hidden_at IS NULL) = (hidden_by IS NULL)", name="hidden"),
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        # The deal algorithm is stored with every game and names its code's (docs/rules.md §3).
        CheckConstraint(
            "deal_version IN ('TP1', 'TP2') AND left(code, 3) = deal_version",
            name="deal_version",
        ),
        CheckConstraint("mode IN ('free', 'daily', 'race')", name="mode"),
        CheckConstraint("status IN ('playing', 'won', 'blocked', 'resigned')", name="status"),
        CheckConstraint("(mode = 'daily') = (daily_date IS NOT NULL)", name="daily_date"),
        CheckConstraint("score >= 0 AND moves >= 0 AND undos >= 0 AND seq >= 0", name="counters"),
        # A ranked result has its place in the board order (and in ``leaderboard_counts``).
        CheckConstraint(
            "status NOT IN ('won', 'blocked') "
            "OR (finished_at IS NOT NULL AND elapsed_ms IS NOT NULL AND elapsed_ms >= 0)",
            name="result",
        ),
        # One ranked attempt per player per daily date.
        Index(
            "uq_games_daily_player",
            "daily_date",
            "player_id",
            unique=True,
            postgresql_where=text("mode = 'daily'"),
        ),
        # The daily leaderboard in docs/rules.md §4 order, for keyset pages: ascending on
        # ``-score`` so that a position is one row comparison, i.e. one index range. Its WHERE
        # is the board's condition (``_on_board`` in server/services/leaderboards.py).
        Index(
            "ix_games_daily_board",
            "daily_date",
            text("(-score)"),
            "moves",
            "elapsed_ms",
            "finished_at",
            "player_id",
            postgresql_where=text(BOARD_WHERE),
        ),
    )


class LeaderboardCount(Base):
    """Ranked daily entries counted by key prefix, for ranks without counting the board.

    Kept by statement-level triggers on ``games`` (migration 0004), so every writer keeps it
    right. One row per date and ``level``: 0 counts entries per ``score`` (``moves`` and
    ``elapsed_s`` are 0), 1 per ``score`` and ``moves`` (``elapsed_s`` is 0), 2 per ``score``,
    ``moves`` and whole elapsed second (``elapsed_ms / 1000``). A row whose entries have all
    gone stays with ``entries = 0``.
    """

    __tablename__ = "leaderboard_counts"

    daily_date: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    score: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    moves: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    elapsed_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    entries: Mapped[int] = mapped_column(BigInteger, nullable=False)

    __table_args__ = (CheckConstraint("level IN (0, 1, 2)", name="level"),)


class PeriodTotal(Base):
    """A player's entry on a weekly or monthly board: the sum of the scores, the number of days
    and the sum of the elapsed ms of their ranked daily results in the period (docs/rules.md §4
    "Weekly and monthly boards").

    Kept by statement-level triggers on ``games`` (migration 0013). ``kind`` is ``week`` (an
    ISO week, ``starts_on`` its Monday) or ``month`` (``starts_on`` its first day). A row whose
    results have all left (hidden, deleted) stays with ``days = 0``, on no board.
    """

    __tablename__ = "period_totals"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    starts_on: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    player_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    total: Mapped[int] = mapped_column(BigInteger, nullable=False)
    days: Mapped[int] = mapped_column(Integer, nullable=False)
    elapsed_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)

    __table_args__ = (
        CheckConstraint("kind IN ('week', 'month')", name="kind"),
        # The board in its order (total and days descending, time ascending, player id), for
        # keyset pages: one row comparison is one index range.
        Index(
            "ix_period_totals_board",
            "kind",
            "starts_on",
            text("(-total)"),
            text("(-days)"),
            "elapsed_ms",
            "player_id",
            postgresql_where=text("days > 0"),
        ),
    )


class PeriodCount(Base):
    """Entries of a weekly or monthly board counted by key prefix (as
    :class:`LeaderboardCount` for a date), kept by the triggers of migration 0013: ``level`` 0
    per ``total`` (``days`` and ``elapsed_s`` 0), 1 per ``total`` and ``days``, 2 per
    ``total``, ``days`` and whole elapsed second (``elapsed_ms / 1000``)."""

    __tablename__ = "period_counts"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    starts_on: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True, autoincrement=False)
    total: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    days: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    elapsed_s: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    entries: Mapped[int] = mapped_column(BigInteger, nullable=False)

    __table_args__ = (
        CheckConstraint("kind IN ('week', 'month')", name="kind"),
        CheckConstraint("level IN (0, 1, 2)", name="level"),
    )


class DailyPlayers(Base):
    """How many daily games were started for a date (any status), kept by statement-level
    triggers on ``games`` (migration 0005) so that it is never a count of the date's games."""

    __tablename__ = "daily_players"

    daily_date: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    players: Mapped[int] = mapped_column(BigInteger, nullable=False)


class GameAction(Base):
    """One accepted action of a game (the stored undo history), unique per game and seq."""

    __tablename__ = "game_actions"

    game_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("games.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(6), nullable=False)
    pos: Mapped[int | None] = mapped_column(SmallInteger, nullable=True)
    card: Mapped[str] = mapped_column(String(2), nullable=False)
    score_after: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint("kind IN ('remove', 'draw', 'undo')", name="kind"),
        CheckConstraint("seq >= 1", name="seq"),
        CheckConstraint("pos IS NULL OR (pos >= 0 AND pos < 28)", name="pos"),
    )


class Race(Base):
    """A race room: players with the same deal at the same server time (docs/rules.md §4 "Races").

    ``host_deal``: the host chose the code (they may know its cards); otherwise the deal is a
    random TP2 deal, secret until the race is over.
    ``status``: ``lobby`` (joining), ``running`` (from ``starts_at``, the end of the countdown,
    until every racer is done or ``ends_at``), ``finished`` (``results`` stored) or ``closed``
    (abandoned before its start). ``version`` grows with every change of the room.
    """

    __tablename__ = "races"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    invite: Mapped[str] = mapped_column(String(8), nullable=False, unique=True)
    host_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), nullable=False
    )
    code: Mapped[str] = mapped_column(String(CODE_MAX), nullable=False)
    rules: Mapped[str] = mapped_column(String(1), nullable=False)
    status: Mapped[RaceStatus] = mapped_column(EnumText(RaceStatus, 10), nullable=False)
    host_deal: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    rated: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    time_limit_s: Mapped[int] = mapped_column(Integer, nullable=False)
    max_players: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    starts_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ends_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    results: Mapped[Any | None] = mapped_column(JSONB, nullable=True)

    __table_args__ = (
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        CheckConstraint(one_of("status", RaceStatus), name="status"),
        CheckConstraint("time_limit_s > 0 AND max_players > 0", name="limits"),
        CheckConstraint("NOT (rated AND host_deal)", name="rated_random_deal"),
        Index(
            "ix_races_running_ends_at",
            "ends_at",
            postgresql_where=text(f"status = '{RaceStatus.RUNNING.value}'"),
        ),
        Index(
            "ix_races_lobby_created_at",
            "created_at",
            postgresql_where=text(f"status = '{RaceStatus.LOBBY.value}'"),
        ),
    )


class RacePlayer(Base):
    """A seat in a race: the player, their join order and (once started) their game."""

    __tablename__ = "race_players"

    race_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("races.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    seat: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    joined_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    game_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("games.id", ondelete="SET NULL"), nullable=True
    )


class PlayerRating(Base):
    """A player's rating under a rule set (docs/rules.md §4 "Ratings"): OpenSkill's
    Plackett–Luce ``mu`` and ``sigma``, the rated races played and won, and when the last one
    ended (UTC)."""

    __tablename__ = "player_ratings"

    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    rules: Mapped[str] = mapped_column(String(1), primary_key=True)
    mu: Mapped[float] = mapped_column(Float, nullable=False)
    sigma: Mapped[float] = mapped_column(Float, nullable=False)
    races: Mapped[int] = mapped_column(Integer, nullable=False)
    wins: Mapped[int] = mapped_column(Integer, nullable=False)
    rated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    #: The rating shown (the ordinal ``mu - 3 sigma`` times 40, rounded), the ladder's order.
    rating: Mapped[int] = mapped_column(
        Integer, Computed("round((mu - 3 * sigma) * 40)::integer", persisted=True)
    )

    __table_args__ = (
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        CheckConstraint("sigma > 0 AND races >= 0 AND wins >= 0 AND wins <= races", name="counts"),
        # The ladder in its order (rating and races descending, player id), for keyset pages
        # and for counting the entries ahead of a rating: each one index range.
        Index(
            "ix_player_ratings_ladder",
            "rules",
            text("rating DESC"),
            text("races DESC"),
            "player_id",
        ),
    )


class LadderCount(Base):
    """Ratings of a rule set counted by shown rating (banned players' included), kept by the
    triggers of migration 0016 on ``player_ratings``: a ladder rank sums the counts above."""

    __tablename__ = "ladder_counts"

    rules: Mapped[str] = mapped_column(String(1), primary_key=True)
    rating: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    entries: Mapped[int] = mapped_column(BigInteger, nullable=False)

    __table_args__ = (CheckConstraint("entries >= 0", name="entries"),)


class RatingChange(Base):
    """A racer's rating change in a rated race: before, after, their rank among ``racers``."""

    __tablename__ = "rating_changes"

    race_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("races.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    rules: Mapped[str] = mapped_column(String(1), nullable=False)
    rank: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    racers: Mapped[int] = mapped_column(SmallInteger, nullable=False)
    mu_before: Mapped[float] = mapped_column(Float, nullable=False)
    sigma_before: Mapped[float] = mapped_column(Float, nullable=False)
    mu_after: Mapped[float] = mapped_column(Float, nullable=False)
    sigma_after: Mapped[float] = mapped_column(Float, nullable=False)
    rated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        Index(
            "ix_rating_changes_player_rules_rated_at", "player_id", "rules", "rated_at", "race_id"
        ),
    )


class QueuedPlayer(Base):
    """A player waiting for a quick race (docs/rules.md §4 "Quick races"): under ``rules``,
    with their shown ``rating`` when they asked, since ``joined_at`` (UTC), from the websocket
    ``connection`` of server process ``instance_id`` (whose record takes the row with it)."""

    __tablename__ = "race_queue"

    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    rules: Mapped[str] = mapped_column(String(1), nullable=False)
    rating: Mapped[int] = mapped_column(Integer, nullable=False)
    instance_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("server_instances.id", ondelete="CASCADE"), nullable=False
    )
    connection: Mapped[str] = mapped_column(String(32), nullable=False)
    joined_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        Index("ix_race_queue_rules_joined_at", "rules", "joined_at"),
        Index("ix_race_queue_instance_connection", "instance_id", "connection"),
    )


class ServerInstance(Base):
    """A running server process, seen by the others through ``seen_at`` (the database's clock,
    refreshed by its race sweep). A process unseen for longer than the instance time-out is
    taken for dead: its connections are dropped and their players start reconnecting."""

    __tablename__ = "server_instances"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    started_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    seen_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )


class RaceConnection(Base):
    """One open websocket (``connection``, of the process ``instance_id``) following a race
    room for a player. A player is connected to a room while they have at least one."""

    __tablename__ = "race_connections"

    race_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("races.id", ondelete="CASCADE"), primary_key=True
    )
    instance_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("server_instances.id", ondelete="CASCADE"), primary_key=True
    )
    connection: Mapped[str] = mapped_column(String(32), primary_key=True)
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), nullable=False
    )
    connected_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        Index("ix_race_connections_race_id_player_id", "race_id", "player_id"),
        Index("ix_race_connections_instance_id", "instance_id"),
    )


class Follow(Base):
    """One player following another (docs/rules.md §4 "Following"): one-way, asked of nobody.
    A player follows nobody twice (the pair is the key) and never themself."""

    __tablename__ = "follows"

    follower_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    followed_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (CheckConstraint("follower_id <> followed_id", name="not_self"),)


class PlayerConnection(Base):
    """One open websocket (``connection``, of the process ``instance_id``) that said hello for
    a player: a player is online while they have one on a process that is seen in time."""

    __tablename__ = "player_connections"

    instance_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("server_instances.id", ondelete="CASCADE"), primary_key=True
    )
    connection: Mapped[str] = mapped_column(String(32), primary_key=True)
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), nullable=False, index=True
    )
    connected_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class RacePresence(Base):
    """Whether a racer or watcher of a room is there (docs/rules.md §4 "Presence").

    ``state``: ``connected`` (at least one open connection follows the room), ``reconnecting``
    (none since ``since``; the seat and game are kept for the grace period) or ``gone`` (left,
    or not back within the grace period, since ``since``). ``role``: ``racer`` (seated) or
    ``watcher``.
    """

    __tablename__ = "race_presence"

    race_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("races.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("players.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    role: Mapped[PresenceRole] = mapped_column(EnumText(PresenceRole, 8), nullable=False)
    state: Mapped[PresenceState] = mapped_column(EnumText(PresenceState, 12), nullable=False)
    since: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        CheckConstraint(one_of("role", PresenceRole), name="role"),
        CheckConstraint(one_of("state", PresenceState), name="state"),
        Index(
            "ix_race_presence_reconnecting_since",
            "since",
            postgresql_where=text(f"state = '{PresenceState.RECONNECTING.value}'"),
        ),
    )


DIFFICULTY_LEVELS = ("easy", "medium", "hard", "expert")
_DIFFICULTY_COLUMNS = (
    "greedy_status",
    "greedy_score",
    "random_playouts",
    "random_wins",
    "random_median_score",
)


class DailyChallenge(Base):
    """The deal of one UTC date: its game code and rule set, and (migration 0012) the level it
    was chosen for with the baselines of the difficulty measure (docs/rules.md §4
    "Difficulty"): all null for a date chosen without the solver or before the levels, else
    all set."""

    __tablename__ = "daily_challenges"

    date: Mapped[dt.date] = mapped_column(Date, primary_key=True)
    code: Mapped[str] = mapped_column(String(CODE_MAX), nullable=False)
    rules: Mapped[str] = mapped_column(String(1), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    level: Mapped[str | None] = mapped_column(String(8), nullable=True)
    #: How the greedy game ended (won or blocked) and its final score.
    greedy_status: Mapped[str | None] = mapped_column(String(8), nullable=True)
    greedy_score: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: The random playouts played, how many were won, their median final score (lower median).
    random_playouts: Mapped[int | None] = mapped_column(Integer, nullable=True)
    random_wins: Mapped[int | None] = mapped_column(Integer, nullable=True)
    random_median_score: Mapped[int | None] = mapped_column(Integer, nullable=True)

    __table_args__ = (
        CheckConstraint("rules IN ('E', 'C')", name="rules"),
        CheckConstraint(
            f"level IN ({', '.join(repr(level) for level in DIFFICULTY_LEVELS)})", name="level"
        ),
        CheckConstraint("greedy_status IN ('won', 'blocked')", name="greedy_status"),
        CheckConstraint(
            "random_playouts > 0 AND random_wins BETWEEN 0 AND random_playouts", name="random"
        ),
        CheckConstraint(
            " AND ".join(f"(level IS NULL) = ({c} IS NULL)" for c in _DIFFICULTY_COLUMNS),
            name="difficulty_whole",
        ),
    )


class ModerationAction(Base):
    """One moderator's action, kept for ever (the audit trail of ``tripeaks admin``).

    ``action``: ``ban`` / ``unban`` (``player_id``), ``hide`` / ``restore`` (``game_id``, with
    its player and date). ``at`` is the database's clock. ``details`` holds what the action
    changed (the games a ban hid, an unban restored). The targets are ids, not foreign keys, so
    that the trail outlives anything it names.
    """

    __tablename__ = "moderation_actions"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), nullable=False, server_default=func.now()
    )
    moderator: Mapped[str] = mapped_column(Text, nullable=False)
    action: Mapped[str] = mapped_column(String(8), nullable=False)
    player_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    game_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    daily_date: Mapped[dt.date | None] = mapped_column(Date, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    details: Mapped[Any | None] = mapped_column(JSONB, nullable=True)

    __table_args__ = (
        CheckConstraint("action IN ('ban', 'unban', 'hide', 'restore')", name="action"),
        CheckConstraint("length(btrim(moderator)) BETWEEN 1 AND 100", name="moderator"),
        CheckConstraint(
            "player_id IS NOT NULL AND (action IN ('ban', 'unban') OR game_id IS NOT NULL)",
            name="target",
        ),
        CheckConstraint(
            "action NOT IN ('ban', 'hide') OR coalesce(length(btrim(reason)), 0) > 0", name="reason"
        ),
    )


__all__ = [
    "ACTION_KINDS",
    "BOARD_WHERE",
    "CODE_MAX",
    "DEAL_VERSIONS",
    "DIFFICULTY_LEVELS",
    "GAME_MODES",
    "GAME_STATUSES",
    "MODERATION_ACTIONS",
    "OPEN_RACE_STATUSES",
    "Base",
    "DailyChallenge",
    "EnumText",
    "Follow",
    "Game",
    "GameAction",
    "LadderCount",
    "LeaderboardCount",
    "ModerationAction",
    "PeriodCount",
    "PeriodTotal",
    "Player",
    "PlayerConnection",
    "PlayerRating",
    "PresenceRole",
    "PresenceState",
    "QueuedPlayer",
    "Race",
    "RaceConnection",
    "RacePlayer",
    "RacePresence",
    "RaceStatus",
    "RatingChange",
    "ServerInstance",
]
