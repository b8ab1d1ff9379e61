"""Client addresses as moderation keeps them: a keyed hash of one address (IPv4) or one /64
network (IPv6), never the address itself. Registration stores the hash of the address an
account registered from; the review of suspicious results (:mod:`server.services.review`)
groups a day's accounts by it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress

#: What the address key is derived from the daily secret for (a key of its own: the daily
#: secret itself never meets an address).
ADDRESS_KEY_LABEL = b"tripeaks:address-hash:v1"


def address_key(daily_secret: bytes) -> bytes:
    """The key of the address hashes, derived from the daily secret (HMAC-SHA256 of a fixed
    label): every process of a service, sharing the secret, hashes an address alike."""
    return hmac.new(daily_secret, ADDRESS_KEY_LABEL, hashlib.sha256).digest()


#: Addresses whose group is remembered (:func:`address_group`): a connection's address is
#: grouped at its accept, at its first request and by its limits, some 3 µs each time.
ADDRESS_GROUPS_KEPT = 4096
#: The longest address whose group is remembered: an IPv6 address with a zone takes at most
#: this; a longer text (a forwarded header's, behind a trusted proxy) is grouped each time
#: rather than kept.
ADDRESS_LONGEST_KEPT = 64


def address_group(address: str) -> str | None:
    """What counts as one address: an IPv4 address as it is (an IPv4-mapped IPv6 address as its
    IPv4 address), an IPv6 address by its /64 network, which one subscriber usually holds whole;
    None for anything that is not an IP address (a Unix socket's peer). The groups of the last
    :data:`ADDRESS_GROUPS_KEPT` addresses of at most :data:`ADDRESS_LONGEST_KEPT` characters
    are remembered.

    >>> address_group("203.0.113.7"), address_group("::ffff:203.0.113.7")
    ('203.0.113.7', '203.0.113.7')
    >>> address_group("2001:db8:1:2:aaaa::1"), address_group("unknown")
    ('2001:db8:1:2::/64', None)
    """
    if len(address) > ADDRESS_LONGEST_KEPT:
        return _group(address)
    return _kept_group(address)


def _group(address: str) -> str | None:
    try:
        ip = ipaddress.ip_address(address.strip().split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


_kept_group = functools.lru_cache(maxsize=ADDRESS_GROUPS_KEPT)(_group)


def hash_address(key: bytes, address: str) -> bytes | None:
    """HMAC-SHA256 of an address's :func:`address_group` under ``key`` (32 bytes), or None
    when it is not an IP address. The address itself is never stored."""
    group = address_group(address)
    if group is None:
        return None
    return hmac.new(key, group.encode(), hashlib.sha256).digest()


__all__ = [
    "ADDRESS_GROUPS_KEPT",
    "ADDRESS_KEY_LABEL",
    "ADDRESS_LONGEST_KEPT",
    "address_group",
    "address_key",
    "hash_address",
]
