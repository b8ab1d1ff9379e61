"""``tripeaks admin``: moderation over the database (docs/rules.md §4 "Moderation").

``ban`` / ``unban`` a player, ``hide`` / ``restore`` one daily result, ``log`` (the audit
trail), and ``suspicious`` (a day's results with the signals that fired:
:mod:`server.cli.review`). Every command that changes anything records who (``--by``, else the
operating system's user), when (the database's clock) and why (``--reason``) in
``moderation_actions``, and prints what it did; bad input (an unknown player, a ban already
made, …) exits with status 1 and a message, having changed nothing. They run against
``DATABASE_URL``, or the embedded database of ``--data-dir`` like ``tripeaks migrate``, whose
schema must be at the newest migration.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import getpass
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from server.cli.common import SIGTERM, configure_logging_for, settings_from
from server.config import Settings
from server.errors import ServiceError, StorageError

if TYPE_CHECKING:
    from server.services.moderation import ModerationService
    from server.services.review import ReviewService

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Tools:
    """The services a command runs (imported when it runs: ``tripeaks --help`` stays quick)."""

    moderation: ModerationService
    review: ReviewService


#: What a command does with them.
Work = Callable[[Tools], Awaitable[T]]


@click.group()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data folder of the embedded database (used when DATABASE_URL is not set).",
)
@click.pass_context
def admin(ctx: click.Context, data_dir: Path | None) -> None:
    """Moderation: bans, hidden results, suspicious results, the audit trail.

    PLAYER is an id or a name (id:N or name:TEXT when a name is a number).
    """
    ctx.obj = data_dir


def _settings(data_dir: Path | None) -> Settings:
    """The settings, with the embedded database started when no DATABASE_URL is given (said on
    stderr, so that ``--json`` output stays JSON)."""
    settings = settings_from(data_dir=data_dir)
    configure_logging_for(settings)
    if settings.database_url:
        return settings
    from server.storage.db import start_embedded_postgres

    click.echo(
        f"No DATABASE_URL: using the embedded PostgreSQL in {settings.data_dir / 'pg'}", err=True
    )
    with SIGTERM.held_back():
        url = start_embedded_postgres(settings.data_dir)
    return settings.model_copy(update={"database_url": url})


def run(ctx: click.Context, work: Work[T], *, changes: bool = True) -> T:
    """Run ``work(tools)`` against the database; a refusal or a database failure
    ends the command with status 1 and its message (saying that nothing was changed, for a
    command that ``changes`` anything)."""
    unchanged = "; nothing was changed" if changes else ""
    settings = _settings(ctx.obj)

    async def go() -> T:
        from alembic.script import ScriptDirectory

        from server.services.moderation import ModerationService
        from server.services.review import ReviewService
        from server.storage import moderation as store
        from server.storage.db import alembic_config, create_engine
        from server.storage.moderation import PostgresModerationStore
        from server.storage.review import PostgresReviewStore
        from server.storage.sessions import Sessions

        assert settings.database_url
        engine = create_engine(
            settings.database_url,
            pool_size=2,
            pooler=settings.db_pooler,
            deadlines=settings.database_deadlines(),
        )
        try:
            sessions = Sessions(engine)
            async with sessions() as session:
                revision = await store.schema_revision(session)
            head = ScriptDirectory.from_config(alembic_config()).get_current_head()
            if revision != head:
                raise click.ClickException(
                    f"the database schema is at revision {revision or '(none)'}, not {head}: "
                    "run `tripeaks migrate` first"
                )
            tools = Tools(
                ModerationService(PostgresModerationStore(sessions)),
                ReviewService(PostgresReviewStore(sessions)),
            )
            return await work(tools)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(go())
    except ServiceError as exc:
        raise click.ClickException(f"{exc.message}{unchanged}") from None
    except StorageError as exc:
        cause = exc.__cause__ or exc
        raise click.ClickException(
            f"the database failed ({cause.__class__.__name__}){unchanged}"
        ) from None


def _moderator(by: str | None) -> str:
    if by is not None:
        return by
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        raise click.ClickException("cannot tell who you are: say so with --by NAME") from None


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _game_text(game: Any) -> str:
    """``game 41 (2026-03-14, won, score 747)``."""
    date = game.daily_date.isoformat() if game.daily_date else game.mode
    score = f", score {game.score}" if game.status in ("won", "blocked") else ""
    return f"game {game.id} ({date}, {game.status}{score})"


def _games_text(games: list[Any]) -> str:
    return ", ".join(_game_text(g) for g in games)


def _stamp(action: Any) -> str:
    return f"action #{action.id} by {action.moderator} at {_when(action.at)}"


BY = click.option("--by", help="Who is acting, for the audit trail (default: your OS user).")


@admin.command()
@click.argument("player")
@click.option("--reason", required=True, help="Why (kept, and shown to the player).")
@BY
@click.pass_context
def ban(ctx: click.Context, player: str, reason: str, by: str | None) -> None:
    """Ban PLAYER from ranked play and hide their daily results."""
    moderator = _moderator(by)
    done = run(ctx, lambda t: t.moderation.ban(player, reason, moderator))
    click.echo(f"banned player {done.player.id} ({done.player.name}), {_stamp(done.action)}")
    click.echo(f"reason: {done.reason}")
    if done.hidden:
        count = len(done.hidden)
        click.echo(f"hid {count} daily result{'s' * (count != 1)}: {_games_text(done.hidden)}")
    else:
        click.echo("hid no daily result: none was showing")


@admin.command()
@click.argument("player")
@click.option("--reason", help="Why (optional).")
@BY
@click.pass_context
def unban(ctx: click.Context, player: str, reason: str | None, by: str | None) -> None:
    """Lift PLAYER's ban and restore the results it hid."""
    moderator = _moderator(by)
    done = run(ctx, lambda t: t.moderation.unban(player, moderator, reason))
    before = done.player
    assert before.banned_at is not None
    click.echo(f"unbanned player {before.id} ({before.name}), {_stamp(done.action)}")
    click.echo(
        f"the ban was action #{before.ban_action_id}, since {_when(before.banned_at)}: "
        f"{before.ban_reason}"
    )
    if done.restored:
        count = len(done.restored)
        click.echo(
            f"restored {count} daily result{'s' * (count != 1)}: {_games_text(done.restored)}"
        )
    else:
        click.echo("restored no daily result: the ban had hidden none still hidden by it")


@admin.command()
@click.argument("game_id", type=int)
@click.option("--reason", required=True, help="Why (kept in the audit trail).")
@BY
@click.pass_context
def hide(ctx: click.Context, game_id: int, reason: str, by: str | None) -> None:
    """Take the daily result GAME_ID off its board (kept; `restore` puts it back)."""
    moderator = _moderator(by)
    done = run(ctx, lambda t: t.moderation.hide(game_id, reason, moderator))
    click.echo(
        f"hid {_game_text(done.game)} of player {done.player.id} ({done.player.name}) from "
        f"its board, {_stamp(done.action)}"
    )
    click.echo(f"reason: {' '.join(reason.split())}")
    if done.from_ban is not None:
        click.echo(
            f"it was hidden by the player's ban (action #{done.from_ban}); now hidden on its "
            "own, it stays hidden when the ban is lifted"
        )


@admin.command()
@click.argument("game_id", type=int)
@click.option("--reason", help="Why (optional).")
@BY
@click.pass_context
def restore(ctx: click.Context, game_id: int, reason: str | None, by: str | None) -> None:
    """Put the hidden daily result GAME_ID back on its board."""
    moderator = _moderator(by)
    done = run(ctx, lambda t: t.moderation.restore(game_id, moderator, reason))
    click.echo(
        f"restored {_game_text(done.game)} of player {done.player.id} ({done.player.name}) "
        f"to its board, {_stamp(done.action)}; it had been hidden by action "
        f"#{done.game.hidden_by}"
    )
    if done.game.status not in ("won", "blocked"):
        click.echo("it is not over: it ranks once it ends won or blocked")


def _action_json(row: Any) -> dict[str, Any]:
    data = asdict(row)
    data["at"] = row.at.astimezone(dt.UTC).isoformat()
    data["daily_date"] = None if row.daily_date is None else row.daily_date.isoformat()
    return data


def _action_line(row: Any) -> str:
    who = f"player {row.player_id}" + (f" ({row.player_name})" if row.player_name else "")
    if row.game_id is not None:
        date = f", {row.daily_date.isoformat()}" if row.daily_date else ""
        target = f"game {row.game_id} of {who}{date}"
    else:
        target = who
    parts = [f"#{row.id:<4}", _when(row.at), f"{row.moderator:<12}", f"{row.action:<7}", target]
    details = row.details or {}
    for key, label in (("hidden_games", "hid games"), ("restored_games", "restored games")):
        if details.get(key):
            parts.append(f"{label} {', '.join(str(g) for g in details[key])}")
    if details.get("was_hidden_by_ban"):
        parts.append(f"had been hidden by the ban #{details['was_hidden_by_ban']}")
    if details.get("hidden_by"):
        parts.append(f"had been hidden by #{details['hidden_by']}")
    if row.reason:
        parts.append(f"reason: {row.reason}")
    return "  ".join(parts[:5]) + "".join(f"; {p}" for p in parts[5:])


@admin.command()
@click.option("--player", help="Only the actions about this player (id or name).")
@click.option("--limit", type=int, default=50, show_default=True, help="Newest rows shown.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for machines.")
@click.pass_context
def log(ctx: click.Context, player: str | None, limit: int, as_json: bool) -> None:
    """The audit trail: who did what, when and why, newest first."""
    rows = run(ctx, lambda t: t.moderation.log(player, limit), changes=False)
    if as_json:
        click.echo(json.dumps([_action_json(row) for row in rows], ensure_ascii=False))
        return
    if not rows:
        click.echo("no moderation action recorded" + (f" about {player}" if player else ""))
    for row in rows:
        click.echo(_action_line(row))
