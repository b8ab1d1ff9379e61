"""Shared fixtures: throw-away PostgreSQL databases, a fake clock, real servers on loopback.

Every test that needs a database gets its own, copied from a template migrated once per run, on
the run's PostgreSQL (:data:`ADMIN_URL`), dropped afterwards; nothing else on that server is
touched. Which PostgreSQL, by ``TRIPEAKS_TEST_PG``:

- a URL: the server there (its maintenance database, such as
  ``postgresql://postgres@127.0.0.1:5432/postgres``);
- ``embedded``: one started for the run from the ``pgserver`` package's programs (as the server
  starts its embedded database without ``DATABASE_URL``), on a free loopback port, in a
  throw-away folder, and stopped at the end of the run;
- unset: the one at ``127.0.0.1:5432`` when something answers there, else an embedded one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from aiohttp.web import Application, AppRunner, Request
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from server.bench.process import free_port
from server.config import Settings
from server.services.analysis import Analyzer
from server.services.clock import Clock, FakeClock
from server.storage.db import create_engine, migrate
from server.web.app import create_app
from server.web.per_address import GatedAppRunner
from tests import contract
from tests.pg import PrivatePostgres

#: The PostgreSQL the tests use when ``TRIPEAKS_TEST_PG`` is unset and it answers.
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
#: ``TRIPEAKS_TEST_PG``'s value asking for an embedded PostgreSQL.
EMBEDDED = "embedded"
#: The maintenance database of the run's PostgreSQL (:func:`pytest_configure` settles it
#: once per run, before any test module is imported).
ADMIN_URL = DEFAULT_PG
START = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)


def pytest_configure(config: pytest.Config) -> None:
    """Settle the run's PostgreSQL (:data:`ADMIN_URL`), starting an embedded one if it is
    to be used; it is stopped and its folder removed at the end of the run."""
    global ADMIN_URL
    chosen = chosen_postgres(
        os.environ.get("TRIPEAKS_TEST_PG", ""), lambda: _answers("127.0.0.1", 5432)
    )
    if chosen is not None:
        ADMIN_URL = chosen
        return
    server = _start_embedded_postgres()
    config.add_cleanup(lambda: _stop_embedded_postgres(server))
    ADMIN_URL = server.admin_url
    # Whatever else reads it in this run (and its subprocesses) finds the same server.
    os.environ["TRIPEAKS_TEST_PG"] = ADMIN_URL
    config.stash[_EMBEDDED_KEY] = server


def chosen_postgres(given: str, default_answers: Callable[[], bool]) -> str | None:
    """The URL of the run's PostgreSQL by ``TRIPEAKS_TEST_PG`` (``given``), or None for an
    embedded one: a URL is used as it is; ``embedded`` asks for one; unset (or blank), the
    default's is used when ``default_answers()``."""
    given = given.strip()
    if given == EMBEDDED:
        return None
    if given:
        return given
    return DEFAULT_PG if default_answers() else None


_EMBEDDED_KEY = pytest.StashKey[PrivatePostgres]()
#: Settings of the run's embedded PostgreSQL: room for the connections of the servers, their
#: subprocesses and PgBouncer that a run holds at once.
EMBEDDED_SETTINGS = ("max_connections=300",)


def pytest_report_header(config: pytest.Config) -> str:
    server = config.stash.get(_EMBEDDED_KEY, None)
    if server is None:
        return f"PostgreSQL: {make_url(ADMIN_URL).render_as_string(hide_password=True)}"
    return (
        f"PostgreSQL: embedded for this run (pgserver's programs) at 127.0.0.1:{server.port}, "
        f"in {server.root}"
    )


def _answers(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at ``host``:``port``."""
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def _start_embedded_postgres() -> PrivatePostgres:
    """A PostgreSQL of this run's own, running. Its folder is a fresh one under the system's
    temporary directory (as root the server runs as another user, who must reach it)."""
    root = Path(tempfile.mkdtemp(prefix="tripeaks-test-pg-"))
    server = PrivatePostgres(root, free_port(), EMBEDDED_SETTINGS)
    try:
        try:
            server.init(locale="C.UTF-8")  # as Debian's PostgreSQL, where it exists
        except subprocess.CalledProcessError:
            shutil.rmtree(server.data, ignore_errors=True)
            server.init()
        server.start()
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log = server.log.read_text(errors="replace") if server.log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise pytest.UsageError(
            f"could not start an embedded PostgreSQL for the tests ({exc}; "
            f"{detail.decode(errors='replace').strip()}) {log[-2000:]}\n"
            "Set TRIPEAKS_TEST_PG to the URL of a PostgreSQL to use instead."
        ) from None
    return server


def _stop_embedded_postgres(server: PrivatePostgres) -> None:
    try:
        if server.data.exists() and server.running():
            server.stop("fast")
    finally:
        shutil.rmtree(server.root, ignore_errors=True)


def _db_url(name: str) -> str:
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _make_template(name: str) -> None:
    await _admin(f'CREATE DATABASE "{name}"')
    engine = create_engine(_db_url(name), pool_size=1)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database migrated to head, used as the template of each test's database."""
    name = f"tripeaks_test_tmpl_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_make_template(name))
    except OSError as exc:
        pytest.exit(f"PostgreSQL is not reachable at {ADMIN_URL}: {exc}", returncode=3)
    yield name
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def database_url(template_db: str) -> AsyncIterator[str]:
    """A fresh, migrated, empty database for one test."""
    name = f"tripeaks_test_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield _db_url(name)
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine over the test's database (a pool of up to 8 connections, opened as used)."""
    engine = create_engine(database_url, pool_size=8)
    yield engine
    await engine.dispose()


@pytest.fixture
async def empty_database_url() -> AsyncIterator[str]:
    """A fresh database with no schema at all (for migration tests)."""
    name = f"tripeaks_test_empty_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    yield _db_url(name)
    await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def clock() -> FakeClock:
    """A fake UTC clock starting at 2026-03-14 12:00 UTC."""
    return FakeClock(START)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Settings for a test server on the test's database."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path / "data",
        daily_secret="test-daily-key-0123456789abcdefghij",
        # Dates get their deal from their first player, unless a test turns preparing on.
        daily_prepare_every_s=0,
        ws_rate_per_second=1000,
        register_per_minute=100_000,
        # Every test client is 127.0.0.1: the tests of the limit per address set their own.
        max_connections_per_address=100_000,
        # A loaded test machine holds up a server's event loop now and then: newcomers are not
        # turned away for it, except in the tests of that.
        admission_shed_lag_ms=0,
        sign_in_per_minute=100_000,
    )


ServerFactory = Callable[..., Awaitable[TestServer]]


class ServedTestServer(TestServer):
    """A test server run by the runner ``tripeaks serve`` runs the app with (connections over
    their address's limit closed at accept)."""

    async def _make_runner(self, **kwargs: Any) -> AppRunner:
        return GatedAppRunner(self.app, **kwargs)


@pytest.fixture(scope="session")
def analyzer() -> Iterator[Analyzer]:
    """One solver pool for the whole run (its cache spares re-solving the same deals)."""
    pool = Analyzer(workers=1)
    yield pool
    pool.close()


@pytest.fixture
async def make_server(
    settings: Settings, clock: FakeClock, analyzer: Analyzer
) -> AsyncIterator[ServerFactory]:
    """Start real servers (on 127.0.0.1, a free port) over the test's database.

    Call it again for a second process-like server on the same database (a restart).
    ``own_clock`` gives that server a clock of its own instead of the test's fake clock (a
    process whose clock differs); other keywords override settings.

    Every answer these servers send under ``/api/v1`` and of ``/healthz`` and ``/readyz`` is
    checked against the OpenAPI document (:mod:`tests.contract`); the test fails at its end
    if one did not conform.
    """
    servers: list[TestServer] = []
    watches: list[contract.Watch] = []

    async def start(own_clock: Clock | None = None, **overrides: object) -> TestServer:
        app_settings = settings.model_copy(update=overrides) if overrides else settings
        app = create_app(app_settings, clock=own_clock or clock, analyzer=analyzer)
        watches.append(contract.watch(app))
        server = ServedTestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()
    problems = [problem for seen in watches for problem in seen.problems]
    assert not problems, "answers that break the OpenAPI document:\n" + "\n".join(problems)


@pytest.fixture
async def server(make_server: ServerFactory) -> TestServer:
    """One running server."""
    return await make_server()


#: Starts an HTTP/websocket client of a server (see :func:`make_client`).
ClientFactory = Callable[[TestServer], Awaitable[TestClient[Request, Application]]]


@pytest.fixture
async def make_client(make_server: ServerFactory) -> AsyncIterator[ClientFactory]:
    """Start HTTP/websocket clients of servers from ``make_server``; each is closed when the
    test ends, passed or failed (closing one also stops its server)."""
    clients: list[TestClient[Request, Application]] = []

    async def start(server: TestServer) -> TestClient[Request, Application]:
        test_client: TestClient[Request, Application] = TestClient(server)
        await test_client.start_server()
        clients.append(test_client)
        return test_client

    yield start
    for test_client in clients:
        await test_client.close()


@pytest.fixture
async def client(
    server: TestServer, make_client: ClientFactory
) -> TestClient[Request, Application]:
    """An HTTP/websocket client of ``server`` (closed when the test ends, see
    :func:`make_client`)."""
    return await make_client(server)


# ------------------------------------------------------------------------------ PgBouncer

#: Where Debian's ``pgbouncer`` package puts the program (``/usr/sbin`` is not on every PATH).
PGBOUNCER_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
#: Seconds PgBouncer gets to accept connections after it is started.
PGBOUNCER_START_S = 15.0


@dataclass(frozen=True)
class PgBouncer:
    """A PgBouncer in ``pool_mode = transaction`` in front of the test PostgreSQL."""

    host: str
    port: int
    log: Path

    def pooled(self, url: str) -> str:
        """``url`` (a database on the test PostgreSQL) as reached through this PgBouncer."""
        return make_url(url).set(host=self.host, port=self.port).render_as_string(False)


def _pgbouncer_program() -> str:
    given = os.environ.get("TRIPEAKS_TEST_PGBOUNCER")
    if given:
        if not os.access(given, os.X_OK):
            pytest.fail(f"TRIPEAKS_TEST_PGBOUNCER={given} is not a program", pytrace=False)
        return given
    found = shutil.which("pgbouncer")
    found = found or next((p for p in PGBOUNCER_PATHS if os.access(p, os.X_OK)), None)
    if found is None:
        pytest.fail(
            "pgbouncer is not installed: the connection-pooler tests run the server through a "
            "real PgBouncer in transaction mode. Install Debian's package "
            "(apt-get install -y pgbouncer; .ci/run does) or set TRIPEAKS_TEST_PGBOUNCER to "
            "the program.",
            pytrace=False,
        )
    return found


def _pgbouncer_config(folder: Path, port: int) -> Path:
    """A transaction-pooling configuration: every database of the test PostgreSQL, trust
    authentication for its user, generous limits."""
    upstream = make_url(ADMIN_URL)
    user = upstream.username or "postgres"
    (folder / "users.txt").write_text(f'"{user}" "{upstream.password or ""}"\n')
    config = folder / "pgbouncer.ini"
    config.write_text(
        f"""[databases]
* = host={upstream.host or "127.0.0.1"} port={upstream.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
pidfile =
logfile =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
max_client_conn = 4000
default_pool_size = 40
reserve_pool_size = 10
server_round_robin = 0
server_login_retry = 1
admin_users = {user}
"""
    )
    for path in (folder, folder / "users.txt", config):
        path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the user it runs as
    return config


async def _pgbouncer_answers(url: str) -> bool:
    try:
        conn = await asyncpg.connect(url, statement_cache_size=0, timeout=2)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    try:
        return bool(await conn.fetchval("SELECT 1") == 1)
    finally:
        await conn.close()


def _unprivileged_user() -> str | None:
    """The user PgBouncer switches to when started as root (it refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    pytest.fail("pgbouncer refuses to run as root, and there is no postgres or nobody user")


def _start_pgbouncer(
    program: str, folder: Path
) -> tuple[subprocess.Popen[bytes], PgBouncer] | None:
    """Start PgBouncer on a free port and wait until it answers; None when the port was taken
    meanwhile (try another)."""
    port = free_port()
    config = _pgbouncer_config(folder, port)
    user = _unprivileged_user()
    log = folder / "pgbouncer.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [program, *(["-u", user] if user else []), str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    bouncer = PgBouncer("127.0.0.1", port, log)
    probe = bouncer.pooled(_db_url("postgres"))
    deadline = time.monotonic() + PGBOUNCER_START_S
    while process.poll() is None and time.monotonic() < deadline:
        if asyncio.run(_pgbouncer_answers(probe)):
            return process, bouncer
        time.sleep(0.05)  # polling for the condition: PgBouncer answers
    exited = process.poll() is not None
    _stop(process)
    text = log.read_text(errors="replace")
    if exited and "Address already in use" in text:
        return None
    pytest.fail(
        f"pgbouncer ({program}) did not accept connections on 127.0.0.1:{port} within "
        f"{PGBOUNCER_START_S:.0f} s; its log:\n{text[-4000:]}",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def pgbouncer(template_db: str) -> Iterator[PgBouncer]:
    """A PgBouncer of this test session (``pool_mode = transaction``, 127.0.0.1, a free port),
    in front of the test PostgreSQL; stopped at the end.

    Fails (never skips) when pgbouncer is not installed: ``.ci/run`` installs it.
    """
    program = _pgbouncer_program()
    folder = Path(tempfile.mkdtemp(prefix="tripeaks-pgbouncer-"))
    try:
        for _attempt in range(3):
            started = _start_pgbouncer(program, folder)
            if started is not None:
                break
        else:
            pytest.fail("pgbouncer: every free port chosen was taken before it could bind")
        process, bouncer = started
        try:
            yield bouncer
        finally:
            _stop(process)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()  # SIGTERM: PgBouncer closes its connections and exits
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
