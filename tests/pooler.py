"""A PgBouncer of a test's own and ``tripeaks serve`` processes behind it.

:class:`Bouncer` runs PgBouncer in the pool mode the test asks for, with PgBouncer's own default
pool size unless told otherwise (20 server connections per database and user: what an operator
who sets nothing gets), on a free loopback port that it keeps across a restart.
:class:`ServerProcess` is a real ``tripeaks serve`` (a process of its own, with its own
statement names, pools and listener), as an operator starts it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import aiohttp
import pytest
from sqlalchemy.engine import make_url

from server.bench.process import free_port
from tests.conftest import (
    ADMIN_URL,
    _pgbouncer_answers,
    _pgbouncer_program,
    _unprivileged_user,
)

PoolMode = Literal["transaction", "session"]

#: Seconds PgBouncer gets to accept connections after it is started.
BOUNCER_START_S = 15.0
#: Seconds a server process gets to answer ``/readyz`` after it is started.
SERVER_START_S = 90.0


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


@dataclass
class ServerProcess:
    """One ``tripeaks serve`` process on a free loopback port.

    Attributes:
        env: its environment (``TRIPEAKS_*`` and ``DATABASE_URL`` only from here).
        log: where its stdout and stderr go.
    """

    env: dict[str, str]
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        """Its HTTP address."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (it migrates first) without waiting for it."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPEAKS_")}
        env.pop("DATABASE_URL", None)
        env.update(self.env, TRIPEAKS_PORT=str(self.port))
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "server", "serve"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def ready(self, within_s: float = SERVER_START_S) -> None:
        """Wait until it answers ``/readyz`` with 200; fail with its log if it exits or takes
        longer than ``within_s``."""
        assert self.process is not None
        deadline = time.monotonic() + within_s
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"{self.base}/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"the server did not become ready:\n{self.text()[-6000:]}", pytrace=False
                    )
                await asyncio.sleep(0.1)

    def text(self) -> str:
        """What it has logged so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> int | None:
        """SIGTERM, then wait (SIGKILL after 20 s); its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode
