"""A PgBouncer of a test's own and ``tripeaks serve`` processes behind it.

:class:`Bouncer` runs PgBouncer in the pool mode the test asks for, with PgBouncer's own default
pool size unless told otherwise (20 server connections per database and user: what an operator
who sets nothing gets), on a free loopback port that it keeps across a restart.
:class:`ServerProcess` is a real ``tripeaks serve`` (a process of its own, with its own
statement names, pools and listener), as an operator starts it.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import pytest
from sqlalchemy.engine import make_url

from server.bench.process import SERVER_START_S, ServeProcess, free_port
from tests.conftest import (
    ADMIN_URL,
    _pgbouncer_answers,
    _pgbouncer_program,
    _unprivileged_user,
)

PoolMode = Literal["transaction", "session"]

#: Seconds PgBouncer gets to accept connections after it is started.
BOUNCER_START_S = 15.0


class Bouncer:
    """A PgBouncer in front of the test PostgreSQL.

    Args:
        mode: ``pool_mode``.
        pool_size: ``default_pool_size``; None leaves PgBouncer's default (20).
    """

    def __init__(self, mode: PoolMode, pool_size: int | None = None) -> None:
        self.mode = mode
        self.pool_size = pool_size
        self.folder = Path(tempfile.mkdtemp(prefix="tripeaks-bouncer-"))
        self.folder.chmod(0o755)  # readable by the user it runs as
        self.log = self.folder / "pgbouncer.log"
        self.port = free_port()
        self._program = _pgbouncer_program()
        self._process: subprocess.Popen[bytes] | None = None

    def _config(self) -> Path:
        upstream = make_url(ADMIN_URL)
        user = upstream.username or "postgres"
        users = self.folder / "users.txt"
        users.write_text(f'"{user}" "{upstream.password or ""}"\n')
        pool = "" if self.pool_size is None else f"default_pool_size = {self.pool_size}\n"
        config = self.folder / "pgbouncer.ini"
        config.write_text(
            f"""[databases]
* = host={upstream.host or "127.0.0.1"} port={upstream.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
pidfile =
logfile =
auth_type = trust
auth_file = {users}
pool_mode = {self.mode}
max_client_conn = 2000
{pool}server_login_retry = 1
admin_users = {user}
"""
        )
        for path in (users, config):
            path.chmod(0o644)
        return config

    def pooled(self, url: str) -> str:
        """``url`` (a database on the test PostgreSQL) as reached through this PgBouncer."""
        return make_url(url).set(host="127.0.0.1", port=self.port).render_as_string(False)

    def start(self) -> None:
        """Start PgBouncer on its port and wait until it answers."""
        user = _unprivileged_user()
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [self._program, *(["-u", user] if user else []), str(self._config())],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        probe = self.pooled(make_url(ADMIN_URL).set(database="postgres").render_as_string(False))
        deadline = time.monotonic() + BOUNCER_START_S
        while self._process.poll() is None and time.monotonic() < deadline:
            if asyncio.run(_pgbouncer_answers(probe)):
                return
            time.sleep(0.05)  # polling for the condition: PgBouncer answers
        self.stop()
        pytest.fail(
            f"pgbouncer did not accept connections on 127.0.0.1:{self.port}; its log:\n"
            + self.log.read_text(errors="replace")[-4000:],
            pytrace=False,
        )

    def stop(self) -> None:
        """Stop PgBouncer at once (SIGTERM: every client and server connection is cut)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        """Stop it and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


#: The daily secret of the server processes.
DAILY_SECRET = "pooler-daily-key-0123456789abcdefghij"


class ServerProcess(ServeProcess):
    """One ``tripeaks serve`` process on a free loopback port, failing the test when it does
    not become ready."""

    async def ready(self, within_s: float = SERVER_START_S) -> None:
        """Wait until it answers ``/readyz`` with 200; fail with its log if it exits or takes
        longer than ``within_s``."""
        try:
            await super().ready(within_s)
        except RuntimeError as err:
            pytest.fail(str(err), pytrace=False)
