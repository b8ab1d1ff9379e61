"""The aiohttp application: REST API, websocket, static page, and their resources."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from aiohttp import WSCloseCode, web

from server import catalogue
from server.config import Settings, load_or_create_daily_secret
from server.engine.codes import RuleSet
from server.services import Services
from server.services.analysis import Analyzer
from server.services.clock import Clock, SystemClock
from server.services.connections import ConnectionLimit
from server.services.races import RaceLimits
from server.storage.db import create_engine, migrate_url
from server.storage.events import Listener, PgPublisher
from server.storage.replicas import ReadRouter
from server.web import faults, http, metrics, page_rules, per_address, routes, ws
from server.web.admission import Admission
from server.web.arrivals import Arrivals
from server.web.background import periodically
from server.web.collector import RECLAIM_CHECK_S, STORM_LINGER_S, Collector
from server.web.departures import Departures
from server.web.hub import Hub
from server.web.keys import (
    ADMISSION,
    ARRIVALS,
    CLOCK,
    DEPARTURES,
    HUB,
    METRICS,
    PLAYER_SOCKETS,
    SERVICES,
    SETTINGS,
    SHUTTING_DOWN,
    SOCKETS,
)
from server.web.metrics import BackgroundTask
from server.web.outbox import CLOSE_GRACE_S
from server.web.per_address import ADDRESS_CONNECTIONS, AddressConnections

log = logging.getLogger(__name__)

T = TypeVar("T")

STATIC_DIR = Path(__file__).resolve().parent / "static"
#: The page's addresses (router.js): each serves the page, which shows the view it names.
PAGE_PATHS = (
    "/",
    "/race/{invite}",
    "/replay/{game_id}",
    "/players/{player_id}",
    "/daily/{date}",
    "/boards/week/{period}",
    "/boards/month/{period}",
    "/games/{game_id}",
    "/settings",
    "/following",
    "/ladder/{rules:[EC]}",
)
_PAGE_PREFIXES = tuple(p[: p.index("{")] for p in PAGE_PATHS if "{" in p)
_PAGE_EXACT = tuple(p for p in PAGE_PATHS if "{" not in p)


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    run_migrations: bool = True,
    analyzer: Analyzer | None = None,
    daily_secret: bytes | None = None,
    freeze_startup: bool = False,
) -> web.Application:
    """Build the application.

    Args:
        settings: validated settings; ``settings.database_url`` must be set (the CLI starts the
            embedded PostgreSQL and fills it in when the environment gives none).
        clock: the UTC clock (a fake one in tests).
        run_migrations: migrate the database to the newest schema at start (under an advisory
            lock, so concurrent starts are safe).
        analyzer: a solver pool to share (the caller closes it); by default the app starts
            its own with ``settings.solver_workers`` processes (none when 0).
        daily_secret: the daily secret, already loaded (the CLI loads it, generating it beside
            the embedded database, before that database starts); by default it is
            ``TRIPEAKS_DAILY_SECRET`` from the settings, which must then be set.
        freeze_startup: once started, move every object alive then (modules, the schema, the
            compiled statements: some hundreds of thousands) out of the garbage collector's
            reach, and from then on the survivors of each full collection too, reclaiming
            them when due (:class:`server.web.collector.Collector`).
            For a server process (``tripeaks serve``); a process that makes many apps (tests)
            would keep each one's objects for ever.

    Returns:
        The application; its database engine opens on startup and closes on cleanup, and every
        open websocket is closed with 1001 (going away) on shutdown.

    Raises:
        ValueError: no database URL in the settings, or a transaction pooler without a direct
            URL (see :meth:`Settings.check_pooler`).
        SecretError: (a ValueError) the daily secret is missing, too short or a known
            placeholder; the message names the variable and how to make one.
    """
    if not settings.database_url:
        raise ValueError("create_app needs settings.database_url")
    settings.check_pooler()
    if daily_secret is None:
        daily_secret = load_or_create_daily_secret(settings, generate=False)
    app = web.Application(
        middlewares=[
            _door_middleware,
            http.timing_middleware,
            per_address.limit_middleware,
            http.error_middleware,
            http.origin_middleware,
        ],
        client_max_size=64 * 1024,
        handler_args=faults.handler_args(settings),
    )
    app[SETTINGS] = settings
    app[CLOCK] = clock or SystemClock()
    app[SOCKETS] = set()
    app[PLAYER_SOCKETS] = ConnectionLimit(settings.max_sockets_per_player)
    app[ADDRESS_CONNECTIONS] = AddressConnections(settings.max_connections_per_address)
    app[SHUTTING_DOWN] = asyncio.Event()
    app[METRICS] = metrics.ActivityReader()
    # Newcomers use at most half the database pool, so the players already at the table keep
    # theirs however many arrive at once.
    app[ADMISSION] = Admission(
        max(1, settings.db_pool_size // 2),
        settings.admission_wait_s,
        shed_lag_s=settings.admission_shed_lag_ms / 1000 or None,
        retry_spread_per_s=settings.admission_retry_spread_per_s,
        retry_max_s=settings.admission_retry_max_s,
    )
    app[ARRIVALS] = Arrivals(app[ADMISSION], settings.http_header_timeout_s)
    app[DEPARTURES] = Departures()
    app.cleanup_ctx.append(_database(run_migrations, analyzer, daily_secret))
    if freeze_startup:
        app.cleanup_ctx.append(_collect_garbage)
    app.cleanup_ctx.append(_quiet_accept_failures)
    app.cleanup_ctx.append(_watch_loop_lag)
    app.on_shutdown.append(_close_sockets)
    app.on_response_prepare.append(_cache_headers)
    app.on_response_prepare.append(_through_door)
    routes.add_routes(app)
    app.router.add_get("/ws", ws.websocket_handler)
    app.router.add_get("/i18n/{locale}.json", _catalogue)
    index = STATIC_DIR / "index.html"
    if index.exists():
        for path in PAGE_PATHS:
            app.router.add_get(path, _index)
        page_rules.add_routes(app)
        app.router.add_static("/static/", STATIC_DIR, name="static")
    return app


def _database(
    run_migrations: bool, shared: Analyzer | None, daily_secret: bytes
) -> Callable[[web.Application], AsyncIterator[None]]:
    """The application's database context: the engine, the services over it, the race hub and
    event listener, and the background loops. Each resource registers its own clean-up as it
    is acquired, so a start that fails half-way stops exactly what it started, in reverse
    order; each clean-up step is bounded (see :func:`_bounded`)."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            services, hub = await _open_services(app, stack, run_migrations, shared, daily_secret)
            _start_loops(app[SETTINGS], stack, services, hub)
            yield

    return ctx


async def _open_services(
    app: web.Application,
    stack: contextlib.AsyncExitStack,
    run_migrations: bool,
    shared: Analyzer | None,
    daily_secret: bytes,
) -> tuple[Services, Hub]:
    """Open the engine (migrating first when asked), build the services, register this process's
    presence and start the race hub's event listener; returns the services and the hub."""
    settings = app[SETTINGS]
    assert settings.database_url
    # Behind a transaction pooler, DATABASE_URL serves the requests and the direct URL what
    # holds a session: LISTEN and the migrations' advisory lock.
    direct_url = settings.direct_database_url or settings.database_url
    engine = create_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        pooler=settings.db_pooler,
        deadlines=settings.database_deadlines(),
    )
    stack.callback(metrics.watch_pool(engine))
    stack.push_async_callback(_bounded, "the database pool", _later(engine.dispose))
    reads = None
    if settings.read_urls:
        reads = ReadRouter.over(
            engine,
            settings.read_urls,
            pool_size=settings.db_pool_size,
            pooler=settings.db_pooler,
            max_lag_s=settings.database_read_max_lag_s,
            timeout_s=settings.database_read_timeout_s,
            observer=metrics.ReplicaMetrics(),
        )
        stack.push_async_callback(_bounded, "the read replicas' pools", _later(reads.close))
    analyzer = shared
    if shared is None and settings.solver_workers:
        analyzer = Analyzer(
            settings.solver_workers,
            on_lookup=metrics.solver_lookup,
            on_solve=metrics.solver_solved,
        )
        stack.callback(analyzer.close)
    if run_migrations:
        # On a connection of their own, whose statements have no deadline.
        migrating = migrate_url(direct_url)
        await _starting(settings, "migrating the schema", migrating)
    # Events leave after their commits, many in one statement, on a connection of
    # their own to the direct URL (stopped after the group committer: its last events go too).
    publisher = PgPublisher(
        direct_url,
        every_s=settings.event_batch_ms / 1000,
        max_pending=settings.event_max_pending,
        timeout_s=settings.db_write_timeout_s,
        on_sent=metrics.events_published,
        on_dropped=metrics.events_dropped,
    )
    await publisher.start()
    stack.push_async_callback(_bounded, "the event publisher", _later(publisher.stop))
    services = app[SERVICES] = Services.build(
        engine,
        app[CLOCK],
        daily_secret=daily_secret,
        daily_rules=RuleSet(settings.daily_rules),
        race_limits=RaceLimits(
            max_players=settings.race_max_players,
            max_rooms=settings.race_max_rooms,
            countdown_s=settings.race_countdown_s,
            default_time_limit_s=settings.race_time_limit_s,
            min_time_limit_s=settings.race_min_time_limit_s,
            max_time_limit_s=settings.race_max_time_limit_s,
            grace_s=settings.race_grace_s,
            instance_timeout_s=settings.instance_timeout,
        ),
        analyzer=analyzer,
        write_timeout_s=settings.db_write_timeout_s,
        observe_batch=metrics.observe_batch,
        reads=reads,
        publisher=publisher,
        observe_match=metrics.observe_match,
    )
    stack.push_async_callback(_bounded, "the group committer", _later(services.close))
    # The listener hands events to the hub, and the hub tells it which rooms to listen to.
    listener = Listener(
        direct_url,
        lambda event: hub.handle(event),
        lambda: hub.resync(),
        on_restart=lambda: metrics.background_restarted(BackgroundTask.EVENT_LISTENER),
        on_queue_usage=metrics.event_queue_usage,
        on_channels=metrics.event_room_channels,
    )
    hub = app[HUB] = Hub(services, listener)
    stack.push_async_callback(_bounded, "the race hub", _later(hub.close))
    await _starting(settings, "recording this process", services.presence.register())
    stack.push_async_callback(
        _bounded, "the presence records", _later(services.presence.unregister)
    )
    # Runs before the line above: the last closes' records are written while this process's
    # record stands (a write after it would make the record again).
    stack.push_async_callback(
        _bounded, "the online records", _later(services.friends.records.close)
    )
    await _starting(settings, "listening for events", listener.start())
    stack.push_async_callback(_bounded, "the event listener", _later(listener.stop))
    return services, hub


#: Seconds between the warnings of a start still waiting for the database.
START_NOTICE_S = 10.0

#: What a start that waits for the database may be waiting for.
START_HINT = (
    "a connection pooler whose server connections are all taken (in session mode each server "
    "process holds up to 2 x TRIPEAKS_DB_POOL_SIZE connections to DATABASE_URL and two more to "
    "the direct URL, for events: the pooler's pool must cover every process's), or a database "
    "that does not answer"
)


class StartupTimeout(Exception):
    """A step of the start waited for the database longer than ``TRIPEAKS_DB_START_TIMEOUT_S``."""


async def _starting(settings: Settings, what: str, step: Awaitable[T]) -> T:
    """Await one database step of the start: warn every :data:`START_NOTICE_S` while it waits,
    and give it up after ``settings.db_start_timeout_s``.

    A statement behind a pooler whose pool is taken waits in the pooler's queue (PgBouncer's
    ``query_wait_timeout``: two minutes), which the driver's connect time-out does not cover:
    without this bound the process would wait there saying nothing.

    Raises:
        StartupTimeout: the step did not end in time (it is cancelled, and left behind if
            cancelling does not end it within :data:`CLEANUP_STEP_S`).
    """
    task = asyncio.ensure_future(step)
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + settings.db_start_timeout_s
    try:
        while True:
            left = deadline - loop.time()
            done, _ = await asyncio.wait({task}, timeout=max(0.0, min(START_NOTICE_S, left)))
            if done:
                return task.result()
            waited = loop.time() - started
            if loop.time() >= deadline:
                break
            log.warning(
                "start: still %s after %.0f s, waiting for the database: %s",
                what,
                waited,
                START_HINT,
            )
    except asyncio.CancelledError:
        task.cancel()
        raise
    task.add_done_callback(lambda ended: ended.cancelled() or ended.exception())
    task.cancel()
    await asyncio.wait({task}, timeout=CLEANUP_STEP_S)
    raise StartupTimeout(
        f"the database did not answer within {settings.db_start_timeout_s:g} s "
        f"(TRIPEAKS_DB_START_TIMEOUT_S) while {what}: {START_HINT}"
    )


def _start_loops(
    settings: Settings, stack: contextlib.AsyncExitStack, services: Services, hub: Hub
) -> None:
    """Start the background loops, each stopped (bounded) at shutdown: the presence heartbeat,
    the race sweep, the quick-race matcher, the presence sweep, the online sweep (the records of
    who is online), the read replicas' lag probe (with read URLs), and the daily deals prepared
    ahead. Separate loops, so that none holds up another; a failed step is counted and tried
    again after a back-off (:func:`.background.periodically`)."""

    async def heartbeat() -> None:
        # This process's presence record, kept fresh on its own (a sweep held up by a locked
        # room must not get the process taken for dead).
        if not await services.presence.heartbeat():
            log.warning("presence: this process was taken for dead; recording again")
            await services.presence.refollow(hub.follows_all())
            await services.friends.reconnect(hub.signed_in_all())

    def loop(
        task: BackgroundTask, every_s: float, step: Callable[[], Awaitable[object]], **kw: bool
    ) -> None:
        running = asyncio.create_task(periodically(task, every_s, step, **kw), name=task.value)
        stack.push_async_callback(_stop, task.value, running)

    # Six beats per instance time-out are plenty to be seen in time (5 s by default).
    loop(
        BackgroundTask.PRESENCE_HEARTBEAT,
        max(settings.race_sweep_s, settings.instance_timeout / 6),
        heartbeat,
    )
    loop(BackgroundTask.RACE_SWEEP, settings.race_sweep_s, services.races.sweep)
    loop(BackgroundTask.ROOM_SWEEP, settings.event_sweep_s, hub.sweep)
    loop(
        BackgroundTask.QUEUE_MATCH,
        services.matchmaker.rules.interval_s,
        lambda: services.matchmaker.match_all(hub.open_keys),
    )
    loop(
        BackgroundTask.PRESENCE_SWEEP,
        settings.race_sweep_s,
        lambda: services.presence.sweep(hub.open_keys),
    )
    loop(
        BackgroundTask.ONLINE_SWEEP,
        settings.race_sweep_s,
        lambda: services.friends.sweep(hub.open_keys, hub.signed_in_all),
    )
    if services.reads is not None:
        loop(
            BackgroundTask.REPLICA_LAG,
            settings.database_read_probe_s,
            services.reads.probe,
            at_once=True,
        )
    if settings.daily_prepare_every_s > 0:
        lead = dt.timedelta(seconds=settings.daily_prepare_ahead_s)
        loop(
            BackgroundTask.DAILY_PREPARE,
            settings.daily_prepare_every_s,
            lambda: services.daily.prepare_ahead(lead),
            at_once=True,
        )


def _later(step: Callable[[], Awaitable[object]]) -> Awaitable[object]:
    """An awaitable that starts ``step`` only when awaited (a clean-up registered now, run at
    shutdown)."""

    async def run() -> object:
        return await step()

    return run()


#: Seconds each clean-up step may take at shutdown before it is given up.
CLEANUP_STEP_S = 2.0


async def _stop(what: str, task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait for it to end, for at most :data:`CLEANUP_STEP_S`
    (its own cancellation is not the shutdown's)."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task}, timeout=CLEANUP_STEP_S)
    if not task.done():
        log.error("shutdown: %s did not stop within %.0f s; going on", what, CLEANUP_STEP_S)


async def _bounded(what: str, step: Awaitable[object]) -> None:
    """Await one clean-up step for at most :data:`CLEANUP_STEP_S` (twice that if it must be
    cancelled); log it if it fails or hangs (the shutdown goes on either way).

    A step still running after the bound is cancelled and gets one more bound to end (it may
    close what it holds as it ends). It runs as a task of its own, so the bound holds even
    for a step that does not end when cancelled (the database driver, cancelled in the middle
    of a query, waits for its connection to close; behind PgBouncer whose database is gone
    that is minutes): that one is left behind. The clean-up may itself run in a task being
    cancelled (:func:`server.web.serving.run_app`, as aiohttp's, cancels its main task to
    stop): that cancellation stops the step too and goes on up."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.wait({task}, timeout=CLEANUP_STEP_S)
        if not task.done():
            log.error("shutdown: %s did not stop within %.0f s; going on", what, CLEANUP_STEP_S)
            # What it raises as it ends is of no more interest (left behind or not).
            task.add_done_callback(lambda done: done.cancelled() or done.exception())
            task.cancel()  # it may close what it holds as it ends: that gets one more bound
            await asyncio.wait({task}, timeout=CLEANUP_STEP_S)
            return
    except asyncio.CancelledError:
        task.cancel()
        raise  # the shutdown itself is being cancelled
    if task.cancelled():
        if task is not step:  # a task passed in and cancelled on purpose says nothing
            log.error("shutdown: %s was cancelled; going on", what)
    elif (exc := task.exception()) is not None:
        log.error("shutdown: stopping %s failed; going on", what, exc_info=exc)


async def _collect_garbage(app: web.Application) -> AsyncIterator[None]:
    """After the database context has started: freeze what is alive, set the collector's
    thresholds and freeze the survivors of its full collections, and of its middle ones until
    :data:`STORM_LINGER_S` after a connection last waited at the door or to be let go
    (:class:`Collector`); while the app runs, reclaim the frozen objects when due and the
    process is quiet (not shedding, nobody waiting for admission, its loop on time, not in a
    storm)."""
    arrivals, departures = app[ARRIVALS], app[DEPARTURES]
    loop = asyncio.get_running_loop()

    def in_storm() -> bool:
        last = max(arrivals.last_held_at, departures.last_waited_at)
        return loop.time() - last < STORM_LINGER_S

    collector = Collector(in_storm=in_storm)
    collector.start()
    admission = app[ADMISSION]

    def quiet() -> bool:
        return not admission.shedding and not admission.waiting and admission.lag_s < 0.05

    watcher = asyncio.create_task(collector.watch(RECLAIM_CHECK_S, quiet))
    yield
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher
    collector.stop()


async def _quiet_accept_failures(app: web.Application) -> AsyncIterator[None]:
    """While the app runs, connections the loop cannot accept (no file left) are client
    faults, not ERRORs with tracebacks (see :func:`faults.quiet_accept_failures`)."""
    restore = faults.quiet_accept_failures(asyncio.get_running_loop())
    yield
    restore()


#: Seconds between two measures of the event loop's lag (admission's shedding).
LOOP_LAG_EVERY_S = 0.05


async def _watch_loop_lag(app: web.Application) -> AsyncIterator[None]:
    """While the app runs, the event loop's lag is measured for admission (newcomers are
    turned away at once while it runs too late) and for the door (new connections wait
    there while it is busy, let in after each measure)."""
    watcher = asyncio.create_task(
        app[ADMISSION].watch_loop(LOOP_LAG_EVERY_S, then=app[ARRIVALS].measured)
    )
    yield
    watcher.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watcher


async def _close_sockets(app: web.Application) -> None:
    app[SHUTTING_DOWN].set()
    log.info("shutting down: closing %d websockets", len(app[SOCKETS]))
    sockets: set[web.WebSocketResponse] = app[SOCKETS]

    async def close(socket: web.WebSocketResponse) -> None:
        # Bounded: a peer that stopped reading would hold its close (and the shutdown) for
        # ever; its handler cuts it off after the grace time.
        with contextlib.suppress(TimeoutError, ConnectionError):
            async with asyncio.timeout(CLOSE_GRACE_S):
                await socket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")

    await asyncio.gather(*(close(socket) for socket in list(sockets)))


@web.middleware
async def _door_middleware(request: web.Request, handler: http.Handler) -> web.StreamResponse:
    """A request begins: the first of a connection let in makes it one entering
    (:meth:`server.web.arrivals.Arrivals.started`)."""
    request.app[ARRIVALS].started(request.protocol, partial(http.client_group, request))
    return await handler(request)


async def _through_door(request: web.Request, response: web.StreamResponse) -> None:
    """A request's response begins: its connection is through the door
    (:meth:`server.web.arrivals.Arrivals.through`), unless it is a websocket's upgrade (that
    one is through once its first message is read)."""
    if response.status != 101:
        request.app[ARRIVALS].through(request.protocol)


async def _cache_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The page, its modules and its texts are revalidated on every load, so an upgrade is seen
    at once; API answers are never cached."""
    path = request.path
    if path in _PAGE_EXACT or path.startswith(("/static/", "/i18n/", *_PAGE_PREFIXES)):
        response.headers.setdefault("Cache-Control", "no-cache")
    elif path.startswith("/api/"):
        response.headers.setdefault("Cache-Control", "no-store")


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html")


async def _catalogue(request: web.Request) -> web.FileResponse:
    """``GET /i18n/<locale>.json``: a language's message catalogue, the very file the server
    reads its texts from (``server/catalogue/``), for the page; only a known locale's."""
    try:
        locale = catalogue.Locale(request.match_info["locale"])
    except ValueError:
        raise web.HTTPNotFound() from None
    return web.FileResponse(catalogue.path(locale))
