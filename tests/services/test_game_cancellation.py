"""An action whose caller is cancelled while its write waits for the group commit."""

from __future__ import annotations

import asyncio
import secrets

import asyncpg
import pytest

from server.engine import Action, RuleSet
from server.services import Services
from server.services.clock import FakeClock
from server.services.game_views import Outcome
from server.storage.db import create_engine
from tests.helpers import WAIT_S


async def test_a_cancelled_action_settles_its_commit_before_the_cancellation_is_raised(
    database_url: str, clock: FakeClock
) -> None:
    """The cancelled caller is told only once the commit's outcome is known, and the game the
    next request finds is the stored one: its next action is accepted, not ``stale_seq``."""
    engine = create_engine(database_url)
    services = Services.build(
        engine, clock, daily_secret=secrets.token_bytes(32), daily_rules=RuleSet.EASY
    )
    admin = await asyncpg.connect(database_url)
    try:
        me = (await services.players.register("Canceller")).player
        game = await services.games.new_free_game(me.id)
        assert game.view.stock_count > 0
        # Hold the action log's table, so that the writer's batch waits in PostgreSQL.
        hold = admin.transaction()
        await hold.start()
        await admin.execute("LOCK TABLE game_actions IN ACCESS EXCLUSIVE MODE")
        acting = asyncio.create_task(services.games.act(me.id, game.id, 0, Action.draw()))

        async def batch_waits() -> bool:
            waiting = await admin.fetchval(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
                "'game_actions'::regclass"
            )
            return bool(waiting)

        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not await batch_waits():
            assert asyncio.get_running_loop().time() < deadline, "the batch never waited"
            await asyncio.sleep(0.01)
        acting.cancel()
        for _ in range(20):  # the cancellation is delivered, and held back
            await asyncio.sleep(0)
        assert not acting.done(), "cancelled before its commit's outcome was known"
        await hold.rollback()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(acting, WAIT_S)

        stored = await admin.fetchval("SELECT seq FROM games WHERE id = $1", game.id)
        assert stored == 1
        following = await services.games.act(me.id, game.id, 1, Action.draw())
        assert following.outcome is Outcome.ACCEPTED and following.snapshot.seq == 2
    finally:
        await admin.close()
        await services.games.close()
        await engine.dispose()
