"""player_tokens: a bearer token per device; players.recovery_hash

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 10:00:00.000000

A player's bearer tokens move from ``players.token_hash`` (one per player) to
``player_tokens`` (one row per device signed in: the token's SHA-256, unique, when it was made
and when it was last used). Every player's existing token becomes their first row, made when
they registered, so every device signed in before keeps working.

``players.recovery_hash`` is the SHA-256 of the player's recovery code (docs/rules.md §4
"Players"); players registered before have none until they make one.

Downgrading puts one token back on each player: the one of theirs used (or made) last. Their
other devices are signed out, and a player with no token left (signed out everywhere) gets a
random hash that no token matches. The recovery codes are dropped.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "player_tokens",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("player_id", sa.BigInteger(), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "octet_length(token_hash) = 32", name=op.f("ck_player_tokens_token_hash")
        ),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_player_tokens_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_player_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_player_tokens_token_hash")),
    )
    op.create_index(
        op.f("ix_player_tokens_player_id"), "player_tokens", ["player_id"], unique=False
    )
    op.execute(
        "INSERT INTO player_tokens (player_id, token_hash, created_at) "
        "SELECT id, token_hash, created_at FROM players ORDER BY id"
    )
    op.drop_constraint(op.f("uq_players_token_hash"), "players", type_="unique")
    op.drop_column("players", "token_hash")
    op.add_column("players", sa.Column("recovery_hash", sa.LargeBinary(), nullable=True))
    op.create_check_constraint(
        op.f("ck_players_recovery_hash"), "players", "octet_length(recovery_hash) = 32"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_players_recovery_hash"), "players", type_="check")
    op.drop_column("players", "recovery_hash")
    op.add_column("players", sa.Column("token_hash", sa.LargeBinary(length=32), nullable=True))
    op.execute(
        """
        UPDATE players SET token_hash = latest.token_hash
        FROM (
            SELECT DISTINCT ON (player_id) player_id, token_hash
            FROM player_tokens
            ORDER BY player_id, coalesce(last_used_at, created_at) DESC, id DESC
        ) AS latest
        WHERE players.id = latest.player_id
        """
    )
    op.execute(
        "UPDATE players SET token_hash = sha256(convert_to(gen_random_uuid()::text, 'UTF8')) "
        "WHERE token_hash IS NULL"
    )
    op.alter_column("players", "token_hash", existing_type=sa.LargeBinary(32), nullable=False)
    op.create_unique_constraint(op.f("uq_players_token_hash"), "players", ["token_hash"])
    op.drop_index(op.f("ix_player_tokens_player_id"), table_name="player_tokens")
    op.drop_table("player_tokens")
