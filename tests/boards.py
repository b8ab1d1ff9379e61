"""A day's board to build in the leaderboard and moderation tests: rows (each a game with its own
player), rows that must never show on the board, and the ranks the board must give, counted
naively (docs/rules.md §4 order: score, then fewer moves, then less time; ties share a rank);
the rows inserted straight into PostgreSQL (the ``db`` fixture, :func:`insert_rows`) or into
either store of a test's ``backend`` (:func:`store_rows`), and the board read over REST
(:func:`get_json`, :func:`walk`, :func:`error`)."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from server.storage.models import Game, Player, Race
from tests.backends import Backend, Seed

#: The board's date, and when its games ended by default (UTC).
DATE = dt.date(2026, 3, 14)
T0 = dt.datetime(2026, 3, 14, 1, 0, tzinfo=dt.UTC)


@dataclass(slots=True)
class Row:
    """One game to store, with its own player (one per distinct name)."""

    name: str
    score: int
    moves: int
    elapsed_ms: int
    finished_at: dt.datetime = T0
    status: str = "won"
    undos: int = 0
    mode: str = "daily"
    date: dt.date | None = DATE
    player_id: int = 0  # filled in when stored

    def key(self) -> tuple[int, int, int, dt.datetime, int]:
        """The row's place in board order (the player id last, as the board breaks ties)."""
        return (-self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id)


def noise(prefix: str = "noise") -> list[Row]:
    """Rows that must never appear on the 2026-03-14 board (several beat every real score)."""
    other_day = DATE - dt.timedelta(days=1)
    return [
        Row(f"{prefix}Playing", 772, 1, 1, status="playing"),
        Row(f"{prefix}Resigned", 772, 1, 1, status="resigned"),
        Row(f"{prefix}Yesterday", 772, 1, 1, date=other_day),
        Row(f"{prefix}Tomorrow", 772, 1, 1, date=DATE + dt.timedelta(days=1), status="blocked"),
        Row(f"{prefix}Free", 772, 1, 1, mode="free"),
        Row(f"{prefix}FreeB", 772, 1, 1, mode="free", status="blocked"),
        Row(f"{prefix}Race", 772, 1, 1, mode="race"),
        # One player with games in several modes: only the ranked daily one counts.
        Row(f"{prefix}Yesterday", 1, 2, 3, mode="free"),
    ]


def expected(rows: Sequence[Row]) -> list[tuple[int, int]]:
    """(rank, player_id) of every ranked row in board order, ranks computed by counting the
    rows strictly better."""
    ranked = [
        r for r in rows if r.mode == "daily" and r.date == DATE and r.status in ("won", "blocked")
    ]
    return [
        (
            1
            + sum(
                (-o.score, o.moves, o.elapsed_ms) < (-r.score, r.moves, r.elapsed_ms)
                for o in ranked
            ),
            r.player_id,
        )
        for r in sorted(ranked, key=Row.key)
    ]


# ------------------------------------------------------- PostgreSQL rows and the REST board

Client = TestClient[Any, Any]
DAY = "2026-03-14"
BOARD = f"/api/v1/daily/{DAY}/leaderboard"


async def insert_rows(engine: AsyncEngine, rows: Sequence[Row]) -> None:
    """Insert a player for each distinct name and a game for each row; fill in player ids."""
    ids: dict[str, int] = {}
    async with engine.begin() as conn:
        for row in rows:
            if row.name not in ids:
                new_id = await conn.scalar(
                    insert(Player).values(name=row.name, created_at=T0).returning(Player.id)
                )
                assert new_id is not None
                ids[row.name] = new_id
            row.player_id = ids[row.name]
        race_id = None
        if any(row.mode == "race" for row in rows):
            race_id = await conn.scalar(
                insert(Race)
                .values(
                    invite=secrets.token_hex(3).upper(),
                    host_id=rows[0].player_id,
                    code="TP1-E-AAAAAAA",
                    rules="E",
                    status="finished",
                    time_limit_s=600,
                    max_players=8,
                    version=1,
                    created_at=T0,
                )
                .returning(Race.id)
            )
        await conn.execute(
            insert(Game),
            [
                {
                    "player_id": row.player_id,
                    "code": "TP1-E-AAAAAAA",
                    "rules": "E",
                    "deal_version": "TP1",
                    "mode": row.mode,
                    "daily_date": row.date if row.mode == "daily" else None,
                    "race_id": race_id if row.mode == "race" else None,
                    "status": row.status,
                    "score": row.score,
                    "moves": row.moves,
                    "undos": row.undos,
                    "seq": row.moves + row.undos,
                    "elapsed_ms": None if row.status == "playing" else row.elapsed_ms,
                    "created_at": T0 - dt.timedelta(hours=1),
                    "finished_at": None if row.status == "playing" else row.finished_at,
                }
                for row in rows
            ],
        )


async def store_rows(backend: Backend, rows: Sequence[Row]) -> dict[str, int]:
    """Store the rows' players and games; fill in and return the players' ids by name."""
    names = list(dict.fromkeys(r.name for r in rows))
    ids = dict(zip(names, await backend.add_players(names), strict=True))
    for row in rows:
        row.player_id = ids[row.name]
    await backend.add_games(
        [
            Seed(
                r.player_id,
                r.score,
                r.moves,
                None if r.status == "playing" else r.elapsed_ms,
                None if r.status == "playing" else r.finished_at,
                status=r.status,
                undos=r.undos,
                mode=r.mode,
                daily_date=r.date if r.mode == "daily" else None,
            )
            for r in rows
        ]
    )
    return ids


async def get_json(client: Client, path: str, **params: Any) -> dict[str, Any]:
    resp = await client.get(path, params={k: str(v) for k, v in params.items()})
    assert resp.status == 200, await resp.text()
    body: dict[str, Any] = await resp.json()
    return body


async def walk(client: Client, limit: int) -> list[list[dict[str, Any]]]:
    """Every page of the board, following next_cursor until it is null."""
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        body = await get_json(client, BOARD, **params)
        assert set(body) == {"date", "entries", "next_cursor"}
        assert body["date"] == DAY
        assert len(body["entries"]) <= limit
        pages.append(body["entries"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(body["entries"]) == limit  # a short page is always the last
        assert len(pages) < 10_000


def ranks(entries: Sequence[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(e["rank"], e["player_id"]) for e in entries]


async def error(resp: Any, status: int, code: str) -> None:
    assert resp.status == status, await resp.text()
    body = await resp.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]


# --------------------------------------------------------------------------------- order, ranks
