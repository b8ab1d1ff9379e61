"""The event loop a server process runs on (``TRIPEAKS_EVENT_LOOP``): asyncio's own (the
default: uvloop, measured side by side in one run, did not lower the closed loop's server CPU
per reply, README "A reconnect storm, a burst of hellos"), uvloop, or ``auto``: uvloop where it
is installed, asyncio's where it is not."""

from __future__ import annotations

import asyncio
import importlib
from typing import Literal

#: ``auto``: uvloop if it is installed, else asyncio's; ``uvloop``: uvloop or a refusal to
#: start; ``asyncio``: asyncio's own.
EventLoopChoice = Literal["auto", "uvloop", "asyncio"]


class EventLoopUnavailable(RuntimeError):
    """The event loop asked for is not installed."""


def new_event_loop(choice: EventLoopChoice) -> asyncio.AbstractEventLoop:
    """A new event loop of the kind chosen (not set as the current one).

    Raises:
        EventLoopUnavailable: ``uvloop`` was asked for and is not installed.
    """
    if choice == "asyncio":
        return asyncio.new_event_loop()
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        if choice == "uvloop":
            raise EventLoopUnavailable(
                "TRIPEAKS_EVENT_LOOP=uvloop but uvloop is not installed "
                "(pip install uvloop, or choose auto or asyncio)"
            ) from None
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    return loop


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: which kind ``loop`` is."""
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


__all__ = ["EventLoopChoice", "EventLoopUnavailable", "loop_name", "new_event_loop"]
