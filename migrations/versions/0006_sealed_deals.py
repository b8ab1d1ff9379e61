"""sealed deals: TP2 codes in games, races and daily_challenges; races.host_deal

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 15:20:00.000000

A TP2 code (``TP2-E-ABCDEFG-HIJKLMN-OPQRSTU-VWXYZAB``) is 37 characters: the code columns grow
from 13 to 40 (in PostgreSQL a wider ``varchar`` rewrites nothing). Every game's ``deal_version``
is ``TP1`` or ``TP2`` and names its code's algorithm. ``races.host_deal`` marks a race on a code
its host chose (the host may know its cards); rooms made before it are taken as random deals.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CODE_TABLES = ("games", "races", "daily_challenges")


def upgrade() -> None:
    for table in CODE_TABLES:
        op.alter_column(
            table, "code", type_=sa.String(length=40), existing_type=sa.String(length=13)
        )
    # Added NOT VALID, then validated: the check scans the table without blocking writers.
    op.execute(
        "ALTER TABLE games ADD CONSTRAINT ck_games_deal_version "
        "CHECK (deal_version IN ('TP1', 'TP2') AND left(code, 3) = deal_version) NOT VALID"
    )
    op.execute("ALTER TABLE games VALIDATE CONSTRAINT ck_games_deal_version")
    op.add_column(
        "races",
        sa.Column("host_deal", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    # A TP2 code does not fit the old columns: refuse rather than cut a code short.
    op.execute(
        """
        DO $$
        BEGIN
            IF EXISTS (SELECT 1 FROM games WHERE length(code) > 13)
               OR EXISTS (SELECT 1 FROM races WHERE length(code) > 13)
               OR EXISTS (SELECT 1 FROM daily_challenges WHERE length(code) > 13) THEN
                RAISE EXCEPTION 'TP2 codes are stored: revision 0005 cannot hold them';
            END IF;
        END $$
        """
    )
    op.drop_column("races", "host_deal")
    op.drop_constraint(op.f("ck_games_deal_version"), "games", type_="check")
    for table in CODE_TABLES:
        op.alter_column(
            table, "code", type_=sa.String(length=13), existing_type=sa.String(length=40)
        )
