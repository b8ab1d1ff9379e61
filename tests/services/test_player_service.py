"""PlayerService's rules on either store (in memory and PostgreSQL): names normalised and
keyed, look-alikes and mixed scripts refused, tokens kept only as their hash, a failing
database let through as a StorageError. (Over REST on a real server: ``test_players.py``.)"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from server.errors import ConflictError, InvalidInputError, StorageError, UnauthorizedError
from server.names import mixes_scripts, name_key
from server.services.clock import FakeClock
from server.services.players import PlayerInfo, PlayerService, normalize_name
from tests.backends import Backend
from tests.services.test_name_key import LOOK_ALIKE


@pytest.fixture
def players(backend: Backend, clock: FakeClock) -> PlayerService:
    return PlayerService(backend.players, clock)


async def test_register_keeps_the_normalised_name_its_key_and_the_tokens_hash_only(
    players: PlayerService, backend: Backend
) -> None:
    bob, token = await players.register("  Bob   Smith  ")
    assert bob.name == "Bob Smith" and bob.id > 0
    assert isinstance(token, str) and len(token) >= 32
    stored = await backend.stored_player(bob.id)
    assert stored is not None
    assert stored.name == "Bob Smith"
    assert stored.name_key == name_key("Bob Smith")
    assert stored.token_hash == hashlib.sha256(token.encode()).digest()
    assert await players.authenticate(token) == bob
    assert await players.get(bob.id) == bob

    ann, other = await players.register("Ann")
    assert ann.id != bob.id and other != token
    assert await players.authenticate(other) == PlayerInfo(ann.id, "Ann")


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
    _, token = await players.register("Alice")
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
    registered = [o for o in outcomes if isinstance(o, tuple)]
    assert len(registered) == 1
    winner = registered[0][0]
    for name, outcome in zip(names, outcomes, strict=True):
        if isinstance(outcome, InvalidInputError):
            # A name mixing scripts, seen before the winner was stored.
            assert mixes_scripts(name) and outcome.code == "bad_name"
        elif isinstance(outcome, ConflictError):
            assert outcome.code == "name_taken"
            if normalize_name(name).casefold() != winner.name.casefold():
                assert f"looks like {winner.name!r}" in outcome.message
        else:
            assert outcome == (winner, registered[0][1])


async def test_a_failing_database_leaves_the_service_as_a_storage_error(
    players: PlayerService, backend: Backend, clock: FakeClock
) -> None:
    _, token = await players.register("Alice")
    await backend.go_down()
    players = PlayerService(backend.players, clock)
    with pytest.raises(StorageError):
        await players.register("Bob")
    with pytest.raises(StorageError):
        await players.authenticate(token)
    with pytest.raises(StorageError):
        await players.get(1)
