"""PlayerService's rules on either store (in memory and PostgreSQL): names normalised and
keyed, look-alikes and mixed scripts refused, tokens and recovery codes kept only as their
hashes, a failing database let through as a StorageError. (The devices and recovery codes:
``test_accounts.py``; over REST on a real server: ``test_players.py``.)"""

from __future__ import annotations

import asyncio
import hashlib
import re

import pytest

from server.errors import ConflictError, InvalidInputError, StorageError, UnauthorizedError
from server.names import mixes_scripts, name_key
from server.services.clock import FakeClock
from server.services.credentials import (
    hash_recovery_code,
    new_recovery_code,
    parse_recovery_code,
)
from server.services.players import (
    Credential,
    PlayerInfo,
    PlayerService,
    Registration,
    normalize_name,
)
from tests.backends import Backend
from tests.services.test_name_key import LOOK_ALIKE


@pytest.fixture
def players(backend: Backend, clock: FakeClock) -> PlayerService:
    return PlayerService(backend.players, clock)


async def test_register_keeps_the_normalised_name_its_key_and_the_hashes_only(
    players: PlayerService, backend: Backend
) -> None:
    registered = await players.register("  Bob   Smith  ")
    bob, token, code = registered.player, registered.token, registered.recovery_code
    assert bob.name == "Bob Smith" and bob.id > 0
    assert isinstance(token, str) and len(token) >= 32
    assert re.fullmatch(r"([0-9A-HJKMNP-TV-Z]{4}-){6}[0-9A-HJKMNP-TV-Z]{4}", code)
    stored = await backend.stored_player(bob.id)
    assert stored is not None
    assert stored.name == "Bob Smith"
    assert stored.name_key == name_key("Bob Smith")
    assert stored.token_hashes == [hashlib.sha256(token.encode()).digest()]
    assert stored.recovery_hash == hashlib.sha256(code.replace("-", "").encode()).digest()
    assert await players.authenticate(token) == bob
    assert await players.get(bob.id) == bob

    ann = await players.register("Ann")
    assert ann.player.id != bob.id and ann.token != token and ann.recovery_code != code
    assert await players.authenticate(ann.token) == PlayerInfo(ann.player.id, "Ann")


async def test_a_taken_name_in_any_case_is_name_taken(players: PlayerService) -> None:
    await players.register("Alice")
    for clash in ("Alice", "alice", "ALICE", "  aLiCe "):
        with pytest.raises(ConflictError) as caught:
            await players.register(clash)
        assert caught.value.code == "name_taken"
        assert caught.value.message == f"the name {normalize_name(clash)!r} is already taken"
    await players.register("Alice2")
    await players.register("Élodie")
    with pytest.raises(ConflictError) as caught:
        await players.register("ÉLODIE")
    assert caught.value.code == "name_taken"


@pytest.mark.parametrize(("clash", "holder"), LOOK_ALIKE)
async def test_a_look_alike_is_name_taken_naming_the_holders_name(
    players: PlayerService, clash: str, holder: str
) -> None:
    await players.register(holder)
    with pytest.raises(ConflictError) as caught:
        await players.register(clash)
    assert caught.value.code == "name_taken"
    clash = normalize_name(clash)
    if clash.casefold() == holder.casefold():
        assert caught.value.message == f"the name {clash!r} is already taken"
    else:
        assert caught.value.message == (
            f"the name {clash!r} looks like {holder!r}, which is already taken"
        )


@pytest.mark.parametrize("name", ["Rac\u0443", "\u03a9mega", "Pa\u0443l Smith"])
async def test_a_new_name_mixing_scripts_is_bad_name(players: PlayerService, name: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await players.register(name)
    assert caught.value.code == "bad_name"
    assert "scripts" in caught.value.message
    # Nothing was stored: the same name in one script is free.
    await players.register(name.replace("\u0443", "y").replace("\u03a9", "O"))


async def test_a_taken_name_mixing_scripts_is_name_taken(players: PlayerService) -> None:
    await players.register("Ada")
    with pytest.raises(ConflictError) as caught:
        await players.register("\u0410da")  # Cyrillic А, Latin da
    assert caught.value.message == "the name 'Аda' looks like 'Ada', which is already taken"


@pytest.mark.parametrize("name", ["", "A", "x" * 25, "_bob", "Bob😀", "\u3164\u3164", 42, None])
async def test_bad_names_are_bad_name(players: PlayerService, name: object) -> None:
    with pytest.raises(InvalidInputError) as caught:
        await players.register(name)
    assert caught.value.code == "bad_name"


@pytest.mark.parametrize("token", [None, "", "x" * 201, "not-a-real-token"])
async def test_missing_long_or_unknown_tokens_are_unauthorized(
    players: PlayerService, token: str | None
) -> None:
    await players.register("Alice")
    with pytest.raises(UnauthorizedError) as caught:
        await players.authenticate(token)
    assert caught.value.code == "unauthorized"


async def test_a_token_differing_in_one_character_is_unauthorized(players: PlayerService) -> None:
    token = (await players.register("Alice")).token
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(UnauthorizedError):
        await players.authenticate(tampered)


@pytest.mark.parametrize("player_id", [0, -1, 999_999, 2**63, 2**70])
async def test_get_of_an_unknown_id_is_none(players: PlayerService, player_id: int) -> None:
    await players.register("Alice")
    assert await players.get(player_id) is None


async def test_concurrent_registrations_of_look_alikes_admit_exactly_one(
    players: PlayerService,
) -> None:
    names = ["Ada", "\u0410da", "\u0430da", "\u0391DA", "Ａｄａ", "ADA", "𝔄𝔡𝔞"]
    outcomes = await asyncio.gather(*(players.register(n) for n in names), return_exceptions=True)
    registered = [o for o in outcomes if isinstance(o, Registration)]
    assert len(registered) == 1
    winner = registered[0].player
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, InvalidInputError):
            # A name mixing scripts, seen before the winner was stored.
            assert mixes_scripts(name) and outcome.code == "bad_name"
        elif isinstance(outcome, ConflictError):
            assert outcome.code == "name_taken"
            if normalize_name(name).casefold() != winner.name.casefold():
                assert f"looks like {winner.name!r}" in outcome.message
        else:
            assert outcome == registered[0]


async def test_a_failing_database_leaves_the_service_as_a_storage_error(
    players: PlayerService, backend: Backend, clock: FakeClock
) -> None:
    alice = await players.register("Alice")
    await backend.go_down()
    players = PlayerService(backend.players, clock)
    with pytest.raises(StorageError):
        await players.register("Bob")
    with pytest.raises(StorageError):
        await players.authenticate(alice.token)
    with pytest.raises(StorageError):
        await players.get(1)
    with pytest.raises(StorageError):
        await players.sign_in("Alice", alice.recovery_code)
    credential = Credential(alice.player, 1)
    with pytest.raises(StorageError):
        await players.rotate_token(credential)
    with pytest.raises(StorageError):
        await players.new_recovery_code(credential)
    with pytest.raises(StorageError):
        await players.sign_out(alice.player.id, keep=credential)
    with pytest.raises(StorageError):
        await players.live_tokens({1})


@pytest.mark.parametrize("name", ["Zalgo\u0336\u0336\u0336\u0336", "Bob\ufe0f Smith"])
async def test_a_name_registered_before_a_rule_was_added_still_signs_in(
    players: PlayerService, backend: Backend, clock: FakeClock, name: str
) -> None:
    """A new name may no longer hold an invisible code point or a fourth stacked mark; a player
    who registered one before signs in with it as ever."""
    with pytest.raises(InvalidInputError):
        normalize_name(name)
    code = new_recovery_code()
    added = await backend.players.add(
        name,
        name_key(name),
        hashlib.sha256(b"an old device").digest(),
        clock.now(),
        recovery_hash=hash_recovery_code(parse_recovery_code(code) or ""),
    )
    assert added is not None
    signed_in = await players.sign_in(name, code)
    assert signed_in.player == PlayerInfo(added.player.id, name)
    with pytest.raises(UnauthorizedError):
        await players.sign_in(name + "x", code)
