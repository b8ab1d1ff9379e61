"""The daily challenge: one secret deal per UTC date (docs/rules.md §4 "Daily challenge")."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import logging
import re
from dataclasses import dataclass

from server.engine.codes import TP2_CODE_SPACE, DealVersion, GameCode, RuleSet
from server.engine.difficulty import Difficulty, Level
from server.errors import ErrorCode, InvalidInputError, NotFoundError, UnavailableError
from server.services.analysis import Analyzer, LineStep
from server.services.clock import Clock
from server.storage.daily import DailyDeal, DailyDifficulty, DailyStore

log = logging.getLogger(__name__)

MAX_CANDIDATES = 128
"""Candidates tried for a date before it is left without a daily (docs/rules.md §4
"Choosing": each fits with probability about 0.243 under Easy and 0.185 under Classic, so 128
all miss with probability below 10⁻¹¹)."""

WEEKDAY_LEVELS: tuple[Level, ...] = (
    Level.EASY,  # Monday
    Level.EASY,
    Level.MEDIUM,
    Level.MEDIUM,
    Level.HARD,
    Level.EXPERT,
    Level.EXPERT,  # Sunday
)
"""The level of each weekday's daily, Monday first: easiest early in the week, hardest at the
weekend (docs/rules.md §4 "Choosing")."""
_DIGEST_SPACE = 1 << 256
_LIMIT = _DIGEST_SPACE - (_DIGEST_SPACE % TP2_CODE_SPACE)
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def level_for(date: dt.date) -> Level:
    """The level ``date``'s daily is chosen for (:data:`WEEKDAY_LEVELS`)."""
    return WEEKDAY_LEVELS[date.weekday()]


def derive_daily_code(secret: bytes, date: dt.date, rules: RuleSet, candidate: int = 0) -> GameCode:
    """The TP2 game code of a date's daily candidate, derived from the server secret
    (docs/rules.md §3 "TP2", §4 "Daily challenge").

    ``HMAC-SHA256(secret, "TP2-daily:" + ISO date + ":" + candidate + ":" + counter)`` for
    ``counter = 0, 1, …`` is read as a 256-bit big-endian number; the first one below the
    largest multiple of 26²⁸ gives the number modulo 26²⁸ (uniform, no modulo bias; a second
    try happens with probability below 2⁻¹²⁴). Without the secret nobody can compute it in
    advance, and the 26²⁸ deals cannot be searched from the cards on the table.

    Args:
        secret: the server's daily secret (bytes).
        date: the UTC date.
        rules: the day's rule set.
        candidate: which candidate of the date (0 first).

    Returns:
        The daily's TP2 game code.
    """
    counter = 0
    while True:
        msg = f"TP2-daily:{date.isoformat()}:{candidate}:{counter}".encode()
        value = int.from_bytes(hmac.new(secret, msg, hashlib.sha256).digest(), "big")
        if value < _LIMIT:
            return GameCode(rules, value % TP2_CODE_SPACE, DealVersion.TP2)
        counter += 1


@dataclass(frozen=True, slots=True)
class DailyInfo:
    """A date's daily challenge as the public may see it.

    ``code`` is None while the date is open (docs/rules.md §4: published once the date is over).
    ``closes_at`` is the UTC instant the date ends; ``server_time`` the server's clock (UTC) when
    the facts were read, so that a client counts down to ``closes_at`` on the server's time.
    ``par`` is the best score perfect play
    reaches (a number reveals no card); ``line``, an optimal line, is given once the date is
    over. ``level`` is the level the deal was chosen for (names no card; None for a date
    chosen without the solver or before levels); ``baselines``, what the difficulty measure's
    players made of it, is given once the date is over (docs/rules.md §4 "Difficulty").
    """

    date: dt.date
    rules: RuleSet
    code: GameCode | None
    is_open: bool
    players: int
    ranked: int
    closes_at: dt.datetime
    server_time: dt.datetime
    par: int | None = None
    line: list[LineStep] | None = None
    level: Level | None = None
    baselines: DailyDifficulty | None = None


def _stored_difficulty(difficulty: Difficulty) -> DailyDifficulty:
    """What a date's row keeps of its deal's difficulty."""
    return DailyDifficulty(
        level=difficulty.level,
        greedy_status=difficulty.greedy_status,
        greedy_score=difficulty.greedy_score,
        random_playouts=difficulty.playouts,
        random_wins=difficulty.random_wins,
        random_median_score=difficulty.random_median_score,
    )


class DailyService:
    """Chooses, stores and reveals daily deals.

    The first server process to need a date's deal (or to prepare it ahead, see
    :meth:`prepare_ahead`) stores it in ``daily_challenges``; every process reads it from there,
    so all agree even if their secrets differ, and rotating the secret never changes a date that
    already has its deal.

    Which date it is, for the daily, is the database's clock's to say (see
    :mod:`server.services.clock`): a date is open while the database's UTC date has not passed
    it, and an action on a daily game is stored only while that holds in the committing
    statement. Processes whose clocks differ therefore agree on when a date closes. With a
    simulated clock (tests) that clock stands in for the database's.

    Args:
        store: where deals are kept and the database's clock read (PostgreSQL, or an
            in-memory store in tests).
        clock: the UTC clock.
        secret: the server's daily secret.
        rules: the rule set of new daily deals.
        analyzer: the solver (winnable deals, par), or None.
    """

    def __init__(
        self,
        store: DailyStore,
        clock: Clock,
        secret: bytes,
        rules: RuleSet = RuleSet.EASY,
        analyzer: Analyzer | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._secret = secret
        self._rules = rules
        self._analyzer = analyzer
        self._confirmed_today: dt.date | None = None

    def pinned_today(self) -> dt.date | None:
        """The UTC date a simulated clock says it is (it decides the boundary), else None: the
        database's clock decides."""
        if self._clock.simulated:
            return self._clock.now().astimezone(dt.UTC).date()
        return None

    async def today(self) -> dt.date:
        """The current UTC date by the database's clock (one short query), or by a simulated
        clock.

        Raises:
            StorageError: the database did not answer.
        """
        pinned = self.pinned_today()
        if pinned is not None:
            return pinned
        today = await self._store.today()
        self._confirm(today)
        return today

    async def is_open(self, date: dt.date) -> bool:
        """Whether a date's daily may still be played: the database's UTC date has not passed
        it.

        Raises:
            StorageError: the database did not answer.
        """
        return date >= await self.today()

    def known_closed(self, date: dt.date) -> bool:
        """Whether this process has seen the database's clock past ``date`` (no query: for
        deciding, on every state sent, whether a daily's code may be shown). It may lag the
        database by a moment, never run ahead of it: a code is never shown early."""
        pinned = self.pinned_today()
        if pinned is not None:
            return date < pinned
        return self._confirmed_today is not None and date < self._confirmed_today

    def note_closed(self, date: dt.date) -> None:
        """Record that the database refused an action on ``date``'s daily: it has closed."""
        self._confirm(date + dt.timedelta(days=1))

    def saw_today(self, today: dt.date) -> None:
        """The database's clock was read as ``today`` (UTC) by another statement: a date
        before it is known closed from now on (:meth:`known_closed`)."""
        self._confirm(today)

    def _confirm(self, today: dt.date) -> None:
        if self._confirmed_today is None or today > self._confirmed_today:
            self._confirmed_today = today

    async def choose(self, date: dt.date) -> DailyDeal:
        """The deal this server deals for ``date``: the first of the date's candidates (in a
        fixed order, derived from the secret) that is winnable under the day's rule set and of
        the level its weekday asks for (:func:`level_for`), so every server with the same
        secret picks the same deal. Each candidate is solved and measured in the solver's
        processes (:meth:`Analyzer.grade`), never in this event loop. Without the solver,
        candidate 0 unchecked, with no difficulty.

        Raises:
            UnavailableError: no candidate fits among the first :data:`MAX_CANDIDATES` (about
                one date in 10¹¹).
        """
        if self._analyzer is None:
            return DailyDeal(derive_daily_code(self._secret, date, self._rules))
        wanted = level_for(date)
        for candidate in range(MAX_CANDIDATES):
            code = derive_daily_code(self._secret, date, self._rules, candidate)
            difficulty = (await self._analyzer.grade(code)).difficulty
            if difficulty is not None and difficulty.level is wanted:
                return DailyDeal(code, _stored_difficulty(difficulty))
        raise UnavailableError(f"no {wanted.value} daily deal found for {date.isoformat()}")

    async def challenge(self, date: dt.date, *, today: dt.date | None = None) -> GameCode:
        """The stored deal of ``date``; today's is created on first use.

        Args:
            date: the UTC date.
            today: the database's date, when the caller has just read it (spares a query).

        Returns:
            The date's game code (its rule set is the day's rule set).

        Raises:
            InvalidInputError: ``bad_date`` for a date in the future.
            NotFoundError: ``no_daily`` for a past date that had no daily (nobody asked for it
                that day); past dates are never created afterwards.
            UnavailableError: no fitting candidate was found for today.
            StorageError: the database failed.
        """
        return (await self._daily(date, today=today)).code

    async def _daily(self, date: dt.date, *, today: dt.date | None = None) -> DailyDeal:
        """:meth:`challenge`, with the date's difficulty."""
        if today is None:
            today = await self.today()
        if date > today:
            raise InvalidInputError(f"{date.isoformat()} is in the future", code=ErrorCode.BAD_DATE)
        stored = await self._store.deal(date)
        if stored is not None:
            return stored
        if date < today:
            raise NotFoundError(
                f"there was no daily challenge on {date.isoformat()}", code=ErrorCode.NO_DAILY
            )
        return await self._choose_and_keep(date)

    async def _choose_and_keep(self, date: dt.date) -> DailyDeal:
        """Choose ``date``'s deal and store it, unless a deal is stored first (by this or
        another process); returns the stored one."""
        chosen = await self.choose(date)
        return await self._store.keep_deal(date, chosen.code, self._clock.now(), chosen.difficulty)

    async def prepare_ahead(self, lead: dt.timedelta) -> list[dt.date]:
        """Make sure today's deal is stored, and tomorrow's too once the day has less than
        ``lead`` left, each chosen (and solved) now, so that the first player of a date never
        waits for the search. Tomorrow's deal stays secret like any open date's: nothing reads a
        future date's row.

        Args:
            lead: how long before midnight (UTC, by this process's clock) tomorrow is prepared.

        Returns:
            The dates whose deal this call stored or found stored (today, maybe tomorrow).

        Raises:
            UnavailableError: no winnable candidate was found.
            StorageError: the database failed.
        """
        today = await self.today()
        dates = [today]
        midnight = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
        if self._clock.now() >= midnight - lead:
            dates.append(today + dt.timedelta(days=1))
        for date in dates:
            stored = await self._store.deal(date)
            if stored is None:
                stored = await self._choose_and_keep(date)
                log.info("daily deal of %s chosen and stored ahead", date.isoformat())
            if self._analyzer is not None:
                await self._analyzer.analyse(stored.code)  # par ready in this process's cache
        return dates

    async def info(self, date: dt.date | None = None) -> DailyInfo:
        """Public facts about a date's daily (today's by default).

        Raises:
            InvalidInputError: ``bad_date`` for a date in the future.
            NotFoundError: ``no_daily`` for a past date without a daily.
            StorageError: the database failed.
        """
        today = await self.today()
        day = today if date is None else date
        stored = await self._daily(day, today=today)
        code = stored.code
        counts = await self._store.counts(day)
        open_ = day >= today
        closes = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
        par, line = None, None
        if self._analyzer is not None:
            analysis = await self._analyzer.analyse(code)
            par = analysis.par
            line = None if open_ else analysis.steps(code)
        return DailyInfo(
            date=day,
            rules=code.rules,
            code=None if open_ else code,
            is_open=open_,
            players=counts.players,
            ranked=counts.ranked,
            closes_at=closes,
            server_time=self._clock.now().astimezone(dt.UTC),
            par=par,
            line=line,
            level=None if stored.difficulty is None else stored.difficulty.level,
            baselines=None if open_ else stored.difficulty,
        )


def parse_date(text: str) -> dt.date:
    """Parse an ISO date (``YYYY-MM-DD``).

    Raises:
        InvalidInputError: ``bad_date`` naming the text.
    """
    try:
        if not _ISO_DATE.fullmatch(text):  # fromisoformat also takes week dates (2026-W11-6)
            raise ValueError
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{text[:40]!r} is not a date (expected YYYY-MM-DD)", code=ErrorCode.BAD_DATE
        ) from None
