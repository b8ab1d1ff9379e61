"""follows: players following players; player_connections: who is online

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 06:00:00.000000

``follows`` holds who follows whom (docs/rules.md §4 "Following"): one row per pair, made
when it was followed; both players' rows delete it, and nobody follows themself.

``player_connections`` holds every open websocket that said hello, under its server process
(as ``race_connections`` does for the rooms), so that any process can tell who is online; a
process taken for dead takes its rows with it.

Downgrading drops both tables (who followed whom is lost).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "follows",
        sa.Column("follower_id", sa.BigInteger(), nullable=False),
        sa.Column("followed_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("follower_id <> followed_id", name=op.f("ck_follows_not_self")),
        sa.ForeignKeyConstraint(
            ["follower_id"],
            ["players.id"],
            name=op.f("fk_follows_follower_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["followed_id"],
            ["players.id"],
            name=op.f("fk_follows_followed_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("follower_id", "followed_id", name=op.f("pk_follows")),
    )
    op.create_index(op.f("ix_follows_followed_id"), "follows", ["followed_id"], unique=False)
    op.create_table(
        "player_connections",
        sa.Column("instance_id", sa.String(length=32), nullable=False),
        sa.Column("connection", sa.String(length=32), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("connected_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["instance_id"],
            ["server_instances.id"],
            name=op.f("fk_player_connections_instance_id_server_instances"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_player_connections_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("instance_id", "connection", name=op.f("pk_player_connections")),
    )
    op.create_index(
        op.f("ix_player_connections_player_id"), "player_connections", ["player_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_player_connections_player_id"), table_name="player_connections")
    op.drop_table("player_connections")
    op.drop_index(op.f("ix_follows_followed_id"), table_name="follows")
    op.drop_table("follows")
