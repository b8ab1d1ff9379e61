"""What a ban does to play (docs/rules.md §4 "Moderation"): a banned player starts no ranked play
(the daily, opening a race, a racer's seat, starting a lobby opened before the ban) and is told
since when and why; free play and watching races stay open. The races service reads the ban in
its transaction (:meth:`~server.storage.races.RaceStore.ban_of`) and hands it to
:func:`refuse_banned`; the games service reads it through its store and raises
:func:`ban_refusal`. The bans themselves are made and lifted by
:mod:`server.services.moderation`.
"""

from __future__ import annotations

import datetime as dt

from server.errors import BannedError
from server.storage.moderation import PlayerRecord


def banned_message(player: PlayerRecord) -> str:
    """What a banned player is told when ranked play is refused."""
    assert player.banned_at is not None
    since = player.banned_at.astimezone(dt.UTC).date().isoformat()
    return (
        f"you are banned from ranked play (since {since}): {player.ban_reason}. "
        "Free play and watching races are still open to you"
    )


def refuse_banned(banned: PlayerRecord | None) -> None:
    """Refuse ranked play to a banned player: the daily, opening a race, a racer's seat,
    starting a lobby.

    Args:
        banned: the player's record when they are banned (as their store's ``ban_of`` reads
            it), else None (nothing is refused).

    Raises:
        BannedError: ``banned`` (a :class:`~server.errors.ForbiddenError`), saying since when
            and why in its message, with the ban's date and reason as attributes.
    """
    if banned is not None:
        raise ban_refusal(banned)


def ban_refusal(player: PlayerRecord) -> BannedError:
    """The refusal of ranked play to a banned player (``banned``): its message says since when
    and why, its ``since`` and ``reason`` are the ban's (for the page to say in the player's
    language)."""
    assert player.banned_at is not None and player.ban_reason is not None
    return BannedError(
        banned_message(player),
        since=player.banned_at.astimezone(dt.UTC).date(),
        reason=player.ban_reason,
    )


__all__ = ["ban_refusal", "banned_message", "refuse_banned"]
