"""The stores' contracts (``server/storage/players.py``, ``daily.py``, ``leaderboards.py``,
``games.py`` with the committer of actions, ``moderation.py``'s transaction), kept alike by
PostgreSQL's stores and the in-memory ones of ``tests/fakes``: each test runs on both (the
transaction of a race room's operations: ``test_race_transactions.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import secrets

import pytest

from server.engine import DealVersion, GameCode, RuleSet, Status
from server.engine.difficulty import Level
from server.errors import StorageConflict
from server.names import name_key
from server.services.credentials import hash_token
from server.storage.commits import ActionWrite, DailyClosed, GameMovedOn, SignedOut
from server.storage.daily import DailyCounts, DailyDeal, DailyDifficulty
from server.storage.events import TokensRevoked
from server.storage.games import GameHead, GameMode
from server.storage.leaderboards import BoardPosition, BoardSlice
from server.storage.moderation import ModerationTransaction
from server.storage.players import RecoveryRow, TokenRow
from tests.backends import Backend, Seed
from tests.helpers import eventually

DATE = dt.date(2026, 3, 14)
NEXT_DATE = DATE + dt.timedelta(days=1)
T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)
HARD = DailyDifficulty(Level.HARD, Status.BLOCKED, 651, 1000, 120, 652)


# --------------------------------------------------------------------------------- players


async def test_a_player_is_added_and_found_by_token_hash_and_id(backend: Backend) -> None:
    token_hash = secrets.token_bytes(32)
    added = await backend.players.add("Ada", name_key("Ada"), token_hash, T0)
    assert added is not None and added.token_id > 0
    ada = added.player
    assert ada.name == "Ada" and ada.id > 0
    assert await backend.players.by_token_hash(token_hash) == added
    assert await backend.players.get(ada.id) == ada
    assert await backend.players.name_holding(name_key("Ada")) == "Ada"
    assert await backend.players.by_token_hash(secrets.token_bytes(32)) is None
    for nobody in (0, -1, ada.id + 1, 2**63, 2**80):
        assert await backend.players.get(nobody) is None


async def test_a_taken_name_key_adds_nobody(backend: Backend) -> None:
    first = await backend.players.add("Ada", name_key("Ada"), secrets.token_bytes(32), T0)
    assert isinstance(first, TokenRow)
    token_hash = secrets.token_bytes(32)
    assert await backend.players.add("ADA", name_key("ADA"), token_hash, T0) is None
    assert await backend.players.by_token_hash(token_hash) is None
    assert await backend.players.name_holding(name_key("ADA")) == "Ada"
    # The key is compared as given: a key that differs is free.
    assert await backend.players.name_holding(name_key("Ada") + "#1") is None


async def test_a_taken_token_hash_is_a_storage_conflict_and_adds_nobody(
    backend: Backend,
) -> None:
    token_hash = secrets.token_bytes(32)
    ada = await backend.players.add("Ada", name_key("Ada"), token_hash, T0)
    assert ada is not None
    with pytest.raises(StorageConflict) as caught:
        await backend.players.add("Bob", name_key("Bob"), token_hash, T0)
    assert caught.value.constraint == "uq_player_tokens_token_hash"
    assert await backend.players.name_holding(name_key("Bob")) is None
    with pytest.raises(StorageConflict) as caught:
        await backend.players.add_token(ada.player.id, token_hash, T0)
    assert caught.value.constraint == "uq_player_tokens_token_hash"


async def test_concurrent_adds_of_one_name_key_add_one_player(backend: Backend) -> None:
    key = name_key("Ada")
    added = await asyncio.gather(
        *(backend.players.add(n, key, secrets.token_bytes(32), T0) for n in ("Ada", "ADA", "ada"))
    )
    assert len([a for a in added if a is not None]) == 1


async def test_a_player_has_a_token_per_device_each_found_by_its_hash(backend: Backend) -> None:
    first = secrets.token_bytes(32)
    ada = await backend.players.add("Ada", name_key("Ada"), first, T0)
    assert ada is not None
    second = secrets.token_bytes(32)
    token_id = await backend.players.add_token(ada.player.id, second, T0)
    assert token_id is not None and token_id != ada.token_id
    assert await backend.players.by_token_hash(second) == TokenRow(token_id, ada.player)
    assert await backend.players.by_token_hash(first) == ada
    assert await backend.players.live_tokens({ada.token_id, token_id, token_id + 99}) == {
        ada.token_id,
        token_id,
    }
    assert await backend.players.live_tokens(set()) == set()
    for nobody in (0, ada.player.id + 1, 2**63):
        assert await backend.players.add_token(nobody, secrets.token_bytes(32), T0) is None


async def test_a_replaced_token_is_gone_at_once_and_its_player_announced(
    backend: Backend,
) -> None:
    old = secrets.token_bytes(32)
    ada = await backend.players.add("Ada", name_key("Ada"), old, T0)
    bob = await backend.players.add("Bob", name_key("Bob"), secrets.token_bytes(32), T0)
    assert ada is not None and bob is not None
    new = secrets.token_bytes(32)
    async with backend.events() as events:
        new_id = await backend.players.replace_token(ada.token_id, new, T0)
        assert new_id is not None and new_id != ada.token_id
        assert await backend.players.by_token_hash(old) is None
        assert await backend.players.by_token_hash(new) == TokenRow(new_id, ada.player)
        # A token already gone is not replaced, and nothing is announced for it.
        again = secrets.token_bytes(32)
        assert await backend.players.replace_token(ada.token_id, again, T0) is None
        assert await backend.players.live_tokens({ada.token_id, new_id, bob.token_id}) == {
            new_id,
            bob.token_id,
        }
        # Bob's sign-out marks the end: every event before it has been delivered with it.
        assert await backend.players.delete_tokens(bob.player.id, keep=None) == 1
        await eventually(lambda: len(events) >= 2, "the revocations' events")
    assert events == [TokensRevoked(ada.player.id), TokensRevoked(bob.player.id)]


async def test_deleting_tokens_keeps_the_one_asked_for_and_announces_only_a_change(
    backend: Backend,
) -> None:
    ada = await backend.players.add("Ada", name_key("Ada"), secrets.token_bytes(32), T0)
    bob = await backend.players.add("Bob", name_key("Bob"), secrets.token_bytes(32), T0)
    assert ada is not None and bob is not None
    others: list[int] = []
    for _ in range(3):
        token_id = await backend.players.add_token(ada.player.id, secrets.token_bytes(32), T0)
        assert token_id is not None
        others.append(token_id)
    async with backend.events() as events:
        assert await backend.players.delete_tokens(ada.player.id, keep=ada.token_id) == 3
        assert await backend.players.delete_tokens(ada.player.id, keep=ada.token_id) == 0
        assert await backend.players.delete_tokens(bob.player.id + 99, keep=None) == 0
        live = await backend.players.live_tokens({ada.token_id, bob.token_id, *others})
        assert live == {ada.token_id, bob.token_id}
        assert await backend.players.delete_tokens(ada.player.id, keep=None) == 1
        assert await backend.players.live_tokens({ada.token_id, bob.token_id}) == {bob.token_id}
        assert await backend.players.delete_tokens(bob.player.id, keep=None) == 1  # the end mark
        await eventually(lambda: len(events) >= 3, "the revocations' events")
    assert events == [TokensRevoked(ada.player.id)] * 2 + [TokensRevoked(bob.player.id)]
    assert await backend.players.get(ada.player.id) == ada.player  # the player stays


async def test_a_recovery_hash_is_kept_replaced_and_found_by_name_key(backend: Backend) -> None:
    first = secrets.token_bytes(32)
    ada = await backend.players.add(
        "Ada", name_key("Ada"), secrets.token_bytes(32), T0, recovery_hash=first
    )
    bob = await backend.players.add("Bob", name_key("Bob"), secrets.token_bytes(32), T0)
    assert ada is not None and bob is not None
    assert await backend.players.recovery_of(name_key("ADA")) == RecoveryRow(ada.player, first)
    assert await backend.players.recovery_of(name_key("Bob")) == RecoveryRow(bob.player, None)
    assert await backend.players.recovery_of(name_key("Cid")) is None
    second = secrets.token_bytes(32)
    assert await backend.players.set_recovery_hash(ada.player.id, second)
    assert await backend.players.recovery_of(name_key("Ada")) == RecoveryRow(ada.player, second)
    assert not await backend.players.set_recovery_hash(bob.player.id + 99, second)
    assert not await backend.players.set_recovery_hash(2**63, second)


async def test_a_tokens_last_use_is_kept_to_the_hour(backend: Backend) -> None:
    token_hash = secrets.token_bytes(32)
    ada = await backend.players.add("Ada", name_key("Ada"), token_hash, T0)
    assert ada is not None
    before = dt.datetime.now(dt.UTC)
    await backend.players.by_token_hash(token_hash)
    first = await backend.last_used(ada.token_id)
    assert first is not None and first >= before - dt.timedelta(seconds=1)
    await backend.players.by_token_hash(token_hash)  # within the hour: not written again
    assert await backend.last_used(ada.token_id) == first


# --------------------------------------------------------------------------------- daily


async def test_today_is_the_databases_utc_date(backend: Backend) -> None:
    before = dt.datetime.now(dt.UTC).date()
    today = await backend.daily.today()
    assert today in (before, dt.datetime.now(dt.UTC).date())


async def test_the_first_deal_kept_for_a_date_stays(backend: Backend) -> None:
    first, second = GameCode.parse("TP1-E-AAAAAAB"), GameCode.parse("TP1-C-AAAAAAC")
    assert await backend.daily.deal(DATE) is None
    assert await backend.daily.keep_deal(DATE, first, T0) == DailyDeal(first)
    assert await backend.daily.keep_deal(DATE, second, T0, HARD) == DailyDeal(first)
    assert await backend.daily.deal(DATE) == DailyDeal(first, None)
    assert await backend.daily.deal(DATE + dt.timedelta(days=1)) is None
    tp2 = GameCode.random(RuleSet.CLASSIC, DealVersion.TP2)
    later = DATE + dt.timedelta(days=1)
    assert await backend.daily.keep_deal(later, tp2, T0, HARD) == DailyDeal(tp2, HARD)
    assert await backend.daily.keep_deal(later, first, T0) == DailyDeal(tp2, HARD)
    assert await backend.daily.deal(later) == DailyDeal(tp2, HARD)
    assert await backend.deals() == {DATE: str(first), later: str(tp2)}


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


# ------------------------------------------------------------------------------------ games

CODE = GameCode.parse("TP1-E-AAAAAAB")


def _draw(game_id: int, seq: int, **changes: object) -> ActionWrite:
    """A draw taking the game from ``seq`` - 1 to ``seq`` (score 501 after it, still playing),
    with ``changes`` to its fields."""
    write = ActionWrite(
        game_id=game_id,
        expected_seq=seq - 1,
        seq=seq,
        kind="draw",
        pos=None,
        card="5H",
        score_after=501,
        at=T0 + dt.timedelta(seconds=seq),
        status="playing",
        score=501,
        moves=seq,
        undos=0,
        finished_at=None,
        elapsed_ms=None,
        cards_left=28,
    )
    return dataclasses.replace(write, **changes)  # type: ignore[arg-type]


async def _resign(
    backend: Backend,
    game_id: int,
    seq: int,
    finished_at: dt.datetime | None = None,
    elapsed_ms: int | None = None,
    *,
    pinned_today: dt.date | None = None,
) -> bool:
    """Resign a playing game at ``seq``; whether it was stored."""
    return await backend.games.resign(
        game_id,
        seq=seq,
        status=Status.PLAYING,
        resigned=Status.RESIGNED,
        finished_at=finished_at,
        elapsed_ms=elapsed_ms,
        pinned_today=pinned_today,
        lock_timeout_ms=1000,
        event=None,
    )


async def test_a_game_is_created_and_read_back(backend: Backend) -> None:
    (ada,) = await backend.add_players(["Ada"])
    game_id = await backend.games.create(ada, GameMode.FREE, CODE, Status.PLAYING, 500, T0)
    assert game_id is not None
    record = await backend.games.record(game_id)
    assert record is not None
    assert (record.player_id, record.player_name, record.mode, record.code) == (
        ada,
        "Ada",
        GameMode.FREE,
        CODE,
    )
    assert (record.status, record.score, record.moves, record.undos, record.seq) == (
        Status.PLAYING,
        500,
        0,
        0,
        0,
    )
    assert (record.created_at, record.finished_at, record.elapsed_ms) == (T0, None, None)
    assert (record.daily_date, record.hinted, record.race_status) == (None, False, None)
    stored = await backend.games.load(game_id)
    assert stored is not None
    assert (stored.code, stored.seq, stored.actions, stored.race) == (CODE, 0, (), None)
    assert await backend.games.head(game_id) == GameHead(game_id, 0, Status.PLAYING)
    await backend.games.mark_hinted(game_id)
    record = await backend.games.record(game_id)
    assert record is not None and record.hinted
    for unknown in (game_id + 1, 2**62):
        assert await backend.games.record(unknown) is None
        assert await backend.games.load(unknown) is None
        assert await backend.games.head(unknown) is None
        assert await backend.games.actions(unknown) == ()


async def test_a_daily_game_is_created_once_and_only_while_its_date_is_open(
    backend: Backend,
) -> None:
    (ada,) = await backend.add_players(["Ada"])
    games = backend.games
    next_day = DATE + dt.timedelta(days=1)
    over = await games.create(
        ada, GameMode.DAILY, CODE, Status.PLAYING, 500, T0, daily_date=DATE, pinned_today=next_day
    )
    assert over is None and await games.daily_game_id(ada, DATE) is None
    game_id = await games.create(
        ada, GameMode.DAILY, CODE, Status.PLAYING, 500, T0, daily_date=DATE, pinned_today=DATE
    )
    assert game_id is not None and await games.daily_game_id(ada, DATE) == game_id
    with pytest.raises(StorageConflict) as caught:
        await games.create(
            ada, GameMode.DAILY, CODE, Status.PLAYING, 500, T0, daily_date=DATE, pinned_today=DATE
        )
    assert caught.value.constraint == "uq_games_daily_player"
    assert await games.daily_game_id(ada, next_day) is None


async def test_a_write_is_stored_only_on_the_row_it_expects(backend: Backend) -> None:
    (ada,) = await backend.add_players(["Ada"])
    game_id = await backend.games.create(ada, GameMode.FREE, CODE, Status.PLAYING, 500, T0)
    assert game_id is not None
    await backend.committer.submit(_draw(game_id, 1))
    (action,) = await backend.games.actions(game_id)
    assert (action.seq, action.kind, action.pos, action.card) == (1, "draw", None, "5H")
    assert (action.score_after, action.at) == (501, T0 + dt.timedelta(seconds=1))
    record = await backend.games.record(game_id)
    assert record is not None and (record.seq, record.score, record.moves) == (1, 501, 1)

    # The row moved on: by seq (another write first), by status (a resignation), or is gone.
    with pytest.raises(GameMovedOn):
        await backend.committer.submit(_draw(game_id, 1, card="6H"))
    assert await _resign(backend, game_id, 1, T0 + dt.timedelta(seconds=9), 9000)
    with pytest.raises(GameMovedOn):
        await backend.committer.submit(_draw(game_id, 2))
    with pytest.raises(GameMovedOn):
        await backend.committer.submit(_draw(game_id + 1, 1))
    assert [a.card for a in await backend.games.actions(game_id)] == ["5H"]
    record = await backend.games.record(game_id)
    assert record is not None
    assert (record.seq, record.status, record.elapsed_ms) == (1, Status.RESIGNED, 9000)
    assert record.finished_at == T0 + dt.timedelta(seconds=9)
    assert not await _resign(backend, game_id, 1)  # resigned already


async def test_a_write_from_a_device_signed_out_is_not_stored(backend: Backend) -> None:
    """A write carries its device's token: stored while the token exists; once the device is
    signed out (its token deleted), refused with SignedOut and nothing changed."""
    (ada,) = await backend.add_players(["Ada"], tokens=["ada-phone"])
    found = await backend.players.by_token_hash(hash_token("ada-phone"))
    assert found is not None
    game_id = await backend.games.create(ada, GameMode.FREE, CODE, Status.PLAYING, 500, T0)
    assert game_id is not None
    await backend.committer.submit(_draw(game_id, 1, token_id=found.token_id))
    assert await backend.players.delete_tokens(ada, keep=None) == 1
    with pytest.raises(SignedOut):
        await backend.committer.submit(_draw(game_id, 2, token_id=found.token_id))
    assert await backend.games.head(game_id) == GameHead(game_id, 1, Status.PLAYING)
    assert len(await backend.games.actions(game_id)) == 1
    await backend.committer.submit(_draw(game_id, 2))  # a write with no device is not checked
    assert len(await backend.games.actions(game_id)) == 2


async def test_a_dailys_rows_stay_as_they_are_once_its_date_is_over(backend: Backend) -> None:
    (ada,) = await backend.add_players(["Ada"])
    next_day = DATE + dt.timedelta(days=1)
    game_id = await backend.games.create(
        ada, GameMode.DAILY, CODE, Status.PLAYING, 500, T0, daily_date=DATE, pinned_today=DATE
    )
    assert game_id is not None
    await backend.committer.submit(_draw(game_id, 1, pinned_today=DATE))
    with pytest.raises(DailyClosed):
        await backend.committer.submit(_draw(game_id, 2, pinned_today=next_day))
    assert not await _resign(backend, game_id, 1, pinned_today=next_day)
    assert await backend.games.head(game_id) == GameHead(game_id, 1, Status.PLAYING)
    assert len(await backend.games.actions(game_id)) == 1


async def test_a_write_the_schema_refuses_changes_nothing(backend: Backend) -> None:
    (ada,) = await backend.add_players(["Ada"])
    game_id = await backend.games.create(ada, GameMode.FREE, CODE, Status.PLAYING, 500, T0)
    assert game_id is not None
    # A ranked result needs its finish time and elapsed time (``ck_games_result``).
    with pytest.raises(StorageConflict):
        await backend.committer.submit(_draw(game_id, 1, status="won"))
    assert await backend.games.head(game_id) == GameHead(game_id, 0, Status.PLAYING)
    assert await backend.games.actions(game_id) == ()


async def test_unfinished_games_and_bans(backend: Backend) -> None:
    ada, bob = await backend.add_players(["Ada", "Bob"])
    games = backend.games

    async def free(player_id: int, at: dt.datetime, status: Status = Status.PLAYING) -> int:
        game_id = await games.create(player_id, GameMode.FREE, CODE, status, 500, at)
        assert game_id is not None
        return game_id

    older, resigned, newer = (
        await free(ada, T0),
        await free(ada, T0 + dt.timedelta(seconds=1), Status.RESIGNED),
        await free(ada, T0 + dt.timedelta(seconds=2)),
    )
    same_time = await free(ada, T0 + dt.timedelta(seconds=2))
    daily = await games.create(
        ada, GameMode.DAILY, CODE, Status.PLAYING, 500, T0, daily_date=DATE, pinned_today=DATE
    )
    await free(bob, T0)
    assert resigned not in (older, newer)
    heads = await games.unfinished(ada, DATE, T0, 10)
    # Newest first; of two made at once, the later id first.
    assert [h.id for h in heads] == [same_time, newer, daily, older]
    assert heads[0] == GameHead(same_time, 0, Status.PLAYING)
    assert [h.id for h in await games.unfinished(ada, DATE, T0, 2)] == [same_time, newer]
    later = await games.unfinished(ada, DATE + dt.timedelta(days=1), T0, 10)
    assert [h.id for h in later] == [same_time, newer, older]

    assert await games.ban_of(ada) is None
    since = await backend.ban(ada, "bot play")
    ban = await games.ban_of(ada)
    assert ban is not None
    assert (ban.id, ban.name, ban.banned_at, ban.ban_reason) == (ada, "Ada", since, "bot play")
    assert await games.ban_of(bob) is None and await games.ban_of(bob + 1) is None


# ------------------------------------------------------------------------------- moderation


class Boom(Exception):
    """Leaves a transaction's block."""


async def test_a_moderation_transaction_keeps_nothing_unless_committed(backend: Backend) -> None:
    ada, bob = await backend.add_players(["Ada", "Bob"])
    await backend.add_games(
        [Seed(p, 500, 30, 1000, T0, daily_date=DATE) for p in (ada, bob)]
        + [Seed(ada, 400, 30, 1000, T0, mode="free")]
    )
    before = await backend.moderation_state()

    async def ban(tx: ModerationTransaction) -> int:
        player = await tx.player_by_id(ada, lock=True)
        assert player is not None and player.banned_at is None
        games = await tx.visible_daily_games(ada)
        assert [(g.player_id, g.mode) for g in games] == [(ada, "daily")]
        stamp = await tx.record_action(
            moderator="mod", action="ban", player_id=ada, reason="bots", details={"n": 1}
        )
        await tx.set_ban(ada, stamp.id, stamp.at, "bots")
        await tx.set_hidden(games, stamp.id, stamp.at)
        banned = await tx.player_by_id(ada)  # its own writes, before the commit
        assert banned is not None and banned.ban_action_id == stamp.id
        assert [g.id for g in await tx.games_hidden_by(ada, stamp.id)] == [g.id for g in games]
        return stamp.id

    with pytest.raises(Boom):
        async with backend.moderation.transaction() as tx:
            await ban(tx)
            raise Boom
    assert await backend.moderation_state() == before
    async with backend.moderation.transaction() as tx:
        await ban(tx)  # not committed: rolled back when the block ends
    assert await backend.moderation_state() == before

    async with backend.moderation.transaction() as tx:
        action = await ban(tx)
        await tx.commit()
    assert await backend.moderation_state() != before
    async with backend.moderation.transaction() as tx:
        [row] = await tx.actions(player_id=ada)
        assert (row.id, row.action, row.player_name, row.details) == (
            action,
            "ban",
            "Ada",
            {"n": 1},
        )
        assert await tx.actions(player_id=bob) == []
    hidden = {g.id: g.hidden_by for g in await backend.stored_games(ada) if g.mode == "daily"}
    assert list(hidden.values()) == [action]
    # A daily game stored for a banned player is hidden by the ban from the start.
    [late] = await backend.add_games([Seed(ada, 600, 30, 1000, T0, daily_date=NEXT_DATE)])
    assert {g.id: g.hidden_by for g in await backend.stored_games(ada)}[late] == action
    assert (await backend.daily.counts(NEXT_DATE)).players == 0
