"""Moderation: bans, hidden results, the audit trail, and a day's suspicious results
(docs/rules.md §4 "Moderation"; the ``tripeaks admin`` commands).

A **ban** stops a player from starting ranked play (the daily, racing) and hides every daily game
of theirs that is not hidden yet, whatever its status; an **unban** restores exactly the games
its ban hid. **Hiding** one daily result takes it off its board; **restoring** puts it back.
Nothing is deleted: a hidden game keeps its row, and the audit trail (``moderation_actions``)
keeps who did what, when and why. Each command is one transaction that locks the player's row
(then the game's) before it checks anything, so two moderators acting at once take turns and
a refused command changes nothing.

The review of a day's results (:meth:`ModerationService.suspicious`) reads only what the server
already has: elapsed times, action logs against the solver's optimal line, and the keyed hash
of the address each account registered from (:func:`hash_address`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import ipaddress
import statistics
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from server.engine.codes import GameCode
from server.errors import (
    BannedError,
    ConflictError,
    ErrorCode,
    InvalidInputError,
    NotFoundError,
)
from server.names import name_key
from server.storage import moderation as store
from server.storage.moderation import ActionRecord, DayResult, GameRecord, PlayerRecord
from server.storage.sessions import Sessions

#: What the address key is derived from the daily secret for (a key of its own: the daily
#: secret itself never meets an address).
ADDRESS_KEY_LABEL = b"tripeaks:address-hash:v1"
#: Longest reason kept with an action (a ban's is shown to the player).
REASON_MAX = 300
#: Longest moderator name.
MODERATOR_MAX = 100
#: Most rows ``log`` shows at once.
LOG_MAX = 1000


# ------------------------------------------------------------------------- client addresses


def address_key(daily_secret: bytes) -> bytes:
    """The key of the address hashes, derived from the daily secret (HMAC-SHA256 of a fixed
    label): every process of a service, sharing the secret, hashes an address alike."""
    return hmac.new(daily_secret, ADDRESS_KEY_LABEL, hashlib.sha256).digest()


def address_group(address: str) -> str | None:
    """What counts as one address: an IPv4 address as it is (an IPv4-mapped IPv6 address as its
    IPv4 address), an IPv6 address by its /64 network, which one subscriber usually holds whole;
    None for anything that is not an IP address (a Unix socket's peer).

    >>> address_group("203.0.113.7"), address_group("::ffff:203.0.113.7")
    ('203.0.113.7', '203.0.113.7')
    >>> address_group("2001:db8:1:2:aaaa::1"), address_group("unknown")
    ('2001:db8:1:2::/64', None)
    """
    try:
        ip = ipaddress.ip_address(address.strip().split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def hash_address(key: bytes, address: str) -> bytes | None:
    """HMAC-SHA256 of an address's :func:`address_group` under ``key`` (32 bytes), or None
    when it is not an IP address. The address itself is never stored."""
    group = address_group(address)
    if group is None:
        return None
    return hmac.new(key, group.encode(), hashlib.sha256).digest()


# ------------------------------------------------------------------------------- the check


def banned_message(player: PlayerRecord) -> str:
    """What a banned player is told when ranked play is refused."""
    assert player.banned_at is not None
    since = player.banned_at.astimezone(dt.UTC).date().isoformat()
    return (
        f"you are banned from ranked play (since {since}): {player.ban_reason}. "
        "Free play and watching races are still open to you"
    )


async def refuse_banned(db: Sessions | AsyncSession, player_id: int) -> None:
    """Refuse ranked play to a banned player: the daily, opening a race, a racer's seat.

    Args:
        db: the session factory, or a session already open (its transaction is used).
        player_id: the player.

    Raises:
        BannedError: ``banned`` (a :class:`~server.errors.ForbiddenError`), saying since when
            and why in its message, with the ban's date and reason as attributes.
        StorageError: the database failed.
    """
    if isinstance(db, AsyncSession):
        banned = await store.ban_of(db, player_id)
    else:
        async with db() as session:
            banned = await store.ban_of(session, player_id)
    if banned is not None:
        assert banned.banned_at is not None and banned.ban_reason is not None
        raise BannedError(
            banned_message(banned),
            since=banned.banned_at.astimezone(dt.UTC).date(),
            reason=banned.ban_reason,
        )


# --------------------------------------------------------------------------- the commands


@dataclass(frozen=True, slots=True)
class Stamp:
    """An audit row just written: its id, its time (UTC, the database's clock) and who."""

    id: int
    at: dt.datetime
    moderator: str


@dataclass(frozen=True, slots=True)
class Banned:
    """A ban made: the player (as before it), and the daily games it hid, in date order."""

    action: Stamp
    player: PlayerRecord
    reason: str
    hidden: list[GameRecord]


@dataclass(frozen=True, slots=True)
class Unbanned:
    """A ban lifted: the player (as before it, with the ban), and the games it restored."""

    action: Stamp
    player: PlayerRecord
    restored: list[GameRecord]


@dataclass(frozen=True, slots=True)
class Hidden:
    """One result hidden; ``from_ban`` is the ban that had hidden it already, whose unban will
    no longer restore it."""

    action: Stamp
    game: GameRecord
    player: PlayerRecord
    from_ban: int | None = None


@dataclass(frozen=True, slots=True)
class Restored:
    """One result restored (``game`` as it was, hidden by ``game.hidden_by``)."""

    action: Stamp
    game: GameRecord
    player: PlayerRecord


def check_moderator(raw: str) -> str:
    """A moderator's name as kept: trimmed, 1 to 100 printable characters.

    Raises:
        InvalidInputError: empty, too long, or holding control characters.
    """
    name = raw.strip()
    if not 1 <= len(name) <= MODERATOR_MAX:
        raise InvalidInputError(f"the moderator's name must be 1 to {MODERATOR_MAX} characters")
    if any(unicodedata.category(c).startswith("C") for c in name):
        raise InvalidInputError("the moderator's name may not hold control characters")
    return name


def check_reason(raw: str | None, *, required: bool) -> str | None:
    """A reason as kept: trimmed, at most 300 characters; None when not given (and allowed).

    Raises:
        InvalidInputError: missing where required, too long, or holding control characters.
    """
    reason = None if raw is None else " ".join(raw.split())
    if not reason:
        if required:
            raise InvalidInputError("a reason is required (--reason TEXT)")
        return None
    if len(reason) > REASON_MAX:
        raise InvalidInputError(f"the reason is {len(reason)} characters; at most {REASON_MAX}")
    if any(unicodedata.category(c).startswith("C") for c in reason):
        raise InvalidInputError("the reason may not hold control characters")
    return reason


def _player_label(player: PlayerRecord) -> str:
    return f"player {player.id} ({player.name})"


class ModerationService:
    """The moderators' commands over the database.

    Args:
        sessions: database session factory.
        address_key: the key of :func:`hash_address` (see :func:`address_key`), for the server
            that records addresses at registration; None where nothing is registered (the CLI).
    """

    def __init__(self, sessions: Sessions, address_key: bytes | None = None) -> None:
        self._sessions = sessions
        self._address_key = address_key

    def address_hash(self, address: str) -> bytes | None:
        """The keyed hash to store for a registering client's address (None: nothing kept)."""
        if self._address_key is None:
            return None
        return hash_address(self._address_key, address)

    # ---------------------------------------------------------------------------- players

    async def _find(self, session: AsyncSession, ref: str) -> PlayerRecord:
        """The player ``ref`` names: ``id:N``, ``name:TEXT``, a number (an id; refused as
        ambiguous when another player is named so), or a name (look-alikes match, as names
        are unique up to them).

        Raises:
            InvalidInputError: an empty or ambiguous reference.
            NotFoundError: no such player.
        """
        text = ref.strip()
        kind, _, rest = text.partition(":")
        by_id: int | None = None
        by_name: str | None = None
        if kind == "id" and rest.strip().isdecimal():
            by_id = int(rest.strip())
        elif kind == "name" and rest.strip():
            by_name = rest.strip()
        elif text.isascii() and text.isdecimal():
            by_id = int(text)
            named = await store.player_by_name_key(session, name_key(text))
            if named is not None and named.id != by_id:
                raise InvalidInputError(
                    f"{text!r} is both a player id and the name of {_player_label(named)}: "
                    f"say id:{text} or name:{text}"
                )
        elif text:
            by_name = text
        else:
            raise InvalidInputError("name a player by id or by name")
        if by_id is not None:
            found = await store.player_by_id(session, by_id) if by_id < 2**63 else None
            if found is None:
                raise NotFoundError(f"there is no player with id {by_id}")
            return found
        assert by_name is not None
        found = await store.player_by_name_key(session, name_key(by_name))
        if found is None:
            raise NotFoundError(f"there is no player named {by_name!r}")
        return found

    async def _lock_player(self, session: AsyncSession, player_id: int) -> PlayerRecord:
        locked = await store.player_by_id(session, player_id, lock=True)
        assert locked is not None  # players are never deleted while moderated
        return locked

    async def player(self, ref: str) -> PlayerRecord:
        """The player ``ref`` names (see :meth:`_find`)."""
        async with self._sessions() as session:
            return await self._find(session, ref)

    async def ban(self, ref: str, reason: str, moderator: str) -> Banned:
        """Ban a player: no more ranked play, and every daily game of theirs not hidden yet is
        hidden by this ban.

        Raises:
            InvalidInputError: no reason, a bad moderator name or player reference.
            NotFoundError: no such player.
            ConflictError: the player is banned already.
        """
        why = check_reason(reason, required=True)
        assert why is not None
        who = check_moderator(moderator)
        async with self._sessions() as session:
            player = await self._lock_player(session, (await self._find(session, ref)).id)
            if player.banned_at is not None:
                raise ConflictError(
                    f"{_player_label(player)} is already banned, since "
                    f"{_when(player.banned_at)} (action #{player.ban_action_id}): "
                    f"{player.ban_reason}"
                )
            games = await store.visible_daily_games(session, player.id)
            action_id, at = await store.record_action(
                session,
                moderator=who,
                action="ban",
                player_id=player.id,
                reason=why,
                details={"hidden_games": [g.id for g in games]},
            )
            await store.set_ban(session, player.id, action_id, at, why)
            await store.set_hidden(session, games, action_id, at)
            await session.commit()
        return Banned(Stamp(action_id, at, who), player, why, games)

    async def unban(self, ref: str, moderator: str, reason: str | None = None) -> Unbanned:
        """Lift a player's ban and restore exactly the games that ban hid (not those hidden on
        their own).

        Raises:
            InvalidInputError: a bad moderator name, reason or player reference.
            NotFoundError: no such player.
            ConflictError: the player is not banned.
        """
        why = check_reason(reason, required=False)
        who = check_moderator(moderator)
        async with self._sessions() as session:
            player = await self._lock_player(session, (await self._find(session, ref)).id)
            if player.ban_action_id is None:
                raise ConflictError(f"{_player_label(player)} is not banned")
            games = await store.games_hidden_by(session, player.id, player.ban_action_id)
            action_id, at = await store.record_action(
                session,
                moderator=who,
                action="unban",
                player_id=player.id,
                reason=why,
                details={"ban": player.ban_action_id, "restored_games": [g.id for g in games]},
            )
            await store.set_hidden(session, games, None, None)
            await store.set_ban(session, player.id, None, None, None)
            await session.commit()
        return Unbanned(Stamp(action_id, at, who), player, games)

    async def _lock_game(
        self, session: AsyncSession, game_id: int
    ) -> tuple[GameRecord, PlayerRecord]:
        """The game and its player, both locked (the player's row first, as every command)."""
        found = await store.game_by_id(session, game_id) if 0 < game_id < 2**63 else None
        if found is None:
            raise NotFoundError(f"there is no game {game_id}", code=ErrorCode.UNKNOWN_GAME)
        player = await self._lock_player(session, found.player_id)
        game = await store.game_by_id(session, game_id, lock=True)
        assert game is not None
        return game, player

    async def _hider(self, session: AsyncSession, game: GameRecord) -> str:
        """Which audit row hid a game, for a message."""
        assert game.hidden_by is not None
        action = await store.action_by_id(session, game.hidden_by)
        if action is None:
            return f"action #{game.hidden_by}"
        why = f": {action.reason}" if action.reason else ""
        return f"{action.action} #{action.id} by {action.moderator} at {_when(action.at)}{why}"

    async def hide(self, game_id: int, reason: str, moderator: str) -> Hidden:
        """Take one daily result off its board (any status: an unfinished game never ranks
        until restored). A game hidden by its player's ban becomes hidden on its own: the
        unban will not restore it.

        Raises:
            InvalidInputError: no reason, a bad moderator name; not a daily game.
            NotFoundError: ``unknown_game``.
            ConflictError: the game is already hidden on its own.
        """
        why = check_reason(reason, required=True)
        assert why is not None
        who = check_moderator(moderator)
        async with self._sessions() as session:
            game, player = await self._lock_game(session, game_id)
            if game.mode != "daily":
                raise InvalidInputError(
                    f"game {game.id} is a {game.mode} game: only daily results are on a board"
                )
            from_ban = None
            if game.hidden_by is not None:
                if game.hidden_by != player.ban_action_id:
                    hider = await self._hider(session, game)
                    raise ConflictError(f"game {game.id} is already hidden ({hider})")
                from_ban = game.hidden_by
            action_id, at = await store.record_action(
                session,
                moderator=who,
                action="hide",
                player_id=player.id,
                game_id=game.id,
                daily_date=game.daily_date,
                reason=why,
                details=None if from_ban is None else {"was_hidden_by_ban": from_ban},
            )
            await store.set_hidden(session, [game], action_id, at)
            await session.commit()
        return Hidden(Stamp(action_id, at, who), game, player, from_ban)

    async def restore(self, game_id: int, moderator: str, reason: str | None = None) -> Restored:
        """Put a hidden result back on its board.

        Raises:
            InvalidInputError: a bad moderator name or reason.
            NotFoundError: ``unknown_game``.
            ConflictError: the game is not hidden, or its player is banned (the ban's games
                come back with the unban; others once the ban is lifted).
        """
        why = check_reason(reason, required=False)
        who = check_moderator(moderator)
        async with self._sessions() as session:
            game, player = await self._lock_game(session, game_id)
            if game.hidden_by is None:
                raise ConflictError(f"game {game.id} is not hidden")
            if player.ban_action_id is not None:
                if game.hidden_by == player.ban_action_id:
                    raise ConflictError(
                        f"game {game.id} was hidden by the ban of {_player_label(player)} "
                        f"(action #{player.ban_action_id}); it comes back when they are unbanned"
                    )
                raise ConflictError(
                    f"{_player_label(player)} is banned (action #{player.ban_action_id}): "
                    "their results stay hidden while the ban lasts; unban them first"
                )
            action_id, at = await store.record_action(
                session,
                moderator=who,
                action="restore",
                player_id=player.id,
                game_id=game.id,
                daily_date=game.daily_date,
                reason=why,
                details={"hidden_by": game.hidden_by},
            )
            await store.set_hidden(session, [game], None, None)
            await session.commit()
        return Restored(Stamp(action_id, at, who), game, player)

    async def log(self, player_ref: str | None = None, limit: int = 50) -> list[ActionRecord]:
        """The audit trail, newest first (about one player with ``player_ref``).

        Raises:
            InvalidInputError: ``limit`` outside 1..1000, a bad player reference.
            NotFoundError: no such player.
        """
        if not 1 <= limit <= LOG_MAX:
            raise InvalidInputError(f"the limit must be 1..{LOG_MAX}")
        async with self._sessions() as session:
            player_id = None
            if player_ref is not None:
                player_id = (await self._find(session, player_ref)).id
            return await store.actions(session, player_id=player_id, limit=limit)

    # ------------------------------------------------------------------ suspicious results

    async def suspicious(
        self,
        date: dt.date,
        thresholds: Thresholds | None = None,
        solve: Callable[[GameCode], Line] | None = None,
    ) -> DayReview:
        """Review a date's ranked results against the signals of :func:`review`.

        Args:
            date: the UTC date.
            thresholds: when each signal fires (defaults: :class:`Thresholds`).
            solve: the day's optimal line for its code (default: the solver, in this process).

        Raises:
            NotFoundError: ``no_daily``: the date has no daily.
        """
        limits = thresholds or Thresholds()
        async with self._sessions() as session:
            code_text = await store.daily_code(session, date)
            if code_text is None:
                raise NotFoundError(
                    f"there was no daily challenge on {date.isoformat()}", code=ErrorCode.NO_DAILY
                )
            results = await store.day_results(session, date)
        code = GameCode.parse(code_text)
        line = await asyncio.to_thread(solve or solve_line, code) if results else None
        logs: dict[int, list[tuple[str, int | None]]] = {}
        if line is not None:
            followed = [r.game_id for r in results if r.undos == 0 and r.seq == len(line.steps)]
            async with self._sessions() as session:
                logs = await store.action_logs(session, followed)
        return review(date, results, line, logs, limits)


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -------------------------------------------------------------------------------- signals


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When the signals fire.

    Attributes:
        fast_fraction: a won result is fast under this fraction of the median elapsed time of
            the date's won results that are not hidden …
        min_sample: … when there are at least this many of them;
        floor_ms_per_move: and, whatever the others did, under this many milliseconds a move.
        shared_accounts: accounts ranked on the date that registered from one address for the
            shared-address signal.
    """

    fast_fraction: float = 0.25
    min_sample: int = 5
    floor_ms_per_move: int = 250
    shared_accounts: int = 3


@dataclass(frozen=True, slots=True)
class Line:
    """The day's optimal line by the solver: its par and its actions as ``(kind, pos)``."""

    par: int
    steps: tuple[tuple[str, int | None], ...]


def solve_line(code: GameCode) -> Line:
    """The solver's optimal line of a deal, in this process (the one the server publishes once
    the date is over: the solver is deterministic)."""
    from server.engine.solver import solve

    solution = solve(code.deal(), code.rules)
    return Line(solution.par, tuple((a.kind.value, a.pos) for a in solution.line))


@dataclass(frozen=True, slots=True)
class Signal:
    """A signal that fired for a result: ``fast``, ``optimal_line`` or ``shared_address``,
    and what it saw, in words."""

    name: str
    explanation: str


@dataclass(frozen=True, slots=True)
class Flagged:
    """A result and the signals that fired for it."""

    result: DayResult
    signals: list[Signal]


@dataclass(frozen=True, slots=True)
class DayReview:
    """A date's ranked results reviewed: the figures the signals compared against, and the
    results for which any fired (most signals first, then in board order)."""

    date: dt.date
    ranked: int
    hidden: int
    won_on_board: int
    median_won_ms: float | None
    fast_under_ms: float | None
    par: int | None
    line_length: int | None
    thresholds: Thresholds
    flagged: list[Flagged] = field(default_factory=list)


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.1f} s"


def review(
    date: dt.date,
    results: Sequence[DayResult],
    line: Line | None,
    logs: dict[int, list[tuple[str, int | None]]],
    limits: Thresholds,
) -> DayReview:
    """The signals of each of a date's ranked results (hidden ones included, so that a
    moderator sees what was already dealt with).

    - ``fast``: a won result whose elapsed time is under ``fast_fraction`` of the median of the
      date's won results on the board (when there are at least ``min_sample``), or under
      ``floor_ms_per_move`` milliseconds a move.
    - ``optimal_line``: its action log is the solver's optimal line, action for action, from
      the deal to the end (``logs`` holds the logs of the results that could be: as many
      actions as the line, no undo).
    - ``shared_address``: ``shared_accounts`` or more accounts ranked on the date registered
      from one address (the same keyed hash).
    """
    won = sorted(r.elapsed_ms for r in results if r.status == "won" and not r.hidden)
    median = float(statistics.median(won)) if won else None
    fast_under = None
    if median is not None and len(won) >= limits.min_sample:
        fast_under = limits.fast_fraction * median
    accounts: dict[bytes, list[DayResult]] = defaultdict(list)
    for r in results:
        if r.address_hash is not None:
            accounts[r.address_hash].append(r)
    flagged: list[tuple[int, int, Flagged]] = []
    for order, r in enumerate(results):
        signals: list[Signal] = []
        if r.status == "won":
            per_move = r.elapsed_ms / max(r.moves, 1)
            if fast_under is not None and r.elapsed_ms < fast_under:
                assert median is not None
                signals.append(
                    Signal(
                        "fast",
                        f"won in {_seconds(r.elapsed_ms)}, under "
                        f"{limits.fast_fraction:.0%} of the median of the day's "
                        f"{len(won)} won results on the board ({_seconds(median)}): "
                        f"the threshold is {_seconds(fast_under)}",
                    )
                )
            elif per_move < limits.floor_ms_per_move:
                signals.append(
                    Signal(
                        "fast",
                        f"won in {_seconds(r.elapsed_ms)} over {r.moves} moves, "
                        f"{per_move:.0f} ms a move: quicker than "
                        f"{limits.floor_ms_per_move} ms a move",
                    )
                )
        if line is not None and logs.get(r.game_id) == list(line.steps):
            signals.append(
                Signal(
                    "optimal_line",
                    f"its {len(line.steps)} actions are the solver's optimal line, action for "
                    f"action, from the deal to the end (score {r.score}; par {line.par})",
                )
            )
        group = accounts.get(r.address_hash) if r.address_hash is not None else None
        if group is not None and len(group) >= limits.shared_accounts:
            assert r.address_hash is not None
            others = ", ".join(f"{g.player_id} {g.player_name}" for g in group[:10])
            more = f" and {len(group) - 10} more" if len(group) > 10 else ""
            signals.append(
                Signal(
                    "shared_address",
                    f"one of {len(group)} accounts ranked on {date.isoformat()} that registered "
                    f"from one address (group {r.address_hash.hex()[:8]}: players "
                    f"{others}{more})",
                )
            )
        if signals:
            flagged.append((-len(signals), order, Flagged(r, signals)))
    flagged.sort(key=lambda item: (item[0], item[1]))
    return DayReview(
        date=date,
        ranked=len(results),
        hidden=sum(r.hidden for r in results),
        won_on_board=len(won),
        median_won_ms=median,
        fast_under_ms=fast_under,
        par=None if line is None else line.par,
        line_length=None if line is None else len(line.steps),
        thresholds=limits,
        flagged=[item[2] for item in flagged],
    )
