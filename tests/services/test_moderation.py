"""Moderation on either store (in memory and PostgreSQL): a hidden result (one hidden on its own,
or a banned player's) is gone from every page, "around me" window, rank and count, and comes
back, exactly, when restored; refused commands change nothing; two moderators acting at once
take turns."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Sequence
from typing import Any

import pytest

from server.errors import ConflictError, ErrorCode, InvalidInputError, NotFoundError
from server.services.leaderboards import Entry, LeaderboardService
from server.services.moderation import LOG_MAX, ModerationService
from tests.backends import Backend
from tests.boards import DATE, T0, Row, noise, store_rows

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


def ranks(entries: Sequence[Entry]) -> list[tuple[int, int]]:
    return [(e.rank, e.player_id) for e in entries]


async def walk(boards: LeaderboardService, limit: int) -> list[Entry]:
    """The whole board, read page after page (``limit`` entries each)."""
    entries: list[Entry] = []
    cursor: str | None = None
    while True:
        page = await boards.page(DATE, limit, cursor)
        entries.extend(page.entries)
        if page.next_cursor is None:
            return entries
        cursor = page.next_cursor


async def assert_board_is(backend: Backend, want: list[tuple[int, int]], absent: set[int]) -> None:
    """Pages, "around me", rank of and the date's count all show ``want`` and none of
    ``absent``."""
    boards = LeaderboardService(backend.leaderboards)
    for limit in (1, 5, 100):
        assert ranks(await walk(boards, limit)) == want
    for i, (rank, player_id) in enumerate(want):
        entry = await boards.rank_of(DATE, player_id)
        assert entry is not None and entry.rank == rank
        if i % 3 == 0:
            around = await boards.around(DATE, player_id, radius=2)
            assert ranks(around) == want[max(0, i - 2) : i + 3]
    for player_id in absent:
        assert await boards.rank_of(DATE, player_id) is None
        with pytest.raises(NotFoundError) as refused:
            await boards.around(DATE, player_id)
        assert refused.value.code == ErrorCode.NOT_RANKED
    assert (await backend.daily.counts(DATE)).ranked == len(want)


async def audit_rows(moderation: ModerationService) -> int:
    return len(await moderation.log(limit=LOG_MAX))


@pytest.fixture
def moderation(backend: Backend) -> ModerationService:
    return ModerationService(backend.moderation)


async def test_hidden_results_leave_every_view_of_the_board_and_come_back(
    backend: Backend, moderation: ModerationService
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
    await store_rows(backend, [*rows, *noise()])
    players_before = (await backend.daily.counts(DATE)).players
    everyone = visible_ranking(rows, set())
    await assert_board_is(backend, everyone, set())

    # One result hidden on its own, and a banned player's (with games on other dates too).
    games = {
        g.player_id: g.id
        for g in await backend.stored_games()
        if g.daily_date == DATE and g.mode == "daily"
    }
    hidden_alone = rows[rng.randrange(40)].player_id
    banned = next(r.player_id for r in rows if r.player_id != hidden_alone)
    await moderation.hide(games[hidden_alone], "duplicate account", "mod-a")
    ban = await moderation.ban(f"id:{banned}", "played with a solver", "mod-b")
    assert [g.id for g in ban.hidden] == [games[banned]]
    absent = {hidden_alone, banned}
    await assert_board_is(backend, visible_ranking(rows, absent), absent)
    assert (await backend.daily.counts(DATE)).players == players_before - 2

    # The unban restores what the ban hid, not the result hidden on its own.
    unban = await moderation.unban(str(banned), "mod-b")
    assert [g.id for g in unban.restored] == [games[banned]]
    await assert_board_is(backend, visible_ranking(rows, {hidden_alone}), {hidden_alone})
    await moderation.restore(games[hidden_alone], "mod-a", "appeal upheld")
    await assert_board_is(backend, everyone, set())
    assert (await backend.daily.counts(DATE)).players == players_before

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
    backend: Backend, moderation: ModerationService
) -> None:
    yesterday = YESTERDAY
    rows = [
        Row("Mallory", 772, 28, 1000),
        Row("Mallory", 600, 40, 1000, date=yesterday),
        Row("Mallory", 500, 0, 0, mode="free"),
        Row("Mallory", 500, 10, 0, date=DATE + dt.timedelta(days=1), status="playing"),
        Row("Alice", 700, 30, 1000),
    ]
    await store_rows(backend, rows)
    mallory = rows[0].player_id
    ban = await moderation.ban("mallory", "solver", "mod")  # names match in any case
    assert [(g.daily_date, g.status) for g in ban.hidden] == [
        (yesterday, "won"),
        (DATE, "won"),
        (DATE + dt.timedelta(days=1), "playing"),
    ]
    marks = [(g.mode, g.hidden_by) for g in await backend.stored_games(mallory)]
    assert marks == [
        ("daily", ban.action.id),
        ("daily", ban.action.id),
        ("free", None),
        ("daily", ban.action.id),
    ]
    # The unfinished game ends while hidden: it stays off the board.
    [playing] = [g for g in await backend.stored_games(mallory) if g.status == "playing"]
    await backend.set_result(
        playing.id, status="won", score=760, moves=40, finished_at=T0, elapsed_ms=9
    )
    boards = LeaderboardService(backend.leaderboards)
    assert await boards.rank_of(DATE + dt.timedelta(days=1), mallory) is None
    await moderation.unban("Mallory", "mod")
    entry = await boards.rank_of(DATE + dt.timedelta(days=1), mallory)
    assert entry is not None and entry.score == 760


async def test_a_hide_of_a_game_the_ban_hid_outlasts_the_unban(
    backend: Backend, moderation: ModerationService
) -> None:
    rows = [Row("Mallory", 772, 28, 1000), Row("Mallory", 700, 30, 1000, date=YESTERDAY)]
    await store_rows(backend, rows)
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
    marks = {g.id: g.hidden_by for g in await backend.stored_games()}
    assert marks == {first.id: hidden.action.id, second.id: None}


async def test_refused_commands_change_nothing(
    backend: Backend, moderation: ModerationService
) -> None:
    rows = [
        Row("Mallory", 772, 28, 1000),
        Row("Alice", 700, 30, 1000),
        Row("2024", 600, 30, 1000),  # a name that is a number
        Row("Freeplay", 500, 3, 0, mode="free"),
    ]
    await store_rows(backend, rows)
    mallory, alice, numbered, free = (r.player_id for r in rows)
    await moderation.ban("Mallory", "solver", "mod")
    [alice_game] = [g.id for g in await backend.stored_games(alice)]
    [free_game] = [g.id for g in await backend.stored_games(free)]
    await moderation.hide(alice_game, "duplicate", "mod")
    before = await backend.moderation_state()
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
        assert await backend.moderation_state() == before, message
    assert (await moderation.player("name:2024")).id == numbered
    assert (await moderation.player(f"id:{mallory}")).name == "Mallory"


async def test_two_moderators_banning_at_once_take_turns(
    backend: Backend, moderation: ModerationService
) -> None:
    rows = [Row("Mallory", 772, 28, 1000), Row("Mallory", 772, 28, 1000, date=YESTERDAY)]
    await store_rows(backend, rows)
    outcomes = await asyncio.gather(
        *(moderation.ban("Mallory", f"reason {i}", f"mod-{i}") for i in range(4)),
        return_exceptions=True,
    )
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, ConflictError)]
    assert len(done) == 1 and len(refused) == 3
    assert await audit_rows(moderation) == 1
    ban_action = (await moderation.player("name:Mallory")).ban_action_id
    hidden = [g for g in await backend.stored_games() if g.hidden_by == ban_action]
    assert len(hidden) == 2
