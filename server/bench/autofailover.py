"""A pg_auto_failover cluster on this machine's loopback: a monitor, a primary and synchronous
standbys, each a ``pg_autoctl`` service in a throw-away folder on a free port (the fault tests
and ``benchmarks/failover.py``). Debian's programs: ``pg_autoctl`` (package
pg-auto-failover-cli) and PostgreSQL 15 with the ``pgautofailover`` extension
(postgresql-15-auto-failover), whose programs live in :data:`PG_BIN`.

PostgreSQL refuses to run as root: as root every service runs as the ``postgres`` user that
Debian's packages create.

The monitor runs with the failure detection of ``deploy/ha/monitor.conf``, the file the compose
deployment uses (:data:`MONITOR_CONF`): checks every second, a node failed after 4 s without an
answer or a report, a promoted standby waiting 4 s for an unreachable primary to have demoted
itself (pg_auto_failover's defaults: every 5 s, 20 s, 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from server.bench.process import family, free_port

#: Debian's PostgreSQL 15 programs (the ``pgautofailover`` extension is built for them).
PG_BIN = Path("/usr/lib/postgresql/15/bin")
#: The ``pg_autoctl`` program.
PG_AUTOCTL = shutil.which("pg_autoctl") or "/usr/bin/pg_autoctl"
#: The database the nodes serve.
DATABASE = "tripeaks"
#: The user the servers connect as (a superuser of every node; trust on loopback).
DB_USER = "postgres"
#: The monitor's failure detection, shared with the compose deployment (a checkout's file).
MONITOR_CONF = Path(__file__).resolve().parents[2] / "deploy" / "ha" / "monitor.conf"
#: Every instance's settings (four instances share a small machine).
INSTANCE_SETTINGS = ("shared_buffers = '64MB'", "max_connections = 300")
#: Seconds one service gets to start, a standby's copy of the primary included.
START_S = 120.0

#: States in which a node takes writes.
WRITABLE = frozenset({"single", "wait_primary", "primary"})


class ClusterError(RuntimeError):
    """The cluster did not come up; the message names the step and quotes the log."""


@dataclass(frozen=True, slots=True)
class NodeState:
    """A data node as the monitor sees it.

    Attributes:
        node_id: the monitor's id.
        name: ``node1``, ``node2``, …
        port: its TCP port on 127.0.0.1.
        reported: the state its keeper last reported (``primary``, ``secondary``, …).
        goal: the state the monitor assigned to it.
    """

    node_id: int
    name: str
    port: int
    reported: str
    goal: str


def _service_user() -> str | None:
    """The user the services run as: ``postgres`` when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/bin/false", "postgres"], check=True)
    return "postgres"


class Service:
    """One ``pg_autoctl`` service (the monitor or a data node) in its own folder.

    Args:
        root: the cluster's folder; this service's data lives in ``root / name``.
        name: ``monitor`` or the node's name.
        user: the user it runs as (None: ourselves).
    """

    def __init__(self, root: Path, name: str, user: str | None) -> None:
        self.name = name
        self.port = free_port()
        self.pgdata = root / name
        self.log = root / f"{name}.log"
        self._root = root
        self._user = user
        self.process: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """Its environment: Debian's PostgreSQL 15 first on the path, its configuration and
        sockets under the cluster's folder."""
        return {
            "PATH": f"{PG_BIN}:/usr/bin:/bin",
            "HOME": str(self._root),
            "XDG_CONFIG_HOME": str(self._root / "config"),
            "XDG_DATA_HOME": str(self._root / "share"),
            "XDG_RUNTIME_DIR": str(self._root / "run"),
            "PGHOST": str(self._root),
            "PG_REGRESS_SOCK_DIR": str(self._root),
            "PGUSER": DB_USER,
            "LANG": "C.UTF-8",
        }

    def run(self, *args: str, timeout_s: float = START_S) -> str:
        """Run ``pg_autoctl ARGS`` to its end (its output to the log); its stdout.

        Raises:
            ClusterError: it failed or took longer than ``timeout_s``.
        """
        with self.log.open("ab") as out:
            try:
                done = subprocess.run(
                    [PG_AUTOCTL, *args],
                    env=self.env(),
                    user=self._user,
                    cwd=self._root,
                    stdout=subprocess.PIPE,
                    stderr=out,
                    timeout=timeout_s,
                    check=False,
                )
            except subprocess.TimeoutExpired as err:
                raise ClusterError(f"pg_autoctl {args[0]} took over {timeout_s} s") from err
        if done.returncode != 0:
            raise ClusterError(
                f"pg_autoctl {' '.join(args)} failed ({done.returncode}):\n{self.tail()}"
            )
        return done.stdout.decode(errors="replace")

    def start(self, *args: str) -> None:
        """Start ``pg_autoctl ARGS`` as a service (not waiting for it)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [PG_AUTOCTL, *args],
                env=self.env(),
                user=self._user,
                cwd=self._root,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def tail(self, chars: int = 4000) -> str:
        """The end of its log."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def add_settings(self, settings: Sequence[str]) -> None:
        """Append PostgreSQL settings to its data folder's ``postgresql.auto.conf`` (read at
        its next start; copied to the standbys a primary makes)."""
        auto = self.pgdata / "postgresql.auto.conf"
        with auto.open("a") as conf:
            conf.write("".join(f"{line}\n" for line in settings))

    def pids(self) -> set[int]:
        """The service's processes: ``pg_autoctl`` and every PostgreSQL process under it."""
        if self.process is None or self.process.poll() is not None:
            return set()
        return family(self.process.pid)

    def signal(self, signum: signal.Signals) -> set[int]:
        """Send ``signum`` to each of its processes, the PostgreSQL server's first (the
        ``pg_autoctl`` supervisor last, so it cannot restart what it sees die); the pids."""
        pids = self.pids()
        supervisor = self.process.pid if self.process is not None else -1
        for pid in sorted(pids, key=lambda p: p == supervisor):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        return pids

    def stop(self) -> None:
        """Kill it and every process under it (stopped ones too), and reap it."""
        if self.process is None:
            return
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()
        # The others, now init's children, are gone once it has reaped them: until then one
        # may still write in the folder about to be deleted.
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)


class Cluster:
    """A monitor, a primary and ``standbys`` synchronous standbys on 127.0.0.1.

    With two standbys the formation's ``number_sync_standbys`` is 1: a commit waits for one
    of the two, so one standby may fail without stopping writes. With one, pg_auto_failover
    keeps ``number_sync_standbys`` at 0 and its standby synchronous while it is up.

    Args:
        standbys: how many standbys (1 or 2).
        root: the folder (a fresh temporary one by default; deleted by :meth:`close`).
    """

    def __init__(self, standbys: int = 1, root: Path | None = None) -> None:
        if standbys not in (1, 2):
            raise ValueError(f"standbys must be 1 or 2, not {standbys}")
        self.root = root or Path(tempfile.mkdtemp(prefix="tripeaks-ha-"))
        self._user = _service_user()
        self.root.chmod(0o755)
        for folder in ("config", "share", "run"):
            (self.root / folder).mkdir(mode=0o700)
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            for path in (self.root, *self.root.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.monitor = Service(self.root, "monitor", self._user)
        self.nodes = [Service(self.root, f"node{i}", self._user) for i in range(1, standbys + 2)]

    @property
    def monitor_url(self) -> str:
        """The monitor's database (its own superuser)."""
        return f"postgresql://{DB_USER}@127.0.0.1:{self.monitor.port}/pg_auto_failover"

    def database_url(self) -> str:
        """The URL the servers use: every node, the writable one chosen at each connect."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(node.port) for node in self.nodes)
        return (
            f"postgresql://{DB_USER}@/{DATABASE}"
            f"?host={hosts}&port={ports}&target_session_attrs=read-write"
        )

    def node(self, name: str) -> Service:
        """The data node called ``name``."""
        return next(node for node in self.nodes if node.name == name)

    def start(self) -> None:
        """Create and start the monitor and the nodes, one after the other, and wait until
        the first is primary and every other a secondary.

        Raises:
            ClusterError: a step failed or took longer than :data:`START_S`.
        """
        monitor = self.monitor
        monitor.run(
            "create", "monitor", "--pgdata", str(monitor.pgdata), "--pgport", str(monitor.port),
            "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl",
        )  # fmt: skip
        monitor.run(
            "config", "set", "--pgdata", str(monitor.pgdata),
            "postgresql.listen_addresses", "127.0.0.1",
        )  # fmt: skip
        monitor.add_settings((*INSTANCE_SETTINGS, MONITOR_CONF.read_text()))
        monitor.start("run", "--pgdata", str(monitor.pgdata))
        node_monitor = (
            f"postgresql://autoctl_node@127.0.0.1:{monitor.port}/pg_auto_failover?sslmode=disable"
        )
        for index, node in enumerate(self.nodes):
            node.run(
                "create", "postgres", "--pgdata", str(node.pgdata), "--pgport", str(node.port),
                "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", node.name,
                "--monitor", node_monitor, "--auth", "trust", "--no-ssl",
                "--dbname", DATABASE, "--username", DB_USER,
            )  # fmt: skip
            if index == 0:
                node.add_settings((*INSTANCE_SETTINGS, "fsync = off"))
            node.start("run", "--pgdata", str(node.pgdata))
            asyncio.run(self._until_states(index + 1))
        if len(self.nodes) > 2:
            monitor.run(
                "set", "formation", "number-sync-standbys", "--pgdata", str(self.nodes[0].pgdata),
                str(len(self.nodes) - 2),
            )  # fmt: skip
            asyncio.run(self._until_states(len(self.nodes)))

    async def _until_states(self, count: int) -> None:
        want = {"primary"} if count > 1 else {"single"}
        deadline = time.monotonic() + START_S
        while True:
            try:
                states = await self.states()
            except (OSError, asyncpg.PostgresError):
                states = []
            reported = [s.reported for s in states if s.reported == s.goal]
            if (
                len(reported) == count
                and reported[0] in want
                and set(reported[1:]) <= {"secondary"}
            ):
                return
            dead = [s for s in (self.monitor, *self.nodes) if s.process and s.process.poll()]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {s.name}\n{s.tail()}" for s in (self.monitor, *self.nodes))
                raise ClusterError(f"the cluster did not reach {count} nodes up: {states}\n{logs}")
            await asyncio.sleep(0.2)

    async def states(self) -> list[NodeState]:
        """Every data node as the monitor sees it, in the order they joined."""
        conn = await asyncpg.connect(self.monitor_url, timeout=5)
        try:
            rows = await conn.fetch(
                "SELECT nodeid, nodename, nodeport, reportedstate::text AS reported,"
                " goalstate::text AS goal FROM pgautofailover.node ORDER BY nodeid"
            )
        finally:
            await conn.close()
        return [NodeState(r["nodeid"], r["nodename"], r["nodeport"], r["reported"], r["goal"])
                for r in rows]  # fmt: skip

    async def primary(self) -> NodeState | None:
        """The node that takes writes now (reported and assigned so), if any."""
        for state in await self.states():
            if state.reported in WRITABLE and state.goal in WRITABLE:
                return state
        return None

    async def writable_since(self, node_id: int, after: float) -> float | None:
        """When (UTC epoch s) the monitor recorded ``node_id`` reporting a writable state
        at or after ``after`` (epoch s), from its event log; None if it has not yet."""
        conn = await asyncpg.connect(self.monitor_url, timeout=5)
        try:
            moment = await conn.fetchval(
                "SELECT extract(epoch FROM min(eventtime)) FROM pgautofailover.event"
                " WHERE nodeid = $1 AND reportedstate::text = ANY($2::text[])"
                " AND eventtime >= to_timestamp($3)",
                node_id,
                sorted(WRITABLE),
                after,
            )
        finally:
            await conn.close()
        return None if moment is None else float(moment)

    def close(self) -> None:
        """Kill every service (frozen ones too) and delete the folder."""
        for service in (*self.nodes, self.monitor):
            service.stop()
        shutil.rmtree(self.root, ignore_errors=True)
