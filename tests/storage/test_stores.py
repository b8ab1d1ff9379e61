"""The stores' contracts (``server/storage/players.py``, ``daily.py``, ``leaderboards.py``),
kept alike by PostgreSQL's stores and the in-memory ones of ``tests/fakes``: each test runs on
both."""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets

import pytest

from server.engine import DealVersion, GameCode, RuleSet
from server.errors import StorageConflict
from server.names import name_key
from server.storage.daily import DailyCounts
from server.storage.leaderboards import BoardPosition, BoardSlice
from server.storage.players import PlayerRow
from tests.backends import Backend, Seed

DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)


# --------------------------------------------------------------------------------- players


async def test_a_player_is_added_and_found_by_token_hash_and_id(backend: Backend) -> None:
    token_hash = secrets.token_bytes(32)
    ada = await backend.players.add("Ada", name_key("Ada"), token_hash, T0)
    assert ada is not None and ada.name == "Ada" and ada.id > 0
    assert await backend.players.by_token_hash(token_hash) == ada
    assert await backend.players.get(ada.id) == ada
    assert await backend.players.name_holding(name_key("Ada")) == "Ada"
    assert await backend.players.by_token_hash(secrets.token_bytes(32)) is None
    for nobody in (0, -1, ada.id + 1, 2**63, 2**80):
        assert await backend.players.get(nobody) is None


async def test_a_taken_name_key_adds_nobody(backend: Backend) -> None:
    first = await backend.players.add("Ada", name_key("Ada"), secrets.token_bytes(32), T0)
    assert isinstance(first, PlayerRow)
    token_hash = secrets.token_bytes(32)
    assert await backend.players.add("ADA", name_key("ADA"), token_hash, T0) is None
    assert await backend.players.by_token_hash(token_hash) is None
    assert await backend.players.name_holding(name_key("ADA")) == "Ada"
    # The key is compared as given: a key that differs is free.
    assert await backend.players.name_holding(name_key("Ada") + "#1") is None


async def test_a_taken_token_hash_is_a_storage_conflict(backend: Backend) -> None:
    token_hash = secrets.token_bytes(32)
    await backend.players.add("Ada", name_key("Ada"), token_hash, T0)
    with pytest.raises(StorageConflict) as caught:
        await backend.players.add("Bob", name_key("Bob"), token_hash, T0)
    assert caught.value.constraint == "uq_players_token_hash"
    assert await backend.players.name_holding(name_key("Bob")) is None


async def test_concurrent_adds_of_one_name_key_add_one_player(backend: Backend) -> None:
    key = name_key("Ada")
    added = await asyncio.gather(
        *(backend.players.add(n, key, secrets.token_bytes(32), T0) for n in ("Ada", "ADA", "ada"))
    )
    assert len([a for a in added if a is not None]) == 1


# --------------------------------------------------------------------------------- daily


async def test_today_is_the_databases_utc_date(backend: Backend) -> None:
    before = dt.datetime.now(dt.UTC).date()
    today = await backend.daily.today()
    assert today in (before, dt.datetime.now(dt.UTC).date())


async def test_the_first_deal_kept_for_a_date_stays(backend: Backend) -> None:
    first, second = GameCode.parse("TP1-E-AAAAAAB"), GameCode.parse("TP1-C-AAAAAAC")
    assert await backend.daily.deal(DATE) is None
    assert await backend.daily.keep_deal(DATE, first, T0) == first
    assert await backend.daily.keep_deal(DATE, second, T0) == first
    assert await backend.daily.deal(DATE) == first
    assert await backend.daily.deal(DATE + dt.timedelta(days=1)) is None
    tp2 = GameCode.random(RuleSet.CLASSIC, DealVersion.TP2)
    assert await backend.daily.keep_deal(DATE + dt.timedelta(days=1), tp2, T0) == tp2
    assert await backend.deals() == {DATE: str(first), DATE + dt.timedelta(days=1): str(tp2)}


async def test_counts_of_a_date(backend: Backend) -> None:
    assert await backend.daily.counts(DATE) == DailyCounts(players=0, ranked=0)
    ids = await backend.add_players(["Ann", "Ben", "Cid"])
    await backend.add_games(
        [
            Seed(ids[0], 500, 30, 1000, T0, daily_date=DATE),
            Seed(ids[1], 0, 3, None, None, status="playing", daily_date=DATE),
            Seed(ids[2], 500, 30, 1000, T0, status="blocked", daily_date=DATE),
            Seed(ids[2], 500, 30, 1000, T0, mode="free"),
        ]
    )
    assert await backend.daily.counts(DATE) == DailyCounts(players=3, ranked=2)
    assert await backend.daily.counts(DATE - dt.timedelta(days=1)) == DailyCounts(0, 0)


# --------------------------------------------------------------------------------- leaderboards


async def _board(backend: Backend) -> list[int]:
    """Five entries: A; then B, C, D tied (finishing in that order); then E. Their ids."""
    ids = await backend.add_players(["A", "B", "C", "D", "E"])
    await backend.add_games(
        [
            Seed(ids[0], 700, 30, 1000, T0, daily_date=DATE),
            *(
                Seed(pid, 600, 30, 1000, T0 + dt.timedelta(seconds=i), daily_date=DATE)
                for i, pid in enumerate(ids[1:4])
            ),
            Seed(ids[4], 500, 30, 1000, T0, status="blocked", daily_date=DATE),
        ]
    )
    return ids


def _ids(board: BoardSlice | None) -> list[int]:
    assert board is not None
    return [row.player_id for row in board.rows]


async def test_pages_count_the_entries_before_and_better(backend: Backend) -> None:
    ids = await _board(backend)
    first = await backend.leaderboards.page(DATE, 2, None)
    assert (_ids(first), first.before, first.better) == (ids[:2], 0, 0)
    row = first.rows[1]
    assert (row.name, row.score, row.moves, row.elapsed_ms, row.status) == (
        "B",
        600,
        30,
        1000,
        "won",
    )
    assert row.finished_at == T0 and row.undos == 0
    # After B: C ties with B, so two entries come before it and one ranks better.
    after_b = await backend.leaderboards.page(DATE, 2, row.position)
    assert (_ids(after_b), after_b.before, after_b.better) == (ids[2:4], 2, 1)
    # After D (no entry holds a position between D and E): E ranks below all four.
    between = BoardPosition(600, 30, 1000, T0 + dt.timedelta(seconds=2, microseconds=1), 0)
    after_d = await backend.leaderboards.page(DATE, 5, between)
    assert (_ids(after_d), after_d.before, after_d.better) == ([ids[4]], 4, 4)
    last = await backend.leaderboards.page(DATE, 5, after_d.rows[0].position)
    assert last == BoardSlice((), 0, 0)
    assert await backend.leaderboards.page(DATE - dt.timedelta(days=1), 5, None) == last


async def test_windows_and_entries_count_the_entries_before_and_better(backend: Backend) -> None:
    ids = await _board(backend)
    window = await backend.leaderboards.window(DATE, ids[3], 1)
    assert window is not None
    assert (_ids(window), window.before, window.better) == (ids[2:5], 2, 1)
    whole = await backend.leaderboards.window(DATE, ids[0], 10)
    assert whole is not None and (_ids(whole), whole.before, whole.better) == (ids, 0, 0)
    own = await backend.leaderboards.entry(DATE, ids[3])
    assert own is not None and (_ids(own), own.before, own.better) == ([ids[3]], 3, 1)
    for nobody in (0, ids[4] + 1, 2**63):
        assert await backend.leaderboards.window(DATE, nobody, 3) is None
        assert await backend.leaderboards.entry(DATE, nobody) is None
