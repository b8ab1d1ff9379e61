"""Accounts that travel, on either store (in memory and PostgreSQL): a recovery code signs a new
device in beside the others, a rotated token and a replaced code stop working at once, signing
the other devices out keeps only the caller's, and every revocation is announced to every
server process. (Over REST and websockets on real servers: ``tests/web/test_accounts.py``.)"""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from server.errors import UnauthorizedError
from server.services.clock import FakeClock
from server.services.credentials import (
    RECOVERY_ALPHABET,
    format_recovery_code,
    new_recovery_code,
    parse_recovery_code,
)
from server.services.players import SIGN_IN_FAILED, Credential, PlayerService
from server.storage.events import TokensRevoked
from tests.backends import Backend
from tests.helpers import eventually


@pytest.fixture
def players(backend: Backend, clock: FakeClock) -> PlayerService:
    return PlayerService(backend.players, clock)


async def _refused(players: PlayerService, name: object, code: object) -> None:
    with pytest.raises(UnauthorizedError) as caught:
        await players.sign_in(name, code)
    assert caught.value.code == "sign_in_failed"
    assert caught.value.message == SIGN_IN_FAILED == "the name or the recovery code is wrong"
    assert caught.value.http_status == 401


async def test_a_recovery_code_signs_a_new_device_in_beside_the_first(
    players: PlayerService, backend: Backend
) -> None:
    ada = await players.register("Ada")
    device = await players.sign_in("Ada", ada.recovery_code)
    assert device.player == ada.player
    assert device.token != ada.token
    # Both devices work, each with a token of its own.
    first = await players.credential(ada.token)
    second = await players.credential(device.token)
    assert first.player == second.player == ada.player
    assert first.token_id != second.token_id
    stored = await backend.stored_player(ada.player.id)
    assert stored is not None
    assert stored.token_hashes == [
        hashlib.sha256(ada.token.encode()).digest(),
        hashlib.sha256(device.token.encode()).digest(),
    ]
    # The code stays valid: it signs in as often as needed.
    third = await players.sign_in("ada", ada.recovery_code)
    assert third.player == ada.player and third.token not in (ada.token, device.token)


@pytest.mark.parametrize(
    "typed",
    [
        lambda code: code.lower(),
        lambda code: code.replace("-", ""),
        lambda code: f"  {code.replace('-', ' ')}  ",
        lambda code: code.replace("0", "O").replace("1", "l"),
    ],
    ids=["lower case", "no hyphens", "spaces", "look-alike letters"],
)
async def test_a_code_typed_leniently_signs_in(players: PlayerService, typed: object) -> None:
    ada = await players.register("Ada")
    assert callable(typed)
    assert (await players.sign_in("Ada", typed(ada.recovery_code))).player == ada.player


async def test_a_look_alike_of_the_name_names_the_same_player(players: PlayerService) -> None:
    ada = await players.register("Ada")
    assert (await players.sign_in("\u0410DA", ada.recovery_code)).player == ada.player


async def test_every_wrong_sign_in_gets_one_answer_and_stores_nothing(
    players: PlayerService, backend: Backend
) -> None:
    ada = await players.register("Ada")
    bob = await players.register("Bob")
    other = new_recovery_code()
    for name, code in [
        ("Ada", bob.recovery_code),  # another player's code
        ("Ada", other),  # nobody's code
        ("Cid", ada.recovery_code),  # nobody's name
        ("A", ada.recovery_code),  # not a name at all
        (None, ada.recovery_code),
        ("Ada", ada.recovery_code[:-1]),  # a symbol short
        ("Ada", ada.recovery_code + "0"),  # a symbol more
        ("Ada", ada.recovery_code[:-1] + "U"),  # a symbol outside the alphabet
        ("Ada", ada.recovery_code.replace("-", "ı")),  # dotless i: not a separator
        ("Ada", ""),
        ("Ada", 42),
        ("Ada", None),
        ("Ada", "-" * 200),
    ]:
        await _refused(players, name, code)
    stored = await backend.stored_player(ada.player.id)
    assert stored is not None and len(stored.token_hashes) == 1


async def test_a_player_without_a_code_cannot_sign_in_until_they_make_one(
    players: PlayerService, backend: Backend
) -> None:
    # Players registered before recovery codes have none (the store's row has no hash).
    [old_id] = await backend.add_players(["Old"], tokens=["old-device-token"])
    for code in (new_recovery_code(), format_recovery_code("0" * 28)):
        await _refused(players, "Old", code)
    code = await players.new_recovery_code(await players.credential("old-device-token"))
    assert (await players.sign_in("Old", code)).player.id == old_id


async def test_a_new_recovery_code_replaces_the_old_one_at_once(
    players: PlayerService, backend: Backend
) -> None:
    ada = await players.register("Ada")
    credential = await players.credential(ada.token)
    code = await players.new_recovery_code(credential)
    assert code != ada.recovery_code and parse_recovery_code(code) is not None
    await _refused(players, "Ada", ada.recovery_code)
    assert (await players.sign_in("Ada", code)).player == ada.player
    # Devices already signed in stay signed in.
    assert await players.authenticate(ada.token) == ada.player
    with pytest.raises(UnauthorizedError) as caught:  # a token revoked meanwhile
        await players.new_recovery_code(Credential(ada.player, credential.token_id + 99))
    assert caught.value.code == "unauthorized"


async def test_a_rotated_token_stops_working_at_once_and_is_announced(
    players: PlayerService, backend: Backend
) -> None:
    ada = await players.register("Ada")
    bob = await players.register("Bob")
    old = await players.credential(ada.token)
    async with backend.events() as events:
        new = await players.rotate_token(old)
        assert new != ada.token
        with pytest.raises(UnauthorizedError) as caught:
            await players.authenticate(ada.token)
        assert caught.value.code == "unauthorized"
        credential = await players.credential(new)
        assert credential.player == ada.player and credential.token_id != old.token_id
        assert await players.live_tokens({old.token_id, credential.token_id}) == {
            credential.token_id
        }
        # Rotating a token that is gone already changes nothing.
        with pytest.raises(UnauthorizedError):
            await players.rotate_token(old)
        await players.sign_out(bob.player.id, keep=None)  # marks the end of the events
        await eventually(lambda: len(events) >= 2, "the revocations' events")
    assert events == [TokensRevoked(ada.player.id), TokensRevoked(bob.player.id)]


async def test_signing_out_others_keeps_only_the_callers_device(
    players: PlayerService, backend: Backend
) -> None:
    ada = await players.register("Ada")
    bob = await players.register("Bob")
    phones = [await players.sign_in("Ada", ada.recovery_code) for _ in range(3)]
    here = await players.credential(phones[0].token)
    async with backend.events() as events:
        assert await players.sign_out(ada.player.id, keep=here) == 3
        assert await players.authenticate(phones[0].token) == ada.player
        for gone in (ada.token, phones[1].token, phones[2].token):
            with pytest.raises(UnauthorizedError):
                await players.authenticate(gone)
        assert await players.authenticate(bob.token) == bob.player  # nobody else's
        assert await players.sign_out(ada.player.id, keep=here) == 0  # nothing to announce
        assert await players.sign_out(ada.player.id, keep=None) == 1  # everywhere
        with pytest.raises(UnauthorizedError):
            await players.authenticate(phones[0].token)
        await players.sign_out(bob.player.id, keep=None)  # marks the end of the events
        await eventually(lambda: len(events) >= 3, "the revocations' events")
    assert events == [TokensRevoked(ada.player.id)] * 2 + [TokensRevoked(bob.player.id)]
    # The recovery code still signs back in.
    assert (await players.sign_in("Ada", ada.recovery_code)).player == ada.player


async def test_concurrent_rotations_of_one_token_leave_exactly_one_new_token(
    players: PlayerService,
) -> None:
    ada = await players.register("Ada")
    old = await players.credential(ada.token)
    outcomes = await asyncio.gather(
        *(players.rotate_token(old) for _ in range(5)), return_exceptions=True
    )
    tokens = [o for o in outcomes if isinstance(o, str)]
    assert len(tokens) == 1
    assert all(isinstance(o, UnauthorizedError) for o in outcomes if not isinstance(o, str))
    assert await players.authenticate(tokens[0]) == ada.player


async def test_two_devices_signing_each_other_out_at_once_leave_one_signed_in(
    players: PlayerService,
) -> None:
    """Each asks to keep its own token and end the other's: they take turns (the player's row
    is locked first), and the second finds its own token gone: refused, nothing changed."""
    ada = await players.register("Ada")
    phone = await players.sign_in("Ada", ada.recovery_code)
    devices = [await players.credential(t) for t in (ada.token, phone.token)]
    for _ in range(5):
        outcomes = await asyncio.gather(
            *(players.sign_out(ada.player.id, keep=d) for d in devices), return_exceptions=True
        )
        assert sorted(type(o).__name__ for o in outcomes) == ["UnauthorizedError", "int"]
        winner = devices[outcomes.index(1)]
        still = [await players.live_tokens({d.token_id}) for d in devices]
        assert still == [{d.token_id} if d is winner else set() for d in devices]
        again = await players.sign_in("Ada", ada.recovery_code)  # the other device back
        loser = next(i for i, d in enumerate(devices) if d is not winner)
        devices[loser] = await players.credential(again.token)


async def test_a_device_signed_out_cannot_replace_the_recovery_code(
    players: PlayerService,
) -> None:
    """A device signed out (before or while it asks) changes no code: the owner's still
    works, and its request is refused."""
    ada = await players.register("Ada")
    thief = await players.credential((await players.sign_in("Ada", ada.recovery_code)).token)
    owner = await players.credential(ada.token)
    outcomes = await asyncio.gather(
        players.sign_out(ada.player.id, keep=owner),
        players.new_recovery_code(thief),
        return_exceptions=True,
    )
    assert outcomes[0] == 1
    if isinstance(outcomes[1], str):  # its request came first: its code, then it was out
        code = outcomes[1]
    else:
        assert isinstance(outcomes[1], UnauthorizedError)
        code = ada.recovery_code
    with pytest.raises(UnauthorizedError):
        await players.new_recovery_code(thief)
    assert (await players.sign_in("Ada", code)).player == ada.player
    assert await players.authenticate(ada.token) == ada.player


def test_recovery_codes_are_140_random_bits_in_an_unambiguous_alphabet() -> None:
    assert len(RECOVERY_ALPHABET) == 32 and not set("ILOU") & set(RECOVERY_ALPHABET)
    codes = {new_recovery_code() for _ in range(200)}
    assert len(codes) == 200
    for code in codes:
        symbols = parse_recovery_code(code)
        assert symbols is not None and len(symbols) == 28  # 28 × 5 bits = 140 bits
        assert format_recovery_code(symbols) == code
    # Every symbol turns up (a uniform draw over the whole alphabet).
    assert set("".join(codes).replace("-", "")) == set(RECOVERY_ALPHABET)
