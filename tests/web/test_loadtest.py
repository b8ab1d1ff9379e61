"""The load generator's human-pace mode (``tripeaks loadtest --paced``) against a real server."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from server.bench.paced import paced_ladder, run_paced
from server.bench.process import free_port
from server.cli import main
from tests.conftest import ServerFactory


async def test_paced_players_act_on_schedule_and_are_measured(
    make_server: ServerFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    server = await make_server()
    base = str(server.make_url("")).rstrip("/")
    stats, spent = await run_paced(base, players=3, seconds=1.0, pace=10, jitter=0.2)
    assert not stats.errors
    assert 0 < spent <= 10
    # About ten actions a second each: at least one game, and acks measured from the plan.
    assert stats.games >= 3
    assert 3 <= len(stats.latencies_ms) <= 3 * 12
    assert all(ms >= 0 for ms in stats.latencies_ms)
    assert sum(stats.outcomes.values()) == len(stats.latencies_ms)

    rows = await paced_ladder(base, [1, 2], 0.5, 10, 0.2, None, target_p99_ms=60_000)
    assert [r.players for r in rows] == [1, 2]
    assert all(r.acks > 0 and r.errors == 0 for r in rows)
    printed = capsys.readouterr().out
    assert "largest count with ack p99 under 60000 ms: 2 players" in printed


async def test_a_pace_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="pace must be > 0"):
        await run_paced("http://127.0.0.1:9", players=1, seconds=1, pace=0, jitter=0.5)


@pytest.mark.parametrize("paced", ["", "0", "ten", "100,,200", "-5"])
def test_the_cli_names_a_bad_player_count_list(paced: str) -> None:
    result = CliRunner().invoke(main, ["loadtest", "--paced", paced])
    assert result.exit_code == 2
    assert "--paced" in result.output


@pytest.mark.parametrize("mode", [["--players", "2", "--no-echo"], ["--paced", "2"]])
def test_a_run_whose_requests_fail_exits_with_an_error(mode: list[str]) -> None:
    """Nothing listening: every player's requests fail, and the command says so in its exit
    status, not only in its printout."""
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(main, ["loadtest", "--url", url, "--seconds", "0.5", *mode])
    assert result.exit_code == 1, result.output
    assert "requests failed" in result.output
