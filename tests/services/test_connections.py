"""The per-player connection limit of one server process."""

from __future__ import annotations

import pytest

from server.errors import ConflictError, ErrorCode
from server.services.connections import ConnectionLimit


def test_a_hello_past_the_limit_is_refused_and_counts_nothing() -> None:
    limit = ConnectionLimit(2)
    limit.authenticate(7, None)
    limit.authenticate(7, None)
    with pytest.raises(ConflictError) as refused:
        limit.authenticate(7, None)
    assert refused.value.code is ErrorCode.TOO_MANY_CONNECTIONS
    assert "2 connections" in refused.value.message
    assert limit.open(7) == 2
    limit.release(7)
    limit.authenticate(7, None)
    assert limit.open(7) == 2


def test_a_second_hello_on_one_connection_moves_it_between_players() -> None:
    limit = ConnectionLimit(1)
    limit.authenticate(1, None)
    limit.authenticate(1, 1)  # the same player again: still one connection
    assert limit.open(1) == 1
    limit.authenticate(2, 1)
    assert (limit.open(1), limit.open(2)) == (0, 1)
    with pytest.raises(ConflictError):
        limit.authenticate(2, None)
    assert limit.open(2) == 1
