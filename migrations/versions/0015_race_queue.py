"""race_queue: players waiting for a quick race

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 04:00:00.000000

One row per waiting player (a player waits once, under one rule set): their rating under it
when they asked (the rating shown, for matching), since when they wait (UTC), and the websocket
that asked (``instance_id``, ``connection``). The row goes when they are matched (in the
transaction that opens their race), cancel, or that websocket closes; and with their server
process's record when the process is taken for dead (``ON DELETE CASCADE``), so a dead
process's players never stay waiting. Matchers take rows under an advisory lock per rule set,
``FOR UPDATE SKIP LOCKED``.

Downgrading drops the table (whoever waits stops waiting).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "race_queue",
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("connection", sa.String(length=32), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_race_queue_rules")),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_race_queue_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["server_instances.id"],
            name=op.f("fk_race_queue_instance_id_server_instances"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_race_queue")),
    )
    op.create_index(
        "ix_race_queue_rules_joined_at", "race_queue", ["rules", "joined_at"], unique=False
    )
    op.create_index(
        "ix_race_queue_instance_connection",
        "race_queue",
        ["instance_id", "connection"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_race_queue_instance_connection", table_name="race_queue")
    op.drop_index("ix_race_queue_rules_joined_at", table_name="race_queue")
    op.drop_table("race_queue")
