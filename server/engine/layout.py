"""The 28-position TriPeaks layout: rows, the cover map and the three peaks (docs/rules.md §1).

Positions are numbered top row first, left to right::

            0                 1                 2
         3     4           5     6           7     8
       9   10   11      12   13   14      15   16   17
    18  19   20   21   22   23   24   25   26   27

>>> COVERED_BY[0], COVERED_BY[4], COVERED_BY[17], COVERED_BY[27]
((3, 4), (10, 11), (26, 27), ())
>>> COVERS[20]
(10, 11)
"""

from __future__ import annotations

from typing import Final

__all__ = ["COVERED_BY", "COVERS", "PEAKS", "PEAK_OF", "POSITION_COUNT", "ROWS"]

POSITION_COUNT: Final = 28
"""Number of layout positions (0..27)."""

ROWS: Final[tuple[range, ...]] = (range(0, 3), range(3, 9), range(9, 18), range(18, 28))
"""The four rows, top (the peak tops) to bottom."""


def _covered_by(pos: int) -> tuple[int, ...]:
    """The positions covering ``pos`` by the formulas of docs/rules.md §1 (none for the bottom
    row)."""
    if pos in ROWS[0]:
        return (3 + 2 * pos, 4 + 2 * pos)
    if pos in ROWS[1]:
        q, k = divmod(pos - 3, 2)
        return (9 + 3 * q + k, 10 + 3 * q + k)
    if pos in ROWS[2]:
        j = pos - 9
        return (18 + j, 19 + j)
    return ()


COVERED_BY: Final[tuple[tuple[int, ...], ...]] = tuple(
    _covered_by(pos) for pos in range(POSITION_COUNT)
)
"""For each position, the positions covering it, ascending (docs/rules.md §1 cover map)."""

COVERS: Final[tuple[tuple[int, ...], ...]] = tuple(
    tuple(above for above in range(POSITION_COUNT) if pos in COVERED_BY[above])
    for pos in range(POSITION_COUNT)
)
"""For each position, the positions it covers, ascending (the inverse of :data:`COVERED_BY`)."""

PEAKS: Final[tuple[frozenset[int], frozenset[int], frozenset[int]]] = (
    frozenset({0, 3, 4, 9, 10, 11, 18, 19, 20}),
    frozenset({1, 5, 6, 12, 13, 14, 21, 22, 23}),
    frozenset({2, 7, 8, 15, 16, 17, 24, 25, 26, 27}),
)
"""Left, middle and right peak (9, 9 and 10 positions) for the clearing bonus (docs/rules.md §1)."""

PEAK_OF: Final[tuple[int, ...]] = tuple(
    next(i for i, peak in enumerate(PEAKS) if pos in peak) for pos in range(POSITION_COUNT)
)
"""For each position, the index (0 left, 1 middle, 2 right) of the peak it belongs to."""
