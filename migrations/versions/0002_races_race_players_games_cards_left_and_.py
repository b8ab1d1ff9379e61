"""races, race players, games.cards_left and games.race_id

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 13:44:59.115779
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "races",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("invite", sa.String(length=8), nullable=False),
        sa.Column("host_id", sa.BigInteger(), nullable=False),
        sa.Column("code", sa.String(length=13), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("time_limit_s", sa.Integer(), nullable=False),
        sa.Column("max_players", sa.SmallInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("results", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_races_rules")),
        sa.CheckConstraint(
            "status IN ('lobby', 'running', 'finished', 'closed')", name=op.f("ck_races_status")
        ),
        sa.CheckConstraint("time_limit_s > 0 AND max_players > 0", name=op.f("ck_races_limits")),
        sa.ForeignKeyConstraint(
            ["host_id"], ["players.id"], name=op.f("fk_races_host_id_players"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_races")),
        sa.UniqueConstraint("invite", name=op.f("uq_races_invite")),
    )
    op.create_index(
        "ix_races_lobby_created_at",
        "races",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("status = 'lobby'"),
    )
    op.create_index(
        "ix_races_running_ends_at",
        "races",
        ["ends_at"],
        unique=False,
        postgresql_where=sa.text("status = 'running'"),
    )
    op.create_table(
        "race_players",
        sa.Column("race_id", sa.BigInteger(), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("seat", sa.SmallInteger(), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("game_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["game_id"],
            ["games.id"],
            name=op.f("fk_race_players_game_id_games"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_race_players_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["race_id"],
            ["races.id"],
            name=op.f("fk_race_players_race_id_races"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("race_id", "player_id", name=op.f("pk_race_players")),
    )
    op.create_index(op.f("ix_race_players_player_id"), "race_players", ["player_id"], unique=False)
    op.add_column(
        "games", sa.Column("cards_left", sa.SmallInteger(), server_default="28", nullable=False)
    )
    op.add_column("games", sa.Column("race_id", sa.BigInteger(), nullable=True))
    op.create_index(op.f("ix_games_race_id"), "games", ["race_id"], unique=False)
    op.create_foreign_key(
        op.f("fk_games_race_id_races"), "games", "races", ["race_id"], ["id"], ondelete="CASCADE"
    )
    op.create_check_constraint(
        op.f("ck_games_race_id"), "games", "(mode = 'race') = (race_id IS NOT NULL)"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_games_race_id"), "games", type_="check")
    op.drop_constraint(op.f("fk_games_race_id_races"), "games", type_="foreignkey")
    op.drop_index(op.f("ix_games_race_id"), table_name="games")
    op.drop_column("games", "race_id")
    op.drop_column("games", "cards_left")
    op.drop_index(op.f("ix_race_players_player_id"), table_name="race_players")
    op.drop_table("race_players")
    op.drop_index(
        "ix_races_running_ends_at",
        table_name="races",
        postgresql_where=sa.text("status = 'running'"),
    )
    op.drop_index(
        "ix_races_lobby_created_at",
        table_name="races",
        postgresql_where=sa.text("status = 'lobby'"),
    )
    op.drop_table("races")
