"""player_ratings.rating and the ladder's index; banned players indexed

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 05:30:00.000000

The ladder ranks the players of a rule set by their shown rating (docs/rules.md §4 "Ladder").
``player_ratings.rating`` is that rating, generated from ``mu`` and ``sigma`` as the rules
define it (the ordinal ``mu - 3 sigma`` times 40, rounded), so that the
ladder's order is an index: ``ix_player_ratings_ladder`` holds each rule set's ratings in ladder
order (rating descending, rated races descending, player id), for keyset pages (one row
comparison is one index range) and for counting the entries ahead of a rating (one range).

``ladder_counts`` holds the ratings of each rule set counted by shown rating, kept by row
triggers on ``player_ratings`` (an insert counts the row in, a delete out, a change of rating
moves it; TRUNCATE empties it): a rank sums the counts of the ratings above, a few thousand rows
at most, whatever the ladder's size. The writers of ratings (a rated race's transaction) take a
transaction-level advisory lock of the rule set first (``server.storage.ratings.LADDER_LOCK``),
so two of them never lock count rows in opposite orders.

Banned players are left off the ladder but stay counted: ``ix_players_banned`` (a partial index
of the banned players' ids) lets a rank subtract the few banned players ahead.

Downgrading drops the counts, their triggers, both indexes and the column (ratings themselves
are kept).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RATING = "round((mu - 3 * sigma) * 40)::integer"

COUNT_FUNCTION = """
CREATE FUNCTION player_ratings_ladder_counts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE ladder_counts SET entries = entries - 1
         WHERE rules = OLD.rules AND rating = OLD.rating;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO ladder_counts AS c (rules, rating, entries) VALUES (NEW.rules, NEW.rating, 1)
        ON CONFLICT (rules, rating) DO UPDATE SET entries = c.entries + 1;
    END IF;
    RETURN NULL;
END
$$
"""
TRUNCATE_FUNCTION = """
CREATE FUNCTION player_ratings_ladder_counts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ladder_counts;
    RETURN NULL;
END
$$
"""
TRIGGERS = (
    "CREATE TRIGGER player_ratings_ladder_counts AFTER INSERT OR DELETE ON player_ratings "
    "FOR EACH ROW EXECUTE FUNCTION player_ratings_ladder_counts()",
    "CREATE TRIGGER player_ratings_ladder_counts_update AFTER UPDATE ON player_ratings "
    "FOR EACH ROW WHEN (OLD.rating IS DISTINCT FROM NEW.rating OR OLD.rules IS DISTINCT FROM "
    "NEW.rules) EXECUTE FUNCTION player_ratings_ladder_counts()",
    "CREATE TRIGGER player_ratings_ladder_counts_truncate AFTER TRUNCATE ON player_ratings "
    "FOR EACH STATEMENT EXECUTE FUNCTION player_ratings_ladder_counts_truncate()",
)


def upgrade() -> None:
    op.add_column(
        "player_ratings",
        sa.Column("rating", sa.Integer(), sa.Computed(RATING, persisted=True), nullable=False),
    )
    op.create_index(
        "ix_player_ratings_ladder",
        "player_ratings",
        ["rules", sa.text("rating DESC"), sa.text("races DESC"), "player_id"],
        unique=False,
    )
    op.create_table(
        "ladder_counts",
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("entries", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("entries >= 0", name=op.f("ck_ladder_counts_entries")),
        sa.PrimaryKeyConstraint("rules", "rating", name=op.f("pk_ladder_counts")),
    )
    op.execute(
        "INSERT INTO ladder_counts (rules, rating, entries) "
        "SELECT rules, rating, count(*) FROM player_ratings GROUP BY rules, rating"
    )
    op.execute(COUNT_FUNCTION)
    op.execute(TRUNCATE_FUNCTION)
    for trigger in TRIGGERS:
        op.execute(trigger)
    op.create_index(
        "ix_players_banned",
        "players",
        ["id"],
        unique=False,
        postgresql_where=sa.text("banned_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_players_banned", table_name="players")
    for name in ("ladder_counts", "ladder_counts_update", "ladder_counts_truncate"):
        op.execute(f"DROP TRIGGER player_ratings_{name} ON player_ratings")
    op.execute("DROP FUNCTION player_ratings_ladder_counts_truncate()")
    op.execute("DROP FUNCTION player_ratings_ladder_counts()")
    op.drop_table("ladder_counts")
    op.drop_index("ix_player_ratings_ladder", table_name="player_ratings")
    op.drop_column("player_ratings", "rating")
