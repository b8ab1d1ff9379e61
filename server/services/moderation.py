"""Moderation: bans, hidden results and the audit trail (docs/rules.md §4 "Moderation"; the
``tripeaks admin`` commands).

A **ban** stops a player from starting ranked play (the daily, racing: :mod:`server.services.bans`)
and hides every daily game of theirs that is not hidden yet, whatever its status; an **unban**
restores exactly the games its ban hid. **Hiding** one daily result takes it off its board;
**restoring** puts it back. Nothing is deleted: a hidden game keeps its row, and the audit trail
(``moderation_actions``) keeps who did what, when and why.

The service keeps the rules and takes its store as an argument. Each command is one transaction
of a :class:`~server.storage.moderation.ModerationStore` that locks the player's row (then the
game's) before it checks anything, so two moderators acting at once take turns and a refused
command changes nothing. The review of a day's suspicious results is
:mod:`server.services.review`'s; client addresses are hashed by :mod:`server.services.addresses`
(``address_key`` and ``hash_address`` stay importable from here).
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass

from server.errors import ConflictError, ErrorCode, InvalidInputError, NotFoundError
from server.names import name_key
from server.services.addresses import address_key, hash_address
from server.storage.moderation import (
    ActionRecord,
    GameRecord,
    ModerationStore,
    ModerationTransaction,
    PlayerRecord,
)

#: Longest reason kept with an action (a ban's is shown to the player).
REASON_MAX = 300
#: Longest moderator name.
MODERATOR_MAX = 100
#: Most rows ``log`` shows at once.
LOG_MAX = 1000


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


def player_ref(ref: str) -> tuple[int | None, str | None]:
    """What a player reference names: ``(id, None)`` for ``id:N``, ``(None, name)`` for
    ``name:TEXT`` or any other text, and ``(id, text)`` for a bare number (an id, unless another
    player is named so).

    Raises:
        InvalidInputError: an empty reference.
    """
    text = ref.strip()
    kind, _, rest = text.partition(":")
    if kind == "id" and rest.strip().isdecimal():
        return int(rest.strip()), None
    if kind == "name" and rest.strip():
        return None, rest.strip()
    if text.isascii() and text.isdecimal():
        return int(text), text
    if text:
        return None, text
    raise InvalidInputError("name a player by id or by name")


def _player_label(player: PlayerRecord) -> str:
    return f"player {player.id} ({player.name})"


def _when(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class ModerationService:
    """The moderators' commands.

    Args:
        store: where bans, hidden results and the audit trail are kept (each command one of its
            transactions).
        address_key: the key of :func:`hash_address` (see :func:`address_key`), for the server
            that records addresses at registration; None where nothing is registered (the CLI).
    """

    def __init__(self, store: ModerationStore, address_key: bytes | None = None) -> None:
        self._store = store
        self._address_key = address_key

    def address_hash(self, address: str) -> bytes | None:
        """The keyed hash to store for a registering client's address (None: nothing kept)."""
        if self._address_key is None:
            return None
        return hash_address(self._address_key, address)

    # ---------------------------------------------------------------------------- players

    async def _find(self, tx: ModerationTransaction, ref: str) -> PlayerRecord:
        """The player ``ref`` names (see :func:`player_ref`; names match their look-alikes, as
        names are unique up to them).

        Raises:
            InvalidInputError: an empty reference, or a number that is both an id and another
                player's name.
            NotFoundError: no such player.
        """
        by_id, by_name = player_ref(ref)
        if by_id is None:
            assert by_name is not None
            found = await tx.player_by_name_key(name_key(by_name))
            if found is None:
                raise NotFoundError(f"there is no player named {by_name!r}")
            return found
        if by_name is not None:
            named = await tx.player_by_name_key(name_key(by_name))
            if named is not None and named.id != by_id:
                raise InvalidInputError(
                    f"{by_name!r} is both a player id and the name of {_player_label(named)}: "
                    f"say id:{by_name} or name:{by_name}"
                )
        found = await tx.player_by_id(by_id)
        if found is None:
            raise NotFoundError(f"there is no player with id {by_id}")
        return found

    async def _lock_player(self, tx: ModerationTransaction, player_id: int) -> PlayerRecord:
        locked = await tx.player_by_id(player_id, lock=True)
        assert locked is not None  # players are never deleted while moderated
        return locked

    async def player(self, ref: str) -> PlayerRecord:
        """The player ``ref`` names (see :meth:`_find`)."""
        async with self._store.transaction() as tx:
            return await self._find(tx, ref)

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
        async with self._store.transaction() as tx:
            player = await self._lock_player(tx, (await self._find(tx, ref)).id)
            if player.banned_at is not None:
                raise ConflictError(
                    f"{_player_label(player)} is already banned, since "
                    f"{_when(player.banned_at)} (action #{player.ban_action_id}): "
                    f"{player.ban_reason}"
                )
            games = await tx.visible_daily_games(player.id)
            stamp = await tx.record_action(
                moderator=who,
                action="ban",
                player_id=player.id,
                reason=why,
                details={"hidden_games": [g.id for g in games]},
            )
            await tx.set_ban(player.id, stamp.id, stamp.at, why)
            await tx.set_hidden(games, stamp.id, stamp.at)
            await tx.commit()
        return Banned(Stamp(stamp.id, stamp.at, who), player, why, games)

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
        async with self._store.transaction() as tx:
            player = await self._lock_player(tx, (await self._find(tx, ref)).id)
            if player.ban_action_id is None:
                raise ConflictError(f"{_player_label(player)} is not banned")
            games = await tx.games_hidden_by(player.id, player.ban_action_id)
            stamp = await tx.record_action(
                moderator=who,
                action="unban",
                player_id=player.id,
                reason=why,
                details={"ban": player.ban_action_id, "restored_games": [g.id for g in games]},
            )
            await tx.set_hidden(games, None, None)
            await tx.set_ban(player.id, None, None, None)
            await tx.commit()
        return Unbanned(Stamp(stamp.id, stamp.at, who), player, games)

    async def _lock_game(
        self, tx: ModerationTransaction, game_id: int
    ) -> tuple[GameRecord, PlayerRecord]:
        """The game and its player, both locked (the player's row first, as every command)."""
        found = await tx.game_by_id(game_id)
        if found is None:
            raise NotFoundError(f"there is no game {game_id}", code=ErrorCode.UNKNOWN_GAME)
        player = await self._lock_player(tx, found.player_id)
        game = await tx.game_by_id(game_id, lock=True)
        assert game is not None
        return game, player

    async def _hider(self, tx: ModerationTransaction, game: GameRecord) -> str:
        """Which audit row hid a game, for a message."""
        assert game.hidden_by is not None
        action = await tx.action_by_id(game.hidden_by)
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
        async with self._store.transaction() as tx:
            game, player = await self._lock_game(tx, game_id)
            if game.mode != "daily":
                raise InvalidInputError(
                    f"game {game.id} is a {game.mode} game: only daily results are on a board"
                )
            from_ban = None
            if game.hidden_by is not None:
                if game.hidden_by != player.ban_action_id:
                    hider = await self._hider(tx, game)
                    raise ConflictError(f"game {game.id} is already hidden ({hider})")
                from_ban = game.hidden_by
            stamp = await tx.record_action(
                moderator=who,
                action="hide",
                player_id=player.id,
                game_id=game.id,
                daily_date=game.daily_date,
                reason=why,
                details=None if from_ban is None else {"was_hidden_by_ban": from_ban},
            )
            await tx.set_hidden([game], stamp.id, stamp.at)
            await tx.commit()
        return Hidden(Stamp(stamp.id, stamp.at, who), game, player, from_ban)

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
        async with self._store.transaction() as tx:
            game, player = await self._lock_game(tx, game_id)
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
            stamp = await tx.record_action(
                moderator=who,
                action="restore",
                player_id=player.id,
                game_id=game.id,
                daily_date=game.daily_date,
                reason=why,
                details={"hidden_by": game.hidden_by},
            )
            await tx.set_hidden([game], None, None)
            await tx.commit()
        return Restored(Stamp(stamp.id, stamp.at, who), game, player)

    async def log(self, player_ref: str | None = None, limit: int = 50) -> list[ActionRecord]:
        """The audit trail, newest first (about one player with ``player_ref``).

        Raises:
            InvalidInputError: ``limit`` outside 1..1000, a bad player reference.
            NotFoundError: no such player.
        """
        if not 1 <= limit <= LOG_MAX:
            raise InvalidInputError(f"the limit must be 1..{LOG_MAX}")
        async with self._store.transaction() as tx:
            player_id = None
            if player_ref is not None:
                player_id = (await self._find(tx, player_ref)).id
            return await tx.actions(player_id=player_id, limit=limit)


__all__ = [
    "LOG_MAX",
    "MODERATOR_MAX",
    "REASON_MAX",
    "Banned",
    "Hidden",
    "ModerationService",
    "Restored",
    "Stamp",
    "Unbanned",
    "address_key",
    "check_moderator",
    "check_reason",
    "hash_address",
    "player_ref",
]
