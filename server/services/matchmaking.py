"""Quick races (docs/rules.md §4 "Quick races"): players ask to race now under a rule set, and
the server gathers waiting players of near ratings into a rated race of 2 to 6.

The queue lives in PostgreSQL (:mod:`server.storage.queue`), so a player waiting on one server
process can be matched with one waiting on another. Every process runs the matcher
(:meth:`Matchmaker.match`) every :attr:`QueueRules.interval_s`: under the rule set's advisory
lock (one matcher at a time sees the whole queue of a rule set) it takes its waiting rows
``FOR UPDATE SKIP LOCKED``, forms matches (:func:`form_matches`), and in the same
transaction opens and starts each match's race (:meth:`RaceService.open_matched`) and removes
its players from the queue; so no player is ever put in two races, and a failure leaves them
waiting.

A waiting player's row goes when they cancel, when the websocket that asked closes, and when
their server process is taken for dead (the presence sweep forgets its record, whose rows
cascade); meanwhile a process unseen for longer than the instance time-out has its players left
out of every match, so nobody is matched with a player who is not there.

Here are the rules of matching; the queue's queries are :mod:`server.storage.queue`'s, and the
race a match opens is :class:`~server.services.races.RaceService`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from server.engine.codes import RuleSet
from server.errors import ConflictError, ErrorCode
from server.services.bans import refuse_banned
from server.services.clock import Clock
from server.services.players import PlayerInfo
from server.services.races import RaceService
from server.services.ratings import RatingService
from server.storage.presence import Connection
from server.storage.queue import QueueRow, QueueStore
from server.storage.races import RaceStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueRules:
    """How waiting players are matched.

    Attributes:
        min_players / target_players / max_players: a race has at least ``min_players``; it
            starts as soon as ``target_players`` are within the gap, with up to
            ``max_players`` (the nearest ratings first).
        gap / widen_per_s: the largest difference of shown ratings accepted in a match is
            ``gap + widen_per_s × seconds the longest-waiting player has waited``.
        start_after_s: once the longest-waiting player has waited this long, a race of at
            least ``min_players`` starts without waiting for ``target_players``.
        interval_s: seconds between two matcher passes of a process.
    """

    min_players: int = 2
    target_players: int = 4
    max_players: int = 6
    gap: int = 100
    widen_per_s: float = 25.0
    start_after_s: float = 10.0
    interval_s: float = 0.5

    def gap_after(self, waited_s: float) -> int:
        """The rating gap accepted for a player who has waited ``waited_s`` seconds."""
        return self.gap + int(self.widen_per_s * max(0.0, waited_s))


@dataclass(frozen=True, slots=True)
class Waiting:
    """A player waiting: under ``rules``, with their shown ``rating``, since ``since`` (UTC),
    the gap accepted now (``gap``)."""

    rules: RuleSet
    rating: int
    since: dt.datetime
    gap: int


@dataclass(frozen=True, slots=True)
class Matched:
    """A match: its race (``race_id``, ``invite``), its players (by rating, highest first),
    each one's wait in seconds, and the gap between its highest and lowest shown ratings."""

    race_id: int
    invite: str
    rules: RuleSet
    player_ids: tuple[int, ...]
    waits_s: tuple[float, ...]
    rating_gap: int


def form_matches(
    waiting: Sequence[QueueRow], now: dt.datetime, rules: QueueRules
) -> list[list[QueueRow]]:
    """Matches among ``waiting`` (one rule set, the longest waiting first) at ``now``.

    The longest-waiting player still unmatched is the anchor: the others within the gap their
    wait allows (:meth:`QueueRules.gap_after`) of the anchor's rating, the nearest first, join
    it up to ``max_players``. The match is made when it reaches ``target_players``, or
    ``min_players`` once the anchor has waited ``start_after_s``; otherwise the anchor waits on
    and the next longest-waiting player is tried. A player is in one match at most.
    """
    left = list(waiting)
    matches: list[list[QueueRow]] = []
    i = 0
    while i < len(left):
        anchor = left[i]
        waited = (now - anchor.joined_at).total_seconds()
        gap = rules.gap_after(waited)
        near = sorted(
            (r for r in left[i + 1 :] if abs(r.rating - anchor.rating) <= gap),
            key=lambda r: (abs(r.rating - anchor.rating), r.joined_at, r.player_id),
        )[: rules.max_players - 1]
        size = 1 + len(near)
        if size >= rules.target_players or (
            size >= rules.min_players and waited >= rules.start_after_s
        ):
            match = [anchor, *near]
            matches.append(match)
            taken = {r.player_id for r in match}
            left = [r for r in left if r.player_id not in taken]
            continue  # the same index is now the next longest waiting
        i += 1
    return matches


class Matchmaker:
    """Keeps the quick-race queue and matches it.

    Args:
        queue: the queue's queries.
        rooms: the race rooms' store (the matcher's transaction, a player's ban).
        races: the race service (a match's race).
        ratings: the rating service (a player's shown rating).
        clock: the UTC clock.
        instance: this server process's id.
        instance_timeout_s: seconds after which a process that stopped refreshing its record
            is taken for dead. Its players are left out of matches sooner, from half of it
            (:attr:`fresh_s`): a process beats at least three times per time-out, so a live
            one's record is never that old unless a beat is late, and then its players only
            wait for the next pass.
        rules: how players are matched.
        observe: called after each matcher pass with its rule set, the players it left
            waiting and the matches it made (metrics).
    """

    def __init__(
        self,
        queue: QueueStore,
        rooms: RaceStore,
        races: RaceService,
        ratings: RatingService,
        clock: Clock,
        instance: str,
        instance_timeout_s: float,
        rules: QueueRules | None = None,
        observe: Callable[[RuleSet, int, Sequence[Matched]], None] | None = None,
    ) -> None:
        self._queue = queue
        self._rooms = rooms
        self._races = races
        self._ratings = ratings
        self._clock = clock
        self._instance = instance
        #: Seconds since its last beat after which a process's waiting players are left out
        #: of matches (half the time-out; 15 s by default).
        self.fresh_s = instance_timeout_s / 2
        self.rules = rules or QueueRules()
        self._observe = observe
        #: Keys of this process's connections that asked to wait (until they close): only
        #: their close can leave a row in the queue.
        self._asked: set[str] = set()

    async def join(self, player: PlayerInfo, rules: RuleSet, connection: Connection) -> Waiting:
        """The player waits for a quick race under ``rules`` from ``connection`` (asking
        again keeps their place; under another rule set they start again).

        Raises:
            ForbiddenError: ``banned``: a banned player is not matched.
            ConflictError: ``too_many_rooms``: the player sits in a quick race not finished
                yet, or in as many open rooms as a player may (``TRIPEAKS_RACE_MAX_ROOMS``).
        """
        async with self._rooms.transaction() as tx:
            refuse_banned(await self._rooms.ban_of(tx, player.id))
            rooms = await self._rooms.open_rooms_of(tx, player.id)
        if any(room.rated for room in rooms):
            raise ConflictError(
                "you are already in a quick race; finish it first", code=ErrorCode.TOO_MANY_ROOMS
            )
        self._races.limits.check_rooms(len(rooms))
        self._asked.add(connection.key)  # before the row: its close must look for it
        held = await self._ratings.ratings_of(player.id)
        rating = next((r.shown for r in held if r.rules is rules), 0)
        row = await self._queue.join(player.id, rules, rating, connection, self._clock.now())
        return self.waiting_view(row)

    def waiting_view(self, row: QueueRow) -> Waiting:
        """A waiting row as shown now (the gap its wait allows)."""
        waited = (self._clock.now() - row.joined_at).total_seconds()
        return Waiting(row.rules, row.rating, row.joined_at, self.rules.gap_after(waited))

    async def waiting(self, player_id: int) -> Waiting | None:
        """The player's place in the queue as shown now, or None when they do not wait."""
        row = await self._queue.waiting(player_id)
        return None if row is None else self.waiting_view(row)

    async def cancel(self, player: PlayerInfo) -> bool:
        """The player stops waiting; whether they were waiting."""
        return await self._queue.cancel(player.id)

    def waits_from(self, connection: Connection) -> bool:
        """Whether someone asked to wait for a quick race from ``connection`` (and may still)."""
        return connection.key in self._asked

    async def disconnected(self, connection: Connection) -> list[int]:
        """``connection`` closed: whoever waited from it stops waiting (their ids). A
        connection that never asked to wait (most of them) costs no read or write.

        Raises:
            StorageError: the database failed (the row stays until this process's next
                matcher pass over its rule set, which matches nobody from a closed
                connection of its own).
        """
        if connection.key not in self._asked:
            return []
        gone = await self._queue.drop_connection(connection)
        self._asked.discard(connection.key)
        return gone

    async def match(
        self, rules: RuleSet, open_keys: Callable[[], Collection[str]] | None = None
    ) -> list[Matched]:
        """One matcher pass over the players waiting under ``rules`` (nobody while another
        pass holds the rule set's lock): every match :func:`form_matches` finds gets its race,
        opened and started, and its players leave the queue, in one transaction.

        Args:
            rules: the rule set.
            open_keys: the keys of this process's open connections; a player who waited from
                one of this process's connections that is not among them (closed, its close
                not recorded yet) is not matched and leaves the queue. None: every row counts.

        Raises:
            StorageError: the database failed (nobody was matched; they wait on).
        """
        now = self._clock.now()
        made: list[Matched] = []
        left = 0
        async with self._rooms.transaction() as tx:
            waiting = await self._queue.take(tx, rules, self._instance, self.fresh_s)
            if open_keys is not None and waiting:
                still = open_keys()
                closed = [
                    r.player_id
                    for r in waiting
                    if r.connection.instance == self._instance and r.connection.key not in still
                ]
                if closed:
                    await self._queue.forget(tx, closed)
                    waiting = [r for r in waiting if r.player_id not in closed]
            if waiting:
                # A player who took seats in other rooms while waiting (creating or joining
                # them) is matched only while under the room limit (docs/rules.md §4 "Quick
                # races"); counted as a create or join counts, so the limit holds at once.
                held = await self._queue.rooms_held(tx, [r.player_id for r in waiting])
                limit = self._races.limits.max_rooms
                waiting = [r for r in waiting if held.get(r.player_id, limit) < limit]
            matches = form_matches(waiting, now, self.rules)
            left = len(waiting) - sum(len(m) for m in matches)
            for match in matches:
                match.sort(key=lambda r: (-r.rating, r.joined_at, r.player_id))
                ids = [r.player_id for r in match]
                race = await self._races.open_matched(tx, ids, rules)
                await self._queue.matched(tx, race.id, race.invite, rules, ids)
                ratings = [r.rating for r in match]
                made.append(
                    Matched(
                        race.id,
                        race.invite,
                        rules,
                        tuple(ids),
                        tuple((now - r.joined_at).total_seconds() for r in match),
                        max(ratings) - min(ratings),
                    )
                )
            await tx.commit()
        for matched in made:
            log.info("quick race %s: %d players", matched.invite, len(matched.player_ids))
        if self._observe is not None:
            self._observe(rules, left, made)
        return made

    async def match_all(
        self, open_keys: Callable[[], Collection[str]] | None = None
    ) -> list[Matched]:
        """One matcher pass over every rule set in which enough players wait for a race (at
        least ``rules.min_players``, by one count of the queue): a rule set with fewer is not
        locked nor read, only observed as it is — a process's passes over an empty queue
        cost one query. ``open_keys``: as for :meth:`match`.

        Raises:
            StorageError: the database failed (nobody was matched; they wait on).
        """
        counts = await self.counts()
        made: list[Matched] = []
        for rules in RuleSet:
            waiting = counts.get(rules, 0)
            if waiting >= self.rules.min_players:
                made += await self.match(rules, open_keys)
            elif self._observe is not None:
                self._observe(rules, waiting, [])
        return made

    async def counts(self) -> dict[RuleSet, int]:
        """How many players wait under each rule set."""
        return await self._queue.counts()


__all__ = ["Matched", "Matchmaker", "QueueRules", "Waiting", "form_matches"]
