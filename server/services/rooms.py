"""A race room as everyone sees it, and the rules about it that need no database: its limits
and timings, invite codes, how a racer's or watcher's presence and a racer's progress are shown,
and the order of the results (docs/rules.md §4 "Races", "Presence").

The race and presence services (:mod:`server.services.races`, :mod:`server.services.presence`)
change rooms; this module only describes them.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from server.engine.actions import Status
from server.engine.codes import GameCode, RuleSet
from server.engine.layout import POSITION_COUNT
from server.errors import ConflictError, ErrorCode, InvalidInputError
from server.services.clock import elapsed_ms
from server.storage.presence import PresenceState
from server.storage.races import RaceRow, RaceStatus
from server.storage.seats import RacerGameRow, RoomSeatRow, WatcherRow

#: Watchers listed in a room (connected ones first); ``watchers_total`` counts them all.
WATCHERS_SHOWN = 50

#: Invite codes: easy to read aloud and type; no 0/O, 1/I/L, 5/S, 2/Z, 8/B look-alikes.
INVITE_ALPHABET = "34679ACDEFGHJKMNPQRTUVWXY"
INVITE_LENGTH = 6


@dataclass(frozen=True, slots=True)
class Presence:
    """A racer's or watcher's presence in a room.

    Attributes:
        state: ``connected``, ``reconnecting`` or ``gone``.
        since: when the state began (UTC).
        until: for ``reconnecting``, when the grace period ends (UTC); otherwise None.
    """

    state: PresenceState
    since: dt.datetime
    until: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Watcher:
    """A player watching a room without a seat."""

    player_id: int
    name: str
    presence: Presence


def presence_of(state: PresenceState, since: dt.datetime, grace_s: float) -> Presence:
    """A stored presence row as shown: ``until`` is the end of a reconnecting player's grace."""
    until = since + dt.timedelta(seconds=grace_s) if state == PresenceState.RECONNECTING else None
    return Presence(state, since, until)


@dataclass(frozen=True, slots=True)
class RaceLimits:
    """Room limits and timings.

    Attributes:
        max_players: seats per room.
        max_rooms: rooms (lobby or running) one player may sit in at once.
        countdown_s: seconds from the host's start to the deal's release.
        default_time_limit_s / min_time_limit_s / max_time_limit_s: the race time limit.
        lobby_ttl_s: a lobby never started is closed after this long.
        grace_s: seconds a racer or watcher whose connections all closed keeps their place
            (reconnecting) before they are gone (docs/rules.md §4 "Presence").
        instance_timeout_s: seconds after which a server process that stopped refreshing its
            record is taken for dead, and its players start reconnecting.
    """

    max_players: int = 8
    max_rooms: int = 3
    countdown_s: float = 5.0
    default_time_limit_s: int = 600
    min_time_limit_s: int = 30
    max_time_limit_s: int = 7200
    lobby_ttl_s: int = 7200
    grace_s: float = 60.0
    instance_timeout_s: float = 30.0

    def time_limit(self, requested_s: int | None) -> int:
        """The time limit of a new race (seconds): ``requested_s``, or the default for None.

        Raises:
            InvalidInputError: ``bad_time_limit``: out of the allowed range.
        """
        limit = self.default_time_limit_s if requested_s is None else requested_s
        if not self.min_time_limit_s <= limit <= self.max_time_limit_s:
            raise InvalidInputError(
                f"time_limit_s must be {self.min_time_limit_s}..{self.max_time_limit_s}",
                code=ErrorCode.BAD_TIME_LIMIT,
            )
        return limit

    def check_rooms(self, held: int) -> None:
        """Whether a player who sits in ``held`` open rooms may take a seat in another.

        Raises:
            ConflictError: ``too_many_rooms``: they may not.
        """
        if held >= self.max_rooms:
            raise ConflictError(
                f"you are already in {held} race rooms (at most {self.max_rooms}); leave one first",
                code=ErrorCode.TOO_MANY_ROOMS,
            )


@dataclass(frozen=True, slots=True)
class Seat:
    """A racer in a room, with their game's progress once the race has started."""

    player_id: int
    name: str
    seat: int
    game_id: int | None
    cards_left: int | None = None
    score: int | None = None
    moves: int | None = None
    status: str | None = None
    elapsed_ms: int | None = None
    presence: Presence | None = None


@dataclass(frozen=True, slots=True)
class Room:
    """A race room as anyone with its invite may see it (never a card; the code only once
    the race is finished).

    ``host_deal``: the host chose the deal's code (and may know its cards); otherwise it is a
    random TP2 deal nobody knows before the race ends.
    """

    id: int
    invite: str
    host_id: int
    status: RaceStatus
    rules: RuleSet
    code: GameCode | None
    host_deal: bool
    time_limit_s: int
    max_players: int
    version: int
    created_at: dt.datetime
    starts_at: dt.datetime | None
    ends_at: dt.datetime | None
    finished_at: dt.datetime | None
    seats: tuple[Seat, ...]
    results: list[dict[str, Any]] | None
    watchers: tuple[Watcher, ...] = ()
    watchers_total: int = 0
    grace_s: float = 60.0
    rated: bool = False

    def seat_of(self, player_id: int) -> Seat | None:
        """The player's seat, or None for a spectator."""
        return next((s for s in self.seats if s.player_id == player_id), None)


@dataclass(frozen=True, slots=True)
class Joined:
    """The answer to a join: the room, and the player's game when they race in a started race."""

    room: Room
    racer: bool
    game_id: int | None


def normalize_invite(raw: str) -> str:
    """Upper-case an invite code and drop spaces and dashes.

    Raises:
        InvalidInputError: ``bad_invite`` when it is not 6 characters of the invite alphabet.
    """
    invite = raw.replace("-", "").replace(" ", "").upper()
    if len(invite) != INVITE_LENGTH or any(c not in INVITE_ALPHABET for c in invite):
        raise InvalidInputError(
            f"{raw[:20]!r} is not an invite code ({INVITE_LENGTH} characters of "
            f"{INVITE_ALPHABET}, dashes and spaces left out)",
            code=ErrorCode.BAD_INVITE,
        )
    return invite


def result_key(row: Mapping[str, Any]) -> tuple[int, ...]:
    """A racer's standing in the results order (docs/rules.md §4 "Results order"): the smaller,
    the better; equal keys are equal results, which share a rank.

    Those who cleared all 28 cards come first, by ``elapsed_ms`` (quickest first); then
    everyone else by cards removed (most first), then score (highest first), then the time of
    their last removal still in effect, ``last_removal_ms`` (earliest first). Racers who removed
    nothing are equal, whatever their score: last, together.

    Args:
        row: a racer's game: ``status``, ``elapsed_ms``, ``cards_left``, ``score`` and
            ``last_removal_ms``.
    """
    if row["status"] == Status.WON:
        return (0, row["elapsed_ms"])
    if row["cards_left"] >= POSITION_COUNT:
        # Nothing removed: no progress to tell apart (a score lowered by draws alone must not
        # rank below a racer who never played, or resigned at once).
        return (1, 0, 0, 1, 0)
    last = row["last_removal_ms"]
    return (
        1,
        row["cards_left"] - POSITION_COUNT,  # minus the cards removed
        -row["score"],
        1 if last is None else 0,
        0 if last is None else last,
    )


def rank_results(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Order racers for the results (docs/rules.md §4 "Results order", :func:`result_key`),
    equal results sharing a rank.

    Args:
        rows: one mapping per racer with ``player_id``, ``name``, ``status``, ``score``,
            ``cards_left``, ``moves``, ``elapsed_ms`` (ms from the start to their end, or None
            for a game still going when the race ended) and ``last_removal_ms`` (ms from the
            start to their last removal still in effect, or None when they have none).

    Returns:
        New dicts, best first (equal results by player id), with ``rank`` (1 + how many
        racers rank strictly ahead: 1, 1, 3, … as on the daily leaderboard), ``cleared``
        (won) and ``cards_removed`` added.
    """
    ordered = sorted(rows, key=lambda row: (result_key(row), row["player_id"]))
    ranked: list[dict[str, Any]] = []
    for i, row in enumerate(ordered):
        key = result_key(row)
        rank = ranked[-1]["rank"] if i and result_key(ordered[i - 1]) == key else i + 1
        ranked.append(
            {
                **row,
                "rank": rank,
                "cleared": row["status"] == Status.WON,
                "cards_removed": POSITION_COUNT - row["cards_left"],
            }
        )
    return ranked


def new_invite() -> str:
    """A fresh random invite code (:data:`INVITE_LENGTH` characters of :data:`INVITE_ALPHABET`)."""
    return "".join(secrets.choice(INVITE_ALPHABET) for _ in range(INVITE_LENGTH))


def results_of(games: Sequence[RacerGameRow], starts_at: dt.datetime) -> list[dict[str, Any]]:
    """The ranked results (:func:`rank_results`) of a race's games, as stored: each game's
    last removal still in effect as ``last_removal_ms``, whole ms from ``starts_at`` (as a
    game's ``elapsed_ms`` counts)."""
    return rank_results(
        [
            {
                "player_id": game.player_id,
                "name": game.name,
                "status": game.status,
                "score": game.score,
                "cards_left": game.cards_left,
                "moves": game.moves,
                "elapsed_ms": game.elapsed_ms,
                "game_id": game.game_id,
                "last_removal_ms": (
                    None
                    if game.last_removal_at is None
                    else elapsed_ms(starts_at, game.last_removal_at)
                ),
            }
            for game in games
        ]
    )


def shown_results(results: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """A race's stored results as shown: those of a race finished before results counted the
    cards removed get ``cards_removed`` from their ``cards_left`` (their ranks stay as
    stored)."""
    if results is None:
        return None
    return [{"cards_removed": POSITION_COUNT - r["cards_left"], **r} for r in results]


def room_view(
    race: RaceRow,
    seats: Sequence[RoomSeatRow],
    watchers: Sequence[WatcherRow],
    watchers_total: int,
    now: dt.datetime,
    grace_s: float,
) -> Room:
    """The room as shown at ``now``: a game still being played shows its time so far (up to
    ``ends_at``); the deal's code only once the race is finished; a reconnecting player when
    their grace period (``grace_s``) ends."""
    end = min(now, race.ends_at) if race.ends_at else now
    shown = []
    for r in seats:
        presence = (
            None if r.presence is None else presence_of(r.presence.state, r.presence.since, grace_s)
        )
        if r.game_id is None:
            shown.append(Seat(r.player_id, r.name, r.seat, None, presence=presence))
            continue
        elapsed = r.elapsed_ms
        if elapsed is None and r.game_created_at is not None:  # still playing: time so far
            elapsed = elapsed_ms(r.game_created_at, end)
        shown.append(
            Seat(
                r.player_id,
                r.name,
                r.seat,
                r.game_id,
                r.cards_left,
                r.score,
                r.moves,
                r.status,
                elapsed,
                presence,
            )
        )
    return Room(
        id=race.id,
        invite=race.invite,
        host_id=race.host_id,
        status=race.status,
        rules=race.rules,
        code=race.code if race.status == RaceStatus.FINISHED else None,
        host_deal=race.host_deal,
        time_limit_s=race.time_limit_s,
        max_players=race.max_players,
        version=race.version,
        created_at=race.created_at,
        starts_at=race.starts_at,
        ends_at=race.ends_at,
        finished_at=race.finished_at,
        seats=tuple(shown),
        results=shown_results(race.results),
        watchers=tuple(
            Watcher(w.player_id, w.name, presence_of(w.presence.state, w.presence.since, grace_s))
            for w in watchers
        ),
        watchers_total=watchers_total,
        grace_s=grace_s,
        rated=race.rated,
    )


__all__ = [
    "INVITE_ALPHABET",
    "INVITE_LENGTH",
    "WATCHERS_SHOWN",
    "Joined",
    "Presence",
    "RaceLimits",
    "Room",
    "Seat",
    "Watcher",
    "new_invite",
    "normalize_invite",
    "presence_of",
    "rank_results",
    "result_key",
    "results_of",
    "room_view",
    "shown_results",
]
