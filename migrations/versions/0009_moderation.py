"""moderation: audited bans and hidden results; players.address_hash

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 10:00:00.000000

``moderation_actions`` is the audit trail of ``tripeaks admin``: who (``moderator``), when
(``at``, the database's clock), what (``action``: ban, unban, hide, restore), on whom or what
(``player_id``, ``game_id``, ``daily_date``) and why (``reason``). Rows are only ever added.

A banned player has ``banned_at``, ``ban_reason`` and ``ban_action_id`` (the ban's audit row). A
hidden game keeps its row, with ``hidden_at`` and ``hidden_by`` (the audit row that hid it: a
ban or a hide), so that an unban restores exactly what its ban hid and nothing a moderator hid
on its own. A daily game inserted for a banned player (a join that crossed the ban) is hidden by
that player's ban as it is inserted (``games_hide_banned``); the trigger reads the player's row
``FOR SHARE``, so it waits for a ban being made and the ban's own update of the player's games
waits for it.

A hidden game leaves every board and counter: the leaderboard counters of 0004 and the daily
player counts of 0005 now count only rows with ``hidden_at IS NULL`` (hiding and restoring are
updates that leave and re-enter the board, each counted by the triggers), and the board's
partial index ``ix_games_daily_board`` gains ``AND hidden_at IS NULL`` in its WHERE. The new
index is built with ``CREATE INDEX CONCURRENTLY`` under a temporary name, then the old one is
dropped concurrently and the new one renamed, so no writer is held up while it builds; the
columns' constraints are added ``NOT VALID`` and validated without blocking writes. Each step of
that part checks what is already there, so a run interrupted in it can simply be run again.

``players.address_hash`` is a keyed hash of the address a player registered from (never the
address), for spotting many accounts from one address.

Downgrading restores every hidden result (counted back by the triggers) before the columns go.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_BOARD_WHERE = "mode = 'daily' AND status IN ('won', 'blocked')"
BOARD_WHERE = "mode = 'daily' AND status IN ('won', 'blocked') AND hidden_at IS NULL"
BOARD_COLUMNS = "daily_date, (- score), moves, elapsed_ms, finished_at, player_id"
NEW_INDEX = "ix_games_daily_board_visible"

# The trigger function of 0004 with the board's new condition: a row that is hidden or restored
# leaves or enters the counts like a result that ends or is deleted.
LEADERBOARD_FUNCTION = """
CREATE OR REPLACE FUNCTION games_leaderboard_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(1))
           FROM new_games
          WHERE {where}
         HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(-1))
           FROM old_games
          WHERE {where}
         HAVING count(*) > 0;
    ELSE
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(delta))
           FROM (SELECT daily_date, score, moves, elapsed_ms, -1 AS delta
                   FROM old_games
                  WHERE {where}
                 UNION ALL
                 SELECT daily_date, score, moves, elapsed_ms, 1 AS delta
                   FROM new_games
                  WHERE {where}) AS changed
         HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END
$$
"""

# The trigger function of 0005, counting only games that are not hidden (``{visible}``).
DAILY_PLAYERS_FUNCTION = """
CREATE OR REPLACE FUNCTION games_daily_players() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO daily_players AS d (daily_date, players)
        SELECT daily_date, count(*) FROM new_games
         WHERE mode = 'daily'{visible} GROUP BY daily_date ORDER BY daily_date
            ON CONFLICT (daily_date) DO UPDATE SET players = d.players + EXCLUDED.players;
    ELSE
        UPDATE daily_players AS d SET players = d.players - gone.n
          FROM (SELECT daily_date, count(*) AS n FROM old_games
                 WHERE mode = 'daily'{visible} GROUP BY daily_date) AS gone
         WHERE d.daily_date = gone.daily_date;
    END IF;
    RETURN NULL;
END
$$
"""

# A daily game hidden or restored leaves or re-enters its date's player count. Row-level, and
# only for updates that set ``hidden_at`` (a column list cannot go with the transition tables of
# a statement-level trigger), so the actions of play, which never set it, do not fire it.
DAILY_PLAYERS_HIDDEN_FUNCTION = """
CREATE FUNCTION games_daily_players_hidden() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO daily_players AS d (daily_date, players)
    VALUES (NEW.daily_date, CASE WHEN NEW.hidden_at IS NULL THEN 1 ELSE -1 END)
        ON CONFLICT (daily_date) DO UPDATE SET players = d.players + EXCLUDED.players;
    RETURN NULL;
END
$$
"""

DAILY_PLAYERS_HIDDEN_TRIGGER = """
CREATE TRIGGER games_daily_players_hidden AFTER UPDATE OF hidden_at ON games
FOR EACH ROW WHEN (NEW.mode = 'daily' AND (OLD.hidden_at IS NULL) <> (NEW.hidden_at IS NULL))
EXECUTE FUNCTION games_daily_players_hidden()
"""

# A daily game stored for a banned player is hidden by the ban from the start. FOR SHARE: a ban
# being made (which updates the player's row first) is waited for, and a ban made after this
# row lock waits for this insert, then hides the game with the rest.
HIDE_BANNED_FUNCTION = """
CREATE FUNCTION games_hide_banned() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ban bigint;
BEGIN
    SELECT ban_action_id INTO ban FROM players WHERE id = NEW.player_id FOR SHARE;
    IF ban IS NOT NULL AND NEW.hidden_at IS NULL THEN
        NEW.hidden_at := statement_timestamp();
        NEW.hidden_by := ban;
    END IF;
    RETURN NEW;
END
$$
"""

HIDE_BANNED_TRIGGER = """
CREATE TRIGGER games_hide_banned BEFORE INSERT ON games
FOR EACH ROW WHEN (NEW.mode = 'daily') EXECUTE FUNCTION games_hide_banned()
"""


def _index_state(name: str) -> str | None:
    """``valid``, ``invalid`` (a concurrent build that failed) or None (no such index)."""
    valid = op.get_bind().scalar(
        sa.text(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = :name AND c.relnamespace = current_schema()::regnamespace"
        ),
        {"name": name},
    )
    return None if valid is None else ("valid" if valid else "invalid")


def _board_index_has_hidden() -> bool:
    definition = op.get_bind().scalar(
        sa.text(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
            "AND indexname = 'ix_games_daily_board'"
        )
    )
    return definition is not None and "hidden_at" in definition


def _schema_done() -> bool:
    return bool(
        op.get_bind().scalar(
            sa.text("SELECT to_regclass(current_schema() || '.moderation_actions') IS NOT NULL")
        )
    )


def _schema() -> None:
    """The transactional part: the audit table, the columns, the trigger functions."""
    op.create_table(
        "moderation_actions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("moderator", sa.Text(), nullable=False),
        sa.Column("action", sa.String(length=8), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=True),
        sa.Column("game_id", sa.BigInteger(), nullable=True),
        sa.Column("daily_date", sa.Date(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("details", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint(
            "action IN ('ban', 'unban', 'hide', 'restore')",
            name=op.f("ck_moderation_actions_action"),
        ),
        sa.CheckConstraint(
            "length(btrim(moderator)) BETWEEN 1 AND 100",
            name=op.f("ck_moderation_actions_moderator"),
        ),
        sa.CheckConstraint(
            "player_id IS NOT NULL AND (action IN ('ban', 'unban') OR game_id IS NOT NULL)",
            name=op.f("ck_moderation_actions_target"),
        ),
        sa.CheckConstraint(
            "action NOT IN ('ban', 'hide') OR coalesce(length(btrim(reason)), 0) > 0",
            name=op.f("ck_moderation_actions_reason"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_moderation_actions")),
    )
    op.create_index(
        op.f("ix_moderation_actions_player_id"), "moderation_actions", ["player_id"], unique=False
    )
    # Adding nullable columns rewrites nothing; the constraints are checked against the rows
    # already there later, without blocking writes (see _validate).
    op.add_column("players", sa.Column("address_hash", sa.LargeBinary(), nullable=True))
    op.add_column("players", sa.Column("banned_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("players", sa.Column("ban_reason", sa.Text(), nullable=True))
    op.add_column("players", sa.Column("ban_action_id", sa.BigInteger(), nullable=True))
    op.add_column("games", sa.Column("hidden_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("games", sa.Column("hidden_by", sa.BigInteger(), nullable=True))
    op.execute(
        "ALTER TABLE players ADD CONSTRAINT ck_players_ban CHECK ("
        "(banned_at IS NULL) = (ban_reason IS NULL) "
        "AND (banned_at IS NULL) = (ban_action_id IS NULL)) NOT VALID"
    )
    op.execute(
        "ALTER TABLE players ADD CONSTRAINT ck_players_address_hash CHECK ("
        "octet_length(address_hash) = 32) NOT VALID"
    )
    op.execute(
        "ALTER TABLE players ADD CONSTRAINT fk_players_ban_action_id_moderation_actions "
        "FOREIGN KEY (ban_action_id) REFERENCES moderation_actions (id) NOT VALID"
    )
    op.execute(
        "ALTER TABLE games ADD CONSTRAINT ck_games_hidden CHECK ("
        "(hidden_at IS NULL) = (hidden_by IS NULL)) NOT VALID"
    )
    op.execute(
        "ALTER TABLE games ADD CONSTRAINT fk_games_hidden_by_moderation_actions "
        "FOREIGN KEY (hidden_by) REFERENCES moderation_actions (id) NOT VALID"
    )
    # Nothing is hidden yet, so the counters stay as they are: only the condition changes.
    op.execute(LEADERBOARD_FUNCTION.format(where=BOARD_WHERE))
    op.execute(DAILY_PLAYERS_FUNCTION.format(visible=" AND hidden_at IS NULL"))
    op.execute(DAILY_PLAYERS_HIDDEN_FUNCTION)
    op.execute(DAILY_PLAYERS_HIDDEN_TRIGGER)
    op.execute(HIDE_BANNED_FUNCTION)
    op.execute(HIDE_BANNED_TRIGGER)


def _validate_and_index() -> None:
    """The part that must not hold up writers, one statement per transaction: each step checks
    what is there first, so that an interrupted run can be run again."""
    for table, constraint in (
        ("players", "ck_players_ban"),
        ("players", "ck_players_address_hash"),
        ("players", "fk_players_ban_action_id_moderation_actions"),
        ("games", "ck_games_hidden"),
        ("games", "fk_games_hidden_by_moderation_actions"),
    ):
        op.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {constraint}")
    if _board_index_has_hidden():
        return
    if _index_state(NEW_INDEX) == "invalid":
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEW_INDEX}")
    op.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NEW_INDEX} ON games ({BOARD_COLUMNS}) "
        f"WHERE {BOARD_WHERE}"
    )
    op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_games_daily_board")
    op.execute(f"ALTER INDEX {NEW_INDEX} RENAME TO ix_games_daily_board")


def upgrade() -> None:
    if not _schema_done():
        _schema()
    with op.get_context().autocommit_block():
        _validate_and_index()


def downgrade() -> None:
    # Every hidden result back on its board, counted back in by the triggers still in place.
    op.execute("UPDATE games SET hidden_at = NULL, hidden_by = NULL WHERE hidden_at IS NOT NULL")
    op.execute("DROP TRIGGER games_hide_banned ON games")
    op.execute("DROP FUNCTION games_hide_banned()")
    op.execute("DROP TRIGGER games_daily_players_hidden ON games")
    op.execute("DROP FUNCTION games_daily_players_hidden()")
    op.execute(DAILY_PLAYERS_FUNCTION.format(visible=""))
    op.execute(LEADERBOARD_FUNCTION.format(where=OLD_BOARD_WHERE))
    op.execute("DROP INDEX ix_games_daily_board")
    op.execute(
        f"CREATE INDEX ix_games_daily_board ON games ({BOARD_COLUMNS}) WHERE {OLD_BOARD_WHERE}"
    )
    op.execute("ALTER TABLE games DROP CONSTRAINT fk_games_hidden_by_moderation_actions")
    op.execute("ALTER TABLE games DROP CONSTRAINT ck_games_hidden")
    op.drop_column("games", "hidden_by")
    op.drop_column("games", "hidden_at")
    op.execute("ALTER TABLE players DROP CONSTRAINT fk_players_ban_action_id_moderation_actions")
    op.execute("ALTER TABLE players DROP CONSTRAINT ck_players_address_hash")
    op.execute("ALTER TABLE players DROP CONSTRAINT ck_players_ban")
    op.drop_column("players", "ban_action_id")
    op.drop_column("players", "ban_reason")
    op.drop_column("players", "banned_at")
    op.drop_column("players", "address_hash")
    op.drop_index(op.f("ix_moderation_actions_player_id"), table_name="moderation_actions")
    op.drop_table("moderation_actions")
