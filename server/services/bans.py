"""What a ban does to play (docs/rules.md §4 "Moderation"): a banned player starts no ranked play
(the daily, opening a race, a racer's seat) and is told since when and why; free play and
watching races stay open. The races service asks :func:`refuse_banned` inside its transaction;
the games service reads the ban through its store and raises :func:`ban_refusal`. The bans
themselves are made and lifted by :mod:`server.services.moderation`.
"""

from __future__ import annotations

import datetime as dt

from server.errors import BannedError
from server.storage.moderation import PlayerRecord, SessionOrFactory, ban_of


def banned_message(player: PlayerRecord) -> str:
    """What a banned player is told when ranked play is refused."""
    assert player.banned_at is not None
    since = player.banned_at.astimezone(dt.UTC).date().isoformat()
    return (
        f"you are banned from ranked play (since {since}): {player.ban_reason}. "
        "Free play and watching races are still open to you"
    )


async def refuse_banned(db: SessionOrFactory, player_id: int) -> None:
    """Refuse ranked play to a banned player: the daily, opening a race, a racer's seat.

    Args:
        db: the session factory, or a session already open (its transaction is used).
        player_id: the player.

    Raises:
        BannedError: ``banned`` (a :class:`~server.errors.ForbiddenError`), saying since when
            and why in its message, with the ban's date and reason as attributes.
        StorageError: the database failed.
    """
    banned = await ban_of(db, player_id)
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
