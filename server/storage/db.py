"""Database connections, the embedded PostgreSQL, and migrations under an advisory lock."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import os
import re
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import asyncpg
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.util.concurrency import await_, greenlet_spawn

from server.errors import StorageOutcomeUnknown
from server.storage import replication

log = logging.getLogger(__name__)

#: Key of the PostgreSQL advisory lock held while migrating, so that several server processes
#: starting at once run the migrations one after the other (the later ones find nothing to do).
MIGRATION_LOCK_KEY = 0x7472_6970_6B73  # "tripks"

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "migrations"


class DatabaseConfigError(ValueError):
    """The database URL is not a PostgreSQL URL this server can use."""


#: PostgreSQL's default port, for a host given without one.
DEFAULT_PORT = 5432

#: ``target_session_attrs`` values understood (libpq's; asyncpg checks each after connecting).
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")


@dataclass(frozen=True, slots=True)
class DatabaseHost:
    """One server of a database URL's host list.

    Attributes:
        host: a host name or IP address, or a unix socket's directory (starting with ``/``).
        port: its port (also the socket's number for a directory).
    """

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    """A PostgreSQL URL taken apart: its servers, tried in order, and the rest.

    Attributes:
        hosts: the servers, in the URL's order (at least one).
        user / password / database: the credentials and database name (None: the driver's
            defaults, as libpq's).
        target_session_attrs: which server to keep (:data:`SESSION_ATTRS`), e.g. ``read-write``
            skips a standby or a server whose ``default_transaction_read_only`` is on.
        options: the URL's other query options, passed on to the driver (``sslmode``, …).
    """

    hosts: tuple[DatabaseHost, ...]
    user: str | None
    password: str | None
    database: str | None
    target_session_attrs: str
    options: tuple[tuple[str, str], ...]

    def host_dsn(self, host: DatabaseHost) -> str:
        """A ``postgresql://`` DSN for ``host`` alone, with this target's credentials and
        options (not ``target_session_attrs``, which the caller checks)."""
        query = list(self.options)
        if host.host.startswith("/"):
            netloc_host = ""
            query += [("host", host.host), ("port", str(host.port))]
        else:
            netloc_host = f"[{host.host}]" if ":" in host.host else host.host
            netloc_host += f":{host.port}"
        return self._render(netloc_host, query)

    def dsn(self) -> str:
        """A libpq-style ``postgresql://`` DSN with every host (``h1:p1,h2:p2``) and
        ``target_session_attrs``: what ``asyncpg.connect`` takes for the same servers."""
        query = list(self.options)
        if any(h.host.startswith("/") for h in self.hosts):
            netloc_host = ""
            query += [
                ("host", ",".join(h.host for h in self.hosts)),
                ("port", ",".join(str(h.port) for h in self.hosts)),
            ]
        else:
            netloc_host = ",".join(str(h) for h in self.hosts)
        if self.target_session_attrs != "any":
            query.append(("target_session_attrs", self.target_session_attrs))
        return self._render(netloc_host, query)

    def _render(self, netloc_host: str, query: list[tuple[str, str]]) -> str:
        auth = ""
        if self.user is not None:
            auth = quote(self.user, safe="")
            if self.password is not None:
                auth += ":" + quote(self.password, safe="")
            auth += "@"
        path = "/" + quote(self.database, safe="") if self.database is not None else ""
        rendered = f"postgresql://{auth}{netloc_host}{path}"
        return f"{rendered}?{urlencode(query)}" if query else rendered


#: Parameters of libpq's connection strings that asyncpg does not take (it would send them to
#: the server as settings, which refuses them), and what to do instead.
LIBPQ_ONLY = {
    "connect_timeout": "this server does not take: set TRIPEAKS_DB_CONNECT_TIMEOUT_S instead",
    "keepalives": "this server does not take: the operating system's TCP keepalives apply",
    "keepalives_idle": "this server does not take: the operating system's TCP keepalives apply",
    "keepalives_interval": (
        "this server does not take: the operating system's TCP keepalives apply"
    ),
    "keepalives_count": "this server does not take: the operating system's TCP keepalives apply",
    "load_balance_hosts": "this server does not take: hosts are tried in their order",
    "gssencmode": "this server does not take: use sslmode",
}


def parse_database_url(url: str, setting: str = "DATABASE_URL") -> DatabaseTarget:
    """Take a PostgreSQL URL apart, in each of the forms users write for several servers:
    libpq's ``postgresql://u@h1:p1,h2:p2/db``, SQLAlchemy's repeated
    ``?host=h1:p1&host=h2:p2``, and ``?host=h1,h2&port=p1,p2``; any of them with
    ``target_session_attrs`` (``read-write``: the first server that takes writes).

    Args:
        url: ``postgresql://``, ``postgres://`` or ``postgresql+<driver>://``.
        setting: the setting's name, for the error.

    Raises:
        DatabaseConfigError: naming what is wrong: another scheme, a bad port, hosts both in
            the URL and in ``host=``, as many ports as hosts missing, an unknown
            ``target_session_attrs``, a libpq parameter asyncpg does not take
            (:data:`LIBPQ_ONLY`).
    """
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:  # an unbalanced [ or ]
        raise DatabaseConfigError(f"{setting} has a malformed IPv6 host: {exc}") from None
    backend = parts.scheme.lower().split("+", 1)[0]
    if backend not in ("postgresql", "postgres"):
        backend = backend or "none"
        raise DatabaseConfigError(f"{setting} must be a PostgreSQL URL, got backend {backend!r}")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    user = password = None
    if userinfo or "@" in parts.netloc:
        name, colon, secret = userinfo.partition(":")
        user = unquote(name)
        password = unquote(secret) if colon else None
    query = parse_qsl(parts.query, keep_blank_values=True)
    hosts_q = [value for key, value in query if key == "host"]
    ports_q = [value for key, value in query if key == "port"]
    attrs = [value for key, value in query if key == "target_session_attrs"]
    options = tuple(
        (key, value) for key, value in query if key not in ("host", "port", "target_session_attrs")
    )
    for key, _ in options:
        if key in LIBPQ_ONLY:
            raise DatabaseConfigError(f"{setting} has {key}=, which {LIBPQ_ONLY[key]}")
    if hostlist and hosts_q:
        raise DatabaseConfigError(
            f"{setting} names its hosts twice, in the URL ({hostlist}) and in host=: keep one"
        )
    named = [_split_host(h, setting) for h in hostlist.split(",")] if hostlist else []
    if hosts_q:
        named = [_split_host(h, setting) for value in hosts_q for h in value.split(",")]
    ports = [p for value in ports_q for p in value.split(",")]
    if not named:
        named = [("localhost", None)]
    if ports and len(ports) not in (1, len(named)):
        raise DatabaseConfigError(
            f"{setting} has {len(named)} hosts but {len(ports)} ports in port=: give one port "
            "for all or one per host"
        )
    hosts = []
    for i, (host, port) in enumerate(named):
        if port is None and ports:
            port = _port(ports[i if len(ports) > 1 else 0], setting)
        hosts.append(DatabaseHost(host, DEFAULT_PORT if port is None else port))
    target = attrs[-1] if attrs else "any"
    if target not in SESSION_ATTRS:
        raise DatabaseConfigError(
            f"{setting} has target_session_attrs={target!r}: one of {', '.join(SESSION_ATTRS)}"
        )
    path = unquote(parts.path.lstrip("/"))
    return DatabaseTarget(tuple(hosts), user, password, path or None, target, options)


def _split_host(text: str, setting: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a socket directory."""
    text = unquote(text.strip())
    if not text:
        raise DatabaseConfigError(f"{setting} has an empty host in its host list")
    if text.startswith("/"):
        return text, None
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise DatabaseConfigError(f"{setting} has a malformed IPv6 host {text!r}")
        return host, _port(rest[1:], setting) if rest else None
    host, colon, port = text.rpartition(":")
    if not colon:
        return text, None
    return host, _port(port, setting)


def _port(text: str, setting: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise DatabaseConfigError(f"{setting} has the port {text!r}: a number 1-65535")
    return int(text)


def async_url(url: str) -> URL:
    """Normalise a PostgreSQL URL to the asyncpg driver, as SQLAlchemy takes it (one host in
    its netloc, several as repeated ``host=``).

    Args:
        url: any form :func:`parse_database_url` accepts.

    Returns:
        The same URL with the ``postgresql+asyncpg`` driver.

    Raises:
        DatabaseConfigError: the URL cannot be parsed or names another database system.
    """
    target = parse_database_url(url)
    query: dict[str, Any] = {}
    for key, value in target.options:
        query[key] = (*query[key], value) if key in query else (value,)
    query = {key: values[0] if len(values) == 1 else values for key, values in query.items()}
    one = target.hosts[0]
    if len(target.hosts) > 1 or one.host.startswith("/"):
        # (SQLAlchemy's form of a list: host=h1,h2&port=p1,p2; a socket directory as a host)
        query["host"] = ",".join(h.host for h in target.hosts)
        query["port"] = ",".join(str(h.port) for h in target.hosts)
        host, port = None, None
    else:
        host, port = one.host, one.port
    if target.target_session_attrs != "any":
        query["target_session_attrs"] = target.target_session_attrs
    return URL.create(
        "postgresql+asyncpg",
        username=target.user,
        password=target.password,
        host=host,
        port=port,
        database=target.database,
        query=query,
    )


@dataclass(frozen=True, slots=True)
class DatabaseDeadlines:
    """How long each wait on the database may last, in seconds (None: no bound).

    Attributes:
        connect_s: connecting to one server of the host list, and a pooled connection's
            pre-ping (``TRIPEAKS_DB_CONNECT_TIMEOUT_S``); each host gets its own.
        statement_s: each statement (``TRIPEAKS_DB_STATEMENT_TIMEOUT_S``); the group commit's
            batch has its own bound, the write timeout.
        checkout_s: waiting for a pooled connection to come free (``TRIPEAKS_DB_POOL_TIMEOUT_S``).
    """

    connect_s: float = 5.0
    statement_s: float | None = 10.0
    checkout_s: float = 10.0


#: What ``DATABASE_URL`` reaches (``TRIPEAKS_DB_POOLER``): PostgreSQL itself (or a pooler in
#: session mode, which gives each client one server session), or a pooler in transaction mode.
Pooler = Literal["none", "transaction"]

#: Startup parameters of every connection. PgBouncer (1.18 and later) accepts and tracks both per
#: client, restoring each client's values on whichever server connection it is given; a pooler
#: refuses any other startup parameter unless configured to ignore it.
SERVER_SETTINGS = {"application_name": "tripeaks", "timezone": "UTC"}

#: Names of this process's prepared statements: ``(pid, tag)`` of the process that drew the tag
#: (a process started by fork draws its own), and a counter.
_statement_tag: tuple[int, str] | None = None
_statement_numbers = itertools.count(1)


def process_statement_name() -> str:
    """A name for a prepared statement that no other process uses: ``__tp_<tag>_<n>__``, with a
    random tag drawn once per process and a counter.

    The driver's own names (``__asyncpg_stmt_<n>__``) come from a counter per Python process, so
    two server processes name different statements alike; wherever a server session can be
    handed from one client to another (a pooler, in session mode without its ``DISCARD ALL``),
    the second process's statement would then be refused (``prepared statement
    "__asyncpg_stmt_5__" already exists``).
    """
    global _statement_tag
    pid = os.getpid()
    if _statement_tag is None or _statement_tag[0] != pid:
        _statement_tag = (pid, uuid.uuid4().hex[:16])
    return f"__tp_{_statement_tag[1]}_{next(_statement_numbers):x}__"


def names_statements(driver: Any) -> bool:
    """Whether statements are prepared and kept on ``driver``'s connection (asyncpg names them
    only while its statement cache is on): not behind a transaction pooler, for which
    :func:`create_engine` turns the cache off (:data:`TRANSACTION_POOLER_CONNECT_ARGS`)."""
    config = getattr(driver, "_config", None)
    return getattr(config, "statement_cache_size", 0) > 0


def unnamed_statement() -> str:
    """The name of every statement behind a transaction pooler: the empty one, PostgreSQL's
    unnamed statement (see :data:`TRANSACTION_POOLER_CONNECT_ARGS`)."""
    return ""


#: Driver options behind a transaction pooler, where consecutive statements of one client may run
#: on different server sessions, each shared with other clients (other processes): no prepared
#: statement may outlive its statement, and none may have a name.
#:
#: SQLAlchemy prepares every statement (``Connection.prepare``) in one round trip and runs it in
#: the next. Given no name, asyncpg names it ``__asyncpg_stmt_<n>__`` from a counter of its
#: process — whatever its statement caches — so two processes behind one PgBouncer name
#: different statements alike on the server sessions they share: ``prepared statement
#: "__asyncpg_stmt_5__" already exists`` (SQLAlchemy 2.1.9, asyncpg 0.30, PgBouncer 1.18). A
#: name unique to the process does not help either: a statement outside a transaction (the
#: AUTOCOMMIT reads) may be prepared on one server session and run on another (``… does not
#: exist``), and its name stays allocated on the first. So the statement gets the empty name,
#: PostgreSQL's unnamed statement (``prepared_statement_name_func``): with asyncpg's statement
#: cache off (``statement_cache_size=0``) asyncpg marks an unnamed statement unprepared and
#: sends it again (Parse, Bind, Execute, Sync) in the message sequence that runs it, so it never
#: depends on an earlier round trip or on which server session runs it. SQLAlchemy's cache of
#: prepared statements is off too (``prepared_statement_cache_size=0``): a cached unnamed
#: statement would be overwritten by the next. asyncpg's own statements (its type introspection,
#: the group commit's batch) are unnamed with its cache off.
TRANSACTION_POOLER_CONNECT_ARGS: dict[str, Any] = {
    "statement_cache_size": 0,
    "prepared_statement_cache_size": 0,
    "prepared_statement_name_func": unnamed_statement,
}

#: Driver options otherwise (PostgreSQL itself, or a pooler in session mode): statements stay
#: prepared on their connection, named uniquely to the process (:func:`process_statement_name`).
DIRECT_CONNECT_ARGS: dict[str, Any] = {
    "prepared_statement_name_func": process_statement_name,
}

#: Engines created for a transaction pooler: :func:`migrate` refuses them.
_POOLED: weakref.WeakSet[AsyncEngine] = weakref.WeakSet()


def create_engine(
    url: str,
    *,
    pool_size: int = 10,
    pooler: Pooler = "none",
    deadlines: DatabaseDeadlines | None = None,
) -> AsyncEngine:
    """Create the async SQLAlchemy engine (asyncpg) with a bounded pool whose every wait on
    the database has a deadline (:class:`DatabaseDeadlines`).

    A new connection tries the URL's hosts in order, each within ``deadlines.connect_s``
    (:func:`connect_first`), so one hung host does not use up the time of the others. A pooled
    connection is pinged at check-out within the same bound (:func:`_ping_on_checkout`); one
    that does not answer, and any connection the pool gives up, is closed at once without a
    word to its server (:func:`_abandon`), which a frozen server would never answer.

    Args:
        url: a PostgreSQL URL in any form :func:`parse_database_url` accepts.
        pool_size: connections kept open; up to as many again may overflow under load.
        pooler: ``transaction`` when ``url`` is a connection pooler in transaction mode
            (PgBouncer ``pool_mode = transaction``): no statement then relies on a server-side
            prepared statement of an earlier round trip (see
            :data:`TRANSACTION_POOLER_CONNECT_ARGS`). Such an engine cannot :func:`migrate`.
        deadlines: the bounds of each wait (defaults: :class:`DatabaseDeadlines`).

    Raises:
        DatabaseConfigError: a malformed URL or an unknown ``pooler``.
    """
    limits = deadlines or DatabaseDeadlines()
    target = parse_database_url(url)
    if pooler == "transaction":
        adapter_args = dict(TRANSACTION_POOLER_CONNECT_ARGS)
    elif pooler == "none":
        adapter_args = dict(DIRECT_CONNECT_ARGS)
    else:
        raise DatabaseConfigError(f"unknown pooler {pooler!r}: none or transaction")
    for key, value in target.options:  # the adapter's, not the driver's (ENGINE_ONLY_…)
        if key in ENGINE_ONLY_QUERY_OPTIONS:
            adapter_args.setdefault(key, _engine_option(key, value))
    target = replace(
        target,
        options=tuple((k, v) for k, v in target.options if k not in ENGINE_ONLY_QUERY_OPTIONS),
    )
    driver_args: dict[str, Any] = {
        "server_settings": dict(SERVER_SETTINGS),
        "command_timeout": limits.statement_s,
    }
    if "statement_cache_size" in adapter_args:
        driver_args["statement_cache_size"] = adapter_args.pop("statement_cache_size")

    async def connect() -> Any:
        connection = await connect_first(target, limits.connect_s, **driver_args)
        replication.watch(connection)  # (a commit on the primary alone comes with a warning)
        return connection

    dbapi: list[Any] = []

    def creator() -> Any:
        # SQLAlchemy's own ``async_creator`` would drop the adapter's options (the statement
        # names and cache): the adapter's connect takes them with the driver's connect.
        return dbapi[0].connect(async_creator_fn=connect, **adapter_args)

    engine = create_async_engine(
        async_url(url),
        creator=creator,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_timeout=limits.checkout_s,
        # A failed statement's error names no values: they may hold a secret deal's code.
        hide_parameters=True,
    )
    dbapi.append(engine.sync_engine.dialect.dbapi)
    _bound_waits(engine, limits.connect_s)
    _truthful_commits(engine, limits.statement_s)
    if pooler == "transaction":
        _POOLED.add(engine)
    return engine


def _engine_option(key: str, value: str) -> int:
    """An engine-only query option's value (a count).

    Raises:
        DatabaseConfigError: not a whole number ≥ 0.
    """
    if not value.isdigit():
        raise DatabaseConfigError(f"the database URL's {key} must be a whole number, got {value!r}")
    return int(value)


class DatabaseUnreachable(OSError):
    """No server of a URL's host list took a connection; the message names each host's
    failure."""


#: How long a host that did not answer, or did not match ``target_session_attrs``, is tried
#: after the others (s): after a failover the old primary, frozen or now a standby, would
#: otherwise cost every new connection its whole deadline first.
HOST_SET_ASIDE_S = 30.0

#: Hosts that last failed a connection of this process for the ``target_session_attrs`` asked,
#: and when (``time.monotonic()``).
_failed_hosts: dict[tuple[DatabaseHost, str | None], float] = {}


def hosts_in_turn(hosts: tuple[DatabaseHost, ...], attrs: str | None = None) -> list[DatabaseHost]:
    """``hosts`` in their order, those that failed for ``attrs`` (a ``target_session_attrs``)
    within :data:`HOST_SET_ASIDE_S` last."""
    now = time.monotonic()
    recent = {
        h for (h, a), at in _failed_hosts.items() if a == attrs and now - at < HOST_SET_ASIDE_S
    }
    return sorted(hosts, key=lambda host: host in recent)


async def guarded_connect(dsn: str, timeout_s: float, **driver_args: Any) -> Any:
    """``asyncpg.connect(dsn, timeout=timeout_s, **driver_args)``, of which a connection
    cancelled while it is being made (a caller's deadline, a task cancelled) is closed once
    made: a cancelled ``asyncpg.connect`` may otherwise leave its socket, and a session on the
    server, open. The connecting goes on in the background until the driver's own
    ``timeout_s`` ends it.

    Returns:
        An ``asyncpg.Connection``.

    Raises:
        The driver's errors (``asyncpg.PostgresError``, ``OSError``, ``TimeoutError``…), as
        ``asyncpg.connect`` raises them.
    """
    connecting = asyncio.ensure_future(asyncpg.connect(dsn, timeout=timeout_s, **driver_args))
    try:
        return await asyncio.shield(connecting)
    except asyncio.CancelledError:
        connecting.add_done_callback(_close_made)
        raise


def _close_made(connecting: asyncio.Future[Any]) -> None:
    if not connecting.cancelled() and connecting.exception() is None:
        connecting.result().terminate()


async def connect_first(target: DatabaseTarget, timeout_s: float, **driver_args: Any) -> Any:
    """Connect to the first server of ``target.hosts`` that answers within ``timeout_s`` and
    matches ``target.target_session_attrs``, trying them in order, each with its own deadline
    (asyncpg's ``timeout`` covers the whole list at once, so a hung first host would use it
    all up); a host that failed this process within :data:`HOST_SET_ASIDE_S` is tried last.
    A connection made after its host's deadline passed is closed (:func:`guarded_connect`).

    Args:
        target: the servers and credentials.
        timeout_s: the deadline for each host, connection and authentication included.
        driver_args: further arguments of ``asyncpg.connect``.

    Returns:
        An ``asyncpg.Connection``.

    Raises:
        asyncpg.PostgresError: every host refused the connection (the last one's refusal: a
            wrong password, a missing database).
        DatabaseUnreachable: no host would do; its message names each host and why.
    """
    failures: list[str] = []
    refusals: list[asyncpg.PostgresError] = []
    for host in hosts_in_turn(target.hosts, target.target_session_attrs):
        try:
            async with asyncio.timeout(timeout_s):
                connection = await guarded_connect(
                    target.host_dsn(host),
                    timeout_s,
                    target_session_attrs=target.target_session_attrs,
                    **driver_args,
                )
            _failed_hosts.pop((host, target.target_session_attrs), None)
            return connection
        except TimeoutError:
            failures.append(f"{host}: no answer within {timeout_s:g} s")
        except asyncpg.TargetServerAttributeNotMatched:
            failures.append(f"{host}: not {target.target_session_attrs}")
        except asyncpg.PostgresError as exc:  # refused by the server: a password, a database
            refusals.append(exc)
            failures.append(f"{host}: {type(exc).__name__}: {exc}")
            continue
        except (OSError, asyncpg.InterfaceError) as exc:
            failures.append(f"{host}: {type(exc).__name__}: {exc}")
        if len(target.hosts) > 1:
            _failed_hosts[host, target.target_session_attrs] = time.monotonic()
    if len(refusals) == len(failures):
        raise refusals[-1]
    raise DatabaseUnreachable("no database host would do: " + "; ".join(failures))


#: Where the pool marks a connection it has just opened (no ping needed at its first check-out).
_FRESH_KEY = "tripeaks.fresh"


def _bound_waits(engine: AsyncEngine, ping_s: float) -> None:
    """Give the pool of ``engine`` a pre-ping with a deadline and make every connection it
    gives up close at once (see :func:`create_engine`).

    SQLAlchemy's own pre-ping (``pool_pre_ping``) has no deadline, and no deadline put around
    it helps: the ping runs in a transaction (``BEGIN``, ``;``, ``ROLLBACK``); cancelled, the
    driver asks the server to cancel it and the ``ROLLBACK`` that follows in a ``finally``
    waits for the server to confirm that cancel, for ever when the server is frozen. Closing
    such a connection gracefully (SQLAlchemy's invalidation) waits the same way.
    """
    pool = engine.sync_engine.pool

    @event.listens_for(pool, "connect")
    def _opened(dbapi_connection: Any, record: Any) -> None:
        record.info[_FRESH_KEY] = True

    @event.listens_for(pool, "checkout")
    def _ping_on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.pop(_FRESH_KEY, False):
            return
        driver = record.driver_connection
        try:
            await_(driver.fetchrow(";", timeout=ping_s))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.info("a pooled database connection failed its ping: %r", exc)
            raise DisconnectionError(f"the pooled connection's ping failed: {exc!r}") from exc

    @event.listens_for(pool, "invalidate")
    def _abandon(dbapi_connection: Any, record: Any, exception: BaseException | None) -> None:
        driver = record.driver_connection if record is not None else None
        if driver is not None and not driver.is_closed():
            driver.terminate()

    @event.listens_for(engine.sync_engine, "handle_error")
    def _lost_on_timeout(context: Any) -> None:
        # A statement past its deadline leaves its connection waiting for the server to
        # confirm a cancel: it is given up, not rolled back or reused.
        if isinstance(context.original_exception, TimeoutError | StorageOutcomeUnknown):
            context.is_disconnect = True


#: Where the pool's record of a connection notes whether its transaction has run a statement
#: that may store something (:func:`writes`), from its ``BEGIN`` on.
_WROTE_KEY = "tripeaks.wrote"

#: The first word of a statement that stores nothing (unless it holds one of
#: :data:`_STORING`): a query, or a setting of the session or transaction.
_READING = re.compile(r"\s*(?:SELECT|WITH|SET|RESET|SHOW)\b", re.IGNORECASE)
#: What makes a statement store something: a data-modifying statement (in a ``WITH`` of a
#: query), or a notification (sent once its transaction commits). A row-locking clause
#: (``FOR UPDATE``, :data:`_LOCKING`) stores nothing: it is taken out first.
_STORING = re.compile(r"\b(?:INSERT|UPDATE|DELETE|MERGE|NOTIFY|pg_notify)\b", re.IGNORECASE)
_LOCKING = re.compile(r"\bFOR\s+(?:NO\s+KEY\s+)?UPDATE\b", re.IGNORECASE)


def writes(statement: str) -> bool:
    """Whether ``statement`` (SQL) may store something should its transaction commit: anything
    but a query (``SELECT``, or ``WITH`` without a data-modifying part; row locks taken with
    ``FOR UPDATE`` and the like store nothing) or a setting (``SET``, ``RESET``, ``SHOW``).
    Conservative: a statement it cannot tell is one that writes. A query calling a function
    that writes would be taken for a read: the server's queries call none (their advisory
    locks and ``set_config`` store nothing; ``pg_notify`` counts as a write)."""
    if _READING.match(statement) is None:
        return True
    return _STORING.search(_LOCKING.sub(" ", statement)) is not None


def _truthful_commits(engine: AsyncEngine, barrier_s: float | None) -> None:
    """Make a ``COMMIT`` of ``engine``'s transactions (sessions, ``engine.begin()``) tell the
    truth about what it stored, through :func:`replication.acknowledged`:

    * the COMMIT of a transaction that may have stored something (it ran a statement that
      :func:`writes`) was sent and its outcome never came back (the driver's deadline, a lost
      connection, the backend ended): :class:`StorageOutcomeUnknown`, not a database failure
      ("nothing was changed");
    * it came back with a WARNING (its wait for the synchronous standby cancelled): its
      replication is confirmed within ``barrier_s`` first; outcome unknown if that fails.

    Either way the connection is given up (see :func:`_bound_waits`), not rolled back.

    A transaction that stored nothing (only queries and settings: a read) is committed as it
    is: whatever became of its COMMIT, nothing was changed, so its failure is the database's
    (``StorageUnavailable`` once translated, :func:`server.storage.sessions.storage_errors`),
    never outcome unknown. Which transactions stored something is noted on each connection as
    its statements are sent (``before_cursor_execute``), from its ``BEGIN`` on.
    """
    sync_engine = engine.sync_engine

    @event.listens_for(sync_engine, "begin")
    def _began(conn: Connection) -> None:
        conn.info[_WROTE_KEY] = False

    @event.listens_for(sync_engine, "before_cursor_execute")
    def _sending(
        conn: Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        info = conn.info
        if not info.get(_WROTE_KEY, True) and writes(statement):
            info[_WROTE_KEY] = True

    dialect = sync_engine.dialect
    commit = dialect.do_commit

    def do_commit(dbapi_connection: Any) -> None:
        driver = dbapi_connection.driver_connection
        sent = getattr(dbapi_connection.dbapi_connection, "_transaction", None) is not None
        if driver is None or not sent or not dbapi_connection.info.get(_WROTE_KEY, True):
            # (autocommit or nothing begun: no COMMIT is sent; a read: nothing to be unsure of)
            commit(dbapi_connection)
            return
        # The adapter's commit is synchronous (it awaits the driver itself), run here from
        # the coroutine that checks its outcome.
        await_(
            replication.acknowledged(
                driver, functools.partial(greenlet_spawn, commit, dbapi_connection), barrier_s
            )
        )

    dialect.do_commit = do_commit  # type: ignore[method-assign]


#: Query options of a URL that configure SQLAlchemy's asyncpg adapter, not the connection:
#: given to ``asyncpg.connect`` they would be sent as server settings and refused.
ENGINE_ONLY_QUERY_OPTIONS = ("prepared_statement_cache_size",)


def direct_dsn(url: str) -> str:
    """A ``postgresql://`` DSN for a plain ``asyncpg.connect`` (the event listener): ``url`` in
    any form :func:`parse_database_url` accepts, as libpq writes it (``h1:p1,h2:p2``, with its
    ``target_session_attrs``: the same servers as the engine's), without the engine-only query
    options (:data:`ENGINE_ONLY_QUERY_OPTIONS`).

    Raises:
        DatabaseConfigError: a malformed URL.
    """
    target = parse_database_url(url, "TRIPEAKS_DIRECT_DATABASE_URL")
    options = tuple((k, v) for k, v in target.options if k not in ENGINE_ONLY_QUERY_OPTIONS)
    return replace(target, options=options).dsn()


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic configuration pointing at ``migrations/``.

    Args:
        connection: an open synchronous connection for ``env.py`` to use, or None.
        url: a database URL for ``env.py`` when no connection is given.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        parse_database_url(url)  # a malformed URL is refused here, naming what is wrong
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


#: Seconds between tries of the migration lock while another process holds it.
MIGRATION_LOCK_POLL_S = 0.05


def _upgrade(connection: Connection) -> None:
    """Migrate to head on a connection that holds the migration lock."""
    command.upgrade(alembic_config(connection), "head")
    connection.commit()


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest migration, holding an advisory lock meanwhile.

    Safe to call from several processes at once: they take turns, and the later ones find the
    schema already at head. The lock is a session's, held across several transactions: the
    engine must reach PostgreSQL directly (see :func:`migrate_url`). A process waiting for it
    tries again every :data:`MIGRATION_LOCK_POLL_S` outside any transaction, rather than
    blocking in ``pg_advisory_lock``: a waiting statement would hold a snapshot, which a
    migration building an index ``CONCURRENTLY`` (under the lock) must wait out — a deadlock.

    Raises:
        DatabaseConfigError: ``engine`` was created for a transaction pooler.
    """
    if engine in _POOLED:
        raise DatabaseConfigError(
            "migrations hold a session-level advisory lock, which a transaction pooler cannot "
            "carry: migrate over the direct URL (TRIPEAKS_DIRECT_DATABASE_URL)"
        )
    lock = text("SELECT pg_try_advisory_lock(:k)").bindparams(k=MIGRATION_LOCK_KEY)
    async with engine.connect() as conn:
        while True:
            locked = await conn.scalar(lock)
            await conn.commit()  # no transaction, hence no snapshot, while waiting
            if locked:
                break
            await asyncio.sleep(MIGRATION_LOCK_POLL_S)
        try:
            await conn.run_sync(_upgrade)
        finally:
            await conn.rollback()
            await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
            await conn.commit()
    log.info("database schema is at the newest migration")


#: The deadlines of the migrations' own connection: none for a statement.
MIGRATION_DEADLINES = DatabaseDeadlines(statement_s=None)


async def migrate_url(url: str) -> None:
    """:func:`migrate` the database at ``url`` (a direct URL, not a transaction pooler's) over a
    connection of its own, closed afterwards, whose statements have no deadline (building an
    index may take long); connecting has the default one."""
    engine = create_engine(url, pool_size=1, deadlines=MIGRATION_DEADLINES)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()


def start_embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) an embedded PostgreSQL in ``data_dir/pg`` and return its URL.

    The server keeps running while this process lives and stops when it exits. A database named
    ``tripeaks`` is created on first use.

    Returns:
        A ``postgresql://`` URL using the server's unix socket.
    """
    # pgserver logs every initdb/pg_ctl command with its output at INFO: keep its warnings only.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        data_dir.mkdir(parents=True, exist_ok=True)
        forget_dead_handles(data_dir.resolve() / "pg")
        server = pgserver.get_server(  # type: ignore[attr-defined]
            data_dir.resolve() / "pg", cleanup_mode="stop"
        )
        exists = server.psql("SELECT 1 FROM pg_database WHERE datname = 'tripeaks';")
        if "(1 row)" not in exists:
            server.psql("CREATE DATABASE tripeaks;")
        uri: str = server.get_uri("tripeaks")
    _EMBEDDED.append(server)
    return uri


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that no longer run from pgserver's list of processes using the
    embedded PostgreSQL (``<pgdata>/.handle_pids.json``).

    pgserver stops the server when the last process on that list exits; a process killed with
    SIGKILL never takes itself off, so without this every later clean stop would leave the
    server running.

    Returns:
        The pids dropped.
    """
    path = pgdata / ".handle_pids.json"
    try:
        pids = [int(pid) for pid in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):
        return []
    alive = [pid for pid in pids if _running(pid)]
    if len(alive) != len(pids):
        path.write_text(json.dumps(alive))
    return [pid for pid in pids if pid not in alive]


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


_EMBEDDED: list[object] = []  # keeps the embedded server's handle alive for the process


async def database_answers(engine: AsyncEngine) -> None:
    """Ask the database one trivial question (``SELECT 1``) on a pooled connection: the health
    check's.

    Raises:
        Exception: whatever the pool or the driver raised (the caller reports it).
    """
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
