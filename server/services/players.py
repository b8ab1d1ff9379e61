"""Players: registration, names, and what a player signs in with — a bearer token per device,
a recovery code to sign in on another — (docs/rules.md §4 "Players").

Tokens and recovery codes are made and hashed by :mod:`server.services.credentials`; the store
keeps only their hashes.
"""

from __future__ import annotations

import hmac
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass

from server.errors import ConflictError, ErrorCode, InvalidInputError, UnauthorizedError
from server.names import invisible, mixes_scripts, name_key
from server.services.clock import Clock
from server.services.credentials import (
    TOKEN_INPUT_MAX,
    hash_recovery_code,
    hash_token,
    new_recovery_code,
    new_token,
    parse_recovery_code,
)
from server.storage.players import PlayerRow, PlayerStore, TokenRow

NAME_MIN = 2
NAME_MAX = 24
_NAME_PUNCTUATION = frozenset(" _-.'")
_MAX_MARKS = 3


#: What a failed sign-in is told, whichever of the name and the code was wrong.
SIGN_IN_FAILED = "the name or the recovery code is wrong"
#: Hashed in place of a missing player's recovery code, so that a sign-in under a name nobody
#: holds costs what one under a taken name does.
_NO_RECOVERY_HASH = bytes(32)


@dataclass(frozen=True, slots=True)
class PlayerInfo:
    """A player as other code sees it: id and display name."""

    id: int
    name: str


@dataclass(frozen=True, slots=True)
class Credential:
    """A bearer token that authenticated: its player, and the token's id (which names that
    device's sign-in; it changes when the token is rotated)."""

    player: PlayerInfo
    token_id: int


@dataclass(frozen=True, slots=True)
class Registration:
    """A new player: their first bearer token and their recovery code, each shown once."""

    player: PlayerInfo
    token: str
    recovery_code: str


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A device signed in with a recovery code: the player and the device's new token."""

    player: PlayerInfo
    token: str


def normalize_name(raw: object) -> str:
    """Validate and normalise a display name.

    Names are NFKC-normalised (look-alike letters such as 𝕬 become A), trimmed, with inner
    runs of spaces collapsed; 2–24 characters of
    letters or digits (any script) and `` _-.'``, starting with a letter or digit. Combining
    marks (accents, vowel signs) must sit on a letter or digit, at most ``_MAX_MARKS`` on one,
    counted on the name's NFD (every mark apart, however it was typed: NFKC's composing ``e``
    with two accents into ``ệ`` does not make room for more). No code point that draws nothing
    (Unicode's Default_Ignorable_Code_Point: variation selectors, the combining grapheme
    joiner, tags, Hangul fillers…; :func:`server.names.invisible`).

    Returns:
        The normalised name.

    Raises:
        InvalidInputError: (code ``bad_name``) saying which rule the name breaks.
    """
    if not isinstance(raw, str):
        raise InvalidInputError("name must be a string", code=ErrorCode.BAD_NAME)
    name = " ".join(unicodedata.normalize("NFKC", raw).split())
    if len(name) < NAME_MIN:
        raise InvalidInputError(
            f"name must be at least {NAME_MIN} characters", code=ErrorCode.BAD_NAME
        )
    if len(name) > NAME_MAX:
        raise InvalidInputError(
            f"name must be at most {NAME_MAX} characters", code=ErrorCode.BAD_NAME
        )
    bad = sorted(
        {
            c
            for i, c in enumerate(name)
            if not (c.isalnum() or c in _NAME_PUNCTUATION or _is_mark_after_letter(name, i))
        }
    )
    if bad:
        shown = " ".join(repr(c) for c in bad[:5])
        raise InvalidInputError(
            f"name may only contain letters, digits, spaces and _-.' (not {shown})",
            code=ErrorCode.BAD_NAME,
        )
    if not name[0].isalnum():
        raise InvalidInputError("name must start with a letter or a digit", code=ErrorCode.BAD_NAME)
    # As given (NFKC takes no code point in or out of the property: U+3164 becomes U+1160).
    hidden = invisible(raw)
    if hidden:
        shown = " ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(hidden))
        raise InvalidInputError(
            f"name may not hold invisible characters (not {shown})", code=ErrorCode.BAD_NAME
        )
    if _most_marks_on_a_letter(unicodedata.normalize("NFD", name)) > _MAX_MARKS:
        raise InvalidInputError(
            f"name may not stack more than {_MAX_MARKS} marks on a letter",
            code=ErrorCode.BAD_NAME,
        )
    return name


def lookup_key(raw: object) -> str | None:
    """The :func:`~server.names.name_key` of a name typed to find a player (signing in,
    following), or None when it cannot be a name: read as :func:`normalize_name` reads it
    (NFKC, spaces, 2–24 characters) but without the rules only a new name must meet, so that
    a player whose name was registered before a rule was added (an invisible code point, a
    fourth stacked mark) is still found by it."""
    if not isinstance(raw, str):
        return None
    name = " ".join(unicodedata.normalize("NFKC", raw).split())
    if not NAME_MIN <= len(name) <= NAME_MAX:
        return None
    return name_key(name)


def _is_mark(c: str) -> bool:
    return unicodedata.category(c).startswith("M")


def _is_mark_after_letter(name: str, i: int) -> bool:
    """Whether ``name[i]`` is a combining mark (a vowel sign or accent, e.g. Devanagari ``ा``,
    Tamil ``ி``) on a letter or digit (after it, or after other marks on it)."""
    if not _is_mark(name[i]):
        return False
    j = i
    while j > 0 and _is_mark(name[j - 1]):
        j -= 1
    return j > 0 and name[j - 1].isalnum()


def _most_marks_on_a_letter(text: str) -> int:
    """The longest run of combining marks in ``text`` (no "zalgo" stacks). Counted on the NFD
    of a name: NFC composes a letter with some of its marks (``e`` with a dot below and a
    circumflex is ``ệ``), so counted on the NFKC form five stacked marks would pass as three."""
    most = run = 0
    for c in text:
        run = run + 1 if _is_mark(c) else 0
        most = max(most, run)
    return most


def _name_taken(name: str, taken: str | None) -> ConflictError:
    """The ``name_taken`` error for ``name``, naming the player's name it clashes with."""
    if taken is None or taken.casefold() == name.casefold():
        return ConflictError(f"the name {name!r} is already taken", code=ErrorCode.NAME_TAKEN)
    return ConflictError(
        f"the name {name!r} looks like {taken!r}, which is already taken", code=ErrorCode.NAME_TAKEN
    )


class PlayerService:
    """Registers players, resolves bearer tokens, and manages each player's devices and
    recovery code.

    Args:
        store: where players are kept (PostgreSQL, or an in-memory store in tests).
        clock: the UTC clock.
    """

    def __init__(self, store: PlayerStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def register(
        self, raw_name: object, *, address_hash: bytes | None = None
    ) -> Registration:
        """Create a player (``address_hash``: the keyed hash of the address they register
        from, :func:`server.services.moderation.hash_address`; never the address).

        Returns:
            The new player, their first bearer token and their recovery code (each shown once;
            only their hashes are stored).

        Raises:
            InvalidInputError: ``bad_name`` (see :func:`normalize_name`; also a new name that
                mixes scripts beyond TR39's highly restrictive level, such as a Cyrillic ``у``
                in a Latin ``Racу``: Japanese and Korean mixes are fine).
            ConflictError: ``name_taken`` when another player's name has the same
                :func:`~server.names.name_key`: the same name in any case, or a look-alike
                (also one registered at the same moment: the store's unique key decides).
            StorageError: the database failed; nobody was registered.
        """
        name = normalize_name(raw_name)
        key = name_key(name)
        if mixes_scripts(name):
            # A taken name is refused as taken, whatever its letters.
            taken = await self._store.name_holding(key)
            if taken is not None:
                raise _name_taken(name, taken)
            raise InvalidInputError(
                f"the name {name!r} mixes letters of different scripts (such as Latin with "
                "Cyrillic or Greek); use one script",
                code=ErrorCode.BAD_NAME,
            )
        token, code = new_token(), new_recovery_code()
        added = await self._store.add(
            name,
            key,
            hash_token(token),
            self._clock.now(),
            recovery_hash=hash_recovery_code(code.replace("-", "")),
            address_hash=address_hash,
        )
        if added is None:
            # Another player holds the key (maybe registered meanwhile): name the holder.
            raise _name_taken(name, await self._store.name_holding(key))
        return Registration(_info(added.player), token, code)

    async def credential(self, token: str | None) -> Credential:
        """The player owning a bearer token, and the token's id.

        Raises:
            UnauthorizedError: ``unauthorized``: the token is missing, too long or unknown
                (never made, rotated, or signed out).
            StorageError: the database failed.
        """
        found = await self._store.by_token_hash(checked_token_hash(token))
        if found is None:
            raise unknown_token()
        return _credential(found)

    async def authenticate(self, token: str | None) -> PlayerInfo:
        """The player owning a bearer token (see :meth:`credential`).

        Raises:
            UnauthorizedError: the token is missing or unknown.
            StorageError: the database failed.
        """
        return (await self.credential(token)).player

    async def get(self, player_id: int) -> PlayerInfo | None:
        """The player with this id, or None.

        Raises:
            StorageError: the database failed.
        """
        player = await self._store.get(player_id)
        return None if player is None else _info(player)

    async def sign_in(self, raw_name: object, raw_code: object) -> SignedIn:
        """Sign a new device in with the player's name and recovery code: a new bearer token,
        beside the player's others.

        The name is read as registration reads it (any case, look-alike letters: the player
        whose name it looks like), the code as :func:`~server.services.credentials.
        parse_recovery_code` reads it; the code's hash is compared in constant time.

        Returns:
            The player and the device's new token (shown once).

        Raises:
            UnauthorizedError: ``sign_in_failed``, with one message whichever was wrong (an
                unknown or malformed name, a wrong or malformed code, a player without a
                code): the answer tells nobody whether a name holds a code.
            StorageError: the database failed; nothing was stored.
        """
        symbols = parse_recovery_code(raw_code)
        given = hash_recovery_code(symbols or "")
        key = lookup_key(raw_name)
        found = None if key is None else await self._store.recovery_of(key)
        stored = _NO_RECOVERY_HASH if found is None else found.recovery_hash
        matches = hmac.compare_digest(given, stored or _NO_RECOVERY_HASH)
        if found is None or stored is None or symbols is None or not matches:
            raise UnauthorizedError(SIGN_IN_FAILED, code=ErrorCode.SIGN_IN_FAILED)
        token = new_token()
        if await self._store.add_token(found.player.id, hash_token(token), self._clock.now()):
            return SignedIn(_info(found.player), token)
        raise UnauthorizedError(SIGN_IN_FAILED, code=ErrorCode.SIGN_IN_FAILED)

    async def rotate_token(self, credential: Credential) -> str:
        """Replace the caller's bearer token by a new one: the old one stops working at once,
        on every server process (its websockets are closed, docs/protocol.md §8).

        Returns:
            The new token (shown once).

        Raises:
            UnauthorizedError: ``unauthorized``: the token was revoked meanwhile (nothing
                stored).
            StorageError: the database failed; the old token still works.
        """
        token = new_token()
        if await self._store.replace_token(
            credential.token_id, hash_token(token), self._clock.now()
        ):
            return token
        raise UnauthorizedError("unknown player token", code=ErrorCode.UNAUTHORIZED)

    async def new_recovery_code(self, credential: Credential) -> str:
        """Make the caller's player a new recovery code; the old one (if any) stops working at
        once. Tokens are untouched. A device signed out while it asks changes nothing.

        Returns:
            The new code, as shown (only its hash is stored).

        Raises:
            UnauthorizedError: ``unauthorized``: the caller's token was revoked meanwhile
                (nothing stored).
            StorageError: the database failed; the old code still works.
        """
        code = new_recovery_code()
        digest = hash_recovery_code(code.replace("-", ""))
        if await self._store.set_recovery_hash(credential.token_id, digest):
            return code
        raise UnauthorizedError("unknown player token", code=ErrorCode.UNAUTHORIZED)

    async def sign_out(self, player_id: int, *, keep: Credential | None) -> int:
        """Sign the player's devices out: every token of theirs but ``keep``'s (None: every
        one) stops working at once, and their websockets on every server process are closed.
        Two devices signing each other out at once take turns: the second is refused.

        Returns:
            How many tokens were revoked (0: nothing changed).

        Raises:
            UnauthorizedError: ``unauthorized``: ``keep``'s token was revoked meanwhile
                (nothing changed).
            StorageError: the database failed; nothing changed.
        """
        deleted = await self._store.delete_tokens(
            player_id, keep=None if keep is None else keep.token_id
        )
        if deleted is None:
            raise UnauthorizedError("unknown player token", code=ErrorCode.UNAUTHORIZED)
        return deleted

    async def live_tokens(self, token_ids: Collection[int]) -> set[int]:
        """Which of these token ids (:attr:`Credential.token_id`) still work.

        Raises:
            StorageError: the database failed.
        """
        return await self._store.live_tokens(token_ids)


def checked_token_hash(token: str | None) -> bytes:
    """The SHA-256 a bearer token is looked up by.

    Raises:
        UnauthorizedError: ``unauthorized``: the token is missing or too long.
    """
    if not token or len(token) > TOKEN_INPUT_MAX:
        raise UnauthorizedError("a valid player token is required", code=ErrorCode.UNAUTHORIZED)
    return hash_token(token)


def unknown_token() -> UnauthorizedError:
    """The refusal of a token no player has (never made, rotated, or signed out)."""
    return UnauthorizedError("unknown player token", code=ErrorCode.UNAUTHORIZED)


def _info(row: PlayerRow) -> PlayerInfo:
    return PlayerInfo(row.id, row.name)


def _credential(row: TokenRow) -> Credential:
    return Credential(_info(row.player), row.token_id)
