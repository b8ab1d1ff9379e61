"""Server settings, read once at start from the environment (and CLI overrides).

Environment variables (all optional):

- ``DATABASE_URL``: a PostgreSQL URL (``postgresql://user@host:5432/db``). Without it the server
  starts an embedded PostgreSQL (the ``pgserver`` package) in ``<data dir>/pg``.
- ``TRIPEAKS_DATA_DIR``: the data folder (default ``./.tripeaks``): the embedded database and the
  generated daily secret live there.
- ``TRIPEAKS_HOST`` / ``TRIPEAKS_PORT``: where to listen (default ``127.0.0.1:8080``).
- ``TRIPEAKS_DAILY_SECRET``: the secret the daily deals are derived from: at least 32 bytes,
  not a known placeholder. Required with an external database (every process of a service must
  share it); with the embedded one, when absent, one is generated on first start and kept in
  ``<data dir>/daily_secret``.
- ``TRIPEAKS_DAILY_RULES``: ``E`` (Easy, default) or ``C`` (Classic).
- ``TRIPEAKS_DAILY_PREPARE_AHEAD_S``: how long before midnight UTC the next date's deal is chosen
  and solved (3600); ``TRIPEAKS_DAILY_PREPARE_EVERY_S``: how often each process checks that
  today's and (within that lead) tomorrow's deals are stored (60; 0 turns it off: a date's deal
  is then chosen by its first player).
- ``TRIPEAKS_LOG_LEVEL``: ``DEBUG``, ``INFO`` (default), ``WARNING``, ``ERROR``.
- ``TRIPEAKS_LOG_FORMAT``: ``text`` (default) or ``json`` (one object per line; see
  :mod:`server.logs`).
- ``TRIPEAKS_DB_POOL_SIZE``: connections per server process (default 10).
- ``TRIPEAKS_DB_POOLER``: ``none`` (default) or ``transaction``: ``DATABASE_URL`` points at a
  connection pooler in transaction mode (PgBouncer ``pool_mode = transaction``, as most managed
  PostgreSQL offers it). The engine then keeps no prepared statement from one statement to the
  next, and needs ``TRIPEAKS_DIRECT_DATABASE_URL``.
- ``TRIPEAKS_DIRECT_DATABASE_URL``: a PostgreSQL URL that reaches the server itself, not through a
  transaction pooler, for what holds a session: the event listener (``LISTEN``) and the
  migrations (a session-level advisory lock). Defaults to ``DATABASE_URL``; required with
  ``TRIPEAKS_DB_POOLER=transaction``.
- ``TRIPEAKS_DATABASE_READ_URLS``: PostgreSQL URLs of streaming replicas (standbys) of the
  database, comma-separated, for the reads that tolerate lag: leaderboards, profiles, replays,
  the daily's counts (empty by default: every read goes to ``DATABASE_URL``). A player's own
  entry or profile, or a game's end, that a replica has not replayed yet is read on the primary
  (see :mod:`server.storage.replicas`).
  ``TRIPEAKS_DATABASE_READ_MAX_LAG_S``: a replica more than this many seconds behind the primary
  is not read (5). ``TRIPEAKS_DATABASE_READ_TIMEOUT_S``: the deadline of a read on a replica and
  of each lag probe (2); a replica that misses it or fails is not read until its next good probe,
  and the read is done on the primary. ``TRIPEAKS_DATABASE_READ_PROBE_S``: how often each
  process measures the replicas' lag (1).
- ``TRIPEAKS_EVENT_BATCH_MS``: how long each process gathers its committed events before it
  publishes them in one statement (0: none; each statement takes what came while the previous
  one was under way); ``TRIPEAKS_EVENT_MAX_PENDING``: events waiting to be
  published past which more are dropped and counted (10000); ``TRIPEAKS_EVENT_SWEEP_S``: how
  often each process reads a digest of the race rooms it serves and sends those that an event
  missed left behind (5 s).
- ``TRIPEAKS_DB_START_TIMEOUT_S``: how long the start waits for the database (its migrations,
  this process's records, the event listener) before the process exits saying what it waited
  for (60); it says so every 10 s meanwhile.
- ``TRIPEAKS_DB_CONNECT_TIMEOUT_S``: seconds to connect to each host of the URL's host list, and
  for a pooled connection to answer its check-out ping (5). ``TRIPEAKS_DB_STATEMENT_TIMEOUT_S``:
  seconds each statement may take (10; the migrations have none). ``TRIPEAKS_DB_POOL_TIMEOUT_S``:
  seconds to wait for a pooled connection to come free (10). A URL may name several hosts
  (``h1:p1,h2:p2``, ``host=h1:p1&host=h2:p2`` or ``host=h1,h2&port=p1,p2``), tried in order,
  with ``target_session_attrs`` (``read-write``: the first that takes writes).
- ``TRIPEAKS_DB_WRITE_TIMEOUT_S``: how long an action whose game row another transaction holds
  locked keeps being tried before it is answered ``unavailable`` (5; other games never wait).
- ``TRIPEAKS_WS_MAX_MESSAGE_BYTES`` / ``TRIPEAKS_WS_RATE_PER_SECOND``: websocket frame limit and
  per-connection request rate (defaults 4096 bytes, 20 requests per second).
- ``TRIPEAKS_WS_SEND_QUEUE``: messages queued for one slow receiver before it is closed (256).
- ``TRIPEAKS_WS_SEND_BUFFER_BYTES``: bytes waiting for one websocket's peer — queued, in its
  transport and in the kernel's send buffer — before it is closed as too slow (131072), pings
  or not.
- ``TRIPEAKS_MAX_CONNECTIONS_PER_ADDRESS``: connections one client address may have in use at
  once in one process — websockets open, HTTP requests being served (128); beyond it: 429.
- ``TRIPEAKS_HTTP_HEADER_TIMEOUT_S``: seconds a connection has to send a whole request's headers,
  from its opening or its previous answer (10); an idle keep-alive connection is closed after it
  too. ``TRIPEAKS_HTTP_BODY_TIMEOUT_S``: seconds a request's body has to arrive once its headers
  are in (10); else 408 and the connection is closed.
- ``TRIPEAKS_RACE_MAX_PLAYERS`` (8), ``TRIPEAKS_RACE_MAX_ROOMS`` (3 per player),
  ``TRIPEAKS_RACE_COUNTDOWN_S`` (5), ``TRIPEAKS_RACE_TIME_LIMIT_S`` (600, the default limit),
  ``TRIPEAKS_RACE_MIN_TIME_LIMIT_S`` (30), ``TRIPEAKS_RACE_MAX_TIME_LIMIT_S`` (7200),
  ``TRIPEAKS_RACE_SWEEP_S`` (1, how often time limits and presence are checked).
- ``TRIPEAKS_WS_HEARTBEAT_S``: seconds without a frame from a client after which it is pinged
  (30); a connection that does not answer within half of that is closed (a racer is then
  reconnecting).
- ``TRIPEAKS_RACE_GRACE_S``: seconds a reconnecting racer or watcher keeps their place (60).
- ``TRIPEAKS_INSTANCE_TIMEOUT_S``: seconds after which a process that stopped refreshing its
  record is taken for dead (30, or three sweeps if longer).
- ``TRIPEAKS_REGISTER_PER_MINUTE``: player registrations per client address per minute (20).
  Every limit per address counts an IPv6 address by its /64 network.
- ``TRIPEAKS_SIGN_IN_PER_MINUTE``: sign-ins with a recovery code per client address per minute
  (10), right or wrong.
- ``TRIPEAKS_TRUST_FORWARDED_FOR``: behind a reverse proxy, take the client address from the
  last ``X-Forwarded-For`` entry the proxy added (off by default: clients could forge it).
- ``TRIPEAKS_ALLOWED_ORIGINS``: web origins (``https://host[:port]``, comma-separated) whose
  pages may send requests that change something (``POST``, ``PUT``, ``DELETE`` under
  ``/api/v1``) and open websockets, besides the server's own; ``*`` allows every origin (empty
  by default: a request whose ``Origin`` names another site is refused 403).
- ``TRIPEAKS_MAX_SOCKETS_PER_PLAYER``: websockets one player may hold open in one process (8).
- ``TRIPEAKS_SOLVER_WORKERS``: solver processes (1); 0 turns the solver off (daily deals are
  then not checked for winnability, and there is no par and no hint).
- ``TRIPEAKS_WORKERS``: server processes sharing the port (1), e.g. one per core.
- ``TRIPEAKS_EVENT_LOOP``: ``auto`` (uvloop where installed), ``uvloop`` or ``asyncio``.
- ``TRIPEAKS_ADMISSION_WAIT_S``: how long a player arriving in a crowd (registering, saying
  hello) waits for their turn before being told ``server_busy`` and when to come back (10).
- ``TRIPEAKS_METRICS``: serve ``GET /metrics`` (Prometheus text format) on the main port
  (on by default; ``false`` removes the route).
- ``TRIPEAKS_OPS_PORT``: a port of its own for ``/healthz``, ``/readyz`` and ``/metrics``
  (unset by default), read at once whatever waits on the main port (see
  :mod:`server.web.operations`); ``TRIPEAKS_OPS_HOST``: its address (default
  ``TRIPEAKS_HOST``'s), e.g. a private one while the main port listens on every address.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import AliasChoices, Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from server.storage.db import DatabaseDeadlines

#: Seconds after which a process that stopped refreshing its record is taken for dead, unless
#: the race sweeps are so slow that three of them take longer.
DEFAULT_INSTANCE_TIMEOUT_S = 30.0


#: A web origin as a browser sends it in ``Origin``: a scheme, a host and maybe a port.
_ORIGIN = re.compile(r"https?://[a-z0-9.\-\[\]:]+")


#: The start of a PostgreSQL URL (a read URL's).
_POSTGRES_URL = re.compile(r"postgres(ql)?(\+asyncpg)?://", re.IGNORECASE)
#: A comma that starts another read URL (a URL's own commas, in a multi-host ``host=a,b``
#: query, are followed by no scheme).
_NEXT_URL = re.compile(r",\s*(?=[a-z][a-z0-9+.-]*://)", re.IGNORECASE)


def split_read_urls(value: str) -> list[str]:
    """Comma-separated URLs as a list: split only at a comma followed by a scheme
    (``scheme://``), so that a multi-host URL's own ``host=h1,h2`` stays whole."""
    return [url.strip() for url in _NEXT_URL.split(value) if url.strip()]


def _split_origins(value: str) -> list[str]:
    return [o.strip().lower().rstrip("/") for o in value.split(",") if o.strip()]


class Settings(BaseSettings):
    """Validated server settings.

    Raises:
        pydantic.ValidationError: at construction, naming every invalid variable.
    """

    model_config = SettingsConfigDict(env_prefix="TRIPEAKS_", extra="ignore")

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "TRIPEAKS_DATABASE_URL")
    )
    data_dir: Path = Path(".tripeaks")
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    ops_port: int | None = Field(default=None, ge=1, le=65535)
    ops_host: str | None = None
    daily_secret: str | None = None
    daily_rules: Literal["E", "C"] = "E"
    daily_prepare_ahead_s: int = Field(default=3600, ge=0, le=86_400)
    daily_prepare_every_s: float = Field(default=60.0, ge=0, le=86_400)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_format: Literal["text", "json"] = "text"
    db_pool_size: int = Field(default=10, ge=1, le=200)
    db_pooler: Literal["none", "transaction"] = "none"
    direct_database_url: str | None = None
    db_write_timeout_s: float = Field(default=5.0, gt=0, le=600)
    db_connect_timeout_s: float = Field(default=5.0, gt=0, le=600)
    db_statement_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    db_pool_timeout_s: float = Field(default=10.0, gt=0, le=600)
    db_start_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    database_read_urls: str = ""
    database_read_max_lag_s: float = Field(default=5.0, gt=0, le=86_400)
    database_read_timeout_s: float = Field(default=2.0, gt=0, le=600)
    database_read_probe_s: float = Field(default=1.0, gt=0, le=3600)
    event_batch_ms: float = Field(default=0.0, ge=0, le=1000)
    event_max_pending: int = Field(default=10_000, ge=1, le=10_000_000)
    event_sweep_s: float = Field(default=5.0, gt=0, le=3600)
    ws_max_message_bytes: int = Field(default=4096, ge=256, le=1 << 20)
    ws_rate_per_second: int = Field(default=20, ge=1, le=10_000)
    ws_heartbeat_s: float = Field(default=30.0, gt=0)
    ws_send_queue: int = Field(default=256, ge=8, le=100_000)
    ws_send_buffer_bytes: int = Field(default=128 * 1024, ge=4096, le=64 << 20)
    max_connections_per_address: int = Field(default=128, ge=1, le=1_000_000)
    http_header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    http_body_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    race_max_players: int = Field(default=8, ge=1, le=100)
    race_max_rooms: int = Field(default=3, ge=1, le=100)
    race_countdown_s: float = Field(default=5.0, ge=0, le=60)
    race_time_limit_s: int = Field(default=600, ge=1, le=86_400)
    race_min_time_limit_s: int = Field(default=30, ge=1, le=86_400)
    race_max_time_limit_s: int = Field(default=7200, ge=1, le=86_400)
    race_sweep_s: float = Field(default=1.0, gt=0, le=60)
    race_grace_s: float = Field(default=60.0, ge=0, le=3600)
    #: None: 30 s, or three sweeps if those are longer.
    instance_timeout_s: float | None = Field(default=None, gt=0, le=3600)
    solver_workers: int = Field(default=1, ge=0, le=64)
    workers: int = Field(default=1, ge=1, le=64)
    event_loop: Literal["auto", "uvloop", "asyncio"] = "asyncio"
    admission_wait_s: float = Field(default=10.0, gt=0, le=120)
    #: 0: never turn newcomers away for the event loop's lag.
    admission_shed_lag_ms: float = Field(default=200.0, ge=0, le=60_000)
    #: Players turned away a second who are given distinct times to come back.
    admission_retry_spread_per_s: float = Field(default=200.0, gt=0, le=1_000_000)
    #: The longest a player turned away is told to wait (s).
    admission_retry_max_s: float = Field(default=30.0, ge=2, le=3600)
    register_per_minute: int = Field(default=20, ge=1, le=1_000_000)
    sign_in_per_minute: int = Field(default=10, ge=1, le=1_000_000)
    trust_forwarded_for: bool = False
    allowed_origins: str = ""
    max_sockets_per_player: int = Field(default=8, ge=1, le=10_000)
    metrics: bool = True

    @field_validator("daily_rules", mode="before")
    @classmethod
    def _upper_rules(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("db_pooler", "log_format", mode="before")
    @classmethod
    def _lower_pooler(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("database_url", "direct_database_url")
    @classmethod
    def _database_url(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            from server.storage.db import parse_database_url  # (its imports are heavy)

            name = "DATABASE_URL" if info.field_name == "database_url" else None
            parse_database_url(value, name or f"TRIPEAKS_{str(info.field_name).upper()}")
        return value

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        for origin in _split_origins(value):
            if origin != "*" and not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"{origin!r} is not a web origin: write scheme://host[:port] (no path), "
                    "e.g. https://tripeaks.example, or * for any"
                )
        return value

    @field_validator("database_read_urls")
    @classmethod
    def _read_urls(cls, value: str) -> str:
        for url in split_read_urls(value):
            if not _POSTGRES_URL.match(url):
                raise ValueError(
                    f"{url.split('@')[-1]!r} is not a PostgreSQL URL: write "
                    "postgresql://user@host:port/db, several separated by commas"
                )
        return value

    @property
    def read_urls(self) -> list[str]:
        """``TRIPEAKS_DATABASE_READ_URLS`` as a list of URLs (empty: none)."""
        return split_read_urls(self.database_read_urls)

    @property
    def origins(self) -> frozenset[str]:
        """``TRIPEAKS_ALLOWED_ORIGINS`` as a set of lower-case origins (``*``: any)."""
        return frozenset(_split_origins(self.allowed_origins))

    @model_validator(mode="after")
    def _direct_url_behind_a_pooler(self) -> Settings:
        self.check_pooler()
        return self

    @property
    def operations_host(self) -> str:
        """The address the operations port listens on (``TRIPEAKS_OPS_HOST``, else the main
        port's)."""
        return self.ops_host or self.host

    @model_validator(mode="after")
    def _ops_port_of_its_own(self) -> Settings:
        if self.ops_port is not None and self.ops_port == self.port:
            raise ValueError(
                f"TRIPEAKS_OPS_PORT must differ from the main port ({self.port}): the "
                "operations port is a port of its own"
            )
        return self

    def database_deadlines(self) -> DatabaseDeadlines:
        """The bounds of each wait on the database (``TRIPEAKS_DB_CONNECT_TIMEOUT_S``,
        ``TRIPEAKS_DB_STATEMENT_TIMEOUT_S``, ``TRIPEAKS_DB_POOL_TIMEOUT_S``), in seconds."""
        from server.storage.db import DatabaseDeadlines

        return DatabaseDeadlines(
            connect_s=self.db_connect_timeout_s,
            statement_s=self.db_statement_timeout_s,
            checkout_s=self.db_pool_timeout_s,
        )

    @property
    def instance_timeout(self) -> float:
        """Seconds after which a process that stopped refreshing its record is taken for dead:
        ``TRIPEAKS_INSTANCE_TIMEOUT_S``, by default 30 or three sweeps if those are longer."""
        if self.instance_timeout_s is not None:
            return self.instance_timeout_s
        return max(DEFAULT_INSTANCE_TIMEOUT_S, 3 * self.race_sweep_s)

    @model_validator(mode="after")
    def _instance_timeout_beyond_sweeps(self) -> Settings:
        # A process refreshes its record once per race sweep: a time-out of fewer than three
        # sweeps would take a merely busy process for dead.
        if self.instance_timeout_s is not None and self.instance_timeout_s < 3 * self.race_sweep_s:
            raise ValueError(
                f"TRIPEAKS_INSTANCE_TIMEOUT_S ({self.instance_timeout_s:g}) must be at least "
                f"three times TRIPEAKS_RACE_SWEEP_S ({self.race_sweep_s:g}): each process "
                "refreshes its record once per sweep"
            )
        return self

    def check_pooler(self) -> None:
        """Refuse a transaction pooler without a direct URL (settings copied with
        ``model_copy`` are not validated again: the app checks them with this too).

        Raises:
            ValueError: ``TRIPEAKS_DB_POOLER=transaction`` with a database URL and no
                ``TRIPEAKS_DIRECT_DATABASE_URL``.
        """
        if self.db_pooler == "transaction" and self.database_url and not self.direct_database_url:
            raise ValueError(
                "TRIPEAKS_DB_POOLER=transaction needs TRIPEAKS_DIRECT_DATABASE_URL: a URL that "
                "reaches PostgreSQL itself, not through the pooler, for the event listener "
                "(LISTEN) and the migrations (a session-level advisory lock), which a "
                "transaction pooler cannot carry"
            )


#: Shortest daily secret accepted, in bytes (UTF-8): 256 bits of a random hex or base64 value.
SECRET_MIN_BYTES = 32

#: Values published in this repository or its docs, or commonly pasted from examples: anyone
#: could compute a deployment's dailies from them.
KNOWN_PLACEHOLDER_SECRETS = frozenset(
    {
        "change-me-to-a-long-random-secret",
        "changeme",
        "change-me",
        "change_me",
        "secret",
        "password",
        "docs-secret-0123456789",
        "test-daily-secret-0123456789",
        "your-secret-here",
        "your-daily-secret",
    }
)

#: How to make a good secret, quoted by every refusal.
HOW_TO_MAKE_A_SECRET = (
    "make one with: python3 -c 'import secrets; print(secrets.token_hex(32))' "
    "(or: openssl rand -hex 32)"
)


class SecretError(ValueError):
    """The daily secret is missing, too short or a known placeholder; the message names the
    variable (or file) and says how to make a good one."""


#: Words a random secret never holds; a value with one was typed or copied from an example.
_PLACEHOLDER_WORDS = ("change", "replace", "example", "placeholder", "secret", "password")


def check_daily_secret(secret: bytes, source: str) -> bytes:
    """Refuse a daily secret anyone could know or guess.

    Args:
        secret: the secret's bytes.
        source: where it came from, for the message (``TRIPEAKS_DAILY_SECRET`` or a file).

    Returns:
        ``secret`` unchanged.

    Raises:
        SecretError: with surrounding whitespace; shorter than :data:`SECRET_MIN_BYTES`; a
            known placeholder or holding one of the words change, replace, example,
            placeholder, secret or password (any case); fewer than 8 distinct characters; or
            one short part repeated (``abcdefgh`` four times).
    """
    text = secret.decode("utf-8", "replace")
    lowered = text.lower()
    if text != text.strip():
        problem = "starts or ends with whitespace (a quoting mistake?)"
    elif len(secret) < SECRET_MIN_BYTES:
        problem = f"is {len(secret)} bytes long; at least {SECRET_MIN_BYTES} are needed"
    elif lowered in KNOWN_PLACEHOLDER_SECRETS or any(w in lowered for w in _PLACEHOLDER_WORDS):
        problem = "is a published placeholder: anyone could compute this server's daily deals"
    elif len(set(secret)) < 8:
        problem = "has fewer than 8 distinct characters: it can be guessed"
    elif secret in (secret + secret)[1:-1]:
        problem = "is one short part repeated: it can be guessed"
    else:
        return secret
    raise SecretError(f"{source} {problem}; {HOW_TO_MAKE_A_SECRET}")


def load_or_create_daily_secret(settings: Settings, *, generate: bool = True) -> bytes:
    """The daily secret: from the settings, else from ``<data dir>/daily_secret`` (created with a
    fresh 256-bit random value, readable by the owner only, the first time, when ``generate``).

    Args:
        settings: the server settings.
        generate: whether the secret may come from the data folder, generated there the first
            time (the embedded database: one process, one folder). With an external database
            every process must be given the same secret in ``TRIPEAKS_DAILY_SECRET``.

    Returns:
        The secret as bytes.

    Raises:
        SecretError: no secret and ``generate`` is false, or the secret is too short or a known
            placeholder (see :func:`check_daily_secret`).
        OSError: the data folder cannot be written.
    """
    if settings.daily_secret:
        return check_daily_secret(settings.daily_secret.encode(), "TRIPEAKS_DAILY_SECRET")
    if not generate:
        raise SecretError(
            "TRIPEAKS_DAILY_SECRET is not set: with an external database (DATABASE_URL) every "
            "server process must be given the same secret, at least "
            f"{SECRET_MIN_BYTES} bytes; {HOW_TO_MAKE_A_SECRET}"
        )
    path = settings.data_dir / "daily_secret"
    if path.exists():
        return check_daily_secret(path.read_text().rstrip("\n").encode(), str(path))
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process created it first
        return check_daily_secret(path.read_text().rstrip("\n").encode(), str(path))
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value.encode()
