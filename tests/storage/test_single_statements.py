"""Statements sent alone through the driver (a game's load and head, a new game): prepared once
per connection under names of the process's own (``__tp_<tag>_<n>__``, as the engine's: the
driver's ``__asyncpg_stmt_<n>__`` would collide on a server session two processes share), and
never prepared behind a transaction pooler."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from server.storage.db import Pooler, create_engine
from server.storage.single import read_single, write_single

READ = "SELECT $1::int + 1"
WRITE = "SELECT $1::int * 2"


@pytest.mark.parametrize(("pooler", "named"), [("none", True), ("transaction", False)])
async def test_each_statement_is_prepared_once_per_connection_under_the_processs_names(
    database_url: str, pooler: Pooler, named: bool
) -> None:
    # One pooled connection: every statement, and the check afterwards, on the same session.
    engine = create_engine(database_url, pool_size=1, pooler=pooler)
    try:
        for n in range(3):
            row = await read_single(engine, READ, [n])
            assert row is not None and row[0] == n + 1
            assert await write_single(engine, WRITE, [n]) == 2 * n
        async with engine.connect() as conn:
            prepared = (
                await conn.execute(
                    text(
                        "SELECT name, statement FROM pg_prepared_statements "
                        "WHERE statement IN (:read, :write)"
                    ),
                    {"read": READ, "write": WRITE},
                )
            ).all()
    finally:
        await engine.dispose()
    if not named:
        assert prepared == []
        return
    assert sorted(statement for _, statement in prepared) == sorted([READ, WRITE])
    assert all(name.startswith("__tp_") for name, _ in prepared), prepared
