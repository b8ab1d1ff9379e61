"""Players over REST (``POST /api/v1/players``, ``GET /api/v1/players/me``) on a real server.

PostgreSQL only: a real server's services are built over it. The service's rules run on both
stores in ``test_player_service.py``."""

from __future__ import annotations

import asyncio
import hashlib
import unicodedata
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import text

from server.errors import InvalidInputError
from server.names import invisible, mixes_scripts
from server.services.players import normalize_name
from server.storage.db import create_engine
from tests.helpers import register

Client = TestClient[Any, Any]


async def _error(resp: Any, status: int, code: str) -> dict[str, Any]:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body: dict[str, Any] = await resp.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body


async def test_register_returns_201_with_id_name_and_token(client: Client) -> None:
    resp = await client.post("/api/v1/players", json={"name": "Alice"})
    assert resp.status == 201
    body = await resp.json()
    assert set(body) == {"id", "name", "token", "recovery_code"}
    assert isinstance(body["id"], int) and body["id"] > 0
    assert body["name"] == "Alice"
    assert isinstance(body["token"], str) and len(body["token"]) >= 32

    other = await register(client, "Bob")
    assert other["id"] != body["id"]
    assert other["token"] != body["token"]


async def test_token_and_code_are_stored_only_as_their_sha256(
    client: Client, database_url: str
) -> None:
    alice = await register(client, "Alice")
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            columns = set(
                (
                    await conn.execute(
                        text(
                            "SELECT column_name FROM information_schema.columns "
                            "WHERE table_name = 'players'"
                        )
                    )
                ).scalars()
            )
            row = (
                await conn.execute(
                    text(
                        "SELECT p.id, p.name, t.token_hash, p.recovery_hash, "
                        "p::text || t::text AS everything "
                        "FROM players p JOIN player_tokens t ON t.player_id = p.id"
                    )
                )
            ).one()
    finally:
        await engine.dispose()
    assert columns == {
        "id",
        "name",
        "name_key",
        "created_at",
        # the recovery code's SHA-256 (its tokens are player_tokens rows)
        "recovery_hash",
        # moderation (docs/rules.md §4 "Moderation"): a keyed hash of the address, the ban
        "address_hash",
        "banned_at",
        "ban_reason",
        "ban_action_id",
    }
    assert row.id == alice["id"]
    assert bytes(row.token_hash) == hashlib.sha256(alice["token"].encode()).digest()
    code = alice["recovery_code"].replace("-", "")
    assert bytes(row.recovery_hash) == hashlib.sha256(code.encode()).digest()
    for secret in (alice["token"], alice["recovery_code"], code):
        assert secret not in row.everything
        assert secret.encode().hex() not in row.everything
    assert "127.0.0.1" not in row.everything  # the address only as a keyed hash


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "at least 2"),
        ("   ", "at least 2"),
        ("A", "at least 2"),
        ("x" * 25, "at most 24"),
        ("Bob\x00by", "may only contain"),
        ("Bob\x07by", "may only contain"),
        ("Bob\x7fby", "may only contain"),
        ("Bob\u202eby", "may only contain"),
        ("Bob\u200bby", "may only contain"),
        ("Bob😀", "may only contain"),
        ("Bob♠", "may only contain"),
        ("Bob<script>", "may only contain"),
        ("a@b", "may only contain"),
        ("_bob", "must start with a letter or a digit"),
        ("-bob", "must start with a letter or a digit"),
        (".bob", "must start with a letter or a digit"),
        ("'bob", "must start with a letter or a digit"),
        (42, "must be a string"),
        (None, "must be a string"),
        (["Bob"], "must be a string"),
        ({"first": "Bob"}, "must be a string"),
        (True, "must be a string"),
    ],
)
async def test_bad_names_are_rejected_with_bad_name_and_a_reason(
    client: Client, name: object, reason: str
) -> None:
    resp = await client.post("/api/v1/players", json={"name": name})
    body = await _error(resp, 400, "bad_name")
    assert reason in body["error"]["message"]


async def test_missing_name_is_bad_name(client: Client) -> None:
    resp = await client.post("/api/v1/players", json={"nickname": "Bob"})
    body = await _error(resp, 400, "bad_name")
    assert "name" in body["error"]["message"]


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("  Bob   Smith  ", "Bob Smith"),
        ("Bob\tSmith", "Bob Smith"),
        ("xy", "xy"),
        ("x" * 24, "x" * 24),
        ("  " + "y" * 24 + "  ", "y" * 24),
        ("Zoe\u0308", "Zo\u00eb"),  # NFC: e + combining diaeresis -> ë
        ("7th Heaven", "7th Heaven"),
        ("O'Brien-Smith_Jr.", "O'Brien-Smith_Jr."),
        ("Łukasz", "Łukasz"),
        ("山田太郎", "山田太郎"),
        ("Ана", "Ана"),
    ],
)
async def test_good_names_are_normalised(client: Client, raw: str, stored: str) -> None:
    resp = await client.post("/api/v1/players", json={"name": raw})
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["name"] == stored


@pytest.mark.parametrize("name", ["राम", "सीता", "สมศักดิ์", "தமிழ்", "Jalapen\u0303o"])
def test_names_with_combining_marks_of_any_script_are_letters(name: str) -> None:
    # normalize_name promises "letters or digits (any script)": the vowel signs and marks that
    # Devanagari, Thai and Tamil (and decomposed Latin) write with are part of the letters.
    assert normalize_name(name) == unicodedata.normalize("NFC", name)


@pytest.mark.parametrize("name", ["\u0301ab", "a \u0301b", "a-\u0301b", "Zx" + "\u0336" * 4])
def test_combining_marks_must_sit_on_a_letter_and_not_stack(name: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        normalize_name(name)
    assert caught.value.code == "bad_name"


@pytest.mark.parametrize(
    "name",
    [
        "Bob\ufe0f",  # variation selector 16 (emoji presentation)
        "Bob\U000e0100",  # variation selector 17
        "Bo\u034fb",  # combining grapheme joiner
        "Bo\ufe00b",  # variation selector 1
        "\u1828\u180b\u1821",  # Mongolian free variation selector
        "\u1780\u17b4\u1781",  # Khmer inherent vowel
    ],
)
def test_names_holding_code_points_that_draw_nothing_are_bad_name(name: str) -> None:
    """Default-ignorable code points that are marks pass the check of characters (a mark on a
    letter) but show nothing: ``Bob`` with one looks like ``Bob``."""
    with pytest.raises(InvalidInputError) as caught:
        normalize_name(name)
    assert caught.value.code == "bad_name"
    hidden = next(c for c in name if unicodedata.category(c).startswith("M"))
    assert f"invisible characters (not U+{ord(hidden):04X})" in caught.value.message


#: Unicode's Default_Ignorable_Code_Point, as DerivedCoreProperties.txt of Unicode 16.0 lists it
#: (first and last code point of each range): what a name may not hold.
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
]


def test_what_draws_nothing_is_unicodes_default_ignorable_code_points() -> None:
    """:func:`server.names.invisible` reads the property from the installed ICU data (Python's
    ``unicodedata`` lacks it); it is the list of DerivedCoreProperties.txt."""
    listed = {cp for first, last in DEFAULT_IGNORABLE for cp in range(first, last + 1)}
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    assert {ord(c) for c in invisible(everything)} == listed


@pytest.mark.parametrize(
    "name",
    [
        "Vie\u0323\u0302\u0301\u0300t",  # ệ with two accents more: four marks on the e
        "Vie\u0323\u0302\u0301\u0300\u0303t",  # five, which NFC composes down to three
        "Zx\u0336\u0336\u0336\u0336",
        "A\u0300\u0301\u0302\u0303",
    ],
)
def test_more_than_three_marks_on_a_letter_are_bad_name_however_composed(name: str) -> None:
    """Marks are counted on the name's NFD: NFKC composes ``e`` with its first two marks into
    ``ệ``, which must not make room for more."""
    with pytest.raises(InvalidInputError) as caught:
        normalize_name(name)
    assert caught.value.code == "bad_name"
    assert "more than 3 marks" in caught.value.message


@pytest.mark.parametrize(
    "name", ["Việt Nam", "Vie\u0323\u0302\u0301t", "A\u0300\u0301\u0302", "ญั้ส"]
)
def test_three_marks_on_a_letter_are_a_name(name: str) -> None:
    assert normalize_name(name) == unicodedata.normalize("NFC", name)


async def test_a_name_holding_a_variation_selector_is_refused_over_rest(client: Client) -> None:
    resp = await client.post("/api/v1/players", json={"name": "Bob\ufe0f"})
    body = await _error(resp, 400, "bad_name")
    assert "invisible" in body["error"]["message"]


async def test_duplicate_name_is_409_case_insensitively(client: Client) -> None:
    await register(client, "Alice")
    for clash in ("Alice", "alice", "ALICE", "  aLiCe "):
        resp = await client.post("/api/v1/players", json={"name": clash})
        body = await _error(resp, 409, "name_taken")
        assert "already taken" in body["error"]["message"]
    await register(client, "Alice2")
    await register(client, "Élodie")
    resp = await client.post("/api/v1/players", json={"name": "ÉLODIE"})
    await _error(resp, 409, "name_taken")


@pytest.mark.parametrize(
    ("first", "clash"),
    [
        ("ΣΑΣ", "σας"),
        ("Straße", "STRASSE"),
        ("Ada", "\u0410da"),  # Cyrillic capital А
        ("Hello", "\u0397e\u217c\u217co"),  # Greek capital Η, small Roman numeral fifty ⅼ
        ("Ada", "Ａｄａ"),  # fullwidth
        ("Nikola", "\u039d\u0456k\u03bf\u217ca"),  # Greek Ν, Cyrillic і, Greek ο, ⅼ
    ],
)
async def test_look_alike_or_case_variant_name_is_409_naming_the_taken_name(
    client: Client, first: str, clash: str
) -> None:
    await register(client, first)
    resp = await client.post("/api/v1/players", json={"name": clash})
    body = await _error(resp, 409, "name_taken")
    clash = normalize_name(clash)
    if clash.casefold() == first.casefold():  # the same name in other letter case
        assert body["error"]["message"] == f"the name {clash!r} is already taken"
    else:
        assert body["error"]["message"] == (
            f"the name {clash!r} looks like {first!r}, which is already taken"
        )


async def test_names_that_do_not_look_alike_all_register(client: Client) -> None:
    for name in ("Ada", "Adam", "Ana", "Anna", "Ivan", "Иван", "Zoe", "Zoë", "東京", "京都"):
        await register(client, name)


async def test_concurrent_registrations_of_look_alikes_admit_exactly_one(client: Client) -> None:
    names = ["Ada", "\u0410da", "\u0430da", "\u0391DA", "Ａｄａ", "ADA", "𝔄𝔡𝔞"]
    responses = await asyncio.gather(
        *(client.post("/api/v1/players", json={"name": n}) for n in names)
    )
    # Exactly one wins; the others are look-alikes of it, or (seen before it committed) names
    # mixing scripts, which no new player may take.
    assert sorted(r.status for r in responses).count(201) == 1
    (winner,) = [await r.json() for r in responses if r.status == 201]
    for name, resp in zip(names, responses, strict=True):
        if resp.status == 400:
            assert mixes_scripts(name)
            assert (await resp.json())["error"]["code"] == "bad_name"
        elif resp.status == 409:
            error = (await resp.json())["error"]
            assert error["code"] == "name_taken"
            if normalize_name(name).casefold() != winner["name"].casefold():
                assert f"looks like {winner['name']!r}" in error["message"]


@pytest.mark.parametrize(
    "body", [b"{", b"{'name': 'x'}", b"name=Bob", b"", b"\xff\xfe{}", b'{"name": "Bob"} trailing']
)
async def test_invalid_json_body_is_bad_json(client: Client, body: bytes) -> None:
    resp = await client.post(
        "/api/v1/players", data=body, headers={"Content-Type": "application/json"}
    )
    await _error(resp, 400, "bad_json")


@pytest.mark.parametrize("body", [b'"Bob"', b'["Bob"]', b"42", b"null", b"true"])
async def test_non_object_json_body_is_bad_json(client: Client, body: bytes) -> None:
    resp = await client.post(
        "/api/v1/players", data=body, headers={"Content-Type": "application/json"}
    )
    body_json = await _error(resp, 400, "bad_json")
    assert "object" in body_json["error"]["message"]


async def test_oversized_body_is_413_json(client: Client) -> None:
    payload = b'{"name": "Bob", "pad": "' + b"x" * (70 * 1024) + b'"}'
    resp = await client.post(
        "/api/v1/players", data=payload, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 413
    body = await resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    # nothing was registered
    again = await client.post("/api/v1/players", json={"name": "Bob"})
    assert again.status == 201


async def test_me_with_a_valid_bearer_returns_the_player(client: Client) -> None:
    alice = await register(client, "Alice")
    await register(client, "Bob")
    for scheme in ("Bearer", "bearer", "BEARER"):
        resp = await client.get(
            "/api/v1/players/me", headers={"Authorization": f"{scheme} {alice['token']}"}
        )
        assert resp.status == 200
        assert await resp.json() == {"id": alice["id"], "name": "Alice"}


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token abc",
        "Bearer not-a-real-token",
        "Bearer " + "x" * 500,
    ],
)
async def test_me_without_or_with_a_bad_bearer_is_401(client: Client, header: str | None) -> None:
    await register(client, "Alice")
    headers = {} if header is None else {"Authorization": header}
    resp = await client.get("/api/v1/players/me", headers=headers)
    await _error(resp, 401, "unauthorized")


async def test_me_rejects_a_token_differing_in_one_character(client: Client) -> None:
    alice = await register(client, "Alice")
    token = alice["token"]
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    resp = await client.get("/api/v1/players/me", headers={"Authorization": f"Bearer {tampered}"})
    await _error(resp, 401, "unauthorized")


async def test_concurrent_registrations_of_one_name_admit_exactly_one(client: Client) -> None:
    names = ["Racer", "racer", "RACER", "Racer ", " racer", "rAcEr"]
    responses = await asyncio.gather(
        *(client.post("/api/v1/players", json={"name": n}) for n in names)
    )
    statuses = sorted(r.status for r in responses)
    assert statuses == [201] + [409] * (len(names) - 1)
    for resp in responses:
        if resp.status == 409:
            assert (await resp.json())["error"]["code"] == "name_taken"


@pytest.mark.parametrize("name", ["Rac\u0443", "\u03a9mega", "Pa\u0443l Smith"])
async def test_a_new_name_mixing_scripts_is_bad_name(client: Client, name: str) -> None:
    body = await _error(await client.post("/api/v1/players", json={"name": name}), 400, "bad_name")
    assert "scripts" in body["error"]["message"]


@pytest.mark.parametrize("name", ["Иван", "ひらがな太郎", "김민수", "Σωκράτης", "José 2", "李明"])
async def test_names_in_one_script_or_a_usual_mix_register(client: Client, name: str) -> None:
    resp = await client.post("/api/v1/players", json={"name": name})
    assert resp.status == 201, await resp.text()


@pytest.mark.parametrize("name", ["\u3164\u3164", "Q\u3164", "Ab\uffa0"])
async def test_names_with_invisible_letters_are_bad_name(client: Client, name: str) -> None:
    body = await _error(await client.post("/api/v1/players", json={"name": name}), 400, "bad_name")
    assert "invisible" in body["error"]["message"]
