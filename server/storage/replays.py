"""Games read to be replayed on the database's replicas (see
:class:`~server.storage.replicas.ReadRouter`)."""

from __future__ import annotations

from server.engine.game import Status
from server.storage.enums import RaceStatus
from server.storage.games import GameMode, GameRecord, PostgresGameStore, StoredAction
from server.storage.replicas import ReadRouter, RoutedStore


def final(record: GameRecord) -> bool:
    """Whether a game's record can change no more: a race game's race is finished, a daily
    game has ended (won, blocked or resigned), a free game is won or resigned (a blocked free
    game may still be undone)."""
    if record.mode is GameMode.RACE:
        return record.race_status is RaceStatus.FINISHED
    if record.mode is GameMode.DAILY:
        return record.status is not Status.PLAYING
    return record.status in (Status.WON, Status.RESIGNED)


class ReplicaReplayStore:
    """:class:`~server.storage.games.ReplayStore` read on the database's replicas while they
    keep up. A replica's answer is believed only for a game whose record is :func:`final`: any
    other (unknown there, still being played, a race not finished) is read on the primary, so
    a game just ended is replayed at once, whole, whichever process stored its end.

    Args:
        router: the router between the primary and the replicas.
    """

    def __init__(self, router: ReadRouter) -> None:
        self._stores = RoutedStore(router, PostgresGameStore)

    async def replay_rows(self, game_id: int) -> tuple[GameRecord, tuple[StoredAction, ...]] | None:
        """See :meth:`~server.storage.games.PostgresGameStore.replay_rows`."""
        return await self._stores.read(
            lambda store: store.replay_rows(game_id),
            complete=lambda rows: rows is not None and final(rows[0]),
        )


__all__ = ["ReplicaReplayStore", "final"]
