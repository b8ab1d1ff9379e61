"""Races: friends play the same deal at the same server time (docs/rules.md §4 "Races").

A room lives in the database (``races``, ``race_players``), so any server process can serve any
of its players. Every change is published as an event (``LISTEN/NOTIFY``) inside the transaction
that makes it; the web layer passes events on to the sockets it holds.

Life of a room (:class:`~server.storage.races.RaceStatus`): ``lobby`` (players join and leave;
the host starts) → ``running`` (a countdown to ``starts_at``, when the deal is released to every
racer, until every racer has won, been blocked or resigned, or ``ends_at``) → ``finished`` with
ranked results. A lobby left empty or never started is ``closed``.

Here are the rules of a room's life; its queries are :mod:`server.storage.races`'s, what a room
looks like (and the order of the results) is :mod:`server.services.rooms`'s, and who is there
:mod:`server.services.room_presence`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence

from server.engine.actions import Status
from server.engine.codes import DealVersion, GameCode, RuleSet
from server.errors import (
    ConflictError,
    ErrorCode,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageConflict,
    StorageError,
    UnavailableError,
)
from server.services.bans import refuse_banned
from server.services.clock import Clock
from server.services.games import GameService
from server.services.players import PlayerInfo
from server.services.presence import LOCK_WAIT_S
from server.services.ratings import RatingService
from server.services.room_presence import RoomPresence
from server.services.rooms import (
    INVITE_ALPHABET,
    WATCHERS_SHOWN,
    Joined,
    RaceLimits,
    Room,
    Seat,
    new_invite,
    normalize_invite,
    rank_results,
    results_of,
    room_view,
)
from server.storage.presence import Connection, PresenceRole, PresenceStore
from server.storage.races import INVITE_KEY, RaceRow, RaceStatus, RaceStore, RoomDigest
from server.storage.transactions import Transaction

log = logging.getLogger(__name__)


class RaceService:
    """Creates, joins, starts and finishes races.

    Args:
        store: the rooms' queries.
        presence: the presence records' queries (a room operation records who follows it).
        clock: the UTC clock.
        games: the game service (race games are ordinary stored games).
        limits: room limits and timings.
        ratings: the rating service, which rates a rated race in the transaction that finishes
            it; None for a store that keeps no ratings (a rated race then rates nobody).
    """

    def __init__(
        self,
        store: RaceStore,
        presence: PresenceStore,
        clock: Clock,
        games: GameService,
        limits: RaceLimits | None = None,
        ratings: RatingService | None = None,
    ) -> None:
        self._store = store
        self._ratings = ratings
        self._presence = RoomPresence(store, presence)
        self._clock = clock
        self._games = games
        self.limits = limits or RaceLimits()
        games.on_race_game_ended(self.maybe_finish)

    # ------------------------------------------------------------------------------ rooms

    async def create(
        self,
        player: PlayerInfo,
        code: GameCode | None = None,
        rules: RuleSet = RuleSet.EASY,
        time_limit_s: int | None = None,
        connection: Connection | None = None,
        *,
        rated: bool = False,
    ) -> Room:
        """Open a room with the player as host and first racer.

        Args:
            player: the host.
            code: the host's deal, marked as such to everyone (the host may know its cards);
                when None, a fresh random TP2 deal under ``rules``, secret until the race is
                over (docs/rules.md §3 "TP2").
            rules: the rule set of a random deal.
            time_limit_s: the race's time limit (default :attr:`RaceLimits.default_time_limit_s`).
            connection: the host's connection, which follows the room from now on.
            rated: its results move the racers' ratings (docs/rules.md §4 "Ratings"): the
                host opts in, and every racer who takes a seat must too (:meth:`join`).

        Raises:
            InvalidInputError: ``rated_host_deal`` (``rated`` with a host's deal, ``code``:
                such a race is never rated), ``bad_time_limit``.
            ForbiddenError: ``banned``: a banned player opens no race.
            ConflictError: ``too_many_rooms``.
        """
        if rated and code is not None:
            raise InvalidInputError(
                "a race on a host's deal is never rated: open it without rated, or on a "
                "random deal (no code)",
                code=ErrorCode.RATED_HOST_DEAL,
            )
        async with self._store.transaction() as tx:
            refuse_banned(await self._store.ban_of(tx, player.id))
        limit = self.limits.time_limit(time_limit_s)
        deal = code if code is not None else GameCode.random(rules, DealVersion.TP2)
        now = self._clock.now()
        for _ in range(8):
            try:
                async with self._store.transaction() as tx:
                    self.limits.check_rooms(await self._store.seats.rooms_held(tx, player.id))
                    race = await self._store.create(
                        tx,
                        invite=new_invite(),
                        host_id=player.id,
                        code=deal,
                        host_deal=code is not None,
                        time_limit_s=limit,
                        max_players=self.limits.max_players,
                        now=now,
                        rated=rated,
                    )
                    if connection is not None:
                        await self._presence.follow(
                            tx, race, player.id, PresenceRole.RACER, connection, now
                        )
                    await tx.commit()
                return await self.room(race.invite)
            except StorageConflict as exc:
                if exc.constraint != INVITE_KEY:
                    raise
                continue  # an invite code collision: try another
        raise UnavailableError("could not allocate an invite code; try again")

    async def join(
        self,
        player: PlayerInfo,
        raw_invite: str,
        *,
        watch: bool = False,
        connection: Connection | None = None,
        rated: bool = False,
    ) -> Joined:
        """Take a seat in a lobby, or watch (a started race, or ``watch=True``).

        ``rated``: a player taking a seat opts into the room's rating; it must say what the
        room is (true in a rated room, false in one that is not: docs/rules.md §4 "Ratings").
        A racer already seated, or a spectator, is not asked.

        A racer of a started race who joins again (say, after a reconnect) gets their game. In a
        full lobby a newcomer takes the seat of the racer longest gone, if one is. ``connection``
        follows the room from now on (the player is connected there).

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
            ForbiddenError: ``banned``: a banned player takes no seat (watching is open).
            InvalidInputError: ``rated_mismatch``: taking a seat with ``rated`` not the room's.
            ConflictError: ``room_full``, ``too_many_rooms``, ``race_closed``.
        """
        invite = normalize_invite(raw_invite)
        async with self._store.transaction() as tx:
            race = _found(await self._store.find(tx, invite, lock=True), invite)
            now = self._clock.now()
            seat = await self._store.seats.find(tx, race.id, player.id)
            if seat is not None:
                race = await self._follow(tx, race, player.id, PresenceRole.RACER, connection, now)
                return Joined(await self._room(tx, race), True, seat.game_id)
            if race.status == RaceStatus.CLOSED:  # nothing to watch either
                raise ConflictError("this race room is closed", code=ErrorCode.RACE_CLOSED)
            if watch or race.status in (RaceStatus.RUNNING, RaceStatus.FINISHED):
                race = await self._follow(
                    tx, race, player.id, PresenceRole.WATCHER, connection, now
                )
                return Joined(await self._room(tx, race), False, None)
            refuse_banned(await self._store.ban_of(tx, player.id))
            _check_opt_in(race, rated)
            if await self._store.seats.taken(tx, race.id) >= race.max_players:
                gone = await self._store.seats.gone_racers(tx, race.id)
                if not gone:
                    raise ConflictError(
                        f"the room is full ({race.max_players} players)", code=ErrorCode.ROOM_FULL
                    )
                race = await self._presence.unseat(tx, race, gone[0], None, now)
            self.limits.check_rooms(await self._store.seats.rooms_held(tx, player.id))
            await self._store.seats.add(tx, race.id, player.id, now)
            if connection is not None:
                race, _ = await self._presence.follow(
                    tx, race, player.id, PresenceRole.RACER, connection, now
                )
            race = await self._store.announce(tx, race)
            await tx.commit()
            return Joined(await self._room(tx, race), True, None)

    async def leave(
        self,
        player: PlayerInfo,
        raw_invite: str,
        *,
        watching: bool = False,
        connection: Connection | None = None,
    ) -> Room:
        """Leave a room. In a lobby the seat is freed (the host's role passes to the next
        racer; an empty lobby closes); in a running race the player's game is resigned and
        they are gone; a watcher stops watching from ``connection``.

        Args:
            player: the leaving player.
            raw_invite: the room's invite code.
            watching: whether the player watches the room (a spectator has no seat to free,
                but may stop watching).
            connection: the connection that leaves (it no longer follows the room).

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
            ConflictError: ``not_in_race`` for a player neither seated in nor watching it.
        """
        invite = normalize_invite(raw_invite)
        resign_game: int | None = None
        async with self._store.transaction() as tx:
            race = _found(await self._store.find(tx, invite, lock=True), invite)
            now = self._clock.now()
            seat = await self._store.seats.find(tx, race.id, player.id)
            if seat is None and not watching:
                raise ConflictError(f"you are not in race {invite}", code=ErrorCode.NOT_IN_RACE)
            if seat is not None and race.status == RaceStatus.LOBBY:
                race = await self._presence.unseat(tx, race, player.id, connection, now)
                await self._store.announce(tx, race)
            elif seat is not None and race.status == RaceStatus.RUNNING:
                resign_game = seat.game_id
                await self._presence.mark_gone(tx, race.id, player.id, connection, now)
                await self._store.announce(tx, race)
            elif (
                seat is None
                and connection is not None
                and await self._presence.unfollow_one(tx, race.id, player.id, connection)
            ):
                await self._store.announce(tx, race)
            await tx.commit()
        if resign_game is not None:
            try:
                await self._games.resign(player.id, resign_game)
            except InvalidInputError as exc:
                if exc.code is ErrorCode.STALE_SEQ:  # the game kept moving on: the player must know
                    raise
                # otherwise the game is already over, or the race ended: nothing to resign
        return await self.room(invite)

    async def start(
        self, player: PlayerInfo, raw_invite: str, connection: Connection | None = None
    ) -> Room:
        """The host starts the race: the countdown begins and every racer gets a game of the
        room's deal, released at ``starts_at``. ``connection`` (the host's) follows the room:
        the host is connected; racers who are gone are dealt out.

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
            ForbiddenError: ``not_host``; ``banned``: a host banned since the lobby opened
                deals no ranked games (the room stays a lobby).
            ConflictError: ``already_started`` (running or finished) or ``race_closed``.
        """
        invite = normalize_invite(raw_invite)
        async with self._store.transaction() as tx:
            race = _found(await self._store.find(tx, invite, lock=True), invite)
            now = self._clock.now()
            if race.host_id != player.id:
                raise ForbiddenError("only the host can start the race", code=ErrorCode.NOT_HOST)
            if race.status == RaceStatus.CLOSED:
                raise ConflictError("this race room is closed", code=ErrorCode.RACE_CLOSED)
            if race.status != RaceStatus.LOBBY:
                raise ConflictError("the race has already started", code=ErrorCode.ALREADY_STARTED)
            refuse_banned(await self._store.ban_of(tx, player.id))
            if connection is not None:
                race, _ = await self._presence.follow(
                    tx, race, player.id, PresenceRole.RACER, connection, now
                )
            for gone in await self._store.seats.gone_racers(tx, race.id):  # dealt out
                race = await self._presence.unseat(tx, race, gone, None, now)
            seats = await self._store.seats.all(tx, race.id)
            starts_at = now + dt.timedelta(seconds=self.limits.countdown_s)
            ends_at = starts_at + dt.timedelta(seconds=race.time_limit_s)
            games = await self._games.create_race_games(
                tx, race.id, race.code, [s.player_id for s in seats], starts_at
            )
            race = await self._store.start(tx, race, starts_at, ends_at, games)
            await tx.commit()
            return await self._room(tx, race)

    async def open_matched(
        self, tx: Transaction, player_ids: Sequence[int], rules: RuleSet
    ) -> RaceRow:
        """Open and start, in ``tx`` (not committed here), the rated race of a quick-race
        match: a fresh sealed TP2 deal under ``rules``, the players seated in this order (the
        first as host), their games released after the usual countdown. Each racer is
        expected (reconnecting from now, docs/rules.md §4 "Presence"): one who never takes
        their seat is gone after the grace period, and their game resigned.

        Args:
            tx: the matcher's transaction (the players' queue rows are locked in it).
            player_ids: the match's players (two or more).
            rules: the rule set.

        Raises:
            ValueError: fewer than two players.
            StorageConflict: an invite code collision (the transaction must be rolled back).
        """
        if len(player_ids) < 2:
            raise ValueError(f"a quick race needs two players or more, not {len(player_ids)}")
        now = self._clock.now()
        race = await self._store.create(
            tx,
            invite=new_invite(),
            host_id=player_ids[0],
            code=GameCode.random(rules, DealVersion.TP2),
            host_deal=False,
            time_limit_s=self.limits.default_time_limit_s,
            max_players=max(self.limits.max_players, len(player_ids)),
            now=now,
            rated=True,
        )
        for player_id in player_ids[1:]:
            await self._store.seats.add(tx, race.id, player_id, now)
        starts_at = now + dt.timedelta(seconds=self.limits.countdown_s)
        ends_at = starts_at + dt.timedelta(seconds=race.time_limit_s)
        games = await self._games.create_race_games(
            tx, race.id, race.code, list(player_ids), starts_at
        )
        race = await self._store.start(tx, race, starts_at, ends_at, games)
        for player_id in player_ids:  # gone after the grace period unless they come
            await self._presence.expect(tx, race, player_id, now)
        return race

    async def room(self, raw_invite: str) -> Room:
        """A room's current state.

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
        """
        invite = normalize_invite(raw_invite)
        async with self._store.transaction() as tx:
            return await self._room(tx, _found(await self._store.find(tx, invite), invite))

    async def digests(self, race_ids: Iterable[int]) -> dict[int, RoomDigest]:
        """For each of these rooms that exists, what changes with every change of the room
        or of a racer's progress (:data:`~server.storage.races.RoomDigest`), in one read: a
        follower compares it with what it last sent before it reads a room whole."""
        async with self._store.transaction() as tx:
            return await self._store.digests(tx, race_ids)

    async def active_for(self, player_id: int) -> list[Room]:
        """The rooms (lobby or running) the player sits in, newest first."""
        async with self._store.transaction() as tx:
            races = await self._store.open_rooms_of(tx, player_id)
            return [await self._room(tx, race) for race in races]

    def started(self, room: Room) -> bool:
        """Whether the room's race has started by this server's clock: its countdown is over
        and the deal is released to its racers (docs/rules.md §4 "Races")."""
        return room.starts_at is not None and room.starts_at <= self._clock.now()

    # ----------------------------------------------------------------------------- ending

    async def maybe_finish(self, race_id: int, *, lock_wait_s: float | None = None) -> bool:
        """Finish a running race if every racer is done or its time is up: rank the results,
        rate a rated race from them (:class:`RatingService`; each rated racer's result then
        carries their ``rating`` change), store them and announce them, all in one
        transaction. Safe to call from any process, any number of times: the
        race row's lock makes exactly one caller finish it.

        Args:
            race_id: the race.
            lock_wait_s: the longest to wait for the race row when another transaction holds
                it (then :class:`~server.errors.StorageUnavailable`); None waits as long as it
                takes.

        Returns:
            True when this call finished the race.
        """
        async with self._store.transaction() as tx:
            if lock_wait_s is not None:
                await self._store.limit_lock_waits(tx, lock_wait_s)
            race = await self._store.lock(tx, race_id)
            if race is None or race.status != RaceStatus.RUNNING:
                return False
            assert race.starts_at is not None and race.ends_at is not None
            now = self._clock.now()
            games = await self._store.seats.games(tx, race_id)
            if now < race.ends_at and any(g.status == Status.PLAYING for g in games):
                return False
            results = results_of(games, race.starts_at)
            finished_at = min(now, race.ends_at)
            if race.rated and not race.host_deal and self._ratings is not None:
                # Rated before the results are stored, in their transaction: the results
                # carry each racer's change, and are never announced without it.
                results = await self._ratings.rate_race(
                    tx, race.id, race.rules, results, finished_at
                )
            await self._store.finish(tx, race, finished_at, results)
            await tx.commit()
            log.info("race %s finished", race.invite)
            return True

    async def sweep(self) -> None:
        """Finish running races whose time is up, and close lobbies never started."""
        now = self._clock.now()
        async with self._store.transaction() as tx:
            due = await self._store.due(tx, now)
            ttl = dt.timedelta(seconds=self.limits.lobby_ttl_s)
            await self._store.close_lobbies(tx, now - ttl, now)
            await tx.commit()
        for race_id in due:  # one locked race holds up only itself
            try:
                await self.maybe_finish(race_id, lock_wait_s=LOCK_WAIT_S)
            except StorageError as exc:
                log.info("race %s left for the next sweep (%s)", race_id, type(exc).__name__)

    # ---------------------------------------------------------------------------- helpers

    async def _follow(
        self,
        tx: Transaction,
        race: RaceRow,
        player_id: int,
        role: PresenceRole,
        connection: Connection | None,
        now: dt.datetime,
    ) -> RaceRow:
        """``connection`` follows the room (locked) for the player since ``now``; a change is
        announced; the transaction is committed."""
        if connection is None:
            return race
        race, changed = await self._presence.follow(tx, race, player_id, role, connection, now)
        if changed:
            race = await self._store.announce(tx, race)
        await tx.commit()
        return race

    async def _room(self, tx: Transaction, race: RaceRow) -> Room:
        """The room as shown, from its row and its seats and watchers read now."""
        seats = await self._store.seats.shown(tx, race.id)
        watchers, total = await self._store.seats.watchers(tx, race.id, WATCHERS_SHOWN)
        return room_view(race, seats, watchers, total, self._clock.now(), self.limits.grace_s)


def _check_opt_in(race: RaceRow, rated: bool) -> None:
    """A player taking a seat says what the room is: rated (opting into its rating) or not.

    Raises:
        InvalidInputError: ``rated_mismatch``, saying which.
    """
    if race.rated and not rated:
        raise InvalidInputError(
            f"race {race.invite} is rated: join it with rated: true to agree that its results "
            "move your rating, or watch it",
            code=ErrorCode.RATED_MISMATCH,
        )
    if rated and not race.rated:
        raise InvalidInputError(
            f"race {race.invite} is not rated: join it without rated",
            code=ErrorCode.RATED_MISMATCH,
        )


def _found(race: RaceRow | None, invite: str) -> RaceRow:
    """The race found by its invite.

    Raises:
        NotFoundError: ``unknown_invite``: none was.
    """
    if race is None:
        raise NotFoundError(f"there is no race {invite}", code=ErrorCode.UNKNOWN_INVITE)
    return race


__all__ = [
    "INVITE_ALPHABET",
    "Joined",
    "RaceLimits",
    "RaceService",
    "Room",
    "Seat",
    "normalize_invite",
    "rank_results",
]
