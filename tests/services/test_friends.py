"""Following (docs/rules.md §4 "Following"): follow by id and by name, unfollow, the list with
who is online, the limit, the friends' view of a board with the global ranks, and the rules of
race invitations. Each test runs on both stores (``backend``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Collection, Sequence

import pytest

from server.engine.codes import RuleSet
from server.errors import (
    ConflictError,
    ErrorCode,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    StorageError,
    StorageUnavailable,
)
from server.logs import bound, log_context
from server.services.clock import FakeClock
from server.services.friends import INVITE_AGAIN_S, INVITES_PER_MINUTE, FriendService
from server.services.leaderboards import LeaderboardService
from server.services.players import PlayerInfo
from server.services.rooms import Room, Seat
from server.storage.events import RaceInvited
from server.storage.online import OnlineConnection, OnlineStore
from server.storage.races import RaceStatus
from tests.backends import Backend, Seed

DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
INSTANCE = "test-process"


def _service(
    backend: Backend,
    clock: FakeClock | None = None,
    limit: int = 500,
    *,
    online: OnlineStore | None = None,
) -> FriendService:
    return FriendService(
        backend.follows,
        online or backend.online,
        LeaderboardService(backend.leaderboards),
        clock or FakeClock(T0),
        instance=INSTANCE,
        instance_timeout_s=60.0,
        max_following=limit,
    )


async def test_follow_by_id_lists_the_player_since_then_and_again_changes_nothing(
    backend: Backend,
) -> None:
    me, ada = await backend.add_players(["Me", "Ada"])
    clock = FakeClock(T0)
    friends = _service(backend, clock)
    followed = await friends.follow(me, ada)
    assert (followed.id, followed.name, followed.since, followed.online) == (ada, "Ada", T0, False)
    clock.advance(seconds=60)
    again = await friends.follow(me, ada)
    assert again.since == T0
    assert [(p.id, p.since) for p in await friends.following(me)] == [(ada, T0)]
    assert await friends.following(ada) == []  # one-way


async def test_follow_by_name_reads_it_as_registration_does(backend: Backend) -> None:
    me, straße = await backend.add_players(["Me", "Straße"])
    friends = _service(backend)
    followed = await friends.follow_name(me, "  STRASSE ")
    assert (followed.id, followed.name) == (straße, "Straße")


@pytest.mark.parametrize("name", ["Nobody", "x", 7, "!!"])
async def test_following_an_unknown_name_is_refused(backend: Backend, name: object) -> None:
    (me,) = await backend.add_players(["Me"])
    with pytest.raises(NotFoundError) as caught:
        await _service(backend).follow_name(me, name)
    assert caught.value.code is ErrorCode.UNKNOWN_PLAYER


async def test_following_an_unknown_id_or_oneself_is_refused_and_stores_nothing(
    backend: Backend,
) -> None:
    (me,) = await backend.add_players(["Me"])
    friends = _service(backend)
    for player_id in (me + 1000, 2**63 - 1):
        with pytest.raises(NotFoundError) as unknown:
            await friends.follow(me, player_id)
        assert unknown.value.code is ErrorCode.UNKNOWN_PLAYER
    with pytest.raises(InvalidInputError) as self_follow:
        await friends.follow(me, me)
    assert self_follow.value.code is ErrorCode.CANNOT_FOLLOW_SELF
    with pytest.raises(InvalidInputError):
        await friends.follow_name(me, "me")
    assert await friends.following(me) == []


async def test_unfollow_says_whether_one_followed(backend: Backend) -> None:
    me, ada, bob = await backend.add_players(["Me", "Ada", "Bob"])
    friends = _service(backend)
    await friends.follow(me, ada)
    await friends.follow(me, bob)
    assert await friends.unfollow(me, ada) is True
    assert await friends.unfollow(me, ada) is False
    assert [p.id for p in await friends.following(me)] == [bob]


async def test_the_limit_refuses_one_more_but_not_a_repeat(backend: Backend) -> None:
    me, *others = await backend.add_players(["Me", "Ada", "Bob", "Cy"])
    friends = _service(backend, limit=2)
    await friends.follow(me, others[0])
    await friends.follow(me, others[1])
    with pytest.raises(ConflictError) as caught:
        await friends.follow(me, others[2])
    assert caught.value.code is ErrorCode.FOLLOWING_LIMIT
    assert (await friends.follow(me, others[1])).id == others[1]
    await friends.unfollow(me, others[0])
    assert (await friends.follow(me, others[2])).id == others[2]


class FlakyOnline:
    """The backend's online store, whose writes fail while ``failing``; counts its reads of
    a process's keys."""

    def __init__(self, store: OnlineStore) -> None:
        self._store = store
        self.failing = False
        self.announcing = True
        self.reads = 0

    async def record(
        self, instance: str, added: Sequence[OnlineConnection], removed: Collection[str]
    ) -> None:
        if self.failing:
            raise StorageUnavailable("the database is down")
        await self._store.record(instance, added, removed)

    async def own_keys(self, instance: str) -> list[str]:
        self.reads += 1
        return await self._store.own_keys(instance)

    async def online_among(self, player_ids: Collection[int], timeout_s: float) -> set[int]:
        return await self._store.online_among(player_ids, timeout_s)

    async def announce_invite(self, event: RaceInvited) -> None:
        if not self.announcing:
            raise StorageUnavailable("the database is down")
        await self._store.announce_invite(event)


class _LogFields(logging.Filter):
    """Keeps the log fields bound (:func:`server.logs.bound`) as each record is logged."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, object]] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.seen.append(bound())
        return True


async def _ada_and_bob_online(
    backend: Backend,
) -> tuple[int, int, int, FlakyOnline, FriendService]:
    """Me following Ada and Bob, each online through a connection (ws-1, ws-2), recorded in a
    :class:`FlakyOnline` store: ``(me, ada, bob, online, friends)``."""
    me, ada, bob = await backend.add_players(["Me", "Ada", "Bob"])
    online = FlakyOnline(backend.online)
    friends = _service(backend, online=online)
    await friends.follow(me, ada)
    await friends.follow(me, bob)
    await friends.connected("ws-1", ada)
    await friends.connected("ws-2", bob)
    return me, ada, bob, online, friends


async def test_online_follows_the_connections_and_the_sweep_mends_failed_writes(
    backend: Backend,
) -> None:
    me, ada, bob, online, friends = await _ada_and_bob_online(backend)
    assert {p.id: p.online for p in await friends.following(me)} == {ada: True, bob: True}
    await friends.disconnected("ws-1")
    await friends.sweep(lambda: {"ws-2"}, lambda: [(bob, "ws-2")])
    assert online.reads == 0  # nothing failed: nothing to mend, nothing read
    # ws-2's close and ws-3's hello fail to be written.
    online.failing = True
    with pytest.raises(StorageError):
        await friends.disconnected("ws-2")
    with pytest.raises(StorageError):
        await friends.connected("ws-3", ada)
    assert {p.id: p.online for p in await friends.following(me)} == {ada: False, bob: True}
    with pytest.raises(StorageError):  # still down: mended at a later sweep
        await friends.sweep(lambda: {"ws-3"}, lambda: [(ada, "ws-3")])
    online.failing = False
    await friends.sweep(lambda: {"ws-3"}, lambda: [(ada, "ws-3")])
    assert {p.id: p.online for p in await friends.following(me)} == {ada: True, bob: False}
    reads = online.reads
    await friends.sweep(set, list)  # in line again: the sweep reads nothing
    assert online.reads == reads
    assert {p.id: p.online for p in await friends.following(me)} == {ada: True, bob: False}


async def test_a_close_is_forgotten_without_waiting_and_a_failed_write_is_mended(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    me, ada, bob, online, friends = await _ada_and_bob_online(backend)
    friends.forget("ws-1")  # returns at once; written with the next batch
    await friends.connected("ws-3", me)  # written with it or after it
    assert sorted(await backend.online.own_keys(INSTANCE)) == ["ws-2", "ws-3"]
    # A close whose write fails: nothing raised to anyone, logged once (without the log
    # fields of the connection whose close started the write: it is the batch's), mended by
    # the sweep.
    online.failing = True
    recorded = logging.getLogger("server.services.online")
    keep_fields = _LogFields()
    recorded.addFilter(keep_fields)
    try:
        with log_context(connection_id="ws-2"):
            friends.forget("ws-2")
        with pytest.raises(StorageError):
            await friends.connected("ws-4", ada)  # in the same batch
    finally:
        recorded.removeFilter(keep_fields)
    assert [r.message for r in caplog.records if "online: a write" in r.message] == [
        "online: a write of 1 hellos and 1 closes failed (StorageUnavailable); the next sweep "
        "brings the records in line"
    ]
    assert keep_fields.seen == [{}]
    assert {p.id: p.online for p in await friends.following(me)} == {ada: False, bob: True}
    online.failing = False
    await friends.sweep(lambda: {"ws-3", "ws-4"}, lambda: [(me, "ws-3"), (ada, "ws-4")])
    assert {p.id: p.online for p in await friends.following(me)} == {ada: True, bob: False}
    assert sorted(await backend.online.own_keys(INSTANCE)) == ["ws-3", "ws-4"]


async def test_a_crowd_of_hellos_is_written_in_a_few_batches(backend: Backend) -> None:
    me, *crowd = await backend.add_players(["Me", *(f"P{i}" for i in range(300))])
    friends = _service(backend)
    for player in crowd:
        await friends.follow(me, player)
    await asyncio.gather(*(friends.connected(f"ws-{p}", p) for p in crowd))
    assert friends.records.writes <= 3  # one write per hello would be 300
    assert all(p.online for p in await friends.following(me))
    # A close asked for in the batch of its own hello leaves nothing; the others' closes go
    # together too.
    writes = friends.records.writes
    await asyncio.gather(
        friends.connected("ws-late", me),
        friends.disconnected("ws-late"),
        *(friends.disconnected(f"ws-{p}") for p in crowd),
    )
    assert friends.records.writes - writes <= 3
    assert not any(p.online for p in await friends.following(me))
    assert await backend.online.own_keys(INSTANCE) == []


async def test_a_hello_of_a_player_gone_meanwhile_is_left_out_not_failed(
    backend: Backend,
) -> None:
    (ada,) = await backend.add_players(["Ada"])
    friends = _service(backend)
    await asyncio.gather(friends.connected("ws-1", ada), friends.connected("ws-2", 10**9))
    assert await backend.online.own_keys(INSTANCE) == ["ws-1"]


async def test_the_friends_view_holds_me_and_those_i_follow_with_their_global_ranks(
    backend: Backend,
) -> None:
    me, ada, bob, cy, dee = await backend.add_players(["Me", "Ada", "Bob", "Cy", "Dee"])
    done = dt.datetime(2026, 3, 14, 10, tzinfo=dt.UTC)
    await backend.add_games(
        [
            Seed(cy, 900, 30, 50_000, done, daily_date=DATE),
            Seed(ada, 700, 30, 60_000, done, daily_date=DATE),
            Seed(dee, 700, 30, 60_000, done, daily_date=DATE),  # ties with Ada
            Seed(me, 500, 31, 70_000, done, daily_date=DATE),
            Seed(bob, 800, 30, 10_000, done, daily_date=DATE - dt.timedelta(days=1)),
        ]
    )
    friends = _service(backend)
    for player in (ada, bob, dee):
        await friends.follow(me, player)
    board = await friends.board(DATE, me)
    everyone = await LeaderboardService(backend.leaderboards).page(DATE, 100)
    global_rank = {e.player_id: e.rank for e in everyone.entries}
    assert [e.player_id for e in board] == [p for p in global_rank if p in (me, ada, dee)]
    assert [e.rank for e in board] == [global_rank[e.player_id] for e in board] == [2, 2, 4]
    assert await friends.board(DATE, cy) == [e for e in everyone.entries if e.player_id == cy]


def _room(host: int, *seated: tuple[int, str], status: RaceStatus = RaceStatus.LOBBY) -> Room:
    return Room(
        id=5,
        invite="WW9Q3T",
        host_id=host,
        status=status,
        rules=RuleSet.EASY,
        code=None,
        host_deal=False,
        time_limit_s=600,
        max_players=8,
        version=1,
        created_at=T0,
        starts_at=None,
        ends_at=None,
        finished_at=None,
        seats=tuple(Seat(p, name, i, None) for i, (p, name) in enumerate(seated)),
        results=None,
    )


async def test_an_invitation_goes_only_to_a_followed_player_online_and_not_seated(
    backend: Backend,
) -> None:
    me, ada, bob, cy = await backend.add_players(["Me", "Ada", "Bob", "Cy"])
    friends = _service(backend)
    sender = PlayerInfo(me, "Me")
    room = _room(me, (me, "Me"), (cy, "Cy"))
    await friends.follow(me, ada)
    await friends.follow(me, cy)
    with pytest.raises(ConflictError) as offline:
        await friends.invite(sender, room, ada)
    assert offline.value.code is ErrorCode.PLAYER_OFFLINE
    await friends.connected("ws-1", ada)
    await friends.connected("ws-2", bob)
    with pytest.raises(ForbiddenError) as stranger:
        await friends.invite(sender, room, bob)
    assert stranger.value.code is ErrorCode.NOT_FOLLOWING
    with pytest.raises(ConflictError) as seated:
        await friends.invite(sender, room, cy)
    assert seated.value.code is ErrorCode.ALREADY_IN_RACE
    with pytest.raises(ForbiddenError) as outsider:
        await friends.invite(PlayerInfo(bob, "Bob"), room, ada)
    assert outsider.value.code is ErrorCode.NOT_IN_RACE
    running = _room(me, (me, "Me"), status=RaceStatus.RUNNING)
    with pytest.raises(ConflictError) as started:
        await friends.invite(sender, running, ada)
    assert started.value.code is ErrorCode.ALREADY_STARTED
    async with backend.events() as events:
        await friends.invite(sender, room, ada)
    invited = RaceInvited(race_id=5, invite="WW9Q3T", player_id=ada, from_id=me)
    assert invited in events
    told = await friends.invitation(invited, room)
    assert told is not None and (told.invite, told.from_id, told.from_name) == (
        "WW9Q3T",
        me,
        "Me",
    )
    assert await friends.invitation(invited, running) is None
    await friends.unfollow(me, ada)
    assert await friends.invitation(invited, room) is None


async def test_invitations_are_capped_per_player_and_per_minute(backend: Backend) -> None:
    names = ["Me", *(f"P{i}" for i in range(INVITES_PER_MINUTE + 1))]
    me, *others = await backend.add_players(names)
    clock = FakeClock(T0)
    friends = _service(backend, clock)
    sender = PlayerInfo(me, "Me")
    room = _room(me, (me, "Me"))
    for i, player in enumerate(others):
        await friends.follow(me, player)
        await friends.connected(f"ws-{i}", player)
    await friends.invite(sender, room, others[0])
    with pytest.raises(ConflictError) as again:
        await friends.invite(sender, room, others[0])
    assert again.value.code is ErrorCode.TOO_MANY_INVITES
    for player in others[1:INVITES_PER_MINUTE]:
        await friends.invite(sender, room, player)
    with pytest.raises(ConflictError) as flood:
        await friends.invite(sender, room, others[INVITES_PER_MINUTE])
    assert flood.value.code is ErrorCode.TOO_MANY_INVITES
    clock.advance(seconds=max(60.0, INVITE_AGAIN_S))
    await friends.invite(sender, room, others[INVITES_PER_MINUTE])
    await friends.invite(sender, room, others[0])


async def test_invitations_sent_at_the_same_moment_keep_to_the_limits(backend: Backend) -> None:
    names = ["Me", *(f"P{i}" for i in range(INVITES_PER_MINUTE + 5))]
    me, *others = await backend.add_players(names)
    friends = _service(backend)
    sender = PlayerInfo(me, "Me")
    room = _room(me, (me, "Me"))
    for i, player in enumerate(others):
        await friends.follow(me, player)
        await friends.connected(f"ws-{i}", player)

    async def outcome(player: int) -> str:
        try:
            await friends.invite(sender, room, player)
        except ConflictError as exc:
            return str(exc.code)
        return "invited"

    async with backend.events() as events:
        same = await asyncio.gather(*(outcome(others[0]) for _ in range(6)))
        assert sorted(same) == ["invited", *["too_many_invites"] * 5]
        spread = await asyncio.gather(*(outcome(p) for p in others[1:]))
        assert spread.count("invited") == INVITES_PER_MINUTE - 1
    sent = [e for e in events if isinstance(e, RaceInvited)]
    assert len(sent) == INVITES_PER_MINUTE


async def test_an_invitation_nobody_was_told_of_does_not_count(backend: Backend) -> None:
    me, ada = await backend.add_players(["Me", "Ada"])
    online = FlakyOnline(backend.online)
    friends = _service(backend, online=online)
    await friends.follow(me, ada)
    await friends.connected("ws-1", ada)
    room = _room(me, (me, "Me"))
    online.announcing = False
    with pytest.raises(StorageError):
        await friends.invite(PlayerInfo(me, "Me"), room, ada)
    online.announcing = True
    await friends.invite(PlayerInfo(me, "Me"), room, ada)  # not "a moment ago"


async def test_a_follow_answers_the_follow_made_even_if_undone_at_once(backend: Backend) -> None:
    me, ada = await backend.add_players(["Me", "Ada"])
    friends = _service(backend)
    for _ in range(5):
        followed, _ = await asyncio.gather(friends.follow(me, ada), friends.unfollow(me, ada))
        assert (followed.id, followed.name) == (ada, "Ada")


async def test_at_shutdown_the_waiting_records_are_written_and_no_more(backend: Backend) -> None:
    me, ada = await backend.add_players(["Me", "Ada"])
    friends = _service(backend)
    await friends.follow(me, ada)
    hello = asyncio.create_task(friends.connected("ws-1", ada))
    await asyncio.sleep(0)  # one turn of the loop: the hello is handed to the recorder
    await friends.records.close()
    await hello  # written, not dropped
    assert [p.online for p in await friends.following(me)] == [True]
    with pytest.raises(StorageError):
        await friends.connected("ws-2", ada)
    await friends.disconnected("ws-1")  # the process record's removal takes it
    assert await backend.online.own_keys(INSTANCE) == ["ws-1"]


async def test_a_player_banned_from_ranked_play_is_not_invited(backend: Backend) -> None:
    me, ada = await backend.add_players(["Me", "Ada"])
    friends = _service(backend)
    await friends.follow(me, ada)
    await friends.connected("ws-1", ada)
    await backend.ban(ada, "cheating")
    async with backend.events() as events:
        with pytest.raises(ConflictError) as banned:
            await friends.invite(PlayerInfo(me, "Me"), _room(me, (me, "Me")), ada)
    assert banned.value.code is ErrorCode.PLAYER_BANNED
    assert not any(isinstance(e, RaceInvited) for e in events)
    assert [p.id for p in await friends.following(me)] == [ada]  # following them stays open
