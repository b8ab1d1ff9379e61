"""Group commit of game actions: one transaction for every action waiting at that moment.

Each accepted action needs its log row inserted, its game row moved on (only if nobody else
moved it first) and, for a race game, its progress event published — all committed before the
player is told. Committing each action alone costs a transaction and a disk flush per action;
here a single writer task takes every write queued while the previous batch committed, applies
them with one statement each (arrays unnested server-side) and commits once. Each caller is
answered only after that commit; a write whose game had moved on is answered with
:class:`GameMovedOn` and changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.events import CHANNEL, MAX_PAYLOAD, EventTooLargeError

log = logging.getLogger(__name__)

_UPDATE_GAMES = text(
    """
    UPDATE games AS g
       SET status = v.status, score = v.score, moves = v.moves, undos = v.undos, seq = v.seq,
           finished_at = v.finished_at, elapsed_ms = v.elapsed_ms, cards_left = v.cards_left
      FROM unnest(
             CAST(:game_id AS bigint[]), CAST(:expected AS integer[]), CAST(:seq AS integer[]),
             CAST(:status AS text[]), CAST(:score AS integer[]), CAST(:moves AS integer[]),
             CAST(:undos AS integer[]), CAST(:finished_at AS timestamptz[]),
             CAST(:elapsed_ms AS bigint[]), CAST(:cards_left AS smallint[]),
             CAST(:expected_status AS text[])
           ) AS v(game_id, expected, seq, status, score, moves, undos, finished_at, elapsed_ms,
                  cards_left, expected_status)
     WHERE g.id = v.game_id AND g.seq = v.expected AND g.status = v.expected_status
    RETURNING g.id
    """
)

_INSERT_ACTIONS = text(
    """
    INSERT INTO game_actions (game_id, seq, kind, pos, card, score_after, created_at)
    SELECT * FROM unnest(
             CAST(:game_id AS bigint[]), CAST(:seq AS integer[]), CAST(:kind AS text[]),
             CAST(:pos AS smallint[]), CAST(:card AS text[]), CAST(:score_after AS integer[]),
             CAST(:created_at AS timestamptz[])
           )
    """
)

_NOTIFY = text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p")


@dataclass(frozen=True, slots=True)
class ActionWrite:
    """One accepted action to store: its log row, its game row's new values, and an optional
    event to publish with it.

    Attributes:
        expected_seq / expected_status: the game row's ``seq`` and ``status`` before this
            action; the write applies only if the row still has them (a resignation elsewhere
            changes the status, not the seq).
        at: when the action was accepted (UTC).
    """

    game_id: int
    expected_seq: int
    seq: int
    kind: str
    pos: int | None
    card: str
    score_after: int
    at: dt.datetime
    status: str
    score: int
    moves: int
    undos: int
    finished_at: dt.datetime | None
    elapsed_ms: int | None
    cards_left: int
    expected_status: str = "playing"
    event: dict[str, Any] | None = None


class GameMovedOn(Exception):
    """The game row was changed by another writer first; this write changed nothing."""


class GroupCommitter:
    """Batches :class:`ActionWrite`\\ s into shared transactions.

    Args:
        engine: the database engine (the writer holds one connection per batch).
        max_batch: most writes in one transaction.
    """

    def __init__(self, engine: AsyncEngine, max_batch: int = 512) -> None:
        self._engine = engine
        self._max_batch = max_batch
        self._queue: asyncio.Queue[tuple[ActionWrite, asyncio.Future[None]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        self.writes = 0

    async def write(self, write: ActionWrite) -> None:
        """Store one action; returns once it is committed.

        Raises:
            GameMovedOn: the game row had moved on; nothing was stored.
            EventTooLargeError: the event does not fit a NOTIFY payload.
            sqlalchemy.exc.SQLAlchemyError, OSError: the batch's transaction failed; nothing
                of it was stored.
        """
        if write.event is not None:
            payload = json.dumps(write.event, separators=(",", ":"))
            if len(payload.encode()) > MAX_PAYLOAD:
                raise EventTooLargeError(f"event of {len(payload)} bytes")
        if self._task is None or self._task.done():
            self._queue = asyncio.Queue()
            self._task = asyncio.create_task(self._run(), name="group-commit")
        assert self._queue is not None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((write, future))
        await future

    async def close(self) -> None:
        """Stop the writer task (writes still queued fail with CancelledError)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            while len(batch) < self._max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            try:
                stored = await self._commit([w for w, _ in batch])
            except asyncio.CancelledError:
                for _, future in batch:
                    if not future.done():
                        future.cancel()
                raise
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            self.batches += 1
            self.writes += len(batch)
            for write, future in batch:
                if future.done():
                    continue
                if write.game_id in stored:
                    future.set_result(None)
                else:
                    future.set_exception(GameMovedOn(write.game_id))

    async def _commit(self, writes: list[ActionWrite]) -> set[int]:
        async with self._engine.begin() as conn:
            result = await conn.execute(
                _UPDATE_GAMES,
                {
                    "game_id": [w.game_id for w in writes],
                    "expected": [w.expected_seq for w in writes],
                    "seq": [w.seq for w in writes],
                    "status": [w.status for w in writes],
                    "score": [w.score for w in writes],
                    "moves": [w.moves for w in writes],
                    "undos": [w.undos for w in writes],
                    "finished_at": [w.finished_at for w in writes],
                    "elapsed_ms": [w.elapsed_ms for w in writes],
                    "cards_left": [w.cards_left for w in writes],
                    "expected_status": [w.expected_status for w in writes],
                },
            )
            stored = {row[0] for row in result}
            kept = [w for w in writes if w.game_id in stored]
            if kept:
                await conn.execute(
                    _INSERT_ACTIONS,
                    {
                        "game_id": [w.game_id for w in kept],
                        "seq": [w.seq for w in kept],
                        "kind": [w.kind for w in kept],
                        "pos": [w.pos for w in kept],
                        "card": [w.card for w in kept],
                        "score_after": [w.score_after for w in kept],
                        "created_at": [w.at for w in kept],
                    },
                )
                payloads = [
                    json.dumps(w.event, separators=(",", ":")) for w in kept if w.event is not None
                ]
                if payloads:
                    await conn.execute(_NOTIFY, {"channel": CHANNEL, "payloads": payloads})
        return stored
