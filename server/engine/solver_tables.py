"""Deal-independent tables for the solver: every tableau configuration, indexed once.

A *configuration* is the set of removed layout positions. A card can only be removed once every card
covering it is gone (docs/rules.md §1), so a reachable removed set is closed under "covered by":
with each position it holds the positions covering it. There are 22,932 such sets, from the empty
one to the full one. They are numbered in breadth-first order from the empty set, which is also an
order by size (number of removed cards), so every configuration comes after all its subsets: one
pass in index order visits each configuration after everything that can lead to it.

The tables are built on first use (a fraction of a second) and shared afterwards.

>>> tables = config_tables()
>>> len(tables.masks), tables.masks[0], tables.masks[tables.full] == (1 << 28) - 1
(22932, 0, True)
>>> [pos for pos, _ in tables.succ[0]]  # from the start, the bottom row is playable
[18, 19, 20, 21, 22, 23, 24, 25, 26, 27]
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from server.engine.layout import COVERED_BY, COVERS, PEAKS, POSITION_COUNT
from server.engine.rules import PEAK_BONUS

__all__ = ["PEAK_MASKS", "ConfigTables", "config_tables", "peaks_cleared"]

PEAK_MASKS: Final[tuple[int, ...]] = tuple(sum(1 << pos for pos in peak) for peak in PEAKS)
"""The three peaks (left, middle, right) as position bitmasks."""

_BOTTOM_ROW: Final = sum(1 << pos for pos in range(POSITION_COUNT) if not COVERED_BY[pos])


def peaks_cleared(mask: int) -> int:
    """How many peaks are fully removed in the removed-position bitmask ``mask``.

    >>> peaks_cleared(0), peaks_cleared((1 << 28) - 1)
    (0, 3)
    """
    return sum(1 for peak in PEAK_MASKS if mask & peak == peak)


@dataclass(frozen=True, slots=True)
class ConfigTables:
    """All configurations and the removals between them.

    Attributes:
        masks: per configuration, the removed positions as a bitmask (bit ``p`` = position ``p``),
            in breadth-first order from the empty set (so by number of removed cards).
        index: the inverse of :attr:`masks` (bitmask → configuration number).
        succ: per configuration, one ``(position, next configuration)`` pair for each playable
            position (present and face up), ascending by position.
        playable: per configuration, the playable positions as a bitmask.
        value: per configuration, ``100 × peaks cleared − cards removed``: what a blocked ending in
            it adds to the score, up to a constant.
        full: the number of the configuration with all 28 cards removed (the last one).
    """

    masks: tuple[int, ...]
    index: Mapping[int, int]
    succ: tuple[tuple[tuple[int, int], ...], ...]
    playable: tuple[int, ...]
    value: tuple[int, ...]
    full: int


@functools.cache
def config_tables() -> ConfigTables:
    """Build (once) and return the :class:`ConfigTables`."""
    index: dict[int, int] = {0: 0}
    masks: list[int] = [0]
    playable: list[int] = [_BOTTOM_ROW]
    succ: list[tuple[tuple[int, int], ...]] = []
    current = 0
    while current < len(masks):
        mask, free = masks[current], playable[current]
        moves: list[tuple[int, int]] = []
        rest = free
        while rest:
            low = rest & -rest
            rest ^= low
            pos = low.bit_length() - 1
            grown = mask | low
            number = index.get(grown)
            if number is None:
                number = len(masks)
                index[grown] = number
                masks.append(grown)
                # Removing ``pos`` may uncover the cards it covers: each needs both coverers gone.
                now_free = free ^ low
                for below in COVERS[pos]:
                    if all(grown >> above & 1 for above in COVERED_BY[below]):
                        now_free |= 1 << below
                playable.append(now_free)
            moves.append((pos, number))
        succ.append(tuple(moves))
        current += 1
    value = tuple(PEAK_BONUS * peaks_cleared(mask) - mask.bit_count() for mask in masks)
    return ConfigTables(
        masks=tuple(masks),
        index=MappingProxyType(index),
        succ=tuple(succ),
        playable=tuple(playable),
        value=value,
        full=len(masks) - 1,
    )
