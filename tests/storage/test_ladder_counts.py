"""``ladder_counts`` stays equal to a recount of ``player_ratings`` by rule set and shown
rating, whoever writes the ratings: inserts, changes of rating, deletes (a player's cascade
included), TRUNCATE, and many rated races' transactions at once (through the rating store,
which takes the rule set's advisory lock first, so none of them deadlocks)."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections import Counter

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine.codes import RuleSet
from server.storage.models import LadderCount, Player, PlayerRating
from server.storage.ratings import PostgresRatingStore, RatingRow
from server.storage.sessions import Sessions
from tests.storage.test_leaderboard_counts import add_players

AT = dt.datetime(2026, 3, 2, 10, tzinfo=dt.UTC)


async def assert_counts_match(engine: AsyncEngine) -> Counter[tuple[str, int]]:
    async with engine.connect() as conn:
        stored = Counter(
            {
                (row.rules, row.rating): row.entries
                for row in await conn.execute(select(LadderCount))
                if row.entries
            }
        )
        recounted = Counter(
            (row.rules, row.rating)
            for row in await conn.execute(select(PlayerRating.rules, PlayerRating.rating))
        )
    assert stored == recounted
    return stored


def rating(player_id: int, rules: str, shown: int, races: int = 1) -> dict[str, object]:
    """A row whose shown rating is ``shown`` (sigma 1)."""
    return {
        "player_id": player_id,
        "rules": rules,
        "mu": 3 + shown / 40,
        "sigma": 1.0,
        "races": races,
        "wins": 0,
        "rated_at": AT,
    }


async def test_inserts_changes_deletes_and_truncate_move_the_counts(db: AsyncEngine) -> None:
    a, b, c = await add_players(db, 3)
    async with db.begin() as conn:
        await conn.execute(
            insert(PlayerRating),
            [rating(a, "C", 100), rating(b, "C", 100), rating(c, "C", 250), rating(a, "E", 7)],
        )
    assert await assert_counts_match(db) == Counter({("C", 100): 2, ("C", 250): 1, ("E", 7): 1})
    async with db.begin() as conn:
        # A new rating moves the entry; a change of races alone does not.
        await conn.execute(
            update(PlayerRating)
            .where(PlayerRating.player_id == b, PlayerRating.rules == "C")
            .values(mu=3 + 300 / 40)
        )
        await conn.execute(update(PlayerRating).where(PlayerRating.player_id == c).values(races=9))
    assert await assert_counts_match(db) == Counter(
        {("C", 100): 1, ("C", 300): 1, ("C", 250): 1, ("E", 7): 1}
    )
    async with db.begin() as conn:
        await conn.execute(delete(Player).where(Player.id == a))  # its ratings cascade
    assert await assert_counts_match(db) == Counter({("C", 300): 1, ("C", 250): 1})
    async with db.begin() as conn:
        await conn.execute(text("TRUNCATE player_ratings"))
    assert await assert_counts_match(db) == Counter()


async def test_many_rated_races_at_once_are_counted_exactly(db: AsyncEngine) -> None:
    players = await add_players(db, 24)
    store = PostgresRatingStore(Sessions(db))
    rng = random.Random(5)

    touched: set[int] = set()

    async def race(ids: list[int]) -> None:
        touched.update(ids)
        async with Sessions(db)() as tx:
            before = await store.lock(tx, RuleSet.CLASSIC, ids, (25.0, 25 / 3), AT)
            after = [
                RatingRow(
                    i,
                    RuleSet.CLASSIC,
                    rng.uniform(10, 40),
                    rng.uniform(1, 8),
                    r.races + 1,
                    r.wins,
                    AT,
                )
                for i, r in before.items()
            ]
            await store.save(tx, after, [])
            await tx.commit()

    for _ in range(5):
        await asyncio.gather(*(race(rng.sample(players, 4)) for _ in range(12)))
    counts = await assert_counts_match(db)
    assert sum(counts.values()) == len(touched)  # one entry per player rated
