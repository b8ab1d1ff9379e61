"""Checks of what a server stored, shared by the durability tests: every game's action log is
contiguous and agrees with its row, and a client's last acknowledged state is what it replays to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg

from server.engine import Action, Card, Game, GameCode


def view(game: Game) -> dict[str, Any]:
    """A game's state in the fields a STATE message carries (cards as text)."""
    state = game.view()
    return {
        "tableau": [str(c) if isinstance(c, Card) else c for c in state.tableau],
        "waste": str(state.waste),
        "stock_count": state.stock_count,
        "score": state.score,
        "moves": state.moves,
        "undos": state.undos,
        "status": state.status.value,
    }


@dataclass
class StoredGame:
    """One stored game: its row, its logged actions, and its replay (resigned if the row is)."""

    row: asyncpg.Record
    actions: list[Action]
    replayed: Game

    def replay_to(self, seq: int) -> Game:
        """The game as it was after its first ``seq`` logged actions."""
        return _replay(self.row, self.actions[:seq])


def _replay(row: asyncpg.Record, actions: list[Action]) -> Game:
    code = GameCode.parse(row["code"])
    return Game.replay(code.deal(), code.rules, actions, ranked=row["mode"] != "free")


async def checked_games(conn: asyncpg.Connection) -> list[StoredGame]:
    """Every stored game, after asserting that its log has seq 1..N with no gap or duplicate,
    that the row's seq is N, and that the row's status, score, moves and undos are its log's."""
    games = []
    rows = await conn.fetch(
        "SELECT id, code, mode, seq, status, score, moves, undos FROM games ORDER BY id"
    )
    for row in rows:
        log = await conn.fetch(
            "SELECT seq, kind, pos FROM game_actions WHERE game_id = $1 ORDER BY seq", row["id"]
        )
        assert [r["seq"] for r in log] == list(range(1, row["seq"] + 1)), row["id"]
        actions = [Action.from_record(r["kind"], r["pos"]) for r in log]
        replayed = _replay(row, actions)
        if row["status"] == "resigned":  # a resignation is not an action of the log
            replayed.resign()
        fields = {k: row[k] for k in ("status", "score", "moves", "undos")}
        assert {k: view(replayed)[k] for k in fields} == fields, row["id"]
        games.append(StoredGame(row, actions, replayed))
    return games


def agrees(game: Game, state: dict[str, Any]) -> bool:
    """Whether a STATE a client received shows ``game``'s position."""
    mine = view(game)
    return mine == {k: state[k] for k in mine}
