"""Group commit: batches share one statement, each write is answered after its commit, a write
whose game moved on changes nothing, failures and cancellation leave nothing behind; the
statement is prepared once per connection to PostgreSQL and never behind a transaction
pooler; the driver's errors reach callers as the engine's."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import traceback
from typing import Any

import asyncpg
import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from server.errors import StorageConflict, StorageError, StorageUnavailable
from server.logs import bound, log_context
from server.storage.commits import (
    COMMIT_BATCH_SQL,
    ActionWrite,
    DailyClosed,
    GameBusy,
    GameMovedOn,
    GroupCommitter,
)
from server.storage.db import Pooler, async_url, create_engine
from server.storage.driver_errors import DriverError, database_error
from server.storage.events import Outgoing, PgPublisher, RaceProgress, room_channel
from server.storage.models import Game, GameAction
from tests.backends import NOWHERE_URL
from tests.conftest import PgBouncer
from tests.helpers import eventually
from tests.storage.test_models import T0, add_game, add_player


def draw(game_id: int, seq: int, **overrides: Any) -> ActionWrite:
    """The write of a draw taking game ``game_id`` from ``seq`` to ``seq + 1``."""
    values: dict[str, Any] = {
        "game_id": game_id,
        "expected_seq": seq,
        "seq": seq + 1,
        "kind": "draw",
        "pos": None,
        "card": "5h",
        "score_after": 500 - 5 * (seq + 1),
        "at": T0 + dt.timedelta(seconds=seq + 1),
        "status": "playing",
        "score": 500 - 5 * (seq + 1),
        "moves": seq + 1,
        "undos": 0,
        "finished_at": None,
        "elapsed_ms": None,
        "cards_left": 28,
    }
    values.update(overrides)
    return ActionWrite(**values)


def progress(game_id: int) -> RaceProgress:
    """A race progress event of game ``game_id``."""
    return RaceProgress(
        race_id=1,
        player_id=1,
        game_id=game_id,
        seq=1,
        cards_left=27,
        score=495,
        moves=1,
        status="playing",
        elapsed_ms=1000,
    )


async def stored(engine: AsyncEngine, game_id: int) -> tuple[int, list[int]]:
    """A game row's seq and its logged seqs."""
    async with engine.connect() as conn:
        seq = await conn.scalar(select(Game.seq).where(Game.id == game_id))
        logged = (
            await conn.scalars(
                select(GameAction.seq).where(GameAction.game_id == game_id).order_by("seq")
            )
        ).all()
    assert isinstance(seq, int)
    return seq, list(logged)


async def games(engine: AsyncEngine, n: int) -> list[int]:
    player = await add_player(engine, "Committer")
    return [await add_game(engine, player, mode="free", daily_date=None) for _ in range(n)]


async def test_concurrent_writes_share_batches_and_all_commit(db: AsyncEngine) -> None:
    ids = await games(db, 40)
    committer = GroupCommitter(db)
    try:
        for seq in range(3):
            await asyncio.gather(*(committer.write(draw(g, seq)) for g in ids))
        assert committer.writes == 120
        assert committer.batches < 120  # concurrent writes were grouped
        for g in ids:
            assert await stored(db, g) == (3, [1, 2, 3])
        async with db.connect() as conn:
            row = (await conn.execute(select(Game).where(Game.id == ids[0]))).one()
        assert (row.score, row.moves, row.status) == (485, 3, "playing")
    finally:
        await committer.close()


async def test_a_write_whose_game_moved_on_changes_nothing_and_spares_the_batch(
    db: AsyncEngine,
) -> None:
    moved, fine, resigned = await games(db, 3)
    async with db.begin() as conn:
        await conn.execute(text("UPDATE games SET seq = 1 WHERE id = :g"), {"g": moved})
        await conn.execute(
            text("UPDATE games SET status = 'resigned' WHERE id = :g"), {"g": resigned}
        )
    committer = GroupCommitter(db)
    try:
        results = await asyncio.gather(
            committer.write(draw(moved, 0)),
            committer.write(draw(fine, 0)),
            committer.write(draw(resigned, 0)),
            return_exceptions=True,
        )
        assert isinstance(results[0], GameMovedOn)
        assert results[1] is None
        assert isinstance(results[2], GameMovedOn)  # expected status 'playing' no longer holds
        assert await stored(db, moved) == (1, [])
        assert await stored(db, fine) == (1, [1])
        assert await stored(db, resigned) == (0, [])
    finally:
        await committer.close()


async def test_events_are_published_for_stored_writes_only(
    db: AsyncEngine, database_url: str
) -> None:
    moved, fine = await games(db, 2)
    async with db.begin() as conn:
        await conn.execute(text("UPDATE games SET seq = 5 WHERE id = :g"), {"g": moved})
    dsn = async_url(database_url).set(drivername="postgresql").render_as_string(False)
    listener = await asyncpg.connect(dsn)
    heard: list[dict[str, Any]] = []
    await listener.add_listener(room_channel(1), lambda *args: heard.append(json.loads(args[3])))
    publisher = PgPublisher(database_url)
    await publisher.start()
    committer = GroupCommitter(db, publisher=publisher)
    try:
        await asyncio.gather(
            committer.write(draw(moved, 0, event=progress(moved))),
            committer.write(draw(fine, 0, event=progress(fine))),
            committer.write(draw(fine, 1)),  # no event; moves on only after the first
            return_exceptions=True,
        )
        # A marker published after every write was answered: one publisher's messages arrive
        # in order, so once it is heard, every event the writes published has been heard too.
        publisher.send(Outgoing(room_channel(1), '{"kind": "marker"}'))
        await eventually(lambda: {"kind": "marker"} in heard, "the marker notification")
        assert [event.get("game_id") for event in heard] == [fine, None]
        assert heard[0]["kind"] == "race_progress"
        assert (publisher.sent, publisher.dropped) == (2, 0)
    finally:
        await committer.close()
        await publisher.stop()
        await listener.close()


class _FieldsHeard:
    """A publisher that keeps the log fields bound (:func:`server.logs.bound`) where each event
    is sent from: the writer's task."""

    def __init__(self) -> None:
        self.fields: list[dict[str, object]] = []

    def send(self, message: Outgoing) -> None:
        self.fields.append(bound())


async def test_the_writer_started_by_a_request_runs_in_a_context_of_its_own(
    db: AsyncEngine,
) -> None:
    """The writer serves every later write too: it must not log as the connection and player
    whose write happened to start it."""
    (game,) = await games(db, 1)
    heard = _FieldsHeard()
    committer = GroupCommitter(db, publisher=heard)
    try:
        with log_context(connection_id="ws-1", player_id=7):
            await committer.write(draw(game, 0, event=progress(game)))
        assert heard.fields == [{}]
    finally:
        await committer.close()


async def test_writes_go_on_while_their_events_cannot_be_published(db: AsyncEngine) -> None:
    a, b = await games(db, 2)
    publisher = PgPublisher(NOWHERE_URL, timeout_s=1.0)
    await publisher.start()
    committer = GroupCommitter(db, publisher=publisher)
    try:
        for seq in range(3):
            await asyncio.gather(
                committer.write(draw(a, seq, event=progress(a))),
                committer.write(draw(b, seq, event=progress(b))),
            )
        assert await stored(db, a) == (3, [1, 2, 3])
        assert await stored(db, b) == (3, [1, 2, 3])
        await eventually(lambda: publisher.dropped == 6, "the events counted as dropped")
        assert publisher.sent == 0
    finally:
        await committer.close()
        await publisher.stop()


async def test_a_failed_batch_stores_nothing_and_the_writer_goes_on(db: AsyncEngine) -> None:
    a, b = await games(db, 2)
    committer = GroupCommitter(db)
    try:
        # The second write breaks a column check (negative score): the whole batch fails.
        results = await asyncio.gather(
            committer.write(draw(a, 0)),
            committer.write(draw(b, 0, score=-1)),
            return_exceptions=True,
        )
        assert all(
            isinstance(r, StorageError) and isinstance(r.__cause__, DBAPIError) for r in results
        ), results
        assert await stored(db, a) == (0, [])
        assert await stored(db, b) == (0, [])
        await committer.write(draw(a, 0))  # the writer is still there
        assert await stored(db, a) == (1, [1])
    finally:
        await committer.close()


async def test_the_writer_gives_its_connection_back_when_idle(db: AsyncEngine) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db, idle_s=0.05)
    try:
        await committer.write(draw(g, 0))
        assert db.pool.checkedout() == 1  # type: ignore[attr-defined]
        await eventually(
            lambda: db.pool.checkedout() == 0,  # type: ignore[attr-defined]
            "the idle writer to give its connection back",
        )
        await committer.write(draw(g, 1))
        assert await stored(db, g) == (2, [1, 2])
    finally:
        await committer.close()


async def _count_sessions(engine: AsyncEngine, database: str | None, where: str) -> int:
    async with engine.connect() as conn:
        n = await conn.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = :d "
                f"AND pid <> pg_backend_pid() AND {where}"
            ),
            {"d": database},
        )
    assert isinstance(n, int)
    return n


async def test_closing_mid_statement_leaves_no_connection_or_transaction(
    db: AsyncEngine, database_url: str
) -> None:
    (g,) = await games(db, 1)
    name = async_url(database_url).database
    committer = GroupCommitter(db)
    async with db.begin() as blocker:
        # Hold the action log's table lock so that the writer's statement waits inside the
        # database (a locked game row would only be skipped).
        await blocker.execute(text("LOCK TABLE game_actions IN ACCESS EXCLUSIVE MODE"))
        pending = asyncio.ensure_future(committer.write(draw(g, 0)))
        await eventually(
            lambda: _count_sessions(db, name, "wait_event_type = 'Lock'"),
            "the writer's statement to wait for the lock",
        )
        assert await _count_sessions(db, name, "wait_event_type = 'Lock'") == 1
        await committer.close()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
        assert pending.cancelled()
    assert db.pool.checkedout() == 0  # type: ignore[attr-defined]

    async def no_busy_session() -> bool:
        return await _count_sessions(db, name, "state <> 'idle'") == 0

    await eventually(no_busy_session, "every session of the database to be idle")
    # The statement either never ran or ran whole: the row agrees with its log.
    assert await stored(db, g) in ((0, []), (1, [1]))


async def test_two_writes_of_one_game_go_in_successive_batches(db: AsyncEngine) -> None:
    g, other = await games(db, 2)
    committer = GroupCommitter(db)
    try:
        # Queued together: the second write of g must see the row the first one left.
        await asyncio.gather(
            committer.write(draw(g, 0)),
            committer.write(draw(other, 0)),
            committer.write(draw(g, 1)),
            committer.write(draw(g, 2)),
        )
        assert committer.batches == 3
        assert await stored(db, g) == (3, [1, 2, 3])
        assert await stored(db, other) == (1, [1])
    finally:
        await committer.close()


async def test_closing_cancels_writes_still_queued(db: AsyncEngine) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db)
    async with db.begin() as blocker:
        await blocker.execute(text("SELECT 1 FROM games WHERE id = :g FOR UPDATE"), {"g": g})
        first = asyncio.ensure_future(committer.write(draw(g, 0)))
        # Until the first write found its row locked and waits to retry.
        await eventually(lambda: committer.batches > 0, "the first write's batch")
        queued = asyncio.ensure_future(committer.write(draw(g, 1)))
        await asyncio.sleep(0)
        await committer.close()
        for task in (first, queued):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 5)
            assert task.cancelled()


async def _database_today(engine: AsyncEngine) -> dt.date:
    async with engine.connect() as conn:
        today = await conn.scalar(text("SELECT (statement_timestamp() AT TIME ZONE 'UTC')::date"))
    assert isinstance(today, dt.date)
    return today


async def test_a_daily_write_after_its_date_by_the_databases_clock_changes_nothing(
    db: AsyncEngine,
) -> None:
    today = await _database_today(db)
    player = await add_player(db, "Boundary")
    past = await add_game(db, player, mode="daily", daily_date=today - dt.timedelta(days=1))
    current = await add_game(db, player, mode="daily", daily_date=today + dt.timedelta(days=1))
    free = await add_game(db, player, mode="free", daily_date=None)
    committer = GroupCommitter(db)
    try:
        outcomes = await asyncio.gather(
            committer.write(draw(past, 0)),
            committer.write(draw(current, 0)),
            committer.write(draw(free, 0)),
            return_exceptions=True,
        )
        assert isinstance(outcomes[0], DailyClosed)
        assert list(outcomes[1:]) == [None, None]
        assert await stored(db, past) == (0, [])
        assert await stored(db, current) == (1, [1])
        # A simulated clock's date stands in for the database's: the past date is open to it.
        await committer.write(draw(past, 0, pinned_today=today - dt.timedelta(days=1)))
        assert await stored(db, past) == (1, [1])
        with pytest.raises(DailyClosed):
            await committer.write(draw(current, 1, pinned_today=today + dt.timedelta(days=2)))
        assert await stored(db, current) == (1, [1])
    finally:
        await committer.close()


async def test_a_locked_game_row_holds_up_only_its_own_write(db: AsyncEngine) -> None:
    locked, *others = await games(db, 5)
    committer = GroupCommitter(db, timeout_s=30)
    try:
        async with db.connect() as blocker:
            transaction = await blocker.begin()
            await blocker.execute(
                text("SELECT 1 FROM games WHERE id = :g FOR UPDATE"), {"g": locked}
            )
            waiting = asyncio.ensure_future(committer.write(draw(locked, 0)))
            # Every other game's writes go through, batch after batch, while the row is held.
            for seq in range(3):
                await asyncio.gather(*(committer.write(draw(g, seq)) for g in others))
            assert not waiting.done()
            assert await stored(db, locked) == (0, [])
            await transaction.commit()
        await waiting  # stored once the lock is gone
        assert await stored(db, locked) == (1, [1])
        for g in others:
            assert await stored(db, g) == (3, [1, 2, 3])
    finally:
        await committer.close()


async def test_a_write_whose_row_stays_locked_fails_busy_after_the_timeout(
    db: AsyncEngine,
) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db, timeout_s=0.3)
    try:
        async with db.begin() as blocker:
            await blocker.execute(text("SELECT 1 FROM games WHERE id = :g FOR UPDATE"), {"g": g})
            with pytest.raises(GameBusy):
                await committer.write(draw(g, 0))
        assert await stored(db, g) == (0, [])
        await committer.write(draw(g, 0))  # the lock gone, the same write goes through
        assert await stored(db, g) == (1, [1])
    finally:
        await committer.close()


async def test_closing_cancels_a_write_waiting_to_be_retried(db: AsyncEngine) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db, timeout_s=30)
    async with db.begin() as blocker:
        await blocker.execute(text("SELECT 1 FROM games WHERE id = :g FOR UPDATE"), {"g": g})
        waiting = asyncio.ensure_future(committer.write(draw(g, 0)))
        # Until the writer has tried it once and set it to wait.
        await eventually(lambda: committer.batches > 0, "the write's first try")
        assert committer.batches >= 1 and not waiting.done()
        await committer.close()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        assert waiting.cancelled()
    assert await stored(db, g) == (0, [])


async def _prepared_here(conn: Any) -> int:
    """How many times the batch statement is prepared on a connection's server session."""
    n = await conn.scalar(
        text("SELECT count(*) FROM pg_prepared_statements WHERE statement = :sql"),
        {"sql": COMMIT_BATCH_SQL},
    )
    assert isinstance(n, int)
    return n


@pytest.mark.parametrize(("pooler", "prepares"), [("none", 1), ("transaction", 0)])
async def test_the_statement_is_prepared_once_per_connection_and_never_for_a_pooler(
    database_url: str, pooler: Pooler, prepares: int
) -> None:
    # One pooled connection: every batch, and the check afterwards, runs on the same session.
    engine = create_engine(database_url, pool_size=1, pooler=pooler)
    (g,) = await games(engine, 1)
    committer = GroupCommitter(engine, idle_s=0.05)
    try:
        for seq in range(3):
            await committer.write(draw(g, seq))
        await eventually(
            lambda: engine.pool.checkedout() == 0,  # type: ignore[attr-defined]
            "the idle writer to give its connection back",
        )
        # Checked out again, the connection still has the statement prepared on it.
        for seq in range(3, 5):
            await committer.write(draw(g, seq))
        assert committer.batches == 5
        assert committer.prepares == prepares
        await eventually(
            lambda: engine.pool.checkedout() == 0,  # type: ignore[attr-defined]
            "the idle writer to give its connection back",
        )
        async with engine.connect() as conn:
            assert await _prepared_here(conn) == prepares
        assert await stored(engine, g) == (5, [1, 2, 3, 4, 5])
    finally:
        await committer.close()
        await engine.dispose()


async def test_a_failed_batch_is_the_engines_error_without_values_and_is_prepared_again(
    db: AsyncEngine,
) -> None:
    a, b = await games(db, 2)
    committer = GroupCommitter(db)
    try:
        await committer.write(draw(a, 0))
        assert committer.prepares == 1
        with pytest.raises(StorageConflict) as refused:
            # An unknown kind breaks the action log's check; the failing row would quote it.
            await committer.write(draw(b, 0, kind="xyzzy"))
        failed = refused.value.__cause__
        assert isinstance(failed, IntegrityError)
        assert isinstance(failed.orig, DriverError)
        assert failed.orig.sqlstate == "23514"  # check_violation
        assert isinstance(failed.__cause__, asyncpg.CheckViolationError)
        assert not failed.connection_invalidated
        assert "game_actions" in str(failed)
        assert "xyzzy" not in str(failed) and "xyzzy" not in str(refused.value)
        assert await stored(db, b) == (0, [])
        # The next batch takes a connection again and prepares the statement again.
        await committer.write(draw(a, 1))
        await committer.write(draw(b, 0))
        assert committer.prepares == 2
        assert await stored(db, a) == (2, [1, 2])
        assert await stored(db, b) == (1, [1])
    finally:
        await committer.close()


async def test_a_value_the_driver_cannot_send_is_named_by_position_only(db: AsyncEngine) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db)
    try:
        with pytest.raises(StorageUnavailable) as refused:
            await committer.write(draw(g, 0, card=4_242_424))  # not a text
        failed = refused.value.__cause__
        assert isinstance(failed, DBAPIError) and not isinstance(failed, IntegrityError)
        assert "invalid input for query argument $14" in str(failed)
        shown = "".join(traceback.format_exception(refused.value))
        assert "4242424" not in shown
        await committer.write(draw(g, 0))
        assert await stored(db, g) == (1, [1])
    finally:
        await committer.close()


async def _writer_waiting_on_a_lock(engine: AsyncEngine, database: str | None) -> int:
    """The server process of the writer's statement, once it waits for a lock."""
    query = (
        "SELECT pid FROM pg_stat_activity WHERE datname = :d AND wait_event_type = 'Lock' "
        "AND pid <> pg_backend_pid()"
    )
    pids: list[int] = []

    async def waiting() -> bool:
        async with engine.connect() as conn:
            pids[:] = (await conn.scalars(text(query), {"d": database})).all()
        return len(pids) == 1

    await eventually(waiting, "the writer's statement to wait for the lock")
    return pids[0]


@pytest.mark.parametrize(
    ("how", "driver_error", "invalidated"),
    [
        ("pg_cancel_backend", asyncpg.QueryCanceledError, False),
        ("pg_terminate_backend", asyncpg.PostgresError, True),
    ],
)
async def test_a_batch_the_server_stops_fails_with_the_engines_error_and_the_writer_goes_on(
    db: AsyncEngine,
    database_url: str,
    how: str,
    driver_error: type[Exception],
    invalidated: bool,
) -> None:
    g, other = await games(db, 2)
    name = async_url(database_url).database
    committer = GroupCommitter(db)
    try:
        await committer.write(draw(other, 0))  # the statement is prepared
        async with db.begin() as blocker:
            # The writer's statement waits inside the database for the action log's table.
            await blocker.execute(text("LOCK TABLE game_actions IN ACCESS EXCLUSIVE MODE"))
            pending = asyncio.ensure_future(committer.write(draw(g, 0)))
            pid = await _writer_waiting_on_a_lock(db, name)
            await blocker.execute(text(f"SELECT {how}(:pid)"), {"pid": pid})
            with pytest.raises(StorageUnavailable) as refused:  # not taken for a game moved on
                await pending
        failed = refused.value.__cause__
        assert isinstance(failed, DBAPIError) and not isinstance(failed, IntegrityError)
        assert isinstance(failed.__cause__, driver_error)
        assert failed.connection_invalidated is invalidated
        assert await stored(db, g) == (0, [])
        await committer.write(draw(g, 0))  # on a connection of the pool, prepared again
        assert committer.prepares == 2
        assert await stored(db, g) == (1, [1])
    finally:
        await committer.close()


async def test_batches_through_a_transaction_pooler_go_through(
    pgbouncer: PgBouncer, database_url: str
) -> None:
    """Several writers at once through PgBouncer in transaction mode: consecutive batches of
    one writer run on whichever server session is free, where no statement of an earlier
    batch is prepared."""
    engine = create_engine(pgbouncer.pooled(database_url), pool_size=4, pooler="transaction")
    ids = await games(engine, 20)
    committers = [GroupCommitter(engine) for _ in range(4)]

    async def play(committer: GroupCommitter, mine: list[int]) -> None:
        for seq in range(10):
            await asyncio.gather(*(committer.write(draw(g, seq)) for g in mine))

    try:
        await asyncio.gather(
            *(play(committer, ids[i::4]) for i, committer in enumerate(committers))
        )
        assert [c.prepares for c in committers] == [0, 0, 0, 0]
        for g in ids:
            assert await stored(engine, g) == (10, list(range(1, 11)))
    finally:
        for committer in committers:
            await committer.close()
        await engine.dispose()


async def test_a_batch_held_up_past_the_write_timeout_fails_and_the_writer_goes_on(
    db: AsyncEngine,
) -> None:
    """A table lock (or a stalled connection) holds the batch statement itself: after the
    write timeout PostgreSQL ends it and its writes fail, instead of every game of the process
    waiting for as long as the lock lasts; a batch answered as failed is not stored when the
    lock goes either (the server ended it: no lost cancel lets it commit later)."""
    g, other = await games(db, 2)
    committer = GroupCommitter(db, timeout_s=0.5)
    try:
        await committer.write(draw(other, 0))
        async with db.begin() as blocker:
            await blocker.execute(text("LOCK TABLE game_actions IN SHARE MODE"))
            with pytest.raises(StorageUnavailable) as refused:
                await committer.write(draw(g, 0))
            failed = refused.value.__cause__
            assert isinstance(failed, OperationalError)
            assert "statement timeout" in str(failed.orig)
        assert await stored(db, g) == (0, [])  # the lock gone, still nothing of it
        await committer.write(draw(g, 0))  # stored now
        assert await stored(db, g) == (1, [1])
        async with db.connect() as conn:  # the pool's connections keep the server's timeout
            assert await conn.scalar(text("SHOW statement_timeout")) == "0"
    finally:
        await committer.close()


async def test_a_batch_the_driver_refuses_before_sending_goes_to_a_fresh_connection(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection the server dropped while the driver has not noticed refuses the next
    statement before sending it ("cannot switch to state"): that batch is not lost to an
    `unavailable`, it is sent again on a fresh connection, once."""
    (g,) = await games(db, 1)
    committer = GroupCommitter(db)
    real = committer._commit
    refused: list[int] = []

    async def refusing_once(link: Any, batch: Any, outcomes: dict[int, str]) -> None:
        if not refused:
            refused.append(id(link.driver))
            try:
                raise asyncpg.InternalClientError(
                    "cannot switch to state 12; another operation (2) is in progress"
                )
            except asyncpg.InternalClientError as exc:
                raise database_error(exc, "the batch") from exc
        assert id(link.driver) not in refused  # a fresh connection
        await real(link, batch, outcomes)

    monkeypatch.setattr(committer, "_commit", refusing_once)
    try:
        await committer.write(draw(g, 0))
        assert refused and await stored(db, g) == (1, [1])
    finally:
        await committer.close()


async def test_a_batch_whose_connection_is_lost_mid_statement_is_not_sent_again(
    db: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    (g,) = await games(db, 1)
    committer = GroupCommitter(db)
    calls: list[int] = []

    async def lost(link: Any, batch: Any, outcomes: dict[int, str]) -> None:
        calls.append(1)
        try:
            raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")
        except asyncpg.PostgresError as exc:
            raise database_error(exc, "the batch", connection_invalidated=True) from exc

    monkeypatch.setattr(committer, "_commit", lost)
    try:
        with pytest.raises(StorageUnavailable) as refused:
            await committer.write(draw(g, 0))
        assert isinstance(refused.value.__cause__, DBAPIError)
        assert calls == [1]
    finally:
        await committer.close()
