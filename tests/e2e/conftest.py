"""A PostgreSQL server of the test's own, which the test may stop and start again.

The shared PostgreSQL of the other tests must never be disturbed; a test about the database
going away runs its own server from the binaries the ``pgserver`` package ships, in a
throw-away data directory, on a free loopback port, and stops it however the test ends.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.bench.process import free_port

#: PostgreSQL refuses to run as root; as root the server runs as this user (the one the
#: ``pgserver`` package itself uses for the embedded database).
PG_SYSTEM_USER = "pgserver"


def _bin_dir() -> Path:
    """The PostgreSQL programs shipped in the ``pgserver`` package (found without importing
    it: its import has side effects)."""
    spec = importlib.util.find_spec("pgserver")
    assert spec is not None and spec.origin is not None, "the pgserver package is missing"
    return Path(spec.origin).resolve().parent / "pginstall" / "bin"


class PrivatePostgres:
    """One PostgreSQL server in its own data directory, listening on 127.0.0.1:``port``.

    Args:
        root: an empty directory for the data, the socket and the log.
        port: the TCP port, kept across restarts.
    """

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.data = root / "data"
        self.log = root / "postgres.log"
        self._bin = _bin_dir()
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = PG_SYSTEM_USER
            try:
                pwd.getpwnam(PG_SYSTEM_USER)
            except KeyError:
                subprocess.run(["useradd", "-M", "-s", "/bin/false", PG_SYSTEM_USER], check=True)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(root, entry.pw_uid, entry.pw_gid)

    @property
    def url(self) -> str:
        """The URL of the ``tripeaks`` database on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/tripeaks"

    @property
    def admin_url(self) -> str:
        """The URL of the ``postgres`` maintenance database on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(self._bin / tool), *args],
            check=True,
            user=self._user,
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )

    def init(self) -> None:
        """Create the data directory (trust authentication, superuser ``postgres``)."""
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.root} -c fsync=off"
        )
        self._run(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            "30",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
        )

    def stop(self, mode: str = "fast") -> None:
        """Shut the server down (``fast``: roll back open transactions and disconnect every
        client; ``immediate``: abort without a clean shutdown) and wait until it is gone."""
        self._run("pg_ctl", "stop", "-w", "-t", "30", "-m", mode, "-D", str(self.data))

    def running(self) -> bool:
        """Whether the server is running."""
        status = subprocess.run(
            [str(self._bin / "pg_ctl"), "status", "-D", str(self.data)],
            user=self._user,
            cwd=self.root,
            capture_output=True,
            timeout=30,
        )
        return status.returncode == 0

    def create_database(self, name: str) -> None:
        """Create an empty database."""
        self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-q",
            "-c",
            f'CREATE DATABASE "{name}"',
        )


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A running PostgreSQL of this test's own with an empty ``tripeaks`` database; stopped
    and deleted afterwards, however the test ends.

    Its directory is a fresh one under the system's temporary directory rather than under
    ``tmp_path``, whose parents only root may enter (the server runs as another user then).
    """
    root = Path(tempfile.mkdtemp(prefix="tripeaks-pg-"))
    server = PrivatePostgres(root, free_port())
    try:
        server.init()
        server.start()
        server.create_database("tripeaks")
        yield server
    finally:
        if server.data.exists() and server.running():
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
