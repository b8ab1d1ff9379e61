"""A race's games as its results read them (``SeatStore.games``), on either store (in memory
and PostgreSQL): each game's counters, and the time of its last removal still in effect, read
from its action log — an undo takes back the most recent removal or draw not yet taken back
(docs/rules.md §2 "Undo"), so a removal later undone does not count."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence

import pytest

from server.engine.codes import GameCode
from server.engine.game import Status
from server.storage.games import RaceWindow
from server.storage.review import Step
from tests.backends import Backend

CODE = GameCode.parse("TP1-E-AAAAAAB")
T0 = dt.datetime(2026, 3, 14, 12, 0, tzinfo=dt.UTC)

R: Step = ("remove", 18)
D: Step = ("draw", None)
U: Step = ("undo", 18)


def _at(seq: int) -> dt.datetime:
    """When action ``seq`` of a seeded log was made: ``seq`` seconds after the start."""
    return T0 + dt.timedelta(seconds=seq)


def _last_in_effect(log: Sequence[Step]) -> int | None:
    """The seq of the log's last removal still in effect (the rule, step by step)."""
    kept: list[tuple[int, str]] = []
    for seq, (kind, _) in enumerate(log, start=1):
        if kind == "undo":
            kept.pop()
        else:
            kept.append((seq, kind))
    removals = [seq for seq, kind in kept if kind == "remove"]
    return removals[-1] if removals else None


def _random_log(rnd: random.Random) -> list[Step]:
    """A log a game could have stored: an undo only while something can be taken back."""
    log: list[Step] = []
    depth = 0
    for _ in range(rnd.randrange(0, 60)):
        kind = rnd.choice(["remove", "remove", "draw", "undo"] if depth else ["remove", "draw"])
        depth += -1 if kind == "undo" else 1
        log.append({"remove": R, "draw": D, "undo": U}[kind])
    return log


CASES: dict[str, tuple[list[Step], int | None]] = {
    "nothing done": ([], None),
    "draws only": ([D, D, D], None),
    "removals, then a draw": ([R, R, D], 2),
    "the last removal undone": ([R, R, U], 1),
    "everything undone": ([R, D, U, U], None),
    "a removal undone, another made": ([R, R, U, R], 4),
    "undos past a draw": ([R, D, R, U, U], 1),
    "undone, redone, undone again": ([R, R, D, U, R, U, U], 1),
    "an undone draw after the removal": ([D, R, D, U], 2),
}


#: When the seeded races end: ten minutes after their start, ``T0``.
ENDS = T0 + dt.timedelta(minutes=10)


async def _race_games(
    backend: Backend, logs: Sequence[Sequence[Step]]
) -> tuple[int, list[int], dict[int, int]]:
    """A running race (from ``T0`` to :data:`ENDS`) with one racer per log, each log stored
    with action k made at ``_at(k)``: the race's id, its racers in the logs' order, and each
    racer's game."""
    players = await backend.add_players([f"Racer {i}" for i in range(len(logs))])
    async with backend.races.transaction() as tx:
        race = await backend.races.create(
            tx,
            invite="ACDEFG",
            host_id=players[0],
            code=CODE,
            host_deal=True,
            time_limit_s=600,
            max_players=len(players),
            now=T0,
        )
        games = await backend.games.insert_race_games(
            tx, race.id, CODE, Status.PLAYING, 500, players, T0
        )
        await backend.races.start(tx, race, T0, ENDS, games)
        await tx.commit()
    for player, log in zip(players, logs, strict=True):
        await backend.add_actions(games[player], log, [_at(k) for k in range(1, len(log) + 1)])
    return race.id, players, games


@pytest.mark.parametrize("case", list(CASES))
async def test_the_last_removal_still_in_effect_is_read_from_the_log(
    backend: Backend, case: str
) -> None:
    log, expected = CASES[case]
    race_id, players, _ = await _race_games(backend, [log])
    async with backend.races.transaction() as tx:
        (row,) = await backend.races.seats.games(tx, race_id)
    assert (row.player_id, row.name) == (players[0], "Racer 0")
    assert (row.status, row.score, row.cards_left, row.elapsed_ms) == ("playing", 500, 28, None)
    assert row.last_removal_at == (None if expected is None else _at(expected))


async def test_each_game_of_a_race_gets_its_own_last_removal(backend: Backend) -> None:
    rnd = random.Random(20260314)
    logs = [log for log, _ in CASES.values()] + [_random_log(rnd) for _ in range(16)]
    race_id, players, _ = await _race_games(backend, logs)
    async with backend.races.transaction() as tx:
        rows = await backend.races.seats.games(tx, race_id)
    found = {row.player_id: row.last_removal_at for row in rows}
    expected = {}
    for player, log in zip(players, logs, strict=True):
        last = _last_in_effect(log)
        expected[player] = None if last is None else _at(last)
    assert found == expected
    assert any(v is not None for v in expected.values()) and None in expected.values()


async def test_a_race_game_loads_with_its_log_in_order_and_its_races_window(
    backend: Backend,
) -> None:
    """What rebuilds a game on another process (one statement on PostgreSQL): its counters,
    every stored action in ``seq`` order (a draw's position null) and its race's window."""
    log = [R, D, ("remove", 7), U, D]
    race_id, (racer,), games = await _race_games(backend, [log])
    stored = await backend.games.load(games[racer])
    assert stored is not None
    assert (stored.id, stored.player_id, stored.code, stored.status) == (
        games[racer],
        racer,
        CODE,
        Status.PLAYING,
    )
    assert stored.actions == tuple(log)
    assert stored.race == RaceWindow(race_id, T0, ENDS)
    assert (stored.daily_date, stored.finished_at, stored.hinted) == (None, None, False)
