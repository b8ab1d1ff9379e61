"""How many websockets each player holds open on this server process, and the limit on them
(docs/protocol.md §8, ``TRIPEAKS_MAX_SOCKETS_PER_PLAYER``)."""

from __future__ import annotations

from collections import Counter

from server.errors import ConflictError, ErrorCode


class ConnectionLimit:
    """Counts each player's authenticated connections on this process; a ``hello`` that would
    take a player past ``per_player`` is refused and counts nothing.

    Args:
        per_player: the most connections one player may hold open here at once (>= 1).
    """

    def __init__(self, per_player: int) -> None:
        self.per_player = per_player
        self._open: Counter[int] = Counter()

    def authenticate(self, player_id: int, before: int | None) -> None:
        """A connection authenticates as ``player_id`` (having been ``before``'s, or nobody's).

        Raises:
            ConflictError: ``too_many_connections`` when the player already holds
                ``per_player`` connections (another than this one); nothing changes.
        """
        if player_id == before:
            return
        if self._open[player_id] >= self.per_player:
            raise ConflictError(
                f"you already have {self.per_player} connections open; close one",
                code=ErrorCode.TOO_MANY_CONNECTIONS,
            )
        if before is not None:
            self.release(before)
        self._open[player_id] += 1

    def release(self, player_id: int) -> None:
        """One of the player's authenticated connections closed."""
        self._open[player_id] -= 1
        if self._open[player_id] <= 0:
            del self._open[player_id]

    def open(self, player_id: int) -> int:
        """How many authenticated connections the player holds open here."""
        return self._open[player_id]
