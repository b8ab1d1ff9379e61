"""What the ``tripeaks`` commands share: settings from the environment and options, the
embedded database, logging, and SIGTERM handled as Ctrl-C until the server takes it over."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from types import FrameType
from typing import Any

import click
from pydantic import ValidationError

from server.config import Settings


def _variable(field: str) -> str:
    """The environment variable of a settings field."""
    return "DATABASE_URL" if field == "database_url" else f"TRIPEAKS_{field.upper()}"


def settings_from(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        # A check across settings (no single variable) says itself which variables it needs.
        problems = "; ".join(
            f"{_variable(str(e['loc'][0]))}: {e['msg']}"
            if e["loc"]
            else str(e.get("ctx", {}).get("error", e["msg"]))
            for e in exc.errors()
        )
        raise click.UsageError(f"invalid configuration: {problems}") from None


def with_database(settings: Settings) -> Settings:
    if settings.database_url:
        return settings
    from server.storage.db import start_embedded_postgres

    # A log line (stderr, in the configured format), like every other line of the server.
    logging.getLogger("server").info(
        "no DATABASE_URL: using the embedded PostgreSQL in %s (started, or reused if running)",
        settings.data_dir / "pg",
    )
    with SIGTERM.held_back():
        url = start_embedded_postgres(settings.data_dir)
    return settings.model_copy(update={"database_url": url})


def configure_logging_for(settings: Settings, worker: int | None = None) -> None:
    from server.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format, worker=worker)


class Sigterm:
    """SIGTERM before the server (or the workers' supervisor) takes it over: it stops the
    process as Ctrl-C does, unwinding it, so that what was started meanwhile (the embedded
    database) is stopped too, where the signal's default action would end the process on the
    spot. While the embedded database starts it is held back until the start is over (and its
    stop is arranged)."""

    def __init__(self) -> None:
        self.holding = False
        self.held = False

    def __call__(self, _signum: int, _frame: FrameType | None) -> None:
        if self.holding:
            self.held = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held_back(self) -> Iterator[None]:
        """Within the block a SIGTERM waits; it takes effect when the block ends."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.held:
            raise KeyboardInterrupt


SIGTERM = Sigterm()


def interrupt_on_sigterm() -> None:
    """See :class:`Sigterm`."""
    signal.signal(signal.SIGTERM, SIGTERM)
