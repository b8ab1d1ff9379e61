"""A real ``tripeaks serve`` listens with a backlog a storm fits in
(:data:`server.web.serving.LISTEN_BACKLOG`): the kernel keeps the connections waiting to be
accepted rather than dropping their handshakes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from server.web.serving import LISTEN_BACKLOG
from tests.pooler import DAILY_SECRET, ServerProcess


def _backlog(port: int) -> int:
    """The listening socket's backlog on ``port``, as ``ss`` shows it (its Send-Q)."""
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout
    return int(out.split()[2])


def _somaxconn() -> int:
    """The kernel's cap on a listening socket's backlog."""
    return int(Path("/proc/sys/net/core/somaxconn").read_text())


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2) to read the backlog")
async def test_a_server_process_listens_with_a_backlog_a_storm_fits_in(
    database_url: str, tmp_path: Path
) -> None:
    server = ServerProcess(
        {
            "DATABASE_URL": database_url,
            "TRIPEAKS_DAILY_SECRET": DAILY_SECRET,
            "TRIPEAKS_DATA_DIR": str(tmp_path / "data"),
            "TRIPEAKS_SOLVER_WORKERS": "0",
            "TRIPEAKS_LOG_LEVEL": "WARNING",
        },
        tmp_path / "server.log",
    )
    server.start()
    try:
        await server.ready()
        assert _backlog(server.port) == min(LISTEN_BACKLOG, _somaxconn()) > 128
    finally:
        server.stop()
