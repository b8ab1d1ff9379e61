"""``tripeaks serve`` (one process or ``--workers N``) and ``tripeaks migrate``."""

from __future__ import annotations

import asyncio
import errno
import logging
import sys
from pathlib import Path
from typing import Any

import click

from server.cli.common import (
    configure_logging_for,
    interrupt_on_sigterm,
    settings_from,
    with_database,
)
from server.config import Settings
from server.loops import EventLoopUnavailable, loop_name, new_event_loop

log = logging.getLogger("server")


@click.command()
@click.option("--host", help="Address to listen on (env TRIPEAKS_HOST, default 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (env TRIPEAKS_PORT, default 8080).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder for the embedded database and the daily secret (default ./.tripeaks).",
)
@click.option(
    "--workers",
    type=int,
    help="Server processes sharing the port, e.g. one per core (env TRIPEAKS_WORKERS, default 1).",
)
def serve(host: str | None, port: int | None, data_dir: Path | None, workers: int | None) -> None:
    """Run the server (migrates the database first)."""
    from server.config import SecretError, load_or_create_daily_secret

    settings = settings_from(host=host, port=port, data_dir=data_dir, workers=workers)
    configure_logging_for(settings)
    interrupt_on_sigterm()
    try:  # before the embedded database is started; generated only beside it
        daily_secret = load_or_create_daily_secret(settings, generate=not settings.database_url)
    except SecretError as exc:
        raise click.UsageError(f"invalid configuration: {exc}") from None
    from server.workers import PortTaken, check_port, run_workers

    # The ports before anything starts (the embedded database, the app: some seconds).
    try:
        check_port(settings.host, settings.port)
    except PortTaken as exc:
        raise click.ClickException(f"{exc}; choose another with --port or TRIPEAKS_PORT") from None
    if settings.ops_port is not None:
        try:
            check_port(settings.operations_host, settings.ops_port)
        except PortTaken as exc:
            raise click.ClickException(f"{exc}; choose another with TRIPEAKS_OPS_PORT") from None
    if settings.workers == 1:
        _serve(with_database(settings), daily_secret)
        return
    status = run_workers(settings.workers, with_database(settings), daily_secret, _worker_main)
    log.info("stopped")
    if status:
        sys.exit(status)


def _serve(settings: Settings, daily_secret: bytes, *, worker: int | None = None) -> None:
    """Run one server process until SIGINT or SIGTERM (a worker shares its port with others)."""
    from server.errors import StorageError
    from server.storage.sessions import as_storage_error
    from server.web.app import StartupTimeout, create_app
    from server.web.serving import OperationsPortError, run_app

    try:
        loop = new_event_loop(settings.event_loop)
    except EventLoopUnavailable as exc:
        raise click.ClickException(f"could not start: {exc}") from None
    asyncio.set_event_loop(loop)
    log.info("event loop: %s", loop_name(loop))
    app = create_app(settings, daily_secret=daily_secret, freeze_startup=True)
    try:
        run_app(
            app,
            loop=loop,
            host=settings.host,
            port=settings.port,
            reuse_port=worker is not None,
            shutdown_timeout=8.0,
            on_listening=lambda: _listening(settings),
            ops_port=settings.ops_port,
            ops_host=settings.operations_host,
        )
    except StartupTimeout as exc:
        raise click.ClickException(f"could not start: {exc}") from None
    except OperationsPortError as exc:
        raise click.ClickException(f"{exc}; choose another with TRIPEAKS_OPS_PORT") from None
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise click.ClickException(
                f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}; "
                "choose another with --port or TRIPEAKS_PORT"
            ) from None
        # The database's address answered nothing (refused, unknown host, unreachable).
        raise click.ClickException(
            f"could not start: the database does not answer ({exc}); "
            "is the PostgreSQL of DATABASE_URL running and reachable?"
        ) from None
    except Exception as exc:
        if not isinstance(as_storage_error(exc), StorageError):
            raise
        # The database answered, and refused (no such database, a login it does not know).
        detail = getattr(exc, "orig", None) or exc
        raise click.ClickException(
            f"could not start: the database refused the connection ({detail})"
        ) from None
    if worker is None:
        log.info("stopped")


def _listening(settings: Settings) -> None:
    log.info("serving on http://%s:%s (Ctrl-C to stop)", settings.host, settings.port)
    if settings.ops_port is not None:
        log.info(
            "health and metrics also on http://%s:%s (the operations port)",
            settings.operations_host,
            settings.ops_port,
        )


def _worker_main(number: int, dumped: dict[str, Any], daily_secret: bytes) -> None:
    """A worker process of ``serve --workers`` (started by :mod:`server.workers`)."""
    from server.workers import detach_from_terminal_signals, stop_with_parent

    detach_from_terminal_signals()
    stop_with_parent()
    settings = Settings(**dumped)
    configure_logging_for(settings, number)
    _serve(settings, daily_secret, worker=number)


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder of the embedded database (used when DATABASE_URL is not set).",
)
def migrate(data_dir: Path | None) -> None:
    """Bring the database schema to the newest migration and exit."""
    from server.storage.db import migrate_url

    settings = settings_from(data_dir=data_dir)
    configure_logging_for(settings)
    settings = with_database(settings)
    assert settings.database_url

    # The migrations hold a session-level advisory lock: never through a transaction pooler.
    asyncio.run(migrate_url(settings.direct_database_url or settings.database_url))
    click.echo("database schema is up to date")
