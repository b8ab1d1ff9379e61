"""PostgreSQL servers of the tests' own, run from the binaries the ``pgserver`` package ships
(the embedded database the server starts without ``DATABASE_URL``), in throw-away data
directories on free loopback ports: the run's own PostgreSQL when there is none to use
(``tests/conftest.py``), and a test's own that it may stop and start again (``tests/e2e``).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

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
        settings: server settings beyond the defaults (``name=value``, each passed as ``-c``).
    """

    def __init__(self, root: Path, port: int, settings: Sequence[str] = ()) -> None:
        self.root = root
        self.port = port
        self.data = root / "data"
        self.log = root / "postgres.log"
        self._bin = _bin_dir()
        self._settings = tuple(settings)
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = PG_SYSTEM_USER
            try:
                pwd.getpwnam(PG_SYSTEM_USER)
            except KeyError:
                subprocess.run(["useradd", "-M", "-s", "/bin/false", PG_SYSTEM_USER], check=True)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            os.chown(root, entry.pw_uid, entry.pw_gid)
            self._let_the_user_run_the_programs()

    def _let_the_user_run_the_programs(self) -> None:
        """As root, the server runs as :data:`PG_SYSTEM_USER`, who must reach the programs:
        when it cannot (a checkout under root's own home, say), make their folders readable
        and passable by everyone, as the ``pgserver`` package does for the server's embedded
        database."""
        try:
            subprocess.run(
                [str(self._bin / "postgres"), "--version"],
                user=self._user,
                cwd=self.root,
                capture_output=True,
                check=True,
            )
            return
        except (OSError, subprocess.CalledProcessError):
            pass
        readable = stat.S_IRGRP | stat.S_IROTH
        passable = readable | stat.S_IXGRP | stat.S_IXOTH
        install = self._bin.parent
        for folder in [*reversed(install.parents), install]:
            folder.chmod(folder.stat().st_mode | passable)
        for path in install.rglob("*"):
            runnable = path.is_dir() or path.parent == self._bin
            path.chmod(path.stat().st_mode | (passable if runnable else readable))

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

    def init(self, locale: str | None = None) -> None:
        """Create the data directory (trust authentication, superuser ``postgres``; in
        ``locale`` when given, else the environment's)."""
        chosen = () if locale is None else (f"--locale={locale}",)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", *chosen
        )

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = " ".join(
            f"-c {setting}"
            for setting in (
                "listen_addresses=127.0.0.1",
                f"port={self.port}",
                f"unix_socket_directories={self.root}",
                "fsync=off",
                *self._settings,
            )
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

    def follow(self, primary: PrivatePostgres) -> None:
        """Make this server's data directory a streaming standby of ``primary`` (running):
        ``pg_basebackup -R`` over its replication connection, ready to :meth:`start` (hot
        standby, read-only queries allowed)."""
        self._run(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(self.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
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


@contextmanager
def primary_and_standby() -> Iterator[tuple[PrivatePostgres, PrivatePostgres]]:
    """A primary with an empty ``tripeaks`` database and a hot standby streaming from it
    (:meth:`PrivatePostgres.follow`), each in a fresh directory under the system's temporary
    directory on a free loopback port; both stopped (``immediate``) and deleted afterwards."""
    roots = [Path(tempfile.mkdtemp(prefix="tripeaks-pg-")) for _ in range(2)]
    primary = PrivatePostgres(roots[0], free_port())
    standby = PrivatePostgres(roots[1], free_port())
    try:
        primary.init()
        primary.start()
        primary.create_database("tripeaks")
        standby.follow(primary)
        standby.start()
        yield primary, standby
    finally:
        for server in (standby, primary):
            if server.data.exists() and server.running():
                server.stop("immediate")
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
