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

Banned players are left off the ladder: ``ix_players_banned`` (a partial index of the banned
players' ids) lets a rank subtract the few banned players ahead without reading every player.

Downgrading drops both indexes and the column (ratings themselves are kept).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RATING = "round((mu - 3 * sigma) * 40)::integer"


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
    op.create_index(
        "ix_players_banned",
        "players",
        ["id"],
        unique=False,
        postgresql_where=sa.text("banned_at IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_players_banned", table_name="players")
    op.drop_index("ix_player_ratings_ladder", table_name="player_ratings")
    op.drop_column("player_ratings", "rating")
