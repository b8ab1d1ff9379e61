"""The driver's own exceptions leave storage as :class:`StorageError`, wherever they are raised:
SQLAlchemy's connect hook (``set_type_codec`` on a new pooled connection) lets them through as
they are — a backend killed meanwhile raised ``ConnectionDoesNotExistError``,
``InternalClientError`` ("cannot switch to state …") or ``BrokenPipeError`` out of a session, and
handlers answered 500 and ``internal_error`` where ``unavailable`` was due.

PostgreSQL alone: the engine's pool and its connect hook are the real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from sqlalchemy import event, text

from server.errors import StorageUnavailable
from server.storage.db import create_engine
from server.storage.players import PostgresPlayerStore
from server.storage.sessions import Sessions, as_storage_error

#: What a backend killed while a connection is set up was seen to raise.
FAILURES: list[Callable[[], BaseException]] = [
    lambda: asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    lambda: asyncpg.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    ),
    lambda: BrokenPipeError(32, "Broken pipe"),
    lambda: asyncpg.InterfaceError("connection is closed"),
    lambda: asyncpg.ProtocolError("unexpected message"),
]


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: type(f()).__name__)
async def test_a_driver_error_of_the_connect_hook_leaves_a_session_as_storage_unavailable(
    database_url: str, failure: Callable[[], BaseException]
) -> None:
    engine = create_engine(database_url, pool_size=1)
    raised = failure()

    def hook(_dbapi_connection: Any, _record: Any) -> None:
        raise raised

    event.listen(engine.sync_engine, "connect", hook)
    sessions = Sessions(engine)
    try:
        with pytest.raises(StorageUnavailable) as caught:
            async with sessions() as session:
                await session.execute(text("SELECT 1"))
        assert caught.value.__cause__ is raised
        # A store over those sessions says the same (what a handler answers 503/unavailable).
        with pytest.raises(StorageUnavailable):
            await PostgresPlayerStore(sessions).live_tokens({1, 2})
        event.remove(engine.sync_engine, "connect", hook)
        async with sessions() as session:  # the next connection is set up as usual
            assert (await session.execute(text("SELECT 1"))).scalar_one() == 1
    finally:
        await engine.dispose()


@pytest.mark.parametrize("failure", FAILURES, ids=lambda f: type(f()).__name__)
def test_every_driver_error_is_a_storage_error(failure: Callable[[], BaseException]) -> None:
    raised = failure()
    translated = as_storage_error(raised)
    assert isinstance(translated, StorageUnavailable)
    assert translated.__cause__ is raised
