"""Quick races at the service level (docs/rules.md §4 "Quick races"): how waiting players are
formed into matches, and the queue in PostgreSQL under matchers of two server processes at
once (two matchmakers with their own process records over one database): nobody is put in two
races, cancelled and disconnected players leave the queue, a dead process's players never hold
others up, banned players are not matched."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
from sqlalchemy import delete, event, func, insert, select

from server.engine.codes import RuleSet
from server.errors import ConflictError, ErrorCode, ForbiddenError, StorageError
from server.services.clock import FakeClock
from server.services.daily import DailyService
from server.services.games import GameService
from server.services.matchmaking import Matched, Matchmaker, QueueRules, form_matches
from server.services.players import PlayerInfo, PlayerService
from server.services.races import RaceLimits, RaceService
from server.services.ratings import RatingService
from server.storage.models import QueuedPlayer, Race, RacePlayer, ServerInstance
from server.storage.presence import Connection
from server.storage.queue import PostgresQueueStore, QueueRow
from server.storage.ratings import PostgresRatingStore
from server.storage.sessions import Sessions
from server.storage.transactions import session_of
from tests.backends import PostgresBackend, open_backend
from tests.helpers import eventually

T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)
RULES = QueueRules(gap=100, widen_per_s=10.0, start_after_s=10.0)

# ------------------------------------------------------------------------------ forming


def _waiting(*ratings_and_waits: tuple[int, float]) -> list[QueueRow]:
    rows = [
        QueueRow(
            i + 1, RuleSet.EASY, rating, T0 - dt.timedelta(seconds=waited), Connection("a", f"c{i}")
        )
        for i, (rating, waited) in enumerate(ratings_and_waits)
    ]
    return sorted(rows, key=lambda r: (r.joined_at, r.player_id))


def _ids(matches: list[list[QueueRow]]) -> list[list[int]]:
    return [sorted(r.player_id for r in m) for m in matches]


def test_four_players_within_the_gap_are_matched_at_once() -> None:
    rows = _waiting((1000, 1), (1050, 1), (980, 0), (1090, 0))
    assert _ids(form_matches(rows, T0, RULES)) == [[1, 2, 3, 4]]


def test_two_players_wait_for_more_until_the_first_has_waited_the_set_time() -> None:
    assert form_matches(_waiting((1000, 9), (1000, 0)), T0, RULES) == []
    assert _ids(form_matches(_waiting((1000, 10), (1000, 0)), T0, RULES)) == [[1, 2]]


def test_the_gap_widens_with_the_first_players_wait() -> None:
    # 300 apart: out of the 100 gap at first; 100 + 10 × 20 s = 300 after 20 s.
    assert form_matches(_waiting((1000, 19), (1300, 0)), T0, RULES) == []
    assert _ids(form_matches(_waiting((1000, 20), (1300, 0)), T0, RULES)) == [[1, 2]]


def test_a_match_takes_six_at_most_the_nearest_ratings_first() -> None:
    rows = _waiting(*((1000 + 10 * i, 5 - i * 0.1) for i in range(8)))
    matches = form_matches(rows, T0, RULES)
    assert _ids(matches) == [[1, 2, 3, 4, 5, 6]]  # the two left wait on (two, not yet 10 s)


def test_far_apart_players_form_separate_matches_and_nobody_is_in_two() -> None:
    rows = _waiting(
        (1000, 3), (1010, 3), (1020, 2), (1030, 2), (2000, 3), (2010, 1), (2020, 1), (2030, 0)
    )
    matches = form_matches(rows, T0, RULES)
    assert _ids(matches) == [[1, 2, 3, 4], [5, 6, 7, 8]]


# --------------------------------------------------------------------------- the queue


@dataclass(frozen=True, slots=True)
class Queue:
    """Two server processes' matchmakers ("a" and "b") over one PostgreSQL database."""

    backend: PostgresBackend
    players: PlayerService
    races: RaceService
    a: Matchmaker
    b: Matchmaker
    passes: list[tuple[RuleSet, int, list[int]]]


@pytest.fixture
async def queue(database_url: str, clock: FakeClock) -> AsyncIterator[Queue]:
    passes: list[tuple[RuleSet, int, list[int]]] = []
    async with open_backend("postgres", database_url) as backend:
        assert isinstance(backend, PostgresBackend)
        async with backend.engine.begin() as conn:
            await conn.execute(insert(ServerInstance), [{"id": "a"}, {"id": "b"}, {"id": "dead"}])
        sessions = Sessions(backend.engine)
        daily = DailyService(backend.daily, clock, b"test-daily-key-0123456789abcdefghij")
        games = GameService(backend.games, backend.committer, clock, daily)
        ratings = RatingService(PostgresRatingStore(sessions))
        races = RaceService(backend.races, backend.presence, clock, games, RaceLimits(), ratings)

        def matchmaker(instance: str) -> Matchmaker:
            store = PostgresQueueStore(sessions)
            return Matchmaker(
                store, backend.races, races, ratings, clock, instance, 30.0, RULES, observe
            )

        def observe(rules: RuleSet, left: int, made: Sequence[Matched]) -> None:
            passes.append((rules, left, [len(m.player_ids) for m in made]))

        try:
            players = PlayerService(backend.players, clock)
            yield Queue(backend, players, races, matchmaker("a"), matchmaker("b"), passes)
        finally:
            await games.close()


async def _players(queue: Queue, count: int) -> list[PlayerInfo]:
    return [(await queue.players.register(f"Racer{i}")).player for i in range(count)]


async def _seats(queue: Queue) -> dict[int, list[int]]:
    """Each seated player's races."""
    async with queue.backend.engine.connect() as conn:
        rows = await conn.execute(select(RacePlayer.player_id, RacePlayer.race_id))
        seats: dict[int, list[int]] = {}
        for player_id, race_id in rows:
            seats.setdefault(player_id, []).append(race_id)
        return seats


async def _queued(queue: Queue) -> set[int]:
    async with queue.backend.engine.connect() as conn:
        return set(await conn.scalars(select(QueuedPlayer.player_id)))


async def test_players_waiting_on_two_processes_are_matched_into_one_rated_race(
    queue: Queue,
) -> None:
    players = await _players(queue, 4)
    for n, p in enumerate(players):
        side = queue.a if n % 2 else queue.b
        waiting = await side.join(p, RuleSet.CLASSIC, Connection("a" if n % 2 else "b", f"k{n}"))
        assert (waiting.rules, waiting.rating, waiting.gap) == (RuleSet.CLASSIC, 0, 100)
    made_a, made_b = await asyncio.gather(
        queue.a.match(RuleSet.CLASSIC), queue.b.match(RuleSet.CLASSIC)
    )
    made = made_a + made_b
    assert len(made) == 1 and sorted(made[0].player_ids) == sorted(p.id for p in players)
    assert made[0].rating_gap == 0
    assert sorted(p[2] for p in queue.passes) == [[], [4]]  # one pass made it, one found none
    seats = await _seats(queue)
    assert {p.id: len(seats[p.id]) for p in players} == {p.id: 1 for p in players}
    assert await _queued(queue) == set()
    async with queue.backend.engine.connect() as conn:
        race = (
            await conn.execute(
                select(Race.rated, Race.host_deal, Race.status, Race.rules, Race.code)
            )
        ).one()
    assert race[:4] == (True, False, "running", "C") and race.code.startswith("TP2-C-")
    room = await queue.races.room(made[0].invite)
    assert room.code is None  # sealed until the race is over
    assert room.starts_at is not None and room.starts_at > room.created_at  # a countdown


async def test_concurrent_matchers_of_two_processes_never_seat_a_player_twice(
    queue: Queue, clock: FakeClock
) -> None:
    players = await _players(queue, 22)
    for n, p in enumerate(players):
        side, key = (queue.a, "a") if n % 2 else (queue.b, "b")
        await side.join(p, RuleSet.EASY, Connection(key, f"k{n}"))
    clock.advance(seconds=11)  # everyone may start in a race of two
    for _ in range(3):
        await asyncio.gather(*(m.match(RuleSet.EASY) for m in (queue.a, queue.b, queue.a, queue.b)))
    seats = await _seats(queue)
    assert sorted(seats) == sorted(p.id for p in players)
    assert all(len(races) == 1 for races in seats.values())
    assert await _queued(queue) == set()


async def test_cancelling_and_disconnecting_leave_the_queue(queue: Queue, clock: FakeClock) -> None:
    ann, bob, cy = await _players(queue, 3)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    await queue.a.join(bob, RuleSet.EASY, Connection("a", "bob"))
    await queue.b.join(cy, RuleSet.EASY, Connection("b", "cy"))
    assert await queue.a.cancel(ann) is True
    assert await queue.a.cancel(ann) is False
    assert await queue.a.disconnected(Connection("a", "bob")) == [bob.id]
    assert await queue.a.waiting(bob.id) is None
    assert await _queued(queue) == {cy.id}
    clock.advance(seconds=60)
    assert await queue.b.match_all() == []  # alone: no race
    assert queue.passes == [(RuleSet.EASY, 1, []), (RuleSet.CLASSIC, 0, [])]
    assert await _seats(queue) == {}


async def test_the_close_of_a_connection_that_never_asked_to_wait_touches_no_database(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most connections never ask for a quick race: their close (a storm closes thousands at
    once) costs the queue nothing."""
    (ann,) = await _players(queue, 1)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    asked: list[Connection] = []
    drop = queue.a._queue.drop_connection

    async def counted(connection: Connection) -> list[int]:
        asked.append(connection)
        return await drop(connection)

    monkeypatch.setattr(queue.a._queue, "drop_connection", counted)
    assert await queue.a.disconnected(Connection("a", "never-asked")) == []
    assert asked == []
    assert await queue.a.disconnected(Connection("a", "ann")) == [ann.id]
    assert await queue.a.disconnected(Connection("a", "ann")) == []  # once only
    assert asked == [Connection("a", "ann")]


async def test_asking_again_keeps_the_place_and_another_rule_set_starts_again(
    queue: Queue, clock: FakeClock
) -> None:
    (ann,) = await _players(queue, 1)
    first = await queue.a.join(ann, RuleSet.EASY, Connection("a", "one"))
    clock.advance(seconds=5)
    again = await queue.a.join(ann, RuleSet.EASY, Connection("a", "two"))
    assert again.since == first.since and again.gap == 150  # 100 + 10 × 5 s
    other = await queue.a.join(ann, RuleSet.CLASSIC, Connection("a", "two"))
    assert other.since == T0 + dt.timedelta(seconds=5) and other.rules is RuleSet.CLASSIC
    assert await queue.a.disconnected(Connection("a", "one")) == []  # not waiting from there


async def test_a_dead_processs_players_are_left_out_and_go_with_its_record(
    queue: Queue, clock: FakeClock
) -> None:
    ann, bob, cy = await _players(queue, 3)
    await queue.a.join(ann, RuleSet.EASY, Connection("dead", "ann"))
    await queue.a.join(bob, RuleSet.EASY, Connection("a", "bob"))
    await queue.b.join(cy, RuleSet.EASY, Connection("b", "cy"))
    await queue.backend.set_seen(["dead"], 60)
    clock.advance(seconds=11)
    made = await queue.b.match(RuleSet.EASY)
    assert [sorted(m.player_ids) for m in made] == [sorted([bob.id, cy.id])]
    assert await _queued(queue) == {ann.id}
    async with queue.backend.engine.begin() as conn:  # the presence sweep forgets it
        await conn.execute(delete(ServerInstance).where(ServerInstance.id == "dead"))
    assert await _queued(queue) == set()


async def test_a_banned_player_cannot_wait_and_is_not_matched(
    queue: Queue, clock: FakeClock
) -> None:
    ann, bob, cy = await _players(queue, 3)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    await queue.a.join(bob, RuleSet.EASY, Connection("a", "bob"))
    await queue.backend.ban(ann.id, "cheating")
    with pytest.raises(ForbiddenError) as refused:
        await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    assert refused.value.code == "banned"
    await queue.a.join(cy, RuleSet.EASY, Connection("a", "cy"))
    clock.advance(seconds=11)
    made = await queue.a.match(RuleSet.EASY)
    assert [sorted(m.player_ids) for m in made] == [sorted([bob.id, cy.id])]
    async with queue.backend.engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(QueuedPlayer)) == 1  # Ann


async def test_a_player_in_a_quick_race_not_over_is_not_queued_nor_matched_again(
    queue: Queue,
) -> None:
    players = await _players(queue, 8)
    for n, p in enumerate(players[:4]):
        await queue.a.join(p, RuleSet.EASY, Connection("a", f"k{n}"))
    [made] = await queue.a.match(RuleSet.EASY)
    first = players[0]
    # Asking again while in that race is refused, and nothing is queued.
    with pytest.raises(ConflictError) as refused:
        await queue.a.join(first, RuleSet.EASY, Connection("a", "again"))
    assert refused.value.code is ErrorCode.TOO_MANY_ROOMS
    assert await _queued(queue) == set()
    # A row of theirs that got in anyway (an ask that waited for the match's commit) is
    # dropped by the next pass, not matched into a second race.
    async with queue.backend.engine.begin() as conn:
        await conn.execute(
            insert(QueuedPlayer),
            [
                {
                    "player_id": first.id,
                    "rules": "E",
                    "rating": 0,
                    "instance_id": "a",
                    "connection": "late",
                    "joined_at": T0,
                }
            ],
        )
    for n, p in enumerate(players[4:]):
        await queue.b.join(p, RuleSet.EASY, Connection("b", f"m{n}"))
    [second] = await queue.b.match(RuleSet.EASY)
    assert first.id not in second.player_ids and sorted(second.player_ids) == sorted(
        p.id for p in players[4:]
    )
    assert (await _seats(queue))[first.id] == [made.race_id]
    assert await _queued(queue) == set()


#: How long the test waits for the database to end a stopped matcher's transaction: its
#: idle limit, several times over (a loaded machine).
IDLE_ENDED_WITHIN_S = 60.0


async def test_a_matcher_stopped_mid_pass_holds_up_the_others_only_until_its_idle_limit(
    queue: Queue,
) -> None:
    players = await _players(queue, 4)
    for n, p in enumerate(players):
        await queue.b.join(p, RuleSet.EASY, Connection("b", f"k{n}"))
    stopped = PostgresQueueStore(Sessions(queue.backend.engine))
    with pytest.raises(StorageError):
        async with queue.backend.races.transaction() as tx:
            # A pass that took the rule set's lock and the rows, and then stops (its process
            # frozen): it sends nothing more.
            assert len(await stopped.take(tx, RuleSet.EASY, "a", 30.0)) == 4
            assert await queue.b.match(RuleSet.EASY) == []  # held up for now
            made: list[Matched] = []

            async def matched() -> bool:
                made.extend(await queue.b.match(RuleSet.EASY))
                return bool(made)

            await eventually(
                matched, "the stopped pass's lock let go", within_s=IDLE_ENDED_WITHIN_S, every_s=0.2
            )
            assert sorted(made[0].player_ids) == sorted(p.id for p in players)
            await session_of(tx).execute(select(1))  # the stopped pass's session was ended


async def test_a_pass_over_a_queue_too_short_for_a_race_is_one_count_and_locks_nothing(
    queue: Queue, clock: FakeClock
) -> None:
    (ann,) = await _players(queue, 1)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    clock.advance(seconds=60)
    sent: list[str] = []

    def note(conn: object, cursor: object, statement: str, *args: object) -> None:
        sent.append(statement)

    engine = queue.backend.engine.sync_engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        assert await queue.a.match_all() == []
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert len(sent) == 1 and "count" in sent[0].lower(), sent  # no lock, no row taken
    assert queue.passes == [(RuleSet.EASY, 1, []), (RuleSet.CLASSIC, 0, [])]
    (bob,) = [(await queue.players.register("Racer9")).player]
    await queue.b.join(bob, RuleSet.EASY, Connection("b", "bob"))
    made = await queue.a.match_all()  # two now: a pass of the rule set, and a race
    assert len(made) == 1 and sorted(made[0].player_ids) == sorted([ann.id, bob.id])


async def test_a_player_waiting_from_a_connection_of_this_process_that_closed_is_not_matched(
    queue: Queue, clock: FakeClock
) -> None:
    ann, bob, cy, dee = await _players(queue, 4)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    await queue.a.join(bob, RuleSet.EASY, Connection("a", "bob"))  # closed, not recorded yet
    await queue.a.join(cy, RuleSet.EASY, Connection("a", "cy"))
    await queue.b.join(dee, RuleSet.EASY, Connection("b", "dee"))  # another process's: open
    clock.advance(seconds=11)  # a race of two or more may start
    made = await queue.a.match_all(lambda: {"ann", "cy"})
    assert len(made) == 1 and sorted(made[0].player_ids) == sorted([ann.id, cy.id, dee.id])
    assert await _queued(queue) == set()  # bob's row went with the pass
    assert bob.id not in await _seats(queue)


async def test_a_player_who_took_seats_up_to_the_room_limit_while_waiting_is_not_matched(
    queue: Queue, clock: FakeClock
) -> None:
    ann, bob, cy = await _players(queue, 3)
    await queue.a.join(ann, RuleSet.EASY, Connection("a", "ann"))
    await queue.a.join(bob, RuleSet.EASY, Connection("a", "bob"))
    await queue.a.join(cy, RuleSet.EASY, Connection("a", "cy"))
    limit = queue.races.limits.max_rooms
    for _ in range(limit):  # rooms of her own, opened while she waits
        await queue.races.create(ann, None, RuleSet.EASY, None)
    clock.advance(seconds=11)
    (made,) = await queue.a.match_all()
    assert sorted(made.player_ids) == sorted([bob.id, cy.id])
    assert await _queued(queue) == {ann.id}  # she waits on, matched once she leaves a room
    assert len((await _seats(queue))[ann.id]) == limit
