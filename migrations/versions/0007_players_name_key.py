"""players.name_key: names that look alike cannot both be registered

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:00:00.000000

Uniqueness of ``lower(name)`` let look-alike names coexist: ``ΣΑΣ`` beside ``σας``, ``Straße``
beside ``STRASSE``, a Cyrillic ``Аda`` beside a Latin ``Ada``. ``players.name_key`` holds
:func:`server.names.name_key` of the name (case folding plus the Unicode TR39 confusable
skeleton) and its unique index replaces ``uq_players_name_lower``.

Players who already have look-alike names all stay, with their names and accounts: the oldest
(lowest id) gets the plain key, each later one the key followed by ``#`` and its id. ``#`` is
never part of a name's key, so these keys collide with nothing, and a new name that looks like
any of them collides with the oldest one's plain key and is refused.

The key is computed in Python (ICU's skeleton), in batches of players by id.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from server.names import name_key

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000

players = sa.table(
    "players",
    sa.column("id", sa.BigInteger()),
    sa.column("name", sa.String(24)),
    sa.column("name_key", sa.Text()),
)


def upgrade() -> None:
    op.add_column("players", sa.Column("name_key", sa.Text(), nullable=True))
    bind = op.get_bind()
    fill = (
        players.update()
        .where(players.c.id == sa.bindparam("player_id"))
        .values(name_key=sa.bindparam("key"))
    )
    last = 0
    while True:
        rows = bind.execute(
            sa.select(players.c.id, players.c.name)
            .where(players.c.id > last)
            .order_by(players.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        bind.execute(fill, [{"player_id": row.id, "key": name_key(row.name)} for row in rows])
        last = rows[-1].id
    # Look-alike names registered before this revision: all but the oldest of each get a key of
    # their own.
    op.execute(
        """
        UPDATE players
        SET name_key = players.name_key || '#' || players.id
        FROM (
            SELECT id, row_number() OVER (PARTITION BY name_key ORDER BY id) AS rank
            FROM players
        ) AS ranked
        WHERE players.id = ranked.id AND ranked.rank > 1
        """
    )
    op.alter_column("players", "name_key", existing_type=sa.Text(), nullable=False)
    op.create_index("uq_players_name_key", "players", ["name_key"], unique=True)
    op.drop_index("uq_players_name_lower", table_name="players")


def downgrade() -> None:
    # Names equal under lower() always share a name_key, so the players registered meanwhile fit
    # the old index; refuse with a clear message rather than fail on it if they do not.
    op.execute(
        """
        DO $$
        BEGIN
            IF EXISTS (SELECT 1 FROM players GROUP BY lower(name) HAVING count(*) > 1) THEN
                RAISE EXCEPTION 'names equal under lower(): revision 0006 cannot hold them';
            END IF;
        END $$
        """
    )
    op.create_index(
        "uq_players_name_lower", "players", [sa.literal_column("lower(name)")], unique=True
    )
    op.drop_index("uq_players_name_key", table_name="players")
    op.drop_column("players", "name_key")
