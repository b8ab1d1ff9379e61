"""``tripeaks admin`` as a moderator runs it: real processes over a real test database, with a
real server on the same database showing what players see."""

from __future__ import annotations

import asyncio
import datetime as dt
import getpass
import json
import os
import secrets
import sys
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from server.engine import Action, ActionKind, GameCode
from server.engine import Game as EngineGame
from server.services.review import solve_line
from server.storage.models import DailyChallenge, Game, GameAction, Player
from tests.helpers import WsPlayer, register

Client = TestClient[Any, Any]
TRIPEAKS = [sys.executable, "-m", "server"]
YESTERDAY = dt.date(2026, 3, 13)
DAY = YESTERDAY.isoformat()
BOARD = f"/api/v1/daily/{DAY}/leaderboard"
T0 = dt.datetime(2026, 3, 13, 18, 0, tzinfo=dt.UTC)
CODE = GameCode.parse("TP1-E-AAAAAAB")


async def admin(database_url: str, *args: str) -> tuple[int, str, str]:
    """Run ``tripeaks admin ARGS`` against the database; its status, stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIPEAKS_")}
    env["DATABASE_URL"] = database_url
    proc = await asyncio.create_subprocess_exec(
        *TRIPEAKS,
        "admin",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def plant_day(
    db: AsyncEngine, date: dt.date, results: list[dict[str, Any]], *, code: GameCode = CODE
) -> dict[str, int]:
    """A date's deal and one finished daily game per entry (a new player unless ``player_id``
    is given); each entry may give ``actions`` (stored as its log), ``address`` (its player's
    address hash). Returns the game id of each entry's ``name``."""
    games: dict[str, int] = {}
    async with db.begin() as conn:
        await conn.execute(
            insert(DailyChallenge).values(date=date, code=str(code), rules=code.rules.value)
        )
        for entry in results:
            player_id = entry.get("player_id")
            if player_id is None:
                player_id = await conn.scalar(
                    insert(Player)
                    .values(
                        name=entry["name"],
                        address_hash=entry.get("address", secrets.token_bytes(32)),
                    )
                    .returning(Player.id)
                )
            actions = entry.get("actions", [])
            moves = entry.get("moves", len(actions) or 40)
            game_id = await conn.scalar(
                insert(Game)
                .values(
                    player_id=player_id,
                    code=str(code),
                    rules=code.rules.value,
                    deal_version=code.version.value,
                    mode="daily",
                    daily_date=date,
                    status=entry.get("status", "won"),
                    score=entry["score"],
                    moves=moves,
                    undos=0,
                    seq=len(actions) or moves,
                    elapsed_ms=entry["elapsed_ms"],
                    created_at=T0,
                    finished_at=T0 + dt.timedelta(milliseconds=entry["elapsed_ms"]),
                )
                .returning(Game.id)
            )
            assert isinstance(game_id, int)
            if actions:
                await conn.execute(
                    insert(GameAction),
                    [{**a, "game_id": game_id, "created_at": T0} for a in actions],
                )
            games[entry["name"]] = game_id
    return games


def optimal_actions(code: GameCode) -> tuple[int, list[dict[str, Any]]]:
    """The solver's line of ``code`` as action log rows, and the score it ends with."""
    line = solve_line(code)
    game = EngineGame.new(code, ranked=True)
    rows = []
    for seq, (kind, pos) in enumerate(line.steps, start=1):
        applied = game.apply(Action(ActionKind(kind), pos))
        rows.append(
            {
                "seq": seq,
                "kind": applied.kind.value,
                "pos": applied.pos,
                "card": str(applied.card),
                "score_after": game.score,
            }
        )
    assert game.score == line.par
    return line.par, rows


async def board(client: Client) -> list[tuple[int, str]]:
    body = await (await client.get(BOARD)).json()
    return [(e["rank"], e["name"]) for e in body["entries"]]


async def counts(client: Client) -> tuple[int, int]:
    info = await (await client.get(f"/api/v1/daily/{DAY}")).json()
    return info["players"], info["ranked"]


async def audit(db: AsyncEngine) -> list[tuple[Any, ...]]:
    async with db.connect() as conn:
        rows = await conn.execute(text("SELECT * FROM moderation_actions ORDER BY id"))
        return [tuple(r) for r in rows]


async def test_ban_then_unban_from_the_command_line(
    client: Client, server: TestServer, database_url: str, db: AsyncEngine
) -> None:
    mallory = await register(client, "Mallory")
    alice = await register(client, "Alice")
    await register(client, "Bob")
    async with db.connect() as conn:
        ids = dict((await conn.execute(select(Player.name, Player.id))).all())
    await plant_day(
        db,
        YESTERDAY,
        [
            {"name": "m", "player_id": ids["Mallory"], "score": 772, "elapsed_ms": 30_000},
            {"name": "a", "player_id": ids["Alice"], "score": 760, "elapsed_ms": 400_000},
            {"name": "b", "player_id": ids["Bob"], "score": 750, "elapsed_ms": 500_000},
        ],
    )
    assert await board(client) == [(1, "Mallory"), (2, "Alice"), (3, "Bob")]
    assert await counts(client) == (3, 3)

    code, out, err = await admin(
        database_url, "ban", "Mallory", "--reason", "played with a solver", "--by", "mod-ann"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"banned player {mallory['id']} (Mallory), action #1 by mod-ann at ")
    assert lines[1] == "reason: played with a solver"
    assert lines[2].startswith("hid 1 daily result: game ")
    assert lines[2].endswith("(2026-03-13, won, score 772)")

    # Gone from the board, its ranks, "around me" and the counts.
    assert await board(client) == [(1, "Alice"), (2, "Bob")]
    assert await counts(client) == (2, 2)
    around = await client.get(f"{BOARD}/around/{mallory['id']}")
    assert around.status == 404 and (await around.json())["error"]["code"] == "not_ranked"
    body = await (await client.get(f"{BOARD}/around/{alice['id']}")).json()
    assert [(e["rank"], e["name"]) for e in body["entries"]] == [(1, "Alice"), (2, "Bob")]

    # The player is told why when they try to play the daily.
    ws, _ = await WsPlayer.connect(client, mallory["token"])
    refused = await ws.request({"type": "join_daily"})
    assert refused["type"] == "error" and refused["code"] == "banned"
    assert "played with a solver" in refused["message"]

    # Bad input changes nothing and says why.
    trail = await audit(db)
    for args, message in [
        (("ban", "Mallory", "--reason", "again"), "is already banned"),
        (("ban", "Nobody", "--reason", "x"), "there is no player named 'Nobody'"),
        (("unban", "Alice"), "player {} (Alice) is not banned".format(alice["id"])),
        (("ban", "Alice", "--reason", " "), "a reason is required"),
    ]:
        code, out, err = await admin(database_url, *args)
        assert code == 1, (args, out, err)
        assert message in err and "nothing was changed" in err, (args, err)
        assert out == ""
    code, _, err = await admin(database_url, "ban", "Alice")  # no --reason at all
    assert code == 2 and "--reason" in err
    assert await audit(db) == trail
    assert await board(client) == [(1, "Alice"), (2, "Bob")]

    # Unbanned (by whoever runs it when --by is not given): everything comes back.
    code, out, err = await admin(database_url, "unban", str(mallory["id"]))
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"unbanned player {mallory['id']} (Mallory), action #2")
    assert "the ban was action #1" in out and "restored 1 daily result" in out
    assert await board(client) == [(1, "Mallory"), (2, "Alice"), (3, "Bob")]
    assert await counts(client) == (3, 3)
    assert (await ws.request({"type": "join_daily"}))["type"] == "game"

    # The audit trail: who, when, why.
    code, out, err = await admin(database_url, "log", "--json")
    assert code == 0, err
    trail_json = json.loads(out)
    assert [(r["action"], r["moderator"], r["player_id"], r["reason"]) for r in trail_json] == [
        ("unban", getpass.getuser(), mallory["id"], None),
        ("ban", "mod-ann", mallory["id"], "played with a solver"),
    ]
    assert all(dt.datetime.fromisoformat(r["at"]).tzinfo is not None for r in trail_json)
    code, out, _ = await admin(database_url, "log", "--player", "Mallory")
    assert code == 0
    assert out.splitlines()[1].startswith("#1  ")
    assert "mod-ann" in out and "reason: played with a solver" in out and "hid games" in out


async def test_hide_and_restore_one_result_from_the_command_line(
    client: Client, server: TestServer, database_url: str, db: AsyncEngine
) -> None:
    games = await plant_day(
        db,
        YESTERDAY,
        [
            {"name": "Ann", "score": 772, "elapsed_ms": 100_000},
            {"name": "Ben", "score": 760, "elapsed_ms": 100_000},
            {"name": "Cid", "score": 760, "elapsed_ms": 100_000},
        ],
    )
    assert await board(client) == [(1, "Ann"), (2, "Ben"), (2, "Cid")]
    code, out, err = await admin(
        database_url, "hide", str(games["Ann"]), "--reason", "a second account", "--by", "mod"
    )
    assert code == 0, err
    assert out.startswith(f"hid game {games['Ann']} (2026-03-13, won, score 772) of player ")
    assert "reason: a second account" in out
    assert await board(client) == [(1, "Ben"), (1, "Cid")]
    assert await counts(client) == (2, 2)

    trail = await audit(db)
    for args, message in [
        (("hide", str(games["Ann"]), "--reason", "again"), "is already hidden (hide #1 by mod"),
        (("hide", "999999", "--reason", "x"), "there is no game 999999"),
        (("restore", str(games["Ben"])), f"game {games['Ben']} is not hidden"),
    ]:
        code, out, err = await admin(database_url, *args)
        assert code == 1, (args, out, err)
        assert message in err, (args, err)
    code, _, err = await admin(database_url, "hide", "x", "--reason", "y")
    assert code == 2 and "GAME_ID" in err
    assert await audit(db) == trail

    code, out, err = await admin(database_url, "restore", str(games["Ann"]), "--by", "mod")
    assert code == 0, err
    assert f"restored game {games['Ann']}" in out and "hidden by action #1" in out
    assert await board(client) == [(1, "Ann"), (2, "Ben"), (2, "Cid")]
    assert await counts(client) == (3, 3)


async def test_suspicious_lists_a_fast_finish_an_optimal_line_and_a_shared_address(
    database_url: str, db: AsyncEngine
) -> None:
    par, line = optimal_actions(CODE)
    shared = secrets.token_bytes(32)
    normal = [
        {"name": f"Normal{i}", "score": 700 + i, "elapsed_ms": 600_000 + 1_000 * i}
        for i in range(6)
    ]
    games = await plant_day(
        db,
        YESTERDAY,
        [
            *normal,
            {"name": "Quick", "score": 720, "elapsed_ms": 100_000},  # 17% of the median
            {"name": "Solver", "score": par, "elapsed_ms": 500_000, "actions": line},
            *(
                {"name": f"Sock{i}", "score": 650, "elapsed_ms": 700_000, "address": shared}
                for i in range(3)
            ),
        ],
    )
    code, out, err = await admin(database_url, "suspicious", "--date", DAY, "--json")
    assert code == 0, err
    review = json.loads(out)
    found = {r["game_id"]: [s["signal"] for s in r["signals"]] for r in review["results"]}
    assert found == {
        games["Quick"]: ["fast"],
        games["Solver"]: ["optimal_line"],
        games["Sock0"]: ["shared_address"],
        games["Sock1"]: ["shared_address"],
        games["Sock2"]: ["shared_address"],
    }
    assert (review["ranked"], review["par"], review["line_length"]) == (11, par, len(line))
    assert review["median_won_ms"] == 603_000  # the 6th of the 11 won results

    code, out, err = await admin(database_url, "suspicious", "--date", DAY)
    assert code == 0, err
    assert out.startswith(f"daily {DAY}: 11 ranked results (0 hidden); 11 won on the board")
    assert "5 results with signals:" in out
    assert f"game {games['Quick']}  player " in out
    assert "  - fast: won in 100.0 s, under 25% of the median" in out
    assert f"  - optimal_line: its {len(line)} actions are the solver's optimal line" in out
    assert "  - shared_address: one of 3 accounts ranked on 2026-03-13" in out

    # A hidden result is still listed, marked, and no longer moves the median.
    code, _, err = await admin(database_url, "hide", str(games["Quick"]), "--reason", "fast")
    assert code == 0, err
    code, out, _ = await admin(database_url, "suspicious", "--date", DAY)
    assert "10 won on the board" in out and "[hidden]" in out

    for args in (("--date", "2026-02-30"), ("--date", "yesterday")):
        code, _, err = await admin(database_url, "suspicious", *args)
        assert code == 2 and "is not a date" in err
    code, _, err = await admin(database_url, "suspicious", "--date", "2026-01-01")
    assert code == 1 and "there was no daily challenge on 2026-01-01" in err
    assert "nothing was changed" not in err


async def test_admin_refuses_a_database_not_migrated(empty_database_url: str) -> None:
    code, _, err = await admin(empty_database_url, "log")
    assert code == 1
    assert "run `tripeaks migrate` first" in err
