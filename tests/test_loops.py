"""The server's event loop (``TRIPEAKS_EVENT_LOOP``): uvloop where installed, asyncio's where
it is not or when asked, a clear refusal when uvloop is asked for and missing (a server serving
on each: tests/e2e/test_cli.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from server.config import Settings
from server.loops import EventLoopUnavailable, loop_name, new_event_loop


@pytest.mark.parametrize("choice", ["auto", "uvloop", "asyncio"])
def test_each_choice_gives_its_loop_where_uvloop_is_installed(choice: str) -> None:
    pytest.importorskip("uvloop")
    loop = new_event_loop(choice)  # type: ignore[arg-type]
    try:
        assert loop_name(loop) == ("asyncio" if choice == "asyncio" else "uvloop")
    finally:
        loop.close()


def test_without_uvloop_auto_is_asyncios_loop_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed
    loop = new_event_loop("auto")
    try:
        assert loop_name(loop) == "asyncio" and isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()
    with pytest.raises(EventLoopUnavailable, match="uvloop is not installed"):
        new_event_loop("uvloop")


def test_the_setting_takes_the_three_names_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIPEAKS_EVENT_LOOP", "uvloop")
    assert Settings().event_loop == "uvloop"
    monkeypatch.setenv("TRIPEAKS_EVENT_LOOP", "trio")
    with pytest.raises(ValueError, match="event_loop"):
        Settings()
