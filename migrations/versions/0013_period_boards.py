"""period_totals and period_counts: weekly and monthly boards kept by triggers on games

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 02:30:00.000000

A weekly (ISO week, Monday to Sunday) or monthly (calendar month) board ranks players by the sum
of their daily scores in the period (docs/rules.md §4 "Weekly and monthly boards"). Its entries
are ``period_totals``: one row per period and player with the sum of the scores, the number of
days and the sum of the elapsed ms of the player's ranked daily results in the period (the rows
of the daily boards: ``mode = 'daily'``, won or blocked, not hidden). Its ranks come from
``period_counts``: entries per period and total; per total and days; per total, days and whole
elapsed second, as ``leaderboard_counts`` does for a date. Statement-level triggers on ``games``
keep both in step with every writer (COPY included; TRUNCATE empties them), so that a hidden or
restored result, a ban or an unban moves the period boards as it moves the daily ones.

A player's totals row is upserted first (in key order), and its new values less the statement's
change give its old ones: the old entry is counted out and the new one in, so concurrent
finishes of one player (or of many) are counted exactly. A row whose days come down to 0 stays,
off the board (the board index's WHERE is ``days > 0``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BOARD_WHERE = "mode = 'daily' AND status IN ('won', 'blocked') AND hidden_at IS NULL"

# Adds signed changes (one element per ranked game entering or leaving a board) to the totals of
# the week and the month of each game's date, then counts the old entries out and the new ones in.
# Keys are written in primary-key order so that concurrent statements lock shared rows in one
# order. PL/pgSQL rather than SQL so that the session keeps the statement's plan.
ADD_FUNCTION = """
CREATE FUNCTION period_totals_add(
    changed_dates date[],
    changed_players bigint[],
    changed_scores integer[],
    changed_elapsed_ms bigint[],
    changed_deltas integer[]
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH changed AS (
        SELECT p.kind, p.starts_on, d.player_id,
               CAST(sum(d.delta * d.score) AS bigint) AS total,
               CAST(sum(d.delta) AS integer) AS days,
               CAST(sum(d.delta * d.elapsed_ms) AS bigint) AS elapsed_ms
          FROM unnest(changed_dates, changed_players, changed_scores, changed_elapsed_ms,
                      changed_deltas)
               AS d(daily_date, player_id, score, elapsed_ms, delta)
         CROSS JOIN LATERAL (
               VALUES ('week',
                       d.daily_date - (CAST(extract(isodow FROM d.daily_date) AS integer) - 1)),
                      ('month',
                       d.daily_date - (CAST(extract(day FROM d.daily_date) AS integer) - 1))
               ) AS p(kind, starts_on)
         GROUP BY p.kind, p.starts_on, d.player_id
    ), moved AS (
        INSERT INTO period_totals AS t (kind, starts_on, player_id, total, days, elapsed_ms)
        SELECT kind, starts_on, player_id, total, days, elapsed_ms
          FROM changed
         WHERE total <> 0 OR days <> 0 OR elapsed_ms <> 0
         ORDER BY kind, starts_on, player_id
            ON CONFLICT (kind, starts_on, player_id) DO UPDATE
           SET total = t.total + EXCLUDED.total,
               days = t.days + EXCLUDED.days,
               elapsed_ms = t.elapsed_ms + EXCLUDED.elapsed_ms
        RETURNING kind, starts_on, player_id, total, days, elapsed_ms
    ), entries AS (
        SELECT m.kind, m.starts_on, m.total - c.total AS total, m.days - c.days AS days,
               m.elapsed_ms - c.elapsed_ms AS elapsed_ms, -1 AS delta
          FROM moved AS m
          JOIN changed AS c USING (kind, starts_on, player_id)
         WHERE m.days - c.days > 0
        UNION ALL
        SELECT kind, starts_on, total, days, elapsed_ms, 1
          FROM moved
         WHERE days > 0
    )
    INSERT INTO period_counts AS c (kind, starts_on, level, total, days, elapsed_s, entries)
    SELECT levels.kind, levels.starts_on, levels.level, levels.total, levels.days,
           levels.elapsed_s, levels.entries
      FROM (
            SELECT e.kind, e.starts_on,
                   CAST(2 - GROUPING(e.days) - GROUPING(e.elapsed_s) AS smallint) AS level,
                   e.total,
                   coalesce(e.days, 0) AS days,
                   coalesce(e.elapsed_s, 0) AS elapsed_s,
                   sum(e.delta) AS entries
              FROM (SELECT kind, starts_on, total, days, elapsed_ms / 1000 AS elapsed_s, delta
                      FROM entries) AS e
             GROUP BY GROUPING SETS (
                   (e.kind, e.starts_on, e.total),
                   (e.kind, e.starts_on, e.total, e.days),
                   (e.kind, e.starts_on, e.total, e.days, e.elapsed_s)
             )
           ) AS levels
     WHERE levels.entries <> 0
     ORDER BY levels.kind, levels.starts_on, levels.level, levels.total, levels.days,
              levels.elapsed_s
        ON CONFLICT (kind, starts_on, level, total, days, elapsed_s)
        DO UPDATE SET entries = c.entries + EXCLUDED.entries;
END
$$
"""

# The trigger function of INSERT, UPDATE and DELETE statements on games: old ranked rows leave
# their periods' totals, new ranked rows enter them. Statements that touch no ranked row (every
# action of a game still being played) stop after the two filtered scans of the transition tables.
TRIGGER_FUNCTION = f"""
CREATE FUNCTION games_period_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM period_totals_add(
                    array_agg(daily_date), array_agg(player_id), array_agg(score),
                    array_agg(elapsed_ms), array_agg(1))
           FROM new_games
          WHERE {BOARD_WHERE}
         HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM period_totals_add(
                    array_agg(daily_date), array_agg(player_id), array_agg(score),
                    array_agg(elapsed_ms), array_agg(-1))
           FROM old_games
          WHERE {BOARD_WHERE}
         HAVING count(*) > 0;
    ELSE
        PERFORM period_totals_add(
                    array_agg(daily_date), array_agg(player_id), array_agg(score),
                    array_agg(elapsed_ms), array_agg(delta))
           FROM (SELECT daily_date, player_id, score, elapsed_ms, -1 AS delta
                   FROM old_games
                  WHERE {BOARD_WHERE}
                 UNION ALL
                 SELECT daily_date, player_id, score, elapsed_ms, 1 AS delta
                   FROM new_games
                  WHERE {BOARD_WHERE}) AS changed
         HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END
$$
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION games_period_totals_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM period_counts;
    DELETE FROM period_totals;
    RETURN NULL;
END
$$
"""

TRIGGERS = (
    "CREATE TRIGGER games_period_totals_insert AFTER INSERT ON games "
    "REFERENCING NEW TABLE AS new_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_period_totals()",
    "CREATE TRIGGER games_period_totals_update AFTER UPDATE ON games "
    "REFERENCING OLD TABLE AS old_games NEW TABLE AS new_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_period_totals()",
    "CREATE TRIGGER games_period_totals_delete AFTER DELETE ON games "
    "REFERENCING OLD TABLE AS old_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_period_totals()",
    "CREATE TRIGGER games_period_totals_truncate AFTER TRUNCATE ON games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_period_totals_truncate()",
)

# Every ranked game counted as one statement inserting them all would count it.
BACKFILL = f"""
SELECT period_totals_add(
           array_agg(daily_date), array_agg(player_id), array_agg(score),
           array_agg(elapsed_ms), array_agg(1))
  FROM games
 WHERE {BOARD_WHERE}
HAVING count(*) > 0
"""


def upgrade() -> None:
    # No writer may slip between the backfill and the triggers.
    op.execute("LOCK TABLE games IN SHARE ROW EXCLUSIVE MODE")
    op.create_table(
        "period_totals",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("starts_on", sa.Date(), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("days", sa.Integer(), nullable=False),
        sa.Column("elapsed_ms", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("kind IN ('week', 'month')", name=op.f("ck_period_totals_kind")),
        sa.PrimaryKeyConstraint("kind", "starts_on", "player_id", name=op.f("pk_period_totals")),
    )
    op.create_index(
        "ix_period_totals_board",
        "period_totals",
        [
            "kind",
            "starts_on",
            sa.literal_column("(-total)"),
            sa.literal_column("(-days)"),
            "elapsed_ms",
            "player_id",
        ],
        unique=False,
        postgresql_where=sa.text("days > 0"),
    )
    op.create_table(
        "period_counts",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("starts_on", sa.Date(), nullable=False),
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("total", sa.BigInteger(), nullable=False),
        sa.Column("days", sa.Integer(), nullable=False),
        sa.Column("elapsed_s", sa.BigInteger(), nullable=False),
        sa.Column("entries", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("kind IN ('week', 'month')", name=op.f("ck_period_counts_kind")),
        sa.CheckConstraint("level IN (0, 1, 2)", name=op.f("ck_period_counts_level")),
        sa.PrimaryKeyConstraint(
            "kind",
            "starts_on",
            "level",
            "total",
            "days",
            "elapsed_s",
            name=op.f("pk_period_counts"),
        ),
    )
    op.execute(ADD_FUNCTION)
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRUNCATE_FUNCTION)
    for trigger in TRIGGERS:
        op.execute(trigger)
    op.execute(BACKFILL)


def downgrade() -> None:
    for name in ("insert", "update", "delete", "truncate"):
        op.execute(f"DROP TRIGGER games_period_totals_{name} ON games")
    op.execute("DROP FUNCTION games_period_totals_truncate()")
    op.execute("DROP FUNCTION games_period_totals()")
    op.execute("DROP FUNCTION period_totals_add(date[], bigint[], integer[], bigint[], integer[])")
    op.drop_table("period_counts")
    op.drop_index(
        "ix_period_totals_board", table_name="period_totals", postgresql_where=sa.text("days > 0")
    )
    op.drop_table("period_totals")
