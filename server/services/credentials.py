"""What a player signs in with (docs/rules.md §4 "Players"): bearer tokens and recovery codes,
how they are made, read back from what a person typed, and hashed. Pure: no I/O.

A **bearer token** is 32 random bytes from the operating system's cryptographic source, in
URL-safe base64 (43 characters): one per device, sent with every request.

A **recovery code** lets a player sign in on another device (or again, after losing every
token) with their name: 28 symbols of Crockford's base32 alphabet (the digits and the capital
letters but ``I``, ``L``, ``O`` and ``U``, so that nothing reads as something else), drawn
uniformly by :mod:`secrets` — 140 bits — and shown as seven groups of four,
``XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX``. What a person types back is read leniently, as
Crockford's decoding does: any case, without or with hyphens and spaces anywhere, ``O`` for
``0`` and ``I`` or ``L`` for ``1``.

Both are stored only as their plain SHA-256 (32 bytes). A slow, salted password hash is not
needed: both are long random values, not something a person chose, so a stolen hash cannot be
reversed by guessing (2¹⁴⁰ candidates for a code, 2²⁵⁶ for a token), and a plain hash keeps a
token's look-up a single index probe.
"""

from __future__ import annotations

import hashlib
import secrets

#: Crockford's base32 alphabet: no I, L, O or U.
RECOVERY_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
RECOVERY_GROUPS = 7
RECOVERY_GROUP_LENGTH = 4
#: Symbols in a recovery code (28: 140 bits).
RECOVERY_LENGTH = RECOVERY_GROUPS * RECOVERY_GROUP_LENGTH
#: Longest input read as a recovery code (a code with separators and spaces to spare).
RECOVERY_INPUT_MAX = 100
#: Longest input read as a bearer token (a token is 43 characters).
TOKEN_INPUT_MAX = 200
#: What Crockford's decoding reads as another symbol.
_LOOK_ALIKES = str.maketrans({"O": "0", "I": "1", "L": "1"})
#: Separators a person may type between the symbols.
_SEPARATORS = str.maketrans("", "", "- \t\r\n\u00a0\u2010\u2011\u2012\u2013\u2014\u2212")


def new_token() -> str:
    """A new bearer token: 32 random bytes, URL-safe base64 without padding (43 characters)."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> bytes:
    """SHA-256 of a bearer token (32 bytes; a token is 256 random bits, so a fast hash is
    enough)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def new_recovery_code() -> str:
    """A new recovery code, as shown: seven groups of four symbols joined by hyphens
    (``7K2M-…``, 34 characters, 140 random bits).

    >>> code = new_recovery_code()
    >>> len(code), code.count("-"), parse_recovery_code(code.lower()) == code.replace("-", "")
    (34, 6, True)
    """
    symbols = "".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(RECOVERY_LENGTH))
    return format_recovery_code(symbols)


def format_recovery_code(symbols: str) -> str:
    """The 28 symbols of a code in groups of four joined by hyphens.

    >>> format_recovery_code("0123456789ABCDEFGHJKMNPQRSTV")
    '0123-4567-89AB-CDEF-GHJK-MNPQ-RSTV'
    """
    step = RECOVERY_GROUP_LENGTH
    return "-".join(symbols[i : i + step] for i in range(0, len(symbols), step))


def parse_recovery_code(raw: object) -> str | None:
    """The 28 symbols a typed recovery code names, or None when it names no code: not a
    string, longer than :data:`RECOVERY_INPUT_MAX`, a symbol outside the alphabet, or not 28
    symbols once separators are dropped.

    >>> parse_recovery_code(" 0123-4567 89ab-cdef-ghjk-mnpq-rstv ")
    '0123456789ABCDEFGHJKMNPQRSTV'
    >>> parse_recovery_code("O123-4567-89AB-CDEF-GHJK-MNPQ-RSTV")  # O for 0
    '0123456789ABCDEFGHJKMNPQRSTV'
    >>> parse_recovery_code("0123-4567-89AB-CDEF-GHJK-MNPQ-RSTU") is None  # no U
    True
    """
    if not isinstance(raw, str) or len(raw) > RECOVERY_INPUT_MAX:
        return None
    symbols = raw.translate(_SEPARATORS)
    if not symbols.isascii():  # before upper(): "ı".upper() is "I"
        return None
    symbols = symbols.upper().translate(_LOOK_ALIKES)
    if len(symbols) != RECOVERY_LENGTH or any(c not in RECOVERY_ALPHABET for c in symbols):
        return None
    return symbols


def hash_recovery_code(symbols: str) -> bytes:
    """SHA-256 of a recovery code's 28 symbols (as :func:`parse_recovery_code` gives them;
    32 bytes)."""
    return hashlib.sha256(symbols.encode("ascii")).digest()
