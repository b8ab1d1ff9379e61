"""A reconnect storm against a real server: a few hundred players with games in progress, every
socket cut at once (no close frame), each page reconnecting on the page's schedule
(:func:`server.bench.storm.page_backoff_ms`) and resuming its game while others play on. Every
one comes back to the STATE it had been acknowledged, plays on, and what each was last
acknowledged is what the database holds."""

from __future__ import annotations

import asyncpg
import pytest
from aiohttp.test_utils import TestServer

from server.bench.storm import SERVER_HISTOGRAMS, histogram_p99_ms, storm
from tests.conftest import ServerFactory

CUT = 300
STAYED = 20


@pytest.mark.parametrize("clients", [1, 2])
async def test_every_player_cut_off_in_a_storm_resumes_its_game_and_nothing_acked_is_lost(
    make_server: ServerFactory, database_url: str, clients: int
) -> None:
    """With the cut players' pages in one client process or spread over two."""
    server: TestServer = await make_server(admission_shed_lag_ms=200)
    base = str(server.make_url("")).rstrip("/")
    result = await storm(base, CUT, stayed=STAYED, after_s=2.0, clients=clients)
    assert not result.errors, result.errors
    assert len(result.back_s) == CUT  # every one back in play
    assert result.lost == 0  # each resumed the STATE it had been acknowledged
    assert result.hellos == CUT
    assert len(result.acked) == CUT + STAYED
    # The server's own times moved with the storm: the stayed players' actions, their commits.
    for histogram in SERVER_HISTOGRAMS:
        assert histogram_p99_ms(result.server_counts, histogram)[0] > 0, histogram
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT id, seq, status FROM games WHERE id = ANY($1::bigint[])", list(result.acked)
        )
    finally:
        await conn.close()
    stored = {row["id"]: (row["seq"], row["status"]) for row in rows}
    assert stored == result.acked


def test_a_histograms_p99_is_the_bound_of_the_first_bucket_holding_99_percent() -> None:
    counts = {
        'h_bucket{le="0.01"}': 900.0,
        'h_bucket{le="0.1"}': 995.0,
        'h_bucket{le="2.0"}': 1000.0,
        'h_bucket{le="+Inf"}': 1000.0,
        'other_bucket{le="+Inf"}': 5.0,
    }
    assert histogram_p99_ms(counts, "h_bucket") == (1000, 100.0)
    counts['h_bucket{le="+Inf"}'] = 1100.0  # 100 above the largest bound
    assert histogram_p99_ms(counts, "h_bucket") == (1100, None)
    assert histogram_p99_ms({}, "h_bucket") == (0, None)
