"""A server process's garbage collector settings (``create_app(freeze_startup=True)``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from aiohttp.test_utils import TestServer

from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import FakeClock
from server.web.app import GC_YOUNG_THRESHOLD, create_app


@pytest.fixture
def collector() -> Iterator[None]:
    """Give the test process its collector back as it was."""
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("collector")
async def test_a_server_process_freezes_its_start_and_lets_the_young_generation_grow(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> None:
    _, older, oldest = gc.get_threshold()
    server = TestServer(
        create_app(settings, clock=clock, analyzer=analyzer, freeze_startup=True),
        host="127.0.0.1",
    )
    await server.start_server()
    try:
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, older, oldest)
    finally:
        await server.close()
