"""Following players, who of them is online, their daily results, and race invitations
(docs/rules.md §4 "Following").

Following is one-way: a player follows another without asking them, and stops when they like.
A player follows at most :data:`MAX_FOLLOWING` players and never themself; following a player
twice changes nothing. A name is read as registration reads it (``server.names.name_key`` of
the normalised name: any case, look-alike letters), so it finds the player whose name it looks
like.

A player is online while one of their websockets that said hello is open on a server process
seen in time (each process records its own in the store, in batches, and forgets each at its
close; after a failed write its sweep brings the records in line; a process taken for dead takes
its records with it).

A racer seated in a lobby may invite a player they follow who is online and not seated there:
every process holding that player's websockets tells them (``race_invite``). To keep it from
being used to pester, one racer sends at most :data:`INVITES_PER_MINUTE` invitations a
minute, and the same player to the same room at most once every :data:`INVITE_AGAIN_S`
seconds (counted by each server process).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from server.errors import (
    ConflictError,
    ErrorCode,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
)
from server.services.clock import Clock
from server.services.leaderboards import Entry, LeaderboardService
from server.services.online import OnlineRecorder
from server.services.players import PlayerInfo, lookup_key
from server.services.rooms import Room
from server.storage.events import RaceInvited
from server.storage.follows import Followed, FollowStore
from server.storage.online import OnlineStore
from server.storage.races import RaceStatus

#: The most players one player may follow.
MAX_FOLLOWING = 500
#: The most race invitations one racer sends in any 60 seconds (on one server process).
INVITES_PER_MINUTE = 10
#: Seconds before a racer may invite the same player to the same room again.
INVITE_AGAIN_S = 30.0


@dataclass(frozen=True, slots=True)
class FollowedPlayer:
    """A player one follows: id, display name, since when (aware UTC), and whether they are
    online now."""

    id: int
    name: str
    since: dt.datetime
    online: bool


@dataclass(frozen=True, slots=True)
class Invitation:
    """An invitation to a race room as its invited player is told: the room's invite code and
    who invited them."""

    invite: str
    from_id: int
    from_name: str


class FriendService:
    """Follows, who is online, the friends' view of a daily board, and race invitations.

    Args:
        follows: where follows are kept.
        online: where open connections are kept (and invitations announced).
        leaderboards: the daily boards (the friends' view shows their ranks).
        clock: the UTC clock (when a player was followed; the invitations' limits).
        instance: this server process's id in the presence records.
        instance_timeout_s: seconds after which a process not seen counts for nobody online.
        max_following: the most players one may follow.
    """

    def __init__(
        self,
        follows: FollowStore,
        online: OnlineStore,
        leaderboards: LeaderboardService,
        clock: Clock,
        *,
        instance: str,
        instance_timeout_s: float,
        max_following: int = MAX_FOLLOWING,
    ) -> None:
        self._follows = follows
        self._online = online
        self._leaderboards = leaderboards
        self._clock = clock
        self.instance = instance
        self.instance_timeout_s = instance_timeout_s
        self.max_following = max_following
        #: This process's records of who is online, written in batches.
        self.records = OnlineRecorder(online, instance, clock)
        #: When each racer sent their invitations of the last minute (UTC), oldest first.
        self._sent: dict[int, deque[dt.datetime]] = {}
        #: When each (racer, room, player) invitation was last sent.
        self._last: dict[tuple[int, int, int], dt.datetime] = {}

    # ------------------------------------------------------------------------------ follows

    async def follow(self, me: int, player_id: int) -> FollowedPlayer:
        """Follow a player by id (docs/rules.md §4 "Following"); following them again changes
        nothing.

        Returns:
            The player followed, since when, and whether they are online.

        Raises:
            InvalidInputError: ``cannot_follow_self``.
            NotFoundError: ``unknown_player``: no player has that id.
            ConflictError: ``following_limit``: ``me`` already follows :attr:`max_following`
                players (nothing changed).
            StorageError: the database failed; nothing changed.
        """
        if player_id == me:
            raise InvalidInputError("you cannot follow yourself", code=ErrorCode.CANNOT_FOLLOW_SELF)
        outcome, row = await self._follows.follow(
            me, player_id, self._clock.now(), limit=self.max_following
        )
        if outcome is Followed.NO_PLAYER:
            raise NotFoundError(f"no player has id {player_id}", code=ErrorCode.UNKNOWN_PLAYER)
        if outcome is Followed.LIMIT:
            raise ConflictError(
                f"you already follow {self.max_following} players, the most one may follow; "
                "unfollow one first",
                code=ErrorCode.FOLLOWING_LIMIT,
            )
        assert row is not None  # NEW or ALREADY: the follow as it stood when made or found
        online = await self._online.online_among([player_id], self.instance_timeout_s)
        return FollowedPlayer(row.id, row.name, row.since, player_id in online)

    async def follow_name(self, me: int, raw_name: object) -> FollowedPlayer:
        """Follow a player by name, read as registration reads it (any case, look-alike
        letters: the player whose name it looks like).

        Raises:
            NotFoundError: ``unknown_player``: no player's name looks like it (also for text
                that cannot be a name).
            InvalidInputError, ConflictError, StorageError: as :meth:`follow`.
        """
        key = lookup_key(raw_name)
        player = None if key is None else await self._follows.player_named(key)
        if player is None:
            shown = raw_name[:40] if isinstance(raw_name, str) else raw_name
            raise NotFoundError(f"no player is named {shown!r}", code=ErrorCode.UNKNOWN_PLAYER)
        return await self.follow(me, player.id)

    async def unfollow(self, me: int, player_id: int) -> bool:
        """Stop following a player (nothing when one did not follow them).

        Returns:
            Whether ``me`` followed them.

        Raises:
            StorageError: the database failed; nothing changed.
        """
        return await self._follows.unfollow(me, player_id)

    async def following(self, me: int) -> list[FollowedPlayer]:
        """The players ``me`` follows, the earliest followed first, each with whether they
        are online now.

        Raises:
            StorageError: the database failed.
        """
        rows = await self._follows.following(me)
        online = await self._online.online_among([r.id for r in rows], self.instance_timeout_s)
        return [FollowedPlayer(r.id, r.name, r.since, r.id in online) for r in rows]

    async def board(self, date: dt.date, me: int) -> list[Entry]:
        """The friends' view of a date's board: the entries of ``me`` and of the players they
        follow, each with its rank on the whole board (docs/rules.md §4), in board order.

        Raises:
            StorageError: the database failed.
        """
        rows = await self._follows.following(me)
        return await self._leaderboards.ranks_of(date, [r.id for r in rows], own=me)

    # ------------------------------------------------------------------------------- online

    async def connected(self, key: str, player_id: int) -> None:
        """This process's connection ``key`` said hello for the player: they are online (once
        the batch holding it is written, see :mod:`server.services.online`).

        Raises:
            StorageError: the database failed (the next :meth:`sweep` records it).
        """
        await self.records.connected(key, player_id)

    async def disconnected(self, key: str) -> None:
        """This process's connection ``key`` closed.

        Raises:
            StorageError: the database failed (the next :meth:`sweep` forgets it).
        """
        await self.records.disconnected(key)

    def forget(self, key: str) -> None:
        """This process's connection ``key`` closed: it is forgotten in the next write, not
        waited for (a failed write is logged, and the next :meth:`sweep` forgets it)."""
        self.records.forget(key)

    async def reconnect(self, connections: Iterable[tuple[int, str]]) -> None:
        """Record again this process's connections (``(player_id, key)``), after its records
        were dropped with its process record (it was taken for dead, say after a stall).

        Raises:
            StorageError: the database failed (asked again after the next heartbeat).
        """
        await self.records.connected_all(connections)

    async def sweep(
        self,
        open_keys: Callable[[], Collection[str]],
        signed_in: Callable[[], Iterable[tuple[int, str]]],
    ) -> None:
        """After a write of the records failed, bring them in line with this process's
        connections (``open_keys()``: the keys of the open ones; ``signed_in()``:
        ``(player_id, key)`` of those that said hello); nothing otherwise.

        Raises:
            StorageError: the database failed (the next sweep tries again).
        """
        await self.records.reconcile(open_keys, signed_in)

    # --------------------------------------------------------------------------- invitations

    async def invite(self, sender: PlayerInfo, room: Room, player_id: int) -> None:
        """Invite a player to a lobby (docs/rules.md §4 "Following"): every server process
        holding their websockets tells them.

        Args:
            sender: the racer inviting.
            room: the room, as read just now.
            player_id: the player invited.

        Raises:
            ConflictError: ``already_started`` / ``race_closed``: the room is no lobby;
                ``already_in_race``: the player sits in it; ``player_offline``: they have no
                open connection; ``player_banned``: they are banned from ranked play;
                ``too_many_invites``: over the limits (see the module).
            ForbiddenError: ``not_in_race``: the sender has no seat in the room;
                ``not_following``: the sender does not follow the player.
            StorageError: the database failed; nobody was told.
        """
        if room.status is RaceStatus.RUNNING:
            raise ConflictError("the race has started", code=ErrorCode.ALREADY_STARTED)
        if room.status is not RaceStatus.LOBBY:
            raise ConflictError("the race is over", code=ErrorCode.RACE_CLOSED)
        if room.seat_of(sender.id) is None:
            raise ForbiddenError(
                "only a racer seated in the room may invite", code=ErrorCode.NOT_IN_RACE
            )
        if room.seat_of(player_id) is not None:
            raise ConflictError(
                f"player {player_id} is in the room already", code=ErrorCode.ALREADY_IN_RACE
            )
        if not await self._follows.follows(sender.id, player_id):
            raise ForbiddenError(
                f"you may invite only players you follow; you do not follow {player_id}",
                code=ErrorCode.NOT_FOLLOWING,
            )
        if not await self._online.online_among([player_id], self.instance_timeout_s):
            raise ConflictError(f"player {player_id} is not online", code=ErrorCode.PLAYER_OFFLINE)
        if await self._follows.banned(player_id):  # they could not take the seat
            raise ConflictError(
                f"player {player_id} is banned from ranked play", code=ErrorCode.PLAYER_BANNED
            )
        now = self._clock.now()
        # Checked and counted with no await between: invitations sent at the same moment
        # cannot all pass the limits before any is counted.
        self._check_limits(sender.id, room.id, player_id, now)
        sent = self._sent.setdefault(sender.id, deque())
        sent.append(now)
        self._last[(sender.id, room.id, player_id)] = now
        try:
            await self._online.announce_invite(
                RaceInvited(
                    race_id=room.id, invite=room.invite, player_id=player_id, from_id=sender.id
                )
            )
        except BaseException:  # nobody was told: the invitation does not count
            if now in sent:
                sent.remove(now)
            if self._last.get((sender.id, room.id, player_id)) == now:
                del self._last[(sender.id, room.id, player_id)]
            raise

    def _check_limits(self, sender: int, race_id: int, player_id: int, now: dt.datetime) -> None:
        """Refuse an invitation over the limits (and forget what is past them).

        Raises:
            ConflictError: ``too_many_invites``.
        """
        minute_ago = now - dt.timedelta(seconds=60)
        for racer, sent in list(self._sent.items()):
            while sent and sent[0] <= minute_ago:
                sent.popleft()
            if not sent:
                del self._sent[racer]
        for pair, at in list(self._last.items()):
            if (now - at).total_seconds() >= INVITE_AGAIN_S:
                del self._last[pair]
        if (sender, race_id, player_id) in self._last:
            raise ConflictError(
                f"you invited player {player_id} to this room a moment ago; "
                f"wait {INVITE_AGAIN_S:.0f} s",
                code=ErrorCode.TOO_MANY_INVITES,
            )
        if len(self._sent.get(sender, ())) >= INVITES_PER_MINUTE:
            raise ConflictError(
                f"you sent {INVITES_PER_MINUTE} invitations in the last minute; wait a little",
                code=ErrorCode.TOO_MANY_INVITES,
            )

    async def invitation(self, event: RaceInvited, room: Room) -> Invitation | None:
        """What the invited player is told of an announced invitation, checked against the
        room as read now and the stored follow (an announcement is only a hint): None when
        the room is no longer a lobby, the inviter no longer sits in it, the player sits in it
        already, or the inviter does not follow the player.

        Raises:
            StorageError: the database failed.
        """
        seat = room.seat_of(event.from_id)
        if (
            room.id != event.race_id
            or room.status is not RaceStatus.LOBBY
            or seat is None
            or room.seat_of(event.player_id) is not None
        ):
            return None
        if not await self._follows.follows(event.from_id, event.player_id):
            return None
        return Invitation(room.invite, seat.player_id, seat.name)


__all__ = [
    "INVITES_PER_MINUTE",
    "INVITE_AGAIN_S",
    "MAX_FOLLOWING",
    "FollowedPlayer",
    "FriendService",
    "Invitation",
]
