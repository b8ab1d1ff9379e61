"""leaderboard_counts kept by triggers on games; board index on -score; ck_games_result

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 17:05:12.418306

Ranks on a daily board come from ``leaderboard_counts`` (ranked entries per date and score, per
score and moves, per score, moves and elapsed second) instead of counting the board. Statement-
level triggers on ``games`` keep it in step with every writer, COPY included (TRUNCATE empties
it). The board index becomes ``(daily_date, (-score), moves, elapsed_ms, finished_at,
player_id)`` so that a keyset position is one row comparison, one index range.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BOARD_WHERE = "mode = 'daily' AND status IN ('won', 'blocked')"

# Adds signed entry deltas (one element per changed ranked game) to the three levels of
# leaderboard_counts. Keys are written in primary-key order so that concurrent statements lock
# shared rows in one order and cannot deadlock each other. Rows that come down to 0 stay.
# PL/pgSQL rather than SQL so that the session keeps the statement's plan.
ADD_FUNCTION = """
CREATE FUNCTION leaderboard_counts_add(
    changed_dates date[],
    changed_scores integer[],
    changed_moves integer[],
    changed_elapsed_ms bigint[],
    changed_deltas integer[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO leaderboard_counts AS c (daily_date, level, score, moves, elapsed_s, entries)
    SELECT levels.daily_date, levels.level, levels.score, levels.moves, levels.elapsed_s,
           levels.entries
      FROM (
            SELECT changed.daily_date,
                   CAST(2 - GROUPING(changed.moves) - GROUPING(changed.elapsed_s) AS smallint)
                       AS level,
                   changed.score,
                   coalesce(changed.moves, 0) AS moves,
                   coalesce(changed.elapsed_s, 0) AS elapsed_s,
                   sum(changed.delta) AS entries
              FROM (
                    SELECT d.daily_date, d.score, d.moves, d.elapsed_ms / 1000 AS elapsed_s,
                           d.delta
                      FROM unnest(changed_dates, changed_scores, changed_moves,
                                  changed_elapsed_ms, changed_deltas)
                           AS d(daily_date, score, moves, elapsed_ms, delta)
                   ) AS changed
             GROUP BY GROUPING SETS (
                   (changed.daily_date, changed.score),
                   (changed.daily_date, changed.score, changed.moves),
                   (changed.daily_date, changed.score, changed.moves, changed.elapsed_s)
             )
           ) AS levels
     WHERE levels.entries <> 0
     ORDER BY levels.daily_date, levels.level, levels.score, levels.moves, levels.elapsed_s
        ON CONFLICT (daily_date, level, score, moves, elapsed_s)
        DO UPDATE SET entries = c.entries + EXCLUDED.entries;
END
$$
"""

# The trigger function of INSERT, UPDATE and DELETE statements on games: old ranked rows count
# -1, new ranked rows +1. Statements that touch no ranked row (every action of a game still
# being played) stop after the two filtered scans of the transition tables.
TRIGGER_FUNCTION = f"""
CREATE FUNCTION games_leaderboard_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(1))
           FROM new_games
          WHERE {BOARD_WHERE}
         HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(-1))
           FROM old_games
          WHERE {BOARD_WHERE}
         HAVING count(*) > 0;
    ELSE
        PERFORM leaderboard_counts_add(
                    array_agg(daily_date), array_agg(score), array_agg(moves),
                    array_agg(elapsed_ms), array_agg(delta))
           FROM (SELECT daily_date, score, moves, elapsed_ms, -1 AS delta
                   FROM old_games
                  WHERE {BOARD_WHERE}
                 UNION ALL
                 SELECT daily_date, score, moves, elapsed_ms, 1 AS delta
                   FROM new_games
                  WHERE {BOARD_WHERE}) AS changed
         HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END
$$
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION games_leaderboard_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM leaderboard_counts;
    RETURN NULL;
END
$$
"""

TRIGGERS = (
    "CREATE TRIGGER games_leaderboard_counts_insert AFTER INSERT ON games "
    "REFERENCING NEW TABLE AS new_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_leaderboard_counts()",
    "CREATE TRIGGER games_leaderboard_counts_update AFTER UPDATE ON games "
    "REFERENCING OLD TABLE AS old_games NEW TABLE AS new_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_leaderboard_counts()",
    "CREATE TRIGGER games_leaderboard_counts_delete AFTER DELETE ON games "
    "REFERENCING OLD TABLE AS old_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_leaderboard_counts()",
    "CREATE TRIGGER games_leaderboard_counts_truncate AFTER TRUNCATE ON games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_leaderboard_counts_truncate()",
)

BACKFILL = f"""
INSERT INTO leaderboard_counts (daily_date, level, score, moves, elapsed_s, entries)
SELECT daily_date,
       CAST(2 - GROUPING(moves) - GROUPING(elapsed_s) AS smallint),
       score,
       coalesce(moves, 0),
       coalesce(elapsed_s, 0),
       count(*)
  FROM (SELECT daily_date, score, moves, elapsed_ms / 1000 AS elapsed_s
          FROM games
         WHERE {BOARD_WHERE}) AS ranked
 GROUP BY GROUPING SETS (
       (daily_date, score),
       (daily_date, score, moves),
       (daily_date, score, moves, elapsed_s)
 )
"""


def upgrade() -> None:
    # No writer may slip between the backfill and the triggers.
    op.execute("LOCK TABLE games IN SHARE ROW EXCLUSIVE MODE")
    op.create_check_constraint(
        op.f("ck_games_result"),
        "games",
        "status NOT IN ('won', 'blocked') "
        "OR (finished_at IS NOT NULL AND elapsed_ms IS NOT NULL AND elapsed_ms >= 0)",
    )
    op.create_table(
        "leaderboard_counts",
        sa.Column("daily_date", sa.Date(), nullable=False),
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("moves", sa.Integer(), nullable=False),
        sa.Column("elapsed_s", sa.BigInteger(), nullable=False),
        sa.Column("entries", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("level IN (0, 1, 2)", name=op.f("ck_leaderboard_counts_level")),
        sa.PrimaryKeyConstraint(
            "daily_date",
            "level",
            "score",
            "moves",
            "elapsed_s",
            name=op.f("pk_leaderboard_counts"),
        ),
    )
    op.execute(ADD_FUNCTION)
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRUNCATE_FUNCTION)
    for trigger in TRIGGERS:
        op.execute(trigger)
    op.execute(BACKFILL)
    op.drop_index("ix_games_daily_board", table_name="games", postgresql_where=sa.text(BOARD_WHERE))
    op.create_index(
        "ix_games_daily_board",
        "games",
        [
            "daily_date",
            sa.literal_column("(-score)"),
            "moves",
            "elapsed_ms",
            "finished_at",
            "player_id",
        ],
        unique=False,
        postgresql_where=sa.text(BOARD_WHERE),
    )


def downgrade() -> None:
    op.drop_index("ix_games_daily_board", table_name="games", postgresql_where=sa.text(BOARD_WHERE))
    op.create_index(
        "ix_games_daily_board",
        "games",
        [
            "daily_date",
            sa.literal_column("score DESC"),
            "moves",
            "elapsed_ms",
            "finished_at",
            "player_id",
        ],
        unique=False,
        postgresql_where=sa.text(BOARD_WHERE),
    )
    for name in ("insert", "update", "delete", "truncate"):
        op.execute(f"DROP TRIGGER games_leaderboard_counts_{name} ON games")
    op.execute("DROP FUNCTION games_leaderboard_counts_truncate()")
    op.execute("DROP FUNCTION games_leaderboard_counts()")
    op.execute(
        "DROP FUNCTION leaderboard_counts_add(date[], integer[], integer[], bigint[], integer[])"
    )
    op.drop_table("leaderboard_counts")
    op.drop_constraint(op.f("ck_games_result"), "games", type_="check")
