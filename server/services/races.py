"""Races: friends play the same deal at the same server time (docs/rules.md §4 "Races").

A room lives in PostgreSQL (``races``, ``race_players``), so any server process can serve any of
its players. Every change is published as an event (``LISTEN/NOTIFY``) inside the transaction
that makes it; the web layer passes events on to the sockets it holds.

Life of a room: ``lobby`` (players join and leave; the host starts) → ``running`` (a countdown
to ``starts_at``, when the deal is released to every racer, until every racer has won, been
blocked or resigned, or ``ends_at``) → ``finished`` with ranked results. A lobby left empty or
never started is ``closed``.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

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
from server.services.clock import Clock, elapsed_ms
from server.services.games import GameService
from server.services.players import PlayerInfo
from server.services.presence import (
    CONNECTED,
    LOCK_WAIT_S,
    OPEN_ROOMS,
    RACER,
    WATCHER,
    Connection,
    Presence,
    Watcher,
    announce,
    follow,
    gone_racers,
    leave_seat,
    limit_lock_waits,
    mark_gone,
    next_host,
    presence_of,
    publish_room,
    unfollow_one,
)
from server.storage.events import RaceFinished, RaceRoomChanged, RaceStarted, publish
from server.storage.models import Game as GameRow
from server.storage.models import Player, PresenceRole, Race, RacePlayer, RacePresence, RaceStatus
from server.storage.sessions import Sessions

#: Watchers listed in a room (connected ones first); ``watchers_total`` counts them all.
WATCHERS_SHOWN = 50

log = logging.getLogger(__name__)

#: Invite codes: easy to read aloud and type; no 0/O, 1/I/L, 5/S, 2/Z, 8/B look-alikes.
INVITE_ALPHABET = "34679ACDEFGHJKMNPQRTUVWXY"
INVITE_LENGTH = 6


@dataclass(frozen=True, slots=True)
class RaceLimits:
    """Room limits and timings.

    Attributes:
        max_players: seats per room.
        max_rooms: rooms (lobby or running) one player may sit in at once.
        countdown_s: seconds from the host's start to the deal's release.
        default_time_limit_s / min_time_limit_s / max_time_limit_s: the race time limit.
        lobby_ttl_s: a lobby never started is closed after this long.
        grace_s: seconds a racer or watcher whose connections all closed keeps their place
            (reconnecting) before they are gone (docs/rules.md §4 "Presence").
        instance_timeout_s: seconds after which a server process that stopped refreshing its
            record is taken for dead, and its players start reconnecting.
    """

    max_players: int = 8
    max_rooms: int = 3
    countdown_s: float = 5.0
    default_time_limit_s: int = 600
    min_time_limit_s: int = 30
    max_time_limit_s: int = 7200
    lobby_ttl_s: int = 7200
    grace_s: float = 60.0
    instance_timeout_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Seat:
    """A racer in a room, with their game's progress once the race has started."""

    player_id: int
    name: str
    seat: int
    game_id: int | None
    cards_left: int | None = None
    score: int | None = None
    moves: int | None = None
    status: str | None = None
    elapsed_ms: int | None = None
    presence: Presence | None = None


@dataclass(frozen=True, slots=True)
class Room:
    """A race room as anyone with its invite may see it (never a card; the code only once
    the race is finished).

    ``host_deal``: the host chose the deal's code (and may know its cards); otherwise it is a
    random TP2 deal nobody knows before the race ends.
    """

    id: int
    invite: str
    host_id: int
    status: str
    rules: RuleSet
    code: GameCode | None
    host_deal: bool
    time_limit_s: int
    max_players: int
    version: int
    created_at: dt.datetime
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    finished_at: dt.datetime | None
    seats: tuple[Seat, ...]
    results: list[dict[str, Any]] | None
    watchers: tuple[Watcher, ...] = ()
    watchers_total: int = 0
    grace_s: float = 60.0

    def seat_of(self, player_id: int) -> Seat | None:
        """The player's seat, or None for a spectator."""
        return next((s for s in self.seats if s.player_id == player_id), None)


@dataclass(frozen=True, slots=True)
class Joined:
    """The answer to a join: the room, and the player's game when they race in a started race."""

    room: Room
    racer: bool
    game_id: int | None


def normalize_invite(raw: str) -> str:
    """Upper-case an invite code and drop spaces and dashes.

    Raises:
        InvalidInputError: ``bad_invite`` when it is not 6 characters of the invite alphabet.
    """
    invite = raw.replace("-", "").replace(" ", "").upper()
    if len(invite) != INVITE_LENGTH or any(c not in INVITE_ALPHABET for c in invite):
        raise InvalidInputError(
            f"{raw[:20]!r} is not an invite code ({INVITE_LENGTH} characters)",
            code=ErrorCode.BAD_INVITE,
        )
    return invite


def rank_results(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order racers for the results (docs/rules.md §4): those who cleared all 28 cards first, by
    finish time; then the rest by score (higher first), then cards left (fewer first); then player
    id.

    Args:
        rows: one dict per racer with ``player_id``, ``name``, ``status``, ``score``,
            ``cards_left``, ``moves`` and ``elapsed_ms`` (ms from the start to their end, or
            None for a game still going when the race ended).

    Returns:
        New dicts with ``rank`` (1, 2, 3, … — one agreed order, no shared ranks) and
        ``cleared`` added.
    """

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        if row["status"] == "won":
            return (0, row["elapsed_ms"], 0, 0, row["player_id"])
        return (1, 0, -row["score"], row["cards_left"], row["player_id"])

    ordered = sorted(rows, key=key)
    return [
        {**row, "rank": i, "cleared": row["status"] == "won"} for i, row in enumerate(ordered, 1)
    ]


class RaceService:
    """Creates, joins, starts and finishes races.

    Args:
        sessions: database session factory.
        clock: the UTC clock.
        games: the game service (race games are ordinary stored games).
        limits: room limits and timings.
    """

    def __init__(
        self,
        sessions: Sessions,
        clock: Clock,
        games: GameService,
        limits: RaceLimits | None = None,
    ) -> None:
        self._sessions = sessions
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

        Raises:
            InvalidInputError: ``bad_time_limit``.
            ConflictError: ``too_many_rooms``.
        """
        limit = self.limits.default_time_limit_s if time_limit_s is None else time_limit_s
        if not self.limits.min_time_limit_s <= limit <= self.limits.max_time_limit_s:
            raise InvalidInputError(
                f"time_limit_s must be {self.limits.min_time_limit_s}.."
                f"{self.limits.max_time_limit_s}",
                code=ErrorCode.BAD_TIME_LIMIT,
            )
        deal = code if code is not None else GameCode.random(rules, DealVersion.TP2)
        now = self._clock.now()
        for _ in range(8):
            try:
                async with self._sessions() as session:
                    await self._check_room_count(session, player.id)
                    race = Race(
                        invite=_new_invite(),
                        host_id=player.id,
                        code=str(deal),
                        rules=deal.rules.value,
                        status="lobby",
                        host_deal=code is not None,
                        time_limit_s=limit,
                        max_players=self.limits.max_players,
                        version=1,
                        created_at=now,
                    )
                    session.add(race)
                    await session.flush()
                    session.add(
                        RacePlayer(race_id=race.id, player_id=player.id, seat=1, joined_at=now)
                    )
                    if connection is not None:
                        await follow(session, race, player.id, RACER, connection, now)
                    await publish_room(session, race)
                    await session.commit()
                return await self.room(race.invite)
            except StorageConflict:  # an invite code collision: try another
                continue
        raise UnavailableError("could not allocate an invite code; try again")

    async def join(
        self,
        player: PlayerInfo,
        raw_invite: str,
        *,
        watch: bool = False,
        connection: Connection | None = None,
    ) -> Joined:
        """Take a seat in a lobby, or watch (a started race, or ``watch=True``).

        A racer of a started race who joins again (say, after a reconnect) gets their game. In a
        full lobby a newcomer takes the seat of the racer longest gone, if one is. ``connection``
        follows the room from now on (the player is connected there).

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
            ConflictError: ``room_full``, ``too_many_rooms``, ``race_closed``.
        """
        invite = normalize_invite(raw_invite)
        async with self._sessions() as session:
            race = await self._race_for_update(session, invite)
            seat = await session.get(RacePlayer, (race.id, player.id))
            if seat is not None:
                await self._follow(session, race, player.id, RACER, connection)
                return Joined(await self._room(session, race), True, seat.game_id)
            if race.status == "closed":  # nothing to watch either
                raise ConflictError("this race room is closed", code=ErrorCode.RACE_CLOSED)
            if watch or race.status in ("running", "finished"):
                await self._follow(session, race, player.id, WATCHER, connection)
                return Joined(await self._room(session, race), False, None)
            taken = await session.scalar(
                select(func.count()).select_from(RacePlayer).where(RacePlayer.race_id == race.id)
            )
            if (taken or 0) >= race.max_players:
                gone = await gone_racers(session, race.id)
                if not gone:
                    raise ConflictError(
                        f"the room is full ({race.max_players} players)", code=ErrorCode.ROOM_FULL
                    )
                await self._unseat(session, race, gone[0])
            await self._check_room_count(session, player.id)
            last = await session.scalar(
                select(func.max(RacePlayer.seat)).where(RacePlayer.race_id == race.id)
            )
            session.add(
                RacePlayer(
                    race_id=race.id,
                    player_id=player.id,
                    seat=(last or 0) + 1,
                    joined_at=self._clock.now(),
                )
            )
            if connection is not None:
                await follow(session, race, player.id, RACER, connection, self._clock.now())
            await announce(session, race)
            await session.commit()
            return Joined(await self._room(session, race), True, None)

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
        async with self._sessions() as session:
            race = await self._race_for_update(session, invite)
            seat = await session.get(RacePlayer, (race.id, player.id))
            if seat is None and not watching:
                raise ConflictError(f"you are not in race {invite}", code=ErrorCode.NOT_IN_RACE)
            if seat is not None and race.status == "lobby":
                await self._unseat(session, race, player.id, connection)
                await announce(session, race)
            elif seat is not None and race.status == "running":
                resign_game = seat.game_id
                await mark_gone(session, race.id, player.id, connection, self._clock.now())
                await announce(session, race)
            elif (
                seat is None
                and connection is not None
                and await unfollow_one(session, race.id, player.id, connection)
            ):
                await announce(session, race)
            await session.commit()
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
            ForbiddenError: ``not_host``.
            ConflictError: ``already_started`` (running or finished) or ``race_closed``.
        """
        invite = normalize_invite(raw_invite)
        async with self._sessions() as session:
            race = await self._race_for_update(session, invite)
            if race.host_id != player.id:
                raise ForbiddenError("only the host can start the race", code=ErrorCode.NOT_HOST)
            if race.status == "closed":
                raise ConflictError("this race room is closed", code=ErrorCode.RACE_CLOSED)
            if race.status != "lobby":
                raise ConflictError("the race has already started", code=ErrorCode.ALREADY_STARTED)
            if connection is not None:
                await follow(session, race, player.id, RACER, connection, self._clock.now())
                await session.flush()
            for gone in await gone_racers(session, race.id):  # dealt out (rules §4)
                await self._unseat(session, race, gone)
            seats = (
                await session.scalars(
                    select(RacePlayer)
                    .where(RacePlayer.race_id == race.id)
                    .order_by(RacePlayer.seat)
                )
            ).all()
            now = self._clock.now()
            starts_at = now + dt.timedelta(seconds=self.limits.countdown_s)
            ends_at = starts_at + dt.timedelta(seconds=race.time_limit_s)
            games = await self._games.create_race_games(
                session,
                race.id,
                GameCode.parse(race.code),
                [s.player_id for s in seats],
                starts_at,
            )
            for seat in seats:
                seat.game_id = games[seat.player_id]
            race.status = RaceStatus.RUNNING
            race.starts_at, race.ends_at = starts_at, ends_at
            race.version += 1
            await publish(
                session, RaceStarted(race.id, race.invite, race.version, starts_at, games)
            )
            await session.commit()
            return await self._room(session, race)

    async def room(self, raw_invite: str) -> Room:
        """A room's current state.

        Raises:
            InvalidInputError: ``bad_invite``.
            NotFoundError: ``unknown_invite``.
        """
        invite = normalize_invite(raw_invite)
        async with self._sessions() as session:
            race = await session.scalar(select(Race).where(Race.invite == invite))
            if race is None:
                raise NotFoundError(f"there is no race {invite}", code=ErrorCode.UNKNOWN_INVITE)
            return await self._room(session, race)

    async def active_for(self, player_id: int) -> list[Room]:
        """The rooms (lobby or running) the player sits in, newest first."""
        async with self._sessions() as session:
            races = (
                await session.scalars(
                    select(Race)
                    .join(RacePlayer, RacePlayer.race_id == Race.id)
                    .where(RacePlayer.player_id == player_id, Race.status.in_(OPEN_ROOMS))
                    .order_by(Race.created_at.desc(), Race.id.desc())
                )
            ).all()
            return [await self._room(session, race) for race in races]

    # ----------------------------------------------------------------------------- ending

    async def maybe_finish(self, race_id: int, *, lock_wait_s: float | None = None) -> bool:
        """Finish a running race if every racer is done or its time is up: rank the results,
        store them and announce them. Safe to call from any process, any number of times: the
        race row's lock makes exactly one caller finish it.

        Args:
            race_id: the race.
            lock_wait_s: the longest to wait for the race row when another transaction holds
                it (then ``sqlalchemy.exc.OperationalError``); None waits as long as it takes.

        Returns:
            True when this call finished the race.
        """
        async with self._sessions() as session:
            if lock_wait_s is not None:
                await limit_lock_waits(session, lock_wait_s)
            race = await session.scalar(select(Race).where(Race.id == race_id).with_for_update())
            if race is None or race.status != "running":
                return False
            assert race.starts_at is not None and race.ends_at is not None
            now = self._clock.now()
            rows = (
                await session.execute(
                    select(
                        GameRow.player_id,
                        Player.name,
                        GameRow.status,
                        GameRow.score,
                        GameRow.cards_left,
                        GameRow.moves,
                        GameRow.elapsed_ms,
                        GameRow.finished_at,
                    )
                    .join(Player, Player.id == GameRow.player_id)
                    .where(GameRow.race_id == race_id)
                )
            ).all()
            if now < race.ends_at and any(r.status == "playing" for r in rows):
                return False
            results = rank_results(
                [
                    {
                        "player_id": r.player_id,
                        "name": r.name,
                        "status": r.status,
                        "score": r.score,
                        "cards_left": r.cards_left,
                        "moves": r.moves,
                        "elapsed_ms": r.elapsed_ms,
                    }
                    for r in rows
                ]
            )
            race.status = RaceStatus.FINISHED
            race.finished_at = min(now, race.ends_at)
            race.results = results
            race.version += 1
            await publish(session, RaceFinished(race.id, race.invite, race.version))
            await session.commit()
            log.info("race %s finished", race.invite)
            return True

    async def sweep(self) -> None:
        """Finish running races whose time is up, and close lobbies never started."""
        now = self._clock.now()
        async with self._sessions() as session:
            due = (
                await session.scalars(
                    select(Race.id).where(Race.status == "running", Race.ends_at <= now)
                )
            ).all()
            stale = (
                await session.execute(
                    update(Race)
                    .where(
                        Race.status == "lobby",
                        Race.created_at <= now - dt.timedelta(seconds=self.limits.lobby_ttl_s),
                    )
                    .values(status="closed", finished_at=now, version=Race.version + 1)
                    .returning(Race.id, Race.invite)
                )
            ).all()
            for race_id, invite in stale:
                await publish(session, RaceRoomChanged(race_id, invite))
            await session.commit()
        for race_id in due:  # one locked race holds up only itself
            try:
                await self.maybe_finish(race_id, lock_wait_s=LOCK_WAIT_S)
            except StorageError as exc:
                log.info("race %s left for the next sweep (%s)", race_id, type(exc).__name__)

    # ---------------------------------------------------------------------------- helpers

    async def _race_for_update(self, session: AsyncSession, invite: str) -> Race:
        race = await session.scalar(select(Race).where(Race.invite == invite).with_for_update())
        if race is None:
            raise NotFoundError(f"there is no race {invite}", code=ErrorCode.UNKNOWN_INVITE)
        return race

    async def _follow(
        self,
        session: AsyncSession,
        race: Race,
        player_id: int,
        role: PresenceRole,
        connection: Connection | None,
    ) -> None:
        """``connection`` follows the room (locked) for the player; announce a change."""
        if connection is None:
            return
        if await follow(session, race, player_id, role, connection, self._clock.now()):
            await announce(session, race)
        await session.commit()

    async def _unseat(
        self,
        session: AsyncSession,
        race: Race,
        player_id: int,
        connection: Connection | None = None,
    ) -> None:
        """Free a lobby seat (the room is locked) — by the player from ``connection``, or for
        them (None: dealt out, or their seat given away): the host's role passes to the next
        seated racer; a lobby left empty closes. The caller announces the change."""
        await session.execute(
            delete(RacePlayer).where(
                RacePlayer.race_id == race.id, RacePlayer.player_id == player_id
            )
        )
        await leave_seat(session, race.id, player_id, connection)
        if race.host_id == player_id:
            heir = await next_host(session, race.id, connected_only=False)
            if heir is None:
                race.status = RaceStatus.CLOSED
                race.finished_at = self._clock.now()
            else:
                race.host_id = heir

    async def _check_room_count(self, session: AsyncSession, player_id: int) -> None:
        # Lock the player's row first: their joins and creates (from several connections or
        # processes at once) then take turns, so none counts before another's seat is in.
        await session.execute(
            select(Player.id).where(Player.id == player_id).with_for_update(key_share=True)
        )
        count = await session.scalar(
            select(func.count())
            .select_from(RacePlayer)
            .join(Race, Race.id == RacePlayer.race_id)
            .where(RacePlayer.player_id == player_id, Race.status.in_(("lobby", "running")))
        )
        if (count or 0) >= self.limits.max_rooms:
            raise ConflictError(
                f"you are already in {count} race rooms (at most {self.limits.max_rooms}); "
                "leave one first",
                code=ErrorCode.TOO_MANY_ROOMS,
            )

    async def _room(self, session: AsyncSession, race: Race) -> Room:
        rows = (
            await session.execute(
                select(
                    RacePlayer.player_id,
                    Player.name,
                    RacePlayer.seat,
                    RacePlayer.game_id,
                    GameRow.cards_left,
                    GameRow.score,
                    GameRow.moves,
                    GameRow.status,
                    GameRow.elapsed_ms,
                    GameRow.created_at,
                    RacePresence.state.label("presence"),
                    RacePresence.since.label("presence_since"),
                )
                .join(Player, Player.id == RacePlayer.player_id)
                .outerjoin(GameRow, GameRow.id == RacePlayer.game_id)
                .outerjoin(
                    RacePresence,
                    (RacePresence.race_id == RacePlayer.race_id)
                    & (RacePresence.player_id == RacePlayer.player_id),
                )
                .where(RacePlayer.race_id == race.id)
                .order_by(RacePlayer.seat)
            )
        ).all()
        grace = self.limits.grace_s
        watcher_rows = (
            await session.execute(
                select(
                    RacePresence.player_id,
                    Player.name,
                    RacePresence.state,
                    RacePresence.since,
                    func.count().over().label("total"),
                )
                .join(Player, Player.id == RacePresence.player_id)
                .where(RacePresence.race_id == race.id, RacePresence.role == WATCHER)
                .order_by(
                    case((RacePresence.state == CONNECTED, 0), else_=1),
                    RacePresence.since,
                    RacePresence.player_id,
                )
                .limit(WATCHERS_SHOWN)
            )
        ).all()
        now = self._clock.now()
        seats = []
        for r in rows:
            presence = (
                None if r.presence is None else presence_of(r.presence, r.presence_since, grace)
            )
            elapsed = r.elapsed_ms
            if r.game_id is not None and elapsed is None and r.created_at is not None:
                end = min(now, race.ends_at) if race.ends_at else now
                elapsed = elapsed_ms(r.created_at, end)
            seats.append(
                Seat(
                    r.player_id,
                    r.name,
                    r.seat,
                    r.game_id,
                    r.cards_left,
                    r.score,
                    r.moves,
                    r.status,
                    elapsed,
                    presence,
                )
                if r.game_id is not None
                else Seat(r.player_id, r.name, r.seat, None, presence=presence)
            )
        return Room(
            id=race.id,
            invite=race.invite,
            host_id=race.host_id,
            status=race.status,
            rules=RuleSet(race.rules),
            code=GameCode.parse(race.code) if race.status == "finished" else None,
            host_deal=race.host_deal,
            time_limit_s=race.time_limit_s,
            max_players=race.max_players,
            version=race.version,
            created_at=race.created_at,
            starts_at=race.starts_at,
            ends_at=race.ends_at,
            finished_at=race.finished_at,
            seats=tuple(seats),
            results=race.results,
            watchers=tuple(
                Watcher(w.player_id, w.name, presence_of(w.state, w.since, grace))
                for w in watcher_rows
            ),
            watchers_total=watcher_rows[0].total if watcher_rows else 0,
            grace_s=grace,
        )


def _new_invite() -> str:
    return "".join(secrets.choice(INVITE_ALPHABET) for _ in range(INVITE_LENGTH))


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
