"""Group commit: client CPU and wall time per batch, SQLAlchemy ``text()`` vs raw asyncpg.

    python benchmarks/group_commit.py --rounds 5 --actions 2000

Makes a throw-away database on the PostgreSQL at ``TRIPEAKS_TEST_PG`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``) and stores batches of 1, 8, 32 and 128
writes (each of another free game, no event) with the group committer's batch statement sent
two ways, side by side in each round:

- ``sqlalchemy``: as the committer sent it before, ``conn.execute(text(...), {...})`` with
  named parameters (``CAST(:pN AS type[])``), the driver connection looked up per batch to see
  whether it is still open;
- ``asyncpg``: as it sends it now, prepared once on the asyncpg connection under the engine's
  and executed with positional arrays (``$N::type[]``).

Two levels: ``writer`` goes through :meth:`GroupCommitter.write` (every write of a batch queued
at once, one batch each time: the path an action takes), ``statement`` calls the writer's
per-batch step alone on a held connection. For each, ``--actions`` writes per size and path per
round (at least 10 batches); prints the medians over ``--rounds`` rounds of the client's CPU
per action (``time.process_time``, µs), the wall time per batch (ms) and per action (µs), and
the ratio of the two paths' CPU. Then drops the database.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import re
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from server.bench import throwaway_database
from server.storage.commits import (
    COMMIT_BATCH_SQL,
    ActionWrite,
    GroupCommitter,
    WriteOutcome,
    _arguments,
    _Link,
    _Pending,
)
from server.storage.db import create_engine
from server.storage.models import Game, Player

SIZES = (1, 8, 32, 128)
PATHS = ("sqlalchemy", "asyncpg")
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)

# The batch statement with named parameters cast to their arrays, as the committer sent it
# through SQLAlchemy.
_NAMED_SQL = re.sub(r"\$(\d+)::(\w+\[\])", r"CAST(:p\1 AS \2)", COMMIT_BATCH_SQL)
_NAMED_SQL = re.sub(r"\$(\d+)", r":p\1", _NAMED_SQL)
assert "$" not in _NAMED_SQL
_NAMED_BATCH = text(_NAMED_SQL)


class TextCommitter(GroupCommitter):
    """The group committer sending each batch through SQLAlchemy's ``text()``."""

    async def _commit(
        self, link: _Link, batch: Sequence[_Pending], outcomes: dict[int, str]
    ) -> None:
        await self._was_closed(link.conn)
        parameters = {f"p{i}": value for i, value in enumerate(_arguments(batch), 1)}
        result = await link.conn.execute(_NAMED_BATCH, parameters)
        outcomes.update((row[0], str(row[1])) for row in result)

    @staticmethod
    async def _was_closed(conn: AsyncConnection) -> bool:
        raw = await conn.get_raw_connection()
        driver = raw.driver_connection
        return driver is None or bool(driver.is_closed())


class Games:
    """Free games of one path, and the seq each is at."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self.seq = dict.fromkeys(ids, 0)

    def writes(self, n: int) -> list[ActionWrite]:
        """A draw on each of the first ``n`` games, moving it on by one."""
        out = []
        for game_id in self.ids[:n]:
            seq = self.seq[game_id]
            self.seq[game_id] = seq + 1
            out.append(
                ActionWrite(
                    game_id=game_id,
                    expected_seq=seq,
                    seq=seq + 1,
                    kind="draw",
                    pos=None,
                    card="5h",
                    score_after=500,
                    at=T0 + dt.timedelta(milliseconds=seq),
                    status="playing",
                    score=500,
                    moves=seq + 1,
                    undos=0,
                    finished_at=None,
                    elapsed_ms=None,
                    cards_left=28,
                )
            )
        return out


async def add_games(engine: AsyncEngine, n: int) -> Games:
    async with engine.begin() as conn:
        player = await conn.scalar(
            insert(Player)
            .values(name=f"bench-{secrets.token_hex(3)}")
            .values(created_at=T0)
            .returning(Player.id)
        )
        game = {
            "player_id": player,
            "code": "TP1-E-AAAAAAA",
            "rules": "E",
            "deal_version": "TP1",
            "mode": "free",
            "status": "playing",
            "score": 500,
            "moves": 0,
            "undos": 0,
            "seq": 0,
            "created_at": T0,
        }
        ids = await conn.scalars(insert(Game).returning(Game.id), [game] * n)
        return Games(list(ids))


Batch = Callable[[list[ActionWrite]], Awaitable[None]]


async def through_the_writer(committer: GroupCommitter) -> Batch:
    async def run(writes: list[ActionWrite]) -> None:
        before = committer.batches
        await asyncio.gather(*(committer.write(w) for w in writes))
        assert committer.batches == before + 1, "the writes did not share one batch"

    return run


async def statement_alone(committer: GroupCommitter, link: _Link) -> Batch:
    loop = asyncio.get_running_loop()

    async def run(writes: list[ActionWrite]) -> None:
        batch = [_Pending(w, None, WriteOutcome(loop=loop), 0.0) for w in writes]
        stored: dict[int, str] = {}
        await committer._commit(link, batch, stored)
        assert len(stored) == len(writes), stored

    return run


async def measure(run: Batch, games: Games, size: int, actions: int) -> tuple[float, float]:
    """Client CPU per action (µs) and wall time per batch (ms) over enough batches."""
    batches = max(10, actions // size)
    todo = [games.writes(size) for _ in range(batches)]
    cpu, wall = time.process_time(), time.perf_counter()
    for writes in todo:
        await run(writes)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / (batches * size) * 1e6, wall / batches * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actions", type=int, default=2000, help="writes per size, path, round")
    args = parser.parse_args()
    async with throwaway_database() as url:
        engine = create_engine(url, pool_size=4)
        # (The writers keep their connections between the levels' turns.)
        committers = {
            "sqlalchemy": TextCommitter(engine, idle_s=3600),
            "asyncpg": GroupCommitter(engine, idle_s=3600),
        }
        links = {path: await committer._connect() for path, committer in committers.items()}
        runs: dict[tuple[str, str], Batch] = {}
        games: dict[tuple[str, str], Games] = {}
        for path, committer in committers.items():
            runs["writer", path] = await through_the_writer(committer)
            runs["statement", path] = await statement_alone(committer, links[path])
            for level in ("writer", "statement"):
                games[level, path] = await add_games(engine, max(SIZES))
        try:
            figures: dict[tuple[str, int, str], list[tuple[float, float]]] = {}
            for key, run in runs.items():  # warm up: prepare, compile, first connection
                for size in SIZES:
                    await run(games[key].writes(size))
            for round_ in range(args.rounds):
                for level in ("writer", "statement"):
                    for size in SIZES:
                        order = PATHS if round_ % 2 == 0 else PATHS[::-1]
                        for path in order:
                            figure = await measure(
                                runs[level, path], games[level, path], size, args.actions
                            )
                            figures.setdefault((level, size, path), []).append(figure)
            report(figures, args.rounds)
        finally:
            for path, committer in committers.items():
                await committer._release(links[path].conn)
                await committer.close()
            await engine.dispose()


def report(figures: dict[tuple[str, int, str], list[tuple[float, float]]], rounds: int) -> None:
    print(f"medians of {rounds} rounds; CPU = client process time")
    print(
        f"{'level':<10}{'batch':>6}  {'path':<11}{'CPU µs/action':>14}{'ms/batch':>10}"
        f"{'wall µs/action':>16}{'CPU vs text()':>15}"
    )
    for level in ("writer", "statement"):
        for size in SIZES:
            base: float | None = None
            for path in PATHS:
                samples = figures[level, size, path]
                cpu = statistics.median(s[0] for s in samples)
                wall = statistics.median(s[1] for s in samples)
                base = cpu if base is None else base
                print(
                    f"{level:<10}{size:>6}  {path:<11}{cpu:>14.1f}{wall:>10.3f}"
                    f"{wall * 1e3 / size:>16.1f}{cpu / base:>14.2f}x"
                )


if __name__ == "__main__":
    asyncio.run(main())
