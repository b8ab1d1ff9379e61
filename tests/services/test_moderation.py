"""Moderation over a real server's database: a hidden result (one hidden on its own, or a
banned player's) is gone from every page, "around me" window, rank and count, and comes back,
exactly, when restored; refused commands change nothing; two moderators acting at once take
turns."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Sequence
from typing import Any

import pytest
from aiohttp.test_utils import TestServer
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncEngine

from server.errors import ConflictError, InvalidInputError, NotFoundError
from server.services.moderation import ModerationService
from server.storage.models import Game, ModerationAction, Player
from server.web.keys import SERVICES
from tests.boards import (
    BOARD,
    DATE,
    DAY,
    T0,
    Client,
    Row,
    error,
    get_json,
    insert_rows,
    noise,
    ranks,
    walk,
)

YESTERDAY = DATE - dt.timedelta(days=1)


def visible_ranking(rows: Sequence[Row], hidden: set[int]) -> list[tuple[int, int]]:
    """(rank, player_id) of the board without the hidden players' rows, ranked naively."""
    ranked = [
        r
        for r in rows
        if r.mode == "daily"
        and r.date == DATE
        and r.status in ("won", "blocked")
        and r.player_id not in hidden
    ]
    return [
        (
            1
            + sum(
                (-o.score, o.moves, o.elapsed_ms) < (-r.score, r.moves, r.elapsed_ms)
                for o in ranked
            ),
            r.player_id,
        )
        for r in sorted(ranked, key=Row.key)
    ]


async def assert_board_is(
    client: Client, server: TestServer, want: list[tuple[int, int]], absent: set[int]
) -> None:
    """Pages, "around me", rank of and the date's counts all show ``want`` and none of
    ``absent``."""
    for limit in (1, 5, 100):
        assert ranks([e for page in await walk(client, limit) for e in page]) == want
    boards = server.app[SERVICES].leaderboards
    for i, (rank, player_id) in enumerate(want):
        entry = await boards.rank_of(DATE, player_id)
        assert entry is not None and entry.rank == rank
        if i % 3 == 0:
            body = await get_json(client, f"{BOARD}/around/{player_id}", radius=2)
            assert ranks(body["entries"]) == want[max(0, i - 2) : i + 3]
    for player_id in absent:
        assert await boards.rank_of(DATE, player_id) is None
        await error(await client.get(f"{BOARD}/around/{player_id}"), 404, "not_ranked")
    info = await get_json(client, f"/api/v1/daily/{DAY}")
    assert info["ranked"] == len(want)


async def audit_rows(db: AsyncEngine) -> int:
    async with db.connect() as conn:
        return int(await conn.scalar(select(func.count()).select_from(ModerationAction)) or 0)


@pytest.fixture
def moderation(server: TestServer) -> ModerationService:
    service: ModerationService = server.app[SERVICES].moderation
    return service


async def test_hidden_results_leave_every_view_of_the_board_and_come_back(
    client: Client, server: TestServer, db: AsyncEngine, moderation: ModerationService
) -> None:
    rng = random.Random(11)
    rows = [
        Row(
            f"P{i:02}",
            score=rng.choice([300, 301, 772]),
            moves=rng.randint(28, 30),
            elapsed_ms=rng.choice([1000, 1001, 2000]),
            status=rng.choice(["won", "blocked"]),
        )
        for i in range(40)
    ]
    await insert_rows(db, [*rows, *noise()])
    info = await get_json(client, f"/api/v1/daily/{DAY}")
    players_before = info["players"]
    everyone = visible_ranking(rows, set())
    await assert_board_is(client, server, everyone, set())

    # One result hidden on its own, and a banned player's (with games on other dates too).
    async with db.connect() as conn:
        games = dict(
            (
                await conn.execute(
                    select(Game.player_id, Game.id).where(
                        Game.daily_date == DATE, Game.mode == "daily"
                    )
                )
            ).all()
        )
    hidden_alone = rows[rng.randrange(40)].player_id
    banned = next(r.player_id for r in rows if r.player_id != hidden_alone)
    await moderation.hide(games[hidden_alone], "duplicate account", "mod-a")
    ban = await moderation.ban(f"id:{banned}", "played with a solver", "mod-b")
    assert [g.id for g in ban.hidden] == [games[banned]]
    absent = {hidden_alone, banned}
    await assert_board_is(client, server, visible_ranking(rows, absent), absent)
    info = await get_json(client, f"/api/v1/daily/{DAY}")
    assert info["players"] == players_before - 2

    # The unban restores what the ban hid, not the result hidden on its own.
    unban = await moderation.unban(str(banned), "mod-b")
    assert [g.id for g in unban.restored] == [games[banned]]
    await assert_board_is(client, server, visible_ranking(rows, {hidden_alone}), {hidden_alone})
    await moderation.restore(games[hidden_alone], "mod-a", "appeal upheld")
    await assert_board_is(client, server, everyone, set())
    info = await get_json(client, f"/api/v1/daily/{DAY}")
    assert info["players"] == players_before

    # The trail, newest first, says who, what and why.
    trail = await moderation.log()
    assert [(a.action, a.moderator) for a in trail] == [
        ("restore", "mod-a"),
        ("unban", "mod-b"),
        ("ban", "mod-b"),
        ("hide", "mod-a"),
    ]
    assert trail[2].reason == "played with a solver" and trail[2].player_id == banned
    assert trail[3].game_id == games[hidden_alone] and trail[3].daily_date == DATE
    assert trail[0].reason == "appeal upheld"
    assert all(a.at.tzinfo is not None for a in trail)
    assert [a.action for a in await moderation.log(f"id:{banned}")] == ["unban", "ban"]


async def test_a_ban_hides_every_daily_game_of_any_status_and_date_and_only_those(
    server: TestServer, db: AsyncEngine, moderation: ModerationService
) -> None:
    yesterday = YESTERDAY
    rows = [
        Row("Mallory", 772, 28, 1000),
        Row("Mallory", 600, 40, 1000, date=yesterday),
        Row("Mallory", 500, 0, 0, mode="free"),
        Row("Mallory", 500, 10, 0, date=DATE + dt.timedelta(days=1), status="playing"),
        Row("Alice", 700, 30, 1000),
    ]
    await insert_rows(db, rows)
    mallory = rows[0].player_id
    ban = await moderation.ban("mallory", "solver", "mod")  # names match in any case
    assert [(g.daily_date, g.status) for g in ban.hidden] == [
        (yesterday, "won"),
        (DATE, "won"),
        (DATE + dt.timedelta(days=1), "playing"),
    ]
    async with db.connect() as conn:
        marks = (
            await conn.execute(
                select(Game.mode, Game.hidden_by).where(Game.player_id == mallory).order_by(Game.id)
            )
        ).all()
    assert [tuple(m) for m in marks] == [
        ("daily", ban.action.id),
        ("daily", ban.action.id),
        ("free", None),
        ("daily", ban.action.id),
    ]
    # The unfinished game ends while hidden: it stays off the board.
    async with db.begin() as conn:
        await conn.execute(
            update(Game)
            .where(Game.player_id == mallory, Game.status == "playing")
            .values(status="won", score=760, moves=40, finished_at=T0, elapsed_ms=9)
        )
    boards = server.app[SERVICES].leaderboards
    assert await boards.rank_of(DATE + dt.timedelta(days=1), mallory) is None
    await moderation.unban("Mallory", "mod")
    entry = await boards.rank_of(DATE + dt.timedelta(days=1), mallory)
    assert entry is not None and entry.score == 760


async def test_a_hide_of_a_game_the_ban_hid_outlasts_the_unban(
    db: AsyncEngine, moderation: ModerationService
) -> None:
    rows = [Row("Mallory", 772, 28, 1000), Row("Mallory", 700, 30, 1000, date=YESTERDAY)]
    await insert_rows(db, rows)
    ban = await moderation.ban("Mallory", "solver", "mod")
    first, second = ban.hidden
    hidden = await moderation.hide(first.id, "also a duplicate", "mod")
    assert hidden.from_ban == ban.action.id
    with pytest.raises(ConflictError, match="comes back when they are unbanned"):
        await moderation.restore(second.id, "mod")
    with pytest.raises(ConflictError, match="is banned"):
        await moderation.restore(first.id, "mod")
    unban = await moderation.unban("Mallory", "mod")
    assert [g.id for g in unban.restored] == [second.id]
    async with db.connect() as conn:
        marks = dict((await conn.execute(select(Game.id, Game.hidden_by))).all())
    assert marks == {first.id: hidden.action.id, second.id: None}


async def state(db: AsyncEngine) -> tuple[Any, ...]:
    """Everything a refused command must leave as it was."""
    async with db.connect() as conn:
        tables = []
        for query in (
            "SELECT * FROM moderation_actions ORDER BY id",
            "SELECT id, banned_at, ban_reason, ban_action_id FROM players ORDER BY id",
            "SELECT id, hidden_at, hidden_by FROM games ORDER BY id",
            "SELECT * FROM leaderboard_counts ORDER BY 1, 2, 3, 4, 5",
            "SELECT * FROM daily_players ORDER BY 1",
        ):
            tables.append([tuple(row) for row in await conn.execute(text(query))])
    return tuple(tables)


async def test_refused_commands_change_nothing(
    db: AsyncEngine, moderation: ModerationService
) -> None:
    rows = [
        Row("Mallory", 772, 28, 1000),
        Row("Alice", 700, 30, 1000),
        Row("2024", 600, 30, 1000),  # a name that is a number
        Row("Freeplay", 500, 3, 0, mode="free"),
    ]
    await insert_rows(db, rows)
    mallory, alice, numbered, free = (r.player_id for r in rows)
    await moderation.ban("Mallory", "solver", "mod")
    async with db.connect() as conn:
        alice_game = await conn.scalar(select(Game.id).where(Game.player_id == alice))
        free_game = await conn.scalar(select(Game.id).where(Game.player_id == free))
    assert alice_game is not None and free_game is not None
    await moderation.hide(alice_game, "duplicate", "mod")
    before = await state(db)
    refusals: list[tuple[Any, type[Exception], str]] = [
        (moderation.ban("Mallory", "again", "mod"), ConflictError, "already banned"),
        (moderation.ban("Nobody", "x", "mod"), NotFoundError, "no player named 'Nobody'"),
        (moderation.ban("id:999999", "x", "mod"), NotFoundError, "no player with id 999999"),
        (moderation.ban("Alice", "   ", "mod"), InvalidInputError, "reason is required"),
        (moderation.ban("Alice", "x" * 301, "mod"), InvalidInputError, "at most 300"),
        (moderation.ban("Alice", "why", " "), InvalidInputError, "moderator"),
        (moderation.ban("", "why", "mod"), InvalidInputError, "by id or by name"),
        (moderation.unban("Alice", "mod"), ConflictError, "not banned"),
        (moderation.hide(alice_game, "again", "mod"), ConflictError, "already hidden"),
        (moderation.hide(free_game, "x", "mod"), InvalidInputError, "free game"),
        (moderation.hide(999999, "x", "mod"), NotFoundError, "no game 999999"),
        (moderation.hide(0, "x", "mod"), NotFoundError, "no game 0"),
        (moderation.restore(free_game, "mod"), ConflictError, "not hidden"),
        (moderation.log(limit=0), InvalidInputError, "limit"),
    ]
    assert numbered != 2024  # so "2024" is both an id and another player's name
    refusals.append((moderation.ban("2024", "x", "mod"), InvalidInputError, "id:2024"))
    for call, kind, message in refusals:
        with pytest.raises(kind, match=message):
            await call
        assert await state(db) == before, message
    assert (await moderation.player("name:2024")).id == numbered
    assert (await moderation.player(f"id:{mallory}")).name == "Mallory"


async def test_two_moderators_banning_at_once_take_turns(
    db: AsyncEngine, moderation: ModerationService
) -> None:
    rows = [Row("Mallory", 772, 28, 1000), Row("Mallory", 772, 28, 1000, date=YESTERDAY)]
    await insert_rows(db, rows)
    outcomes = await asyncio.gather(
        *(moderation.ban("Mallory", f"reason {i}", f"mod-{i}") for i in range(4)),
        return_exceptions=True,
    )
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, ConflictError)]
    assert len(done) == 1 and len(refused) == 3
    assert await audit_rows(db) == 1
    async with db.connect() as conn:
        ban_action = await conn.scalar(select(Player.ban_action_id).where(Player.name == "Mallory"))
        hidden = await conn.scalar(select(func.count()).where(Game.hidden_by == ban_action))
    assert hidden == 2
