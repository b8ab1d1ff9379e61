"""The ladder (docs/rules.md §4 "Ladder"): per rule set, every rated player who is not banned,
ranked by their shown rating.

Order: shown rating descending, then rated races under the rule set descending, then player id
ascending; players with the same rating share a rank (1, 1, 3): a rank is 1 + the number of
entries rated strictly higher. Pages continue from an opaque keyset cursor; the window "around
me" and the friends' view are as on the daily board (:mod:`server.services.leaderboards`), with
its limits.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from server.engine.codes import RuleSet
from server.errors import ErrorCode, InvalidInputError
from server.services import cursors, keyset
from server.storage.follows import FollowStore
from server.storage.ladder import LadderPosition, LadderRow, LadderSlice, LadderStore


def ladder_rules(text: str) -> RuleSet:
    """The rule set a ladder's path names: exactly ``E`` or ``C``.

    Raises:
        InvalidInputError: ``bad_rules``, naming the text.
    """
    if text in (RuleSet.EASY.value, RuleSet.CLASSIC.value):
        return RuleSet(text)
    raise InvalidInputError(
        f"{text[:40]!r} is not a rule set (expected E or C)", code=ErrorCode.BAD_RULES
    )


@dataclass(frozen=True, slots=True)
class LadderKey(LadderPosition):
    """A position in the ladder's order, and the cursor that names it."""

    def encode(self) -> str:
        """This key as an opaque URL-safe cursor."""
        return cursors.encode([self.rating, self.races, self.player_id])

    @classmethod
    def decode(cls, cursor: str) -> LadderKey:
        """Parse a cursor made by :meth:`encode`.

        Raises:
            InvalidInputError: ``bad_cursor``.
        """
        rating, races, player = cursors.decode_ints(
            cursor, (cursors.INT32, cursors.NAT32, cursors.NAT64)
        )
        return cls(rating, races, player)


@dataclass(frozen=True, slots=True)
class LadderEntry(LadderRow):
    """One entry of the ladder with its rank (1 and up; entries of the same rating share the
    rank of the first of them) and whether the rating is provisional."""

    rank: int
    provisional: bool

    @property
    def key(self) -> LadderKey:
        """This entry's position in the order."""
        return LadderKey(self.rating, self.races, self.player_id)


LadderPage = keyset.Page


class LadderService:
    """Reads the ladder.

    Args:
        store: where the ladder is read.
        follows: whom each player follows (the friends' view).
        provisional_races: rated races before a rating is no longer provisional
            (:attr:`server.services.ratings.RatingRules.provisional_races`).
    """

    def __init__(self, store: LadderStore, follows: FollowStore, provisional_races: int) -> None:
        self._store = store
        self._follows = follows
        self._provisional = provisional_races

    async def page(
        self, rules: RuleSet, limit: int = 50, cursor: str | None = None
    ) -> keyset.Page[LadderEntry]:
        """One page of a rule set's ladder.

        Args:
            rules: the rule set.
            limit: entries per page, 1..100.
            cursor: the previous page's ``next_cursor``, or None for the first page.

        Raises:
            InvalidInputError: ``bad_limit`` or ``bad_cursor``.
            StorageError: the database failed.
        """
        keyset.check_limit(limit)
        key = LadderKey.decode(cursor) if cursor else None
        ladder = await self._store.page(rules, limit + 1, key)
        return keyset.page_of(self._entries(ladder), limit)

    async def around(self, rules: RuleSet, player_id: int, radius: int = 5) -> list[LadderEntry]:
        """The entries around one player's: ``radius`` above, theirs, ``radius`` below (fewer
        at the ends).

        Raises:
            InvalidInputError: ``bad_radius`` (not 0..50).
            NotFoundError: ``not_ranked`` when the player has no rating under ``rules`` (or
                is banned).
            StorageError: the database failed.
        """
        keyset.check_radius(radius)
        unranked = (
            f"player {player_id} is not on the {rules.value} ladder "
            "(no rated race under it, or banned)"
        )
        window = keyset.window_found(await self._store.window(rules, player_id, radius), unranked)
        return self._entries(window)

    async def ranks_of(self, rules: RuleSet, player_ids: Collection[int]) -> list[LadderEntry]:
        """Some players' entries, each with its rank on the whole ladder, in ladder order
        (players without one left out).

        Raises:
            StorageError: the database failed.
        """
        slices = await self._store.entries(rules, player_ids)
        return [self._entries(one)[0] for one in slices]

    async def friends(self, rules: RuleSet, me: int) -> list[LadderEntry]:
        """The friends' view: the entries of ``me`` and of the players they follow, each with
        its rank on the whole ladder, in ladder order.

        Raises:
            StorageError: the database failed.
        """
        followed = await self._follows.following(me)
        return await self.ranks_of(rules, [me, *(row.id for row in followed)])

    def _entries(self, ladder: LadderSlice) -> list[LadderEntry]:
        """The slice's entries with their ranks: the first's is ``ladder.better + 1``; a row of
        the previous one's rating shares its rank, any other row is ranked by its position."""
        ranks = keyset.ranks(ladder.rows, ladder.better, ladder.before, _same_rating)
        return [
            LadderEntry(
                row.player_id,
                row.name,
                row.rating,
                row.races,
                row.wins,
                rank,
                row.races < self._provisional,
            )
            for row, rank in zip(ladder.rows, ranks, strict=True)
        ]


def _same_rating(row: LadderRow, previous: LadderRow) -> bool:
    """Whether two ladder rows share a rank: the same shown rating."""
    return row.rating == previous.rating


__all__ = ["LadderEntry", "LadderKey", "LadderPage", "LadderService", "ladder_rules"]
