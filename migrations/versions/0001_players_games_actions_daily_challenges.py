"""players, games, actions, daily challenges

Revision ID: 0001
Revises:
Create Date: 2026-11-29 13:10:49.360887
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "daily_challenges",
        sa.Column("date", sa.Date(), nullable=False),
        sa.Column("code", sa.String(length=13), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_daily_challenges_rules")),
        sa.PrimaryKeyConstraint("date", name=op.f("pk_daily_challenges")),
    )
    op.create_table(
        "players",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.String(length=24), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_players")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_players_token_hash")),
    )
    op.create_index(
        "uq_players_name_lower", "players", [sa.literal_column("lower(name)")], unique=True
    )
    op.create_table(
        "games",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("code", sa.String(length=13), nullable=False),
        sa.Column("rules", sa.String(length=1), nullable=False),
        sa.Column("deal_version", sa.String(length=8), nullable=False),
        sa.Column("mode", sa.String(length=8), nullable=False),
        sa.Column("daily_date", sa.Date(), nullable=True),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("score", sa.Integer(), nullable=False),
        sa.Column("moves", sa.Integer(), nullable=False),
        sa.Column("undos", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("elapsed_ms", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(mode = 'daily') = (daily_date IS NOT NULL)", name=op.f("ck_games_daily_date")
        ),
        sa.CheckConstraint("mode IN ('free', 'daily', 'race')", name=op.f("ck_games_mode")),
        sa.CheckConstraint("rules IN ('E', 'C')", name=op.f("ck_games_rules")),
        sa.CheckConstraint(
            "status IN ('playing', 'won', 'blocked', 'resigned')", name=op.f("ck_games_status")
        ),
        sa.CheckConstraint(
            "score >= 0 AND moves >= 0 AND undos >= 0 AND seq >= 0", name=op.f("ck_games_counters")
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_games_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_games")),
    )
    op.create_index(
        "ix_games_daily_board",
        "games",
        [
            "daily_date",
            sa.literal_column("score DESC"),
            "moves",
            "elapsed_ms",
            "finished_at",
            "player_id",
        ],
        unique=False,
        postgresql_where=sa.text("mode = 'daily' AND status IN ('won', 'blocked')"),
    )
    op.create_index(op.f("ix_games_player_id"), "games", ["player_id"], unique=False)
    op.create_index(
        "uq_games_daily_player",
        "games",
        ["daily_date", "player_id"],
        unique=True,
        postgresql_where=sa.text("mode = 'daily'"),
    )
    op.create_table(
        "game_actions",
        sa.Column("game_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=6), nullable=False),
        sa.Column("pos", sa.SmallInteger(), nullable=True),
        sa.Column("card", sa.String(length=2), nullable=False),
        sa.Column("score_after", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('remove', 'draw', 'undo')", name=op.f("ck_game_actions_kind")),
        sa.CheckConstraint(
            "pos IS NULL OR (pos >= 0 AND pos < 28)", name=op.f("ck_game_actions_pos")
        ),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_game_actions_seq")),
        sa.ForeignKeyConstraint(
            ["game_id"],
            ["games.id"],
            name=op.f("fk_game_actions_game_id_games"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("game_id", "seq", name=op.f("pk_game_actions")),
    )


def downgrade() -> None:
    op.drop_table("game_actions")
    op.drop_index(
        "uq_games_daily_player", table_name="games", postgresql_where=sa.text("mode = 'daily'")
    )
    op.drop_index(op.f("ix_games_player_id"), table_name="games")
    op.drop_index(
        "ix_games_daily_board",
        table_name="games",
        postgresql_where=sa.text("mode = 'daily' AND status IN ('won', 'blocked')"),
    )
    op.drop_table("games")
    op.drop_index("uq_players_name_lower", table_name="players")
    op.drop_table("players")
    op.drop_table("daily_challenges")
