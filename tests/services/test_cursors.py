"""The boards' one cursor codec: values round-trip, and every cursor of the wrong shape, kind or
range is the one ``bad_cursor`` error."""

from __future__ import annotations

import base64
import json

import pytest

from server.errors import ErrorCode, InvalidInputError
from server.services import cursors

SLOTS = (cursors.INT32, cursors.NAT32, cursors.TEXT, cursors.NAT64)


def _cursor(values: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")


def test_values_round_trip_through_a_compact_unpadded_cursor() -> None:
    values: list[int | str] = [-(2**31), 2**31 - 1, "2026-12-06T00:00:00+00:00", 2**63 - 1]
    cursor = cursors.encode(values)
    assert "=" not in cursor and " " not in base64.urlsafe_b64decode(cursor + "==").decode()
    assert cursors.decode(cursor, SLOTS) == values
    assert cursors.decode_ints(cursors.encode([7, 0]), (cursors.NAT32, cursors.NAT64)) == [7, 0]


@pytest.mark.parametrize(
    "cursor",
    [
        "x",  # not base64
        "",  # no JSON
        _cursor([1, 2, "t"]),  # too few values
        _cursor([1, 2, "t", 3, 4]),  # too many values
        _cursor({"a": 1, "b": 2, "c": "t", "d": 3}),  # not a list
        _cursor([1, True, "t", 3]),  # a boolean is not an integer
        _cursor([1, 2, 3, 4]),  # an integer in a text slot
        _cursor([1, "2", "t", 3]),  # a string in an integer slot
        _cursor([1, 2.0, "t", 3]),  # a float
        _cursor([-(2**31) - 1, 2, "t", 3]),  # below INTEGER
        _cursor([1, -1, "t", 3]),  # negative where the column holds none
        _cursor([1, 2**31, "t", 3]),  # above INTEGER
        _cursor([1, 2, "t", 2**63]),  # above BIGINT
        "W10" * 100,  # longer than 200 characters
    ],
)
def test_a_cursor_of_the_wrong_shape_kind_or_range_is_bad_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        cursors.decode(cursor, SLOTS)
    assert refused.value.code is ErrorCode.BAD_CURSOR
    assert str(refused.value) == "the cursor is not valid"
