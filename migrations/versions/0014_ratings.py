"""races.rated; player_ratings and rating_changes: the multiplayer rating

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 03:30:00.000000

``races.rated`` marks a race whose results move its racers' ratings (docs/rules.md §4
"Ratings"); a race on a host's deal never is (a check constraint says so). Existing races are
not rated.

``player_ratings`` holds a player's rating under a rule set: the OpenSkill Plackett–Luce
``mu`` and ``sigma``, the rated races played and won, and when the last one ended (UTC).
``rating_changes`` holds one row per racer of each rated race: the rating before and after and
the racer's rank, so that a profile can draw its history and a race show each racer's change.
A ban deletes neither.

Downgrading drops both tables (every rating is lost) and the column.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "races", sa.Column("rated", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.create_check_constraint(
        op.f("ck_races_rated_random_deal"), "races", "NOT (rated AND host_deal)"
    )
    op.create_table(
        "player_ratings",
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("races", sa.Integer(), nullable=False),
        sa.Column("wins", sa.Integer(), nullable=False),
        sa.Column("rated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_player_ratings_rules")),
        sa.CheckConstraint(
            "sigma > 0 AND races >= 0 AND wins >= 0 AND wins <= races",
            name=op.f("ck_player_ratings_counts"),
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_player_ratings_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("player_id", "rules", name=op.f("pk_player_ratings")),
    )
    op.create_table(
        "rating_changes",
        sa.Column("race_id", sa.BigInteger(), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("rank", sa.SmallInteger(), nullable=False),
        sa.Column("racers", sa.SmallInteger(), nullable=False),
        sa.Column("mu_before", sa.Float(), nullable=False),
        sa.Column("sigma_before", sa.Float(), nullable=False),
        sa.Column("mu_after", sa.Float(), nullable=False),
        sa.Column("sigma_after", sa.Float(), nullable=False),
        sa.Column("rated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_rating_changes_rules")),
        sa.ForeignKeyConstraint(
            ["race_id"],
            ["races.id"],
            name=op.f("fk_rating_changes_race_id_races"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_rating_changes_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("race_id", "player_id", name=op.f("pk_rating_changes")),
    )
    op.create_index(
        "ix_rating_changes_player_rules_rated_at",
        "rating_changes",
        ["player_id", "rules", "rated_at", "race_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_rating_changes_player_rules_rated_at", table_name="rating_changes")
    op.drop_table("rating_changes")
    op.drop_table("player_ratings")
    op.drop_constraint(op.f("ck_races_rated_random_deal"), "races", type_="check")
    op.drop_column("races", "rated")
