"""daily_challenges: the level a date's deal was chosen for, and its baselines

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 09:00:00.000000

A date's deal is now chosen for the level its weekday asks for (docs/rules.md §4 "Choosing"),
and its row keeps that level with the baselines of the difficulty measure (§4 "Difficulty"):
the greedy game's status and score, the random playouts' number, wins and median score. The
columns are all null or all set: dates stored before this revision keep their deal and have
none (nor does a date chosen without the solver).

Downgrading drops the columns (the deals stay).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    "greedy_status",
    "greedy_score",
    "random_playouts",
    "random_wins",
    "random_median_score",
)


def upgrade() -> None:
    op.add_column("daily_challenges", sa.Column("level", sa.String(length=8), nullable=True))
    op.add_column(
        "daily_challenges", sa.Column("greedy_status", sa.String(length=8), nullable=True)
    )
    for column in COLUMNS[1:]:
        op.add_column("daily_challenges", sa.Column(column, sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_daily_challenges_level"),
        "daily_challenges",
        "level IN ('easy', 'medium', 'hard', 'expert')",
    )
    op.create_check_constraint(
        op.f("ck_daily_challenges_greedy_status"),
        "daily_challenges",
        "greedy_status IN ('won', 'blocked')",
    )
    op.create_check_constraint(
        op.f("ck_daily_challenges_random"),
        "daily_challenges",
        "random_playouts > 0 AND random_wins BETWEEN 0 AND random_playouts",
    )
    op.create_check_constraint(
        op.f("ck_daily_challenges_difficulty_whole"),
        "daily_challenges",
        " AND ".join(f"(level IS NULL) = ({column} IS NULL)" for column in COLUMNS),
    )


def downgrade() -> None:
    for name in ("difficulty_whole", "random", "greedy_status", "level"):
        op.drop_constraint(op.f(f"ck_daily_challenges_{name}"), "daily_challenges", type_="check")
    for column in reversed(("level", *COLUMNS)):
        op.drop_column("daily_challenges", column)
