"""race presence: server_instances, race_connections, race_presence

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 17:40:00.000000

Who is in a race room, as everyone in it sees it (docs/rules.md §4 "Presence"). Each server
process registers itself in ``server_instances`` and refreshes ``seen_at``; each open websocket
that follows a room is a ``race_connections`` row of its process; ``race_presence`` holds each
racer's and watcher's state (connected, reconnecting or gone) and since when.

Racers of rooms open before this revision have no connection on record: they start as
``reconnecting`` (since the upgrade), so they are back as ``connected`` with their next
connection, or ``gone`` after the grace period, like anyone who lost theirs.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "server_instances",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "seen_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_server_instances")),
    )
    op.create_table(
        "race_connections",
        sa.Column("race_id", sa.BigInteger(), nullable=False),
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("connection", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("connected_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["race_id"],
            ["races.id"],
            name=op.f("fk_race_connections_race_id_races"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["server_instances.id"],
            name=op.f("fk_race_connections_instance_id_server_instances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_race_connections_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "race_id", "instance_id", "connection", name=op.f("pk_race_connections")
        ),
    )
    op.create_index(
        "ix_race_connections_race_id_player_id", "race_connections", ["race_id", "player_id"]
    )
    op.create_index("ix_race_connections_instance_id", "race_connections", ["instance_id"])
    op.create_table(
        "race_presence",
        sa.Column("race_id", sa.BigInteger(), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(length=8), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("role IN ('racer', 'watcher')", name=op.f("ck_race_presence_role")),
        sa.CheckConstraint(
            "state IN ('connected', 'reconnecting', 'gone')", name=op.f("ck_race_presence_state")
        ),
        sa.ForeignKeyConstraint(
            ["race_id"],
            ["races.id"],
            name=op.f("fk_race_presence_race_id_races"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_race_presence_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("race_id", "player_id", name=op.f("pk_race_presence")),
    )
    op.create_index("ix_race_presence_player_id", "race_presence", ["player_id"])
    op.create_index(
        "ix_race_presence_reconnecting_since",
        "race_presence",
        ["since"],
        postgresql_where=sa.text("state = 'reconnecting'"),
    )
    op.execute(
        """
        INSERT INTO race_presence (race_id, player_id, role, state, since)
        SELECT rp.race_id, rp.player_id, 'racer', 'reconnecting', now()
        FROM race_players AS rp JOIN races AS r ON r.id = rp.race_id
        WHERE r.status IN ('lobby', 'running')
        """
    )


def downgrade() -> None:
    op.drop_table("race_presence")
    op.drop_table("race_connections")
    op.drop_table("server_instances")
