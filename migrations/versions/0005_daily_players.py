"""daily_players: daily games started per date, kept by triggers on games

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 18:25:00.000000

``GET /daily/{date}`` shows how many players started a date's daily and how many rank. The
ranked count comes from ``leaderboard_counts``; this table keeps the other one, so that neither
is a count of the date's games (one row per player: a million at a million players). A daily
game's ``mode`` and ``daily_date`` never change, so only inserts, deletes and TRUNCATE move it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Dates in key order, so that concurrent statements lock shared rows in one order.
TRIGGER_FUNCTION = """
CREATE FUNCTION games_daily_players() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO daily_players AS d (daily_date, players)
        SELECT daily_date, count(*) FROM new_games
         WHERE mode = 'daily' GROUP BY daily_date ORDER BY daily_date
            ON CONFLICT (daily_date) DO UPDATE SET players = d.players + EXCLUDED.players;
    ELSE
        UPDATE daily_players AS d SET players = d.players - gone.n
          FROM (SELECT daily_date, count(*) AS n FROM old_games
                 WHERE mode = 'daily' GROUP BY daily_date) AS gone
         WHERE d.daily_date = gone.daily_date;
    END IF;
    RETURN NULL;
END
$$
"""

TRUNCATE_FUNCTION = """
CREATE FUNCTION games_daily_players_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM daily_players;
    RETURN NULL;
END
$$
"""

TRIGGERS = (
    "CREATE TRIGGER games_daily_players_insert AFTER INSERT ON games "
    "REFERENCING NEW TABLE AS new_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_daily_players()",
    "CREATE TRIGGER games_daily_players_delete AFTER DELETE ON games "
    "REFERENCING OLD TABLE AS old_games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_daily_players()",
    "CREATE TRIGGER games_daily_players_truncate AFTER TRUNCATE ON games "
    "FOR EACH STATEMENT EXECUTE FUNCTION games_daily_players_truncate()",
)

BACKFILL = """
INSERT INTO daily_players (daily_date, players)
SELECT daily_date, count(*) FROM games WHERE mode = 'daily' GROUP BY daily_date
"""


def upgrade() -> None:
    # No writer may slip between the backfill and the triggers.
    op.execute("LOCK TABLE games IN SHARE ROW EXCLUSIVE MODE")
    op.create_table(
        "daily_players",
        sa.Column("daily_date", sa.Date(), nullable=False),
        sa.Column("players", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("daily_date", name=op.f("pk_daily_players")),
    )
    op.execute(TRIGGER_FUNCTION)
    op.execute(TRUNCATE_FUNCTION)
    for trigger in TRIGGERS:
        op.execute(trigger)
    op.execute(BACKFILL)


def downgrade() -> None:
    for name in ("insert", "delete", "truncate"):
        op.execute(f"DROP TRIGGER games_daily_players_{name} ON games")
    op.execute("DROP FUNCTION games_daily_players_truncate()")
    op.execute("DROP FUNCTION games_daily_players()")
    op.drop_table("daily_players")
