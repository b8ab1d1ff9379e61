"""Player registration and bearer-token authentication (docs/rules.md §4 "Players")."""

from __future__ import annotations

import hashlib
import secrets
import unicodedata
from dataclasses import dataclass

from server.errors import ConflictError, ErrorCode, InvalidInputError, UnauthorizedError
from server.names import INVISIBLE_LETTERS, mixes_scripts, name_key
from server.services.clock import Clock
from server.storage.players import PlayerRow, PlayerStore

NAME_MIN = 2
NAME_MAX = 24
_NAME_PUNCTUATION = frozenset(" _-.'")
_MAX_MARKS = 3


@dataclass(frozen=True, slots=True)
class PlayerInfo:
    """A player as other code sees it: id and display name."""

    id: int
    name: str


def normalize_name(raw: object) -> str:
    """Validate and normalise a display name.

    Names are NFKC-normalised (look-alike letters such as 𝕬 become A), trimmed, with inner
    runs of spaces collapsed; 2–24 characters of
    letters or digits (any script) and `` _-.'``, starting with a letter or digit, with no
    invisible letters (Hangul fillers).

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
    if any(c in INVISIBLE_LETTERS for c in name):
        raise InvalidInputError("name may not hold invisible letters", code=ErrorCode.BAD_NAME)
    return name


def _is_mark_after_letter(name: str, i: int) -> bool:
    """Whether ``name[i]`` is a combining mark (a vowel sign or accent, e.g. Devanagari ``ा``,
    Tamil ``ி``) on a letter or digit, at most ``_MAX_MARKS`` in a row (no "zalgo" stacks)."""
    if not unicodedata.category(name[i]).startswith("M"):
        return False
    j = i
    while j > 0 and unicodedata.category(name[j - 1]).startswith("M"):
        j -= 1
    return j > 0 and i - j < _MAX_MARKS and name[j - 1].isalnum()


def _name_taken(name: str, taken: str | None) -> ConflictError:
    """The ``name_taken`` error for ``name``, naming the player's name it clashes with."""
    if taken is None or taken.casefold() == name.casefold():
        return ConflictError(f"the name {name!r} is already taken", code=ErrorCode.NAME_TAKEN)
    return ConflictError(
        f"the name {name!r} looks like {taken!r}, which is already taken", code=ErrorCode.NAME_TAKEN
    )


def hash_token(token: str) -> bytes:
    """SHA-256 of a bearer token (tokens are 256-bit random, so a fast hash is enough)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class PlayerService:
    """Registers players and resolves bearer tokens.

    Args:
        store: where players are kept (PostgreSQL, or an in-memory store in tests).
        clock: the UTC clock.
    """

    def __init__(self, store: PlayerStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    async def register(
        self, raw_name: object, *, address_hash: bytes | None = None
    ) -> tuple[PlayerInfo, str]:
        """Create a player (``address_hash``: the keyed hash of the address they register
        from, :func:`server.services.moderation.hash_address`; never the address).

        Returns:
            The new player and its bearer token (shown once; only its hash is stored).

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
        token = secrets.token_urlsafe(32)
        player = await self._store.add(
            name, key, hash_token(token), self._clock.now(), address_hash=address_hash
        )
        if player is None:
            # Another player holds the key (maybe registered meanwhile): name the holder.
            raise _name_taken(name, await self._store.name_holding(key))
        return _info(player), token

    async def authenticate(self, token: str | None) -> PlayerInfo:
        """The player owning a bearer token.

        Raises:
            UnauthorizedError: the token is missing or unknown.
            StorageError: the database failed.
        """
        if not token or len(token) > 200:
            raise UnauthorizedError("a valid player token is required", code=ErrorCode.UNAUTHORIZED)
        player = await self._store.by_token_hash(hash_token(token))
        if player is None:
            raise UnauthorizedError("unknown player token", code=ErrorCode.UNAUTHORIZED)
        return _info(player)

    async def get(self, player_id: int) -> PlayerInfo | None:
        """The player with this id, or None.

        Raises:
            StorageError: the database failed.
        """
        player = await self._store.get(player_id)
        return None if player is None else _info(player)


def _info(row: PlayerRow) -> PlayerInfo:
    return PlayerInfo(row.id, row.name)
