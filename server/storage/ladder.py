"""The ladder's reads (docs/rules.md §4 "Ladder"): each rule set's ratings in ladder order, as
pages, windows and single entries, each with what ranks them.

An entry is a ``player_ratings`` row of the rule set whose player is not banned. Order: shown
rating (``player_ratings.rating``, migration 0016) descending, rated races descending, player
id ascending (:func:`ladder_order_key`); entries with the same rating tie (share a rank). A page
is one range of ``ix_player_ratings_ladder`` from a keyset cursor, never an OFFSET; a rank sums
the ``ladder_counts`` of the higher ratings (a few thousand rows at most, whatever the ladder's
size) and counts the entries of its own rating on the index, less the banned players among
them (read through ``ix_players_banned``). Each answer reads one snapshot
(one statement, or a read-only REPEATABLE READ transaction), so rows and ranks always agree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from server.engine.codes import RuleSet
from server.storage.leaderboards import MAX_PLAYER_ID
from server.storage.rows import typed_rows
from server.storage.sessions import Sessions


class LadderPlaced(Protocol):
    """Anything with a place in the ladder's order: a position, a row."""

    @property
    def rating(self) -> int: ...
    @property
    def races(self) -> int: ...
    @property
    def player_id(self) -> int: ...


def ladder_order_key(entry: LadderPlaced) -> tuple[int, int, int]:
    """An entry's place in the ladder's order (smaller first): higher rating, then more rated
    races, then smaller player id."""
    return (-entry.rating, -entry.races, entry.player_id)


@dataclass(frozen=True, slots=True)
class LadderPosition:
    """A place in the ladder's order (which no entry need hold: a cursor's). ``rating`` and
    ``races`` within −2³¹..2³¹−1 and 0..2³¹−1, ``player_id`` within 0..2⁶³−1 (the columns')."""

    rating: int
    races: int
    player_id: int


@dataclass(frozen=True, slots=True)
class LadderRow:
    """One entry of the ladder.

    Attributes:
        player_id: the player.
        name: the player's display name.
        rating: the shown rating (docs/rules.md §4 "Ratings").
        races / wins: rated races played and won under the rule set.
    """

    player_id: int
    name: str
    rating: int
    races: int
    wins: int

    @property
    def position(self) -> LadderPosition:
        """This entry's place in the order."""
        return LadderPosition(self.rating, self.races, self.player_id)


@dataclass(frozen=True, slots=True)
class LadderSlice:
    """Consecutive entries of the ladder and where they stand on it.

    Attributes:
        rows: the entries, in ladder order.
        before: how many entries come before ``rows[0]`` (0 when ``rows`` is empty).
        better: how many entries have a higher rating than ``rows[0]`` (its rank is
            ``better + 1``; 0 when ``rows`` is empty).
    """

    rows: tuple[LadderRow, ...]
    before: int
    better: int


class LadderStore(Protocol):
    """Where the ladder is read. Every method may raise :class:`~server.errors.StorageError`
    when the database fails."""

    async def page(self, rules: RuleSet, limit: int, after: LadderPosition | None) -> LadderSlice:
        """Up to ``limit`` (1 and up) entries: the first ones, or those after ``after``."""
        ...

    async def window(self, rules: RuleSet, player_id: int, radius: int) -> LadderSlice | None:
        """The player's entry with up to ``radius`` (0 and up) entries either side, or None
        when the player has no entry (no rating under ``rules``, or banned)."""
        ...

    async def entries(self, rules: RuleSet, player_ids: Collection[int]) -> list[LadderSlice]:
        """These players' entries, each alone with the number of entries rated higher on the
        whole ladder (its ``better``, and its ``before`` too: a lone entry's rank needs no
        more), in ladder order; players with none are left out."""
        ...


# ----------------------------------------------------------------------------- statements

_ENTRIES = """
SELECT r.player_id, p.name, r.rating, r.races, r.wins
  FROM player_ratings r JOIN players p ON p.id = r.player_id
 WHERE r.rules = :rules AND p.banned_at IS NULL
"""
_ORDER = " ORDER BY r.rating DESC, r.races DESC, r.player_id"
_REVERSE = " ORDER BY r.rating ASC, r.races ASC, r.player_id DESC"


#: The banned players' ratings of the rule set, read once per statement: each one by its key
#: (``OFFSET 0`` keeps the planner from scanning the ratings to join them).
_BANNED = """WITH banned AS MATERIALIZED (
    SELECT x.rating, x.races, x.player_id FROM players b CROSS JOIN LATERAL (
        SELECT r.rating, r.races, r.player_id FROM player_ratings r
         WHERE r.player_id = b.id AND r.rules = :rules OFFSET 0) x
     WHERE b.banned_at IS NOT NULL)
"""


def _banned(where: str) -> str:
    """The banned players with a rating of the rule set matching ``where`` (on alias ``x``),
    from the statement's ``banned`` (:data:`_BANNED`)."""
    return f"(SELECT count(*) FROM banned x WHERE {where})"


def _counts(key: str) -> str:
    """The counts of a position (``{key}rating`` etc.: a cursor's parameters or a row's
    columns): ``better``, the entries rated higher (the ``ladder_counts`` of the higher
    ratings, less the banned players among them), and ``ties``, the entries of the same rating
    before it or at it (one index range of that rating, less the banned players in it)."""
    higher = f"x.rating > {key}rating"
    better = (
        "((SELECT coalesce(sum(c.entries), 0) FROM ladder_counts c"
        f" WHERE c.rules = :rules AND c.rating > {key}rating) - {_banned(higher)})"
    )
    same = (
        f"x.rating = {key}rating AND (x.races > {key}races"
        f" OR (x.races = {key}races AND x.player_id <= {key}player_id))"
    )
    ties = (
        f"((SELECT count(*) FROM player_ratings x WHERE x.rules = :rules AND {same})"
        f" - {_banned(same)})"
    )
    return f"{better} AS better, {ties} AS ties"


def _sql(statement: str, *expanding: str) -> TextClause:
    clause = text(statement)
    return clause.bindparams(*(bindparam(name, expanding=True) for name in expanding))


#: The first ``limit`` entries.
FIRST_PAGE = _sql(_ENTRIES + _ORDER + " LIMIT :limit")
#: The ``limit`` entries after the cursor (``k_rating``, ``k_races``, ``k_player_id``): the
#: index range from the cursor's rating on, less those of its rating at or before it.
AFTER = (
    " AND r.rating <= :k_rating AND (r.rating < :k_rating OR r.races < :k_races"
    " OR (r.races = :k_races AND r.player_id > :k_player_id))"
)
NEXT_PAGE = _sql(_ENTRIES + AFTER + _ORDER + " LIMIT :limit")
#: The counts of a cursor (see :func:`_counts`).
COUNTS = _sql(_BANNED + "SELECT " + _counts(":k_"))
#: One player's entry (``player_id``), without counts.
OWN = _sql(_ENTRIES + " AND r.player_id = :player_id")
#: Some players' entries (``player_ids``), each with ``better`` (the entries rated higher), in
#: ladder order: the counts of every rating above each rating summed once for all (a window
#: over ``ladder_counts``), less the banned players rated higher.
OWN_MANY = _sql(
    _BANNED
    + """, higher AS MATERIALIZED (
    SELECT c.rating, coalesce(sum(c.entries) OVER (ORDER BY c.rating DESC
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS entries
      FROM ladder_counts c WHERE c.rules = :rules)
SELECT e.*, h.entries - (SELECT count(*) FROM banned x WHERE x.rating > e.rating) AS better
  FROM ("""
    + _ENTRIES
    + """ AND r.player_id IN :player_ids) e JOIN higher h ON h.rating = e.rating
 ORDER BY e.rating DESC, e.races DESC, e.player_id""",
    "player_ids",
)
#: The ``limit`` entries before the cursor, nearest first.
BEFORE = (
    " AND r.rating >= :k_rating AND (r.rating > :k_rating OR r.races > :k_races"
    " OR (r.races = :k_races AND r.player_id < :k_player_id))"
)
ABOVE = _sql(_ENTRIES + BEFORE + _REVERSE + " LIMIT :limit")


# ---------------------------------------------------------------------------------- store


def _values(key: LadderPlaced) -> dict[str, Any]:
    return {"k_rating": key.rating, "k_races": key.races, "k_player_id": key.player_id}


class PostgresLadderStore:
    """:class:`LadderStore` over ``player_ratings`` and ``players``.

    Args:
        sessions: the database session factory (its failures leave as
            :class:`~server.errors.StorageError`).
    """

    def __init__(self, sessions: Sessions) -> None:
        self._sessions = sessions

    async def page(self, rules: RuleSet, limit: int, after: LadderPosition | None) -> LadderSlice:
        """Up to ``limit`` entries in order, the first ones or those after ``after`` with the
        counts of ``after`` (one snapshot).

        Raises:
            StorageError: the database failed.
        """
        values: dict[str, Any] = {"rules": rules.value, "limit": limit}
        async with self._snapshot() as conn:
            if after is None:
                return LadderSlice(
                    typed_rows(LadderRow, (await conn.execute(FIRST_PAGE, values)).all()), 0, 0
                )
            values |= _values(after)
            rows = (await conn.execute(NEXT_PAGE, values)).all()
            if not rows:
                return LadderSlice((), 0, 0)
            counts = (await conn.execute(COUNTS, values)).one()
        before = int(counts.better) + int(counts.ties)
        better = int(counts.better) if rows[0].rating == after.rating else before
        return LadderSlice(typed_rows(LadderRow, rows), before, better)

    async def window(self, rules: RuleSet, player_id: int, radius: int) -> LadderSlice | None:
        """The player's entry with up to ``radius`` entries either side, with the counts of
        the window's first (one snapshot).

        Returns:
            The window, or None when the player has no entry (also for ids outside
            1..2⁶³−1).

        Raises:
            StorageError: the database failed.
        """
        if not 0 < player_id <= MAX_PLAYER_ID:
            return None
        values: dict[str, Any] = {"rules": rules.value, "player_id": player_id}
        async with self._snapshot() as conn:
            own = (await conn.execute(OWN, values)).first()
            if own is None:
                return None
            at = values | _values(own) | {"limit": radius}
            above = list(reversed((await conn.execute(ABOVE, at)).all()))
            below = (await conn.execute(NEXT_PAGE, at)).all()
            first = above[0] if above else own
            counts = (await conn.execute(COUNTS, values | _values(first))).one()
        rows = typed_rows(LadderRow, [*above, own, *below])
        before = int(counts.better) + int(counts.ties) - 1
        return LadderSlice(rows, before, int(counts.better))

    async def entries(self, rules: RuleSet, player_ids: Collection[int]) -> list[LadderSlice]:
        """Some players' entries, each with the entries rated higher (one statement).

        Raises:
            StorageError: the database failed.
        """
        ids = sorted({i for i in player_ids if 0 < i <= MAX_PLAYER_ID})
        if not ids:
            return []
        values = {"rules": rules.value, "player_ids": ids}
        async with self._snapshot() as conn:
            rows = (await conn.execute(OWN_MANY, values)).all()
        return [
            LadderSlice(typed_rows(LadderRow, [row]), int(row.better), int(row.better))
            for row in rows
        ]

    @asynccontextmanager
    async def _snapshot(self) -> AsyncIterator[AsyncConnection]:
        """A connection in a read-only REPEATABLE READ transaction: every statement of one
        answer reads the same snapshot."""
        async with self._sessions() as session:
            conn = await session.connection(
                execution_options={
                    "isolation_level": "REPEATABLE READ",
                    "postgresql_readonly": True,
                }
            )
            yield conn


__all__ = [
    "LadderPlaced",
    "LadderPosition",
    "LadderRow",
    "LadderSlice",
    "LadderStore",
    "PostgresLadderStore",
    "ladder_order_key",
]
