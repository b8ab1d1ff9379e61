"""What a ``hello`` is answered with, assembled from one read (:mod:`server.storage.welcome`):
the token's player, their games that can still be played, and whether they sit in an open race
room (whose rooms the caller then follows, a rare case read apart)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from server.services.clock import Clock
from server.services.daily import DailyService
from server.services.game_views import GameSnapshot
from server.services.games import GameService
from server.services.players import Credential, PlayerInfo, checked_token_hash, unknown_token
from server.storage.welcome import WelcomeStore

#: Unfinished games a welcome lists at most.
WELCOME_GAMES = 20


@dataclass(frozen=True, slots=True)
class Welcomed:
    """A hello that authenticated.

    Attributes:
        credential: the token's player and the token's id.
        games: the player's games that can still be played, newest first, less those in
            ``unchanged``.
        seated: whether the player sits in a room in the lobby or running.
        unchanged: the games the page holds (as the hello said) that can still be played and
            are at the page's ``seq``, newest first; None when the hello named none.
    """

    credential: Credential
    games: list[GameSnapshot]
    seated: bool
    unchanged: list[int] | None = None


class WelcomeService:
    """Answers hellos from one read each (a crowd's read together).

    Args:
        store: where a hello's facts are read.
        games: the games service (their snapshots).
        daily: the daily service (the boundary's date, pinned by a simulated clock).
        clock: the UTC clock.
    """

    def __init__(
        self, store: WelcomeStore, games: GameService, daily: DailyService, clock: Clock
    ) -> None:
        self._store = store
        self._games = games
        self._daily = daily
        self._clock = clock

    async def welcome(self, token: str | None, held: Mapping[int, int] | None = None) -> Welcomed:
        """The player owning a bearer token, with what their welcome shows.

        Args:
            token: the bearer token.
            held: the games whose STATE the page holds, each game id's ``seq`` (None: the
                hello named none).

        Raises:
            UnauthorizedError: ``unauthorized``: the token is missing, too long or unknown
                (never made, rotated, or signed out).
            StorageError: the database failed.
        """
        token_hash = checked_token_hash(token)
        pinned = self._daily.pinned_today()
        found = await self._store.read(token_hash, pinned, self._clock.now(), WELCOME_GAMES)
        if found is None:
            raise unknown_token()
        if pinned is None:
            self._daily.saw_today(found.today)
        credential = Credential(PlayerInfo(found.player.id, found.player.name), found.token_id)
        if held is None:
            return Welcomed(credential, await self._games.snapshots(found.games), found.seated)
        unchanged = [g.id for g in found.games if held.get(g.id) == g.seq]
        changed = [g for g in found.games if held.get(g.id) != g.seq]
        return Welcomed(credential, await self._games.snapshots(changed), found.seated, unchanged)


__all__ = ["WELCOME_GAMES", "WelcomeService", "Welcomed"]
