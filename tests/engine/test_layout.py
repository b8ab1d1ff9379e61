"""Layout: rows, the cover map of docs/rules.md §1 spelled out position by position, and the
peaks."""

from __future__ import annotations

import pytest

from server.engine import COVERED_BY, COVERS, PEAK_OF, PEAKS, POSITION_COUNT, ROWS

# docs/rules.md §1, written out by hand: position -> the two positions covering it.
RULES_COVERED_BY = {
    0: (3, 4), 1: (5, 6), 2: (7, 8),
    3: (9, 10), 4: (10, 11), 5: (12, 13), 6: (13, 14), 7: (15, 16), 8: (16, 17),
    9: (18, 19), 10: (19, 20), 11: (20, 21), 12: (21, 22), 13: (22, 23), 14: (23, 24),
    15: (24, 25), 16: (25, 26), 17: (26, 27),
    **{pos: () for pos in range(18, 28)},
}  # fmt: skip

# The inverse, also by hand: position -> the positions it covers.
RULES_COVERS = {
    **{pos: () for pos in range(0, 3)},
    3: (0,), 4: (0,), 5: (1,), 6: (1,), 7: (2,), 8: (2,),
    9: (3,), 10: (3, 4), 11: (4,), 12: (5,), 13: (5, 6), 14: (6,),
    15: (7,), 16: (7, 8), 17: (8,),
    18: (9,), 19: (9, 10), 20: (10, 11), 21: (11, 12), 22: (12, 13), 23: (13, 14),
    24: (14, 15), 25: (15, 16), 26: (16, 17), 27: (17,),
}  # fmt: skip

LEFT = {0, 3, 4, 9, 10, 11, 18, 19, 20}
MIDDLE = {1, 5, 6, 12, 13, 14, 21, 22, 23}
RIGHT = {2, 7, 8, 15, 16, 17, 24, 25, 26, 27}


def test_there_are_28_positions_in_rows_of_3_6_9_10() -> None:
    assert POSITION_COUNT == 28
    assert (range(0, 3), range(3, 9), range(9, 18), range(18, 28)) == ROWS
    assert [len(row) for row in ROWS] == [3, 6, 9, 10]


@pytest.mark.parametrize("pos", range(28))
def test_each_position_is_covered_exactly_as_rules_section_1_says(pos: int) -> None:
    assert COVERED_BY[pos] == RULES_COVERED_BY[pos]


@pytest.mark.parametrize("pos", range(28))
def test_each_position_covers_exactly_the_inverse_of_the_cover_map(pos: int) -> None:
    assert COVERS[pos] == RULES_COVERS[pos]


def test_cover_map_and_its_inverse_agree_pair_by_pair() -> None:
    pairs = {(low, high) for low in range(28) for high in COVERED_BY[low]}
    inverse = {(low, high) for high in range(28) for low in COVERS[high]}
    assert pairs == inverse
    assert len(pairs) == 2 * 18


def test_only_the_bottom_row_is_uncovered_and_every_cover_is_one_row_down() -> None:
    for row_index, row in enumerate(ROWS):
        for pos in row:
            if row_index == 3:
                assert COVERED_BY[pos] == ()
            else:
                assert len(COVERED_BY[pos]) == 2
                assert all(above in ROWS[row_index + 1] for above in COVERED_BY[pos])


def test_cover_map_matches_the_rules_formulas() -> None:
    for p in range(3):
        assert COVERED_BY[p] == (3 + 2 * p, 4 + 2 * p)
    for j in range(6):
        q, k = j // 2, j % 2
        assert COVERED_BY[3 + j] == (9 + 3 * q + k, 10 + 3 * q + k)
    for j in range(9):
        assert COVERED_BY[9 + j] == (18 + j, 19 + j)


def test_peaks_are_left_middle_right_of_9_9_10_positions() -> None:
    assert [len(peak) for peak in PEAKS] == [9, 9, 10]
    assert PEAKS[0] == LEFT
    assert PEAKS[1] == MIDDLE
    assert PEAKS[2] == RIGHT
    assert all(isinstance(peak, frozenset) for peak in PEAKS)


def test_peaks_partition_the_28_positions() -> None:
    assert set(range(28)) == LEFT | MIDDLE | RIGHT
    assert not (LEFT & MIDDLE or LEFT & RIGHT or MIDDLE & RIGHT)


@pytest.mark.parametrize("pos", range(28))
def test_peak_of_names_the_peak_holding_each_position(pos: int) -> None:
    expected = 0 if pos in LEFT else 1 if pos in MIDDLE else 2
    assert PEAK_OF[pos] == expected


def test_peak_tops_are_0_1_2_and_bottom_row_splits_3_3_4() -> None:
    assert [PEAK_OF[p] for p in ROWS[0]] == [0, 1, 2]
    assert [PEAK_OF[p] for p in ROWS[3]] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
