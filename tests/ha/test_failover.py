"""The primary lost under play: a pg_auto_failover cluster of this machine's own (a monitor, a
primary and two standbys, a commit waiting for one of them; on loopback ports, Debian's
PostgreSQL 15), two real ``tripeaks serve`` processes whose ``DATABASE_URL`` lists every node with
``target_session_attrs=read-write``, and 100 players acting through them. The primary is
killed or frozen; once the monitor has promoted a standby, play must resume within
:data:`RESUME_S`, every acknowledged action must be in the new primary's log, and no ``resume``
may show a state older than one acknowledged, and no player may be told "nothing was changed"
(``unavailable``, ``server_busy``) about an action that was stored (the actions whose COMMIT was
under way when the primary was lost are settled before they are answered).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server.bench.autofailover import PG_AUTOCTL, PG_BIN, Cluster
from server.bench.failover import Fault, FaultRun, deployment, run_fault
from server.bench.process import ServeProcess

#: Promotion → every player acknowledged again (s): the issue's target.
RESUME_S = 10.0
#: Players, spread over the two server processes.
PLAYERS = 100
#: The error codes a player may meet while the primary is gone (actions and resumes): the
#: database unreachable, or every pooled connection of its process waited on for 10 s.
OUTAGE_ERRORS = {
    "unavailable",
    "server_busy",
    "outcome_unknown",
    "resume_unavailable",
    "resume_server_busy",
}

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def ha() -> Iterator[tuple[Cluster, list[ServeProcess]]]:
    """A started cluster (a primary and two synchronous standbys, a quorum of two) and two
    server processes over it; every process killed and every folder deleted afterwards."""
    for program in (Path(PG_AUTOCTL), PG_BIN / "postgres"):
        if not program.exists():
            pytest.fail(
                f"{program} is missing: apt-get install pg-auto-failover-cli"
                " postgresql-15-auto-failover (scripts/test does it)",
                pytrace=False,
            )
    with deployment(standbys=2) as started:
        yield started


def _check(run: FaultRun) -> None:
    assert run.new.name != run.old.name
    assert not run.problems, run.problems[:10]
    assert not run.lost, f"{len(run.lost)} of {run.acked} acknowledged actions lost: {run.lost}"
    assert not run.behind, f"resumed older than acknowledged: {run.behind}"
    assert set(run.errors) <= OUTAGE_ERRORS, run.errors
    assert run.stuck == 0, f"{run.stuck} players were not acknowledged again after the promotion"
    assert run.resumed_all_s <= RESUME_S, (
        f"play resumed {run.resumed_all_s:.1f} s after the promotion for the last player"
        f" (median {run.resumed_median_s:.1f} s)"
    )


@pytest.mark.parametrize(
    "fault",
    [
        Fault.KILL,
        Fault.FREEZE,
    ],
)
async def test_a_lost_primary_loses_nothing_acknowledged_and_play_resumes(
    ha: tuple[Cluster, list[ServeProcess]], fault: Fault
) -> None:
    cluster, servers = ha
    run = await run_fault(cluster, [s.base for s in servers], fault, PLAYERS)
    assert run.acked > 2 * PLAYERS
    _check(run)
    assert not run.told_unavailable_stored, (
        "told 'nothing was changed' about stored actions (game, seq sent, seq stored):"
        f" {run.told_unavailable_stored[:10]}"
    )
