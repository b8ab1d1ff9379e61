"""Benchmark and load tools run on demand (not part of the running server)."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

#: The PostgreSQL the benchmarks make their throw-away databases on (as the tests do).
BENCH_PG = os.environ.get("TRIPEAKS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def percentile(values: Iterable[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of some values; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


@asynccontextmanager
async def throwaway_database(
    admin_url: str = BENCH_PG, *, migrated: bool = True
) -> AsyncIterator[str]:
    """A new database on the PostgreSQL at ``admin_url``, migrated to head (unless not
    ``migrated``: empty, for a server of another source tree to migrate to its own head),
    dropped on exit.

    Yields:
        Its URL.
    """
    import asyncpg
    from sqlalchemy.engine import make_url

    from server.storage.db import migrate_url

    name = f"tripeaks_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
            if migrated:
                await migrate_url(url)
            yield url
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
