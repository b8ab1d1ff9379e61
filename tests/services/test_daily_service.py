"""DailyService's rules on either store (in memory and PostgreSQL): the database's date, one
deal per date kept for ever, future and missing dates refused, the code hidden until the date
is over, the date's counts. (Over REST and websockets on real servers: ``test_daily.py`` and
``test_daily_boundary.py``.)"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from server.engine import GameCode, RuleSet
from server.errors import InvalidInputError, NotFoundError, StorageError
from server.services.clock import FakeClock, SystemClock
from server.services.daily import DailyService, derive_daily_code
from tests.backends import Backend, Seed
from tests.fakes.daily import MemoryDailyStore
from tests.fakes.database import MemoryDatabase

SECRET = b"test-daily-key-0123456789abcdefghij"
OTHER_SECRET = b"a-completely-different-key-42-xyzabc"
TODAY = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)


def _daily(
    backend: Backend, clock: FakeClock | SystemClock, secret: bytes = SECRET
) -> DailyService:
    return DailyService(backend.daily, clock, secret)


def _clock_at(when: dt.datetime) -> SystemClock:
    """A real (not simulated) clock that is wrong: it says about ``when``."""
    return SystemClock(when - dt.datetime.now(dt.UTC))


def _past_midnight(clock: FakeClock) -> None:
    clock.set(dt.datetime(2026, 3, 15, 0, 0, 0, 1000, tzinfo=dt.UTC))


async def test_a_simulated_clock_names_the_utc_date(backend: Backend, clock: FakeClock) -> None:
    daily = _daily(backend, clock)
    # 23:59:59.999 UTC on the 14th is still the 14th, whatever the zone it is given in.
    clock.set(
        dt.datetime(2026, 3, 15, 8, 59, 59, 999000, tzinfo=dt.timezone(dt.timedelta(hours=9)))
    )
    assert daily.pinned_today() == TODAY
    assert await daily.today() == TODAY
    clock.advance(ms=1)
    assert await daily.today() == TODAY + dt.timedelta(days=1)
    assert daily.known_closed(TODAY) and not daily.known_closed(TODAY + dt.timedelta(days=1))


@pytest.mark.parametrize("offset_days", [-3, 0, 3])
async def test_otherwise_the_databases_clock_names_the_date(
    backend: Backend, offset_days: int
) -> None:
    daily = _daily(backend, SystemClock(dt.timedelta(days=offset_days)))
    assert daily.pinned_today() is None
    before = await backend.daily.today()
    today = await daily.today()
    after = await backend.daily.today()
    assert today in (before, after)
    # Having read it, the service knows every earlier date is closed, and no later one.
    assert daily.known_closed(today - dt.timedelta(days=1))
    assert not daily.known_closed(today)
    assert not await daily.is_open(today - dt.timedelta(days=1))
    assert await daily.is_open(today) or await backend.daily.today() > today  # (midnight)


async def test_a_closed_date_noted_by_the_caller_is_known_closed(backend: Backend) -> None:
    daily = _daily(backend, SystemClock())
    yesterday = await backend.daily.today() - dt.timedelta(days=1)
    assert not daily.known_closed(yesterday)
    daily.note_closed(yesterday)
    assert daily.known_closed(yesterday)


async def test_todays_deal_is_chosen_on_first_use_and_kept_whatever_the_secret(
    backend: Backend, clock: FakeClock
) -> None:
    first = _daily(backend, clock, OTHER_SECRET)
    code = await first.challenge(TODAY)
    assert code == derive_daily_code(OTHER_SECRET, TODAY, RuleSet.EASY)
    assert await backend.deals() == {TODAY: str(code)}
    # A process with another secret (or after the secret is rotated) serves the stored deal.
    second = _daily(backend, clock)
    assert await second.challenge(TODAY) == code
    assert await first.challenge(TODAY, today=TODAY) == code
    assert await backend.deals() == {TODAY: str(code)}


async def test_concurrent_first_requests_store_one_deal(backend: Backend, clock: FakeClock) -> None:
    services = [_daily(backend, clock, s) for s in (SECRET, OTHER_SECRET) * 3]
    codes = await asyncio.gather(*(d.challenge(TODAY) for d in services))
    assert len(set(codes)) == 1
    assert await backend.deals() == {TODAY: str(codes[0])}


@pytest.mark.parametrize("days", [1, 2, 365 * 100])
async def test_a_future_date_is_bad_date(backend: Backend, clock: FakeClock, days: int) -> None:
    daily = _daily(backend, clock)
    future = TODAY + dt.timedelta(days=days)
    for call in (daily.challenge(future), daily.info(future)):
        with pytest.raises(InvalidInputError) as caught:
            await call
        assert caught.value.code == "bad_date"
        assert future.isoformat() in caught.value.message
    assert await backend.deals() == {}


@pytest.mark.parametrize("date", [TODAY - dt.timedelta(days=1), dt.date(1, 1, 1)])
async def test_a_past_date_without_a_deal_is_no_daily_and_stores_nothing(
    backend: Backend, clock: FakeClock, date: dt.date
) -> None:
    daily = _daily(backend, clock)
    for call in (daily.challenge(date), daily.info(date)):
        with pytest.raises(NotFoundError) as caught:
            await call
        assert caught.value.code == "no_daily"
    assert await backend.deals() == {}


async def test_the_code_is_hidden_while_the_date_is_open_and_published_after(
    backend: Backend, clock: FakeClock
) -> None:
    daily = _daily(backend, clock)
    info = await daily.info()
    assert (info.date, info.rules, info.code, info.is_open) == (TODAY, RuleSet.EASY, None, True)
    assert (info.players, info.ranked, info.par, info.line) == (0, 0, None, None)
    assert info.closes_at == dt.datetime(2026, 3, 15, tzinfo=dt.UTC)
    assert await daily.info(TODAY) == info

    _past_midnight(clock)
    closed = await daily.info(TODAY)
    assert closed.is_open is False
    assert closed.code == derive_daily_code(SECRET, TODAY, RuleSet.EASY)
    assert closed.closes_at == info.closes_at
    new = await daily.info()
    assert (new.date, new.code, new.is_open) == (TODAY + dt.timedelta(days=1), None, True)


async def test_classic_rules_give_classic_deals(backend: Backend, clock: FakeClock) -> None:
    daily = DailyService(backend.daily, clock, SECRET, RuleSet.CLASSIC)
    assert (await daily.info()).rules is RuleSet.CLASSIC
    _past_midnight(clock)
    code = (await daily.info(TODAY)).code
    assert code == derive_daily_code(SECRET, TODAY, RuleSet.CLASSIC)
    assert str(code).startswith("TP2-C-")


async def test_a_stored_tp1_deal_is_kept_and_published(backend: Backend, clock: FakeClock) -> None:
    legacy = GameCode.parse("TP1-E-AAAAAAB")
    assert (await backend.daily.keep_deal(TODAY, legacy, T0)).code == legacy
    daily = _daily(backend, clock)
    assert await daily.challenge(TODAY) == legacy
    _past_midnight(clock)
    assert str((await daily.info(TODAY)).code) == "TP1-E-AAAAAAB"
    # The next date is dealt from TP2.
    assert str(await daily.challenge(TODAY + dt.timedelta(days=1))).startswith("TP2-E-")


async def test_info_counts_the_dates_players_and_ranked_entries(
    backend: Backend, clock: FakeClock
) -> None:
    ids = await backend.add_players(["Ann", "Ben", "Cid", "Dan", "Eve"])
    yesterday = TODAY - dt.timedelta(days=1)
    await backend.add_games(
        [
            Seed(ids[0], 500, 30, 1000, T0, daily_date=TODAY),
            Seed(ids[1], 300, 40, 1000, T0, status="blocked", daily_date=TODAY),
            Seed(ids[2], 100, 3, None, None, status="playing", daily_date=TODAY),
            Seed(ids[3], 0, 9, None, T0, status="resigned", daily_date=TODAY),
            Seed(ids[4], 700, 28, 1000, T0, daily_date=yesterday),
            Seed(ids[4], 700, 28, 1000, T0, mode="free"),
            Seed(ids[4], 700, 28, 1000, T0, mode="race"),
        ]
    )
    daily = _daily(backend, clock)
    info = await daily.info()
    assert (info.players, info.ranked) == (4, 2)


async def test_a_failing_database_leaves_the_service_as_a_storage_error(
    backend: Backend, clock: FakeClock
) -> None:
    await _daily(backend, clock).challenge(TODAY)
    await backend.go_down()
    with pytest.raises(StorageError):
        await _daily(backend, SystemClock()).today()
    with pytest.raises(StorageError):
        await _daily(backend, clock).info()
    with pytest.raises(StorageError):
        await _daily(backend, clock).prepare_ahead(dt.timedelta(hours=1))


async def test_a_date_closes_when_the_databases_clock_passes_it_not_the_processes() -> None:
    # Memory only: PostgreSQL's clock cannot be moved (test_daily_boundary.py has processes
    # whose clocks differ from a real database's).
    database_clock = FakeClock(dt.datetime(2026, 3, 14, 23, 59, 59, 999000, tzinfo=dt.UTC))
    store = MemoryDailyStore(MemoryDatabase(database_clock))
    ahead = DailyService(store, _clock_at(dt.datetime(2026, 3, 16, tzinfo=dt.UTC)), SECRET)
    behind = DailyService(store, _clock_at(dt.datetime(2026, 3, 13, tzinfo=dt.UTC)), SECRET)
    for daily in (ahead, behind):
        assert await daily.today() == TODAY and await daily.is_open(TODAY)
        assert (await daily.info()).code is None
    database_clock.advance(ms=1)
    for daily in (ahead, behind):
        assert not await daily.is_open(TODAY) and daily.known_closed(TODAY)
        published = await daily.info(TODAY)
        assert published.code == derive_daily_code(SECRET, TODAY, RuleSet.EASY)
