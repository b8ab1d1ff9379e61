"""The ``tripeaks`` command: ``serve``, ``migrate`` and ``deal``."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from server.config import Settings
from server.engine.codes import GameCode
from server.engine.errors import EngineError
from server.engine.layout import ROWS

log = logging.getLogger("server")


def _settings(**overrides: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        raise click.UsageError(f"invalid configuration: {problems}") from None


def _with_database(settings: Settings) -> Settings:
    if settings.database_url:
        return settings
    from server.storage.db import start_embedded_postgres

    click.echo(f"No DATABASE_URL: starting the embedded PostgreSQL in {settings.data_dir / 'pg'}")
    url = start_embedded_postgres(settings.data_dir)
    return settings.model_copy(update={"database_url": url})


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@click.group()
@click.version_option(package_name="tripeaks-server")
def main() -> None:
    """Competitive TriPeaks server: shared deals, daily challenge, leaderboards."""


@main.command()
@click.option("--host", help="Address to listen on (env TRIPEAKS_HOST, default 127.0.0.1).")
@click.option("--port", type=int, help="Port to listen on (env TRIPEAKS_PORT, default 8080).")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder for the embedded database and the daily secret (default ./.tripeaks).",
)
def serve(host: str | None, port: int | None, data_dir: Path | None) -> None:
    """Run the server (migrates the database first)."""
    from aiohttp import web

    from server.web.app import create_app

    settings = _settings(host=host, port=port, data_dir=data_dir)
    _configure_logging(settings.log_level)
    settings = _with_database(settings)
    app = create_app(settings)
    log.info("serving on http://%s:%s", settings.host, settings.port)
    web.run_app(
        app,
        host=settings.host,
        port=settings.port,
        shutdown_timeout=8.0,
        print=None,
        access_log=None,
    )


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder of the embedded database (used when DATABASE_URL is not set).",
)
def migrate(data_dir: Path | None) -> None:
    """Bring the database schema to the newest migration and exit."""
    from server.storage.db import create_engine
    from server.storage.db import migrate as run_migrations

    settings = _settings(data_dir=data_dir)
    _configure_logging(settings.log_level)
    settings = _with_database(settings)
    assert settings.database_url

    async def go() -> None:
        engine = create_engine(settings.database_url or "", pool_size=1)
        try:
            await run_migrations(engine)
        finally:
            await engine.dispose()

    asyncio.run(go())
    click.echo("database schema is up to date")


@main.command()
@click.argument("code")
@click.option("--json", "as_json", is_flag=True, help="Print the deal as JSON.")
def deal(code: str, as_json: bool) -> None:
    """Print the deal of a game CODE (e.g. TP1-E-AAAAAAA): rows, waste and stock."""
    try:
        parsed = GameCode.parse(code)
    except EngineError as exc:
        raise click.BadParameter(str(exc), param_hint="CODE") from None
    dealt = parsed.deal()
    if as_json:
        click.echo(
            json.dumps(
                {
                    "code": str(parsed),
                    "rules": parsed.rules.value,
                    "tableau": [str(c) for c in dealt.tableau],
                    "waste": str(dealt.waste),
                    "stock": [str(c) for c in dealt.stock],
                }
            )
        )
        return
    width = 3 * (len(ROWS[-1]) - 1) + 2
    click.echo(f"{parsed}  ({'Easy' if parsed.rules.value == 'E' else 'Classic'})")
    for row in ROWS:
        cards = "  ".join(str(dealt.tableau[p]) for p in row) if len(row) != 3 else None
        if cards is None:
            cards = "        ".join(str(dealt.tableau[p]) for p in row)
        click.echo(cards.center(width).rstrip())
    click.echo(f"waste: {dealt.waste}")
    click.echo(f"stock: {' '.join(str(c) for c in dealt.stock)}  (drawn left to right)")


if __name__ == "__main__":  # pragma: no cover
    main()
