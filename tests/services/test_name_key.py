"""The look-alike key of display names (``server.names.name_key``) and the registrations it
refuses, including one that loses a race to a look-alike."""

from __future__ import annotations

import asyncio
import datetime as dt
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import insert, select, text

from server.errors import ConflictError
from server.names import _round, name_key
from server.services.clock import FakeClock
from server.services.players import PlayerService, normalize_name
from server.storage.db import create_engine
from server.storage.models import Player
from server.storage.players import PostgresPlayerStore
from server.storage.sessions import Sessions
from tests.helpers import eventually

CLOCK = FakeClock(dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC))

LOOK_ALIKE = [
    ("ΣΑΣ", "σας"),  # case only, with the Greek final sigma
    ("Straße", "STRASSE"),  # full case folding: ß is ss
    ("\u0410da", "Ada"),  # Cyrillic capital А
    ("\u0430da", "Ada"),  # Cyrillic small а
    ("\u0391\u0392\u0395", "ABE"),  # Greek capitals Α Β Ε
    ("\u0397ello", "Hello"),  # Greek capital Η in a Latin name
    ("\u041dans", "Hans"),  # Cyrillic capital Н
    ("\u039aappa", "Kappa"),  # Greek capital Κ
    ("\u0412\u041e\u0412", "BOB"),  # Cyrillic В О В
    ("B0B", "BOB"),  # digit zero
    ("Pau1", "Paul"),  # digit one
    ("Ian", "lan"),  # capital I, small l
    ("Arnie", "Amie"),  # rn, m
    ("Ａｄａ", "Ada"),  # fullwidth letters
    ("𝔄𝔡𝔞", "Ada"),  # mathematical Fraktur
    ("İna", "ina"),  # dotted capital I, as PostgreSQL's lower() takes it
    ("Zoe\u0308", "Zoë"),  # decomposed diaeresis
    ("i\u0307nes", "Ines"),  # i with a combining dot above
]

DIFFERENT = [
    ("Ada", "Adam"),
    ("Ana", "Anna"),
    ("Zoe", "Zoë"),
    ("Ivan", "Иван"),
    ("Maria", "Мария"),
    ("Dmitri", "Дмитрий"),
    ("東京", "京都"),
    ("山田太郎", "山田次郎"),
    ("김철수", "김철주"),
    ("राम", "सीता"),
    ("Ωmega", "Omega"),
    ("Ada Lovelace", "Ada_Lovelace"),
    ("Player 7", "Player 1"),
]


@pytest.mark.parametrize(("a", "b"), LOOK_ALIKE)
def test_look_alike_names_share_a_key(a: str, b: str) -> None:
    assert name_key(normalize_name(a)) == name_key(normalize_name(b))


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_names_that_do_not_look_alike_keep_different_keys(a: str, b: str) -> None:
    assert name_key(normalize_name(a)) != name_key(normalize_name(b))


def _accepted_single_letters() -> Iterator[str]:
    """Every letter or digit a name may hold (NFKC, as stored), and every mark on an ``a``."""
    seen: set[str] = set()
    for cp in range(0x110000):
        c = chr(cp)
        if unicodedata.category(c).startswith("M"):
            name = unicodedata.normalize("NFKC", "a" + c)
        elif c.isalnum():
            name = unicodedata.normalize("NFKC", c)
        else:
            continue
        if name not in seen:
            seen.add(name)
            yield name


def test_every_letter_digit_and_mark_has_a_settled_case_blind_key_without_hash() -> None:
    for name in _accepted_single_letters():
        key = name_key(name)
        assert _round(key) == key, name  # settled well within the rounds allowed
        assert name_key(key) == key, name
        assert "#" not in key, name  # "#" marks the keys of older look-alikes (migration 0007)
        for other in (name.upper(), name.lower(), name.casefold()):
            assert name_key(other) == key, (name, other)


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    st.text(
        st.characters(categories=["L", "Nd", "Mn", "Mc"]) | st.sampled_from(" _-.'"),
        min_size=2,
        max_size=24,
    )
)
def test_keys_are_idempotent_and_blind_to_case(raw: str) -> None:
    key = name_key(raw)
    assert name_key(key) == key
    assert name_key(raw.upper()) == key
    assert name_key(raw.lower()) == key


async def test_names_equal_under_postgres_lower_share_a_key(database_url: str) -> None:
    """The key is coarser than the ``lower(name)`` it replaces (so a downgrade to the old unique
    index never finds two players with one lower-cased name)."""
    names = list(_accepted_single_letters())
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            lowered = (
                await conn.execute(
                    text("SELECT lower(n) FROM unnest(CAST(:names AS text[])) AS n"),
                    {"names": names},
                )
            ).scalars()
            pairs = list(zip(names, lowered, strict=True))
    finally:
        await engine.dispose()
    assert len(pairs) > 100_000
    assert [(n, low) for n, low in pairs if name_key(n) != name_key(low)] == []


async def test_a_look_alike_committed_during_a_registration_makes_it_name_taken(
    database_url: str,
) -> None:
    # The other registration's row is inserted first but not committed, so the service's
    # INSERT waits on the unique index until that commits. PostgreSQL only: it is about two
    # transactions and the unique index between them (the in-memory store has neither).
    engine = create_engine(database_url, pool_size=3)
    service = PlayerService(PostgresPlayerStore(Sessions(engine)), CLOCK)
    try:
        async with engine.connect() as other, engine.connect() as watcher:
            await other.execute(insert(Player).values(name="BOB", created_at=CLOCK.now()))
            # Cyrillic В О В: one script, and it looks like BOB.
            registering = asyncio.create_task(service.register("\u0412\u041e\u0412"))

            async def waiting_on_locks() -> int:
                waiting = await watcher.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                    )
                )
                await watcher.rollback()  # a transaction sees one snapshot of pg_stat_activity
                assert isinstance(waiting, int)
                return waiting

            await eventually(waiting_on_locks, "the registration to wait on the unique index")
            assert await waiting_on_locks() == 1
            await other.commit()
            with pytest.raises(ConflictError) as caught:
                await registering
        assert caught.value.code == "name_taken"
        assert "'BOB'" in caught.value.message
        async with engine.connect() as conn:
            assert list((await conn.execute(select(Player.name))).scalars()) == ["BOB"]
    finally:
        await engine.dispose()
