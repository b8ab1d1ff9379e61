"""The statements of the daily boards in PostgreSQL (:class:`server.storage.leaderboards.
PostgresLeaderboardStore`), built once and bound to each request's values.

Every read is a bounded index range, whatever the size of the board: a page or a window is one
row comparison on the board index ``ix_games_daily_board`` (ascending on ``-score``), never an
OFFSET, and a rank sums a few ranges of ``leaderboard_counts``, which triggers on ``games`` keep
up to date (see :func:`_rank_counts`). Each answer is one statement, hence one snapshot: rows
and ranks always agree.

Parameters: ``date`` always (but :func:`better_on_its_date`, which counts on each row's own
date); ``limit`` for :data:`FIRST_PAGE`, :data:`NEXT_PAGE` and
:data:`AROUND`; ``player_id`` for :data:`OWN` and :data:`AROUND`, ``player_ids`` (a list)
for :data:`OWN_MANY`; a cursor's values
(:func:`key_values`) for :data:`NEXT_PAGE` and :data:`COUNTS`. The rows have the columns of
:data:`COLUMNS`, and the counts ``better`` and ``ties`` where a statement counts.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Date,
    DateTime,
    Integer,
    ScalarSelect,
    and_,
    bindparam,
    func,
    literal_column,
    null,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.orm import aliased

from server.storage.models import Game, LeaderboardCount, Player


class Placed(Protocol):
    """Anything with a place in the board order: a position, a row (the order's columns)."""

    @property
    def score(self) -> int: ...
    @property
    def moves(self) -> int: ...
    @property
    def elapsed_ms(self) -> int: ...
    @property
    def finished_at(self) -> dt.datetime: ...
    @property
    def player_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class _Key:
    """The parts of a position in the order as SQL expressions: statement parameters (a
    cursor) or the columns of the row being selected (its own rank)."""

    score: ColumnElement[Any]
    moves: ColumnElement[Any]
    elapsed_ms: ColumnElement[Any]
    second: ColumnElement[Any]
    finished_at: ColumnElement[Any]
    player_id: ColumnElement[Any]

    def position(self) -> ColumnElement[Any]:
        """This key as a row value in the order of the board index's columns, comparable with
        another key's (a cursor's with a row's own, :data:`_SELF`)."""
        return tuple_(-self.score, self.moves, self.elapsed_ms, self.finished_at, self.player_id)


_DATE = bindparam("date", type_=Date())
_LIMIT = bindparam("limit", type_=Integer())
_PLAYER = bindparam("player_id", type_=BigInteger())
_CURSOR = _Key(
    score=bindparam("k_score", type_=Integer()),
    moves=bindparam("k_moves", type_=Integer()),
    elapsed_ms=bindparam("k_elapsed_ms", type_=BigInteger()),
    second=bindparam("k_second", type_=BigInteger()),
    finished_at=bindparam("k_finished_at", type_=DateTime(timezone=True)),
    player_id=bindparam("k_player_id", type_=BigInteger()),
)
_SELF = _Key(
    score=Game.score.expression,
    moves=Game.moves.expression,
    elapsed_ms=Game.elapsed_ms.expression,
    second=(Game.elapsed_ms // 1000).expression,
    finished_at=Game.finished_at.expression,
    player_id=Game.player_id.expression,
)


def key_values(key: Placed) -> dict[str, Any]:
    """The values of the :data:`_CURSOR` parameters for ``key``."""
    return {
        "k_score": key.score,
        "k_moves": key.moves,
        "k_elapsed_ms": key.elapsed_ms,
        "k_second": key.elapsed_ms // 1000,
        "k_finished_at": key.finished_at,
        "k_player_id": key.player_id,
    }


def _on_board(game: Any, date: ColumnElement[Any] = _DATE) -> ColumnElement[bool]:
    """``game``'s row is a ranked entry of the date being read (``date``: the ``date``
    parameter, or a column naming it).

    The mode and statuses are literals, not parameters: a plan made for any parameter values
    could not use the partial board index, whose WHERE is this very condition.
    """
    return and_(
        game.mode == literal_column("'daily'"),
        game.status.in_([literal_column("'won'"), literal_column("'blocked'")]),
        game.hidden_at.is_(None),  # a hidden result is on no board (docs/rules.md §4)
        game.daily_date == date,
    )


def _counted(
    level: int, *where: ColumnElement[bool], date: ColumnElement[Any] = _DATE
) -> ScalarSelect[Any]:
    """The sum of the ``leaderboard_counts`` entries of the date at ``level`` matching
    ``where``."""
    return (
        select(func.coalesce(func.sum(LeaderboardCount.entries), 0))
        .where(LeaderboardCount.daily_date == date, LeaderboardCount.level == level, *where)
        .scalar_subquery()
    )


def _rank_counts(
    key: _Key, *, up_to: bool, date: ColumnElement[Any] = _DATE
) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """Two counts for the position ``key``: the entries ranked strictly better (the rank of an
    entry there, minus one), and its ties (same score, moves and elapsed ms) placed before it
    in the order — or, when ``up_to``, not after it.

    Better entries have a higher score, or the same score and fewer moves, or the same score
    and moves and a shorter elapsed time. Each is summed from a bounded range: level 0 of
    ``leaderboard_counts`` for higher scores, level 1 for the same score and fewer moves, level
    2 for the same score and moves and an earlier elapsed second, and the board index for the
    same score, moves and elapsed second but fewer ms. The ties come from the board index too.
    """
    counts = LeaderboardCount
    other = aliased(Game)
    same_moves = and_(_on_board(other, date), -other.score == -key.score, other.moves == key.moves)
    same_second_faster = (
        select(func.count())
        .where(
            same_moves,
            other.elapsed_ms >= key.second * 1000,
            other.elapsed_ms < key.elapsed_ms,
        )
        .scalar_subquery()
    )
    better = (
        _counted(0, counts.score > key.score, date=date)
        + _counted(1, counts.score == key.score, counts.moves < key.moves, date=date)
        + _counted(
            2,
            counts.score == key.score,
            counts.moves == key.moves,
            counts.elapsed_s < key.second,
            date=date,
        )
        + same_second_faster
    )
    placed = tuple_(other.finished_at, other.player_id)
    earlier = tuple_(key.finished_at, key.player_id)
    ties = (
        select(func.count())
        .where(
            same_moves,
            other.elapsed_ms == key.elapsed_ms,
            placed <= earlier if up_to else placed < earlier,
        )
        .scalar_subquery()
    )
    return better.label("better"), ties.label("ties")


COLUMNS = (
    Game.player_id,
    Player.name,
    Game.score,
    Game.moves,
    Game.undos,
    Game.elapsed_ms,
    Game.status,
    Game.finished_at,
    Game.id,
)
_ORDER = (
    (-Game.score).asc(),
    Game.moves.asc(),
    Game.elapsed_ms.asc(),
    Game.finished_at.asc(),
    Game.player_id.asc(),
)
_REVERSE = (
    (-Game.score).desc(),
    Game.moves.desc(),
    Game.elapsed_ms.desc(),
    Game.finished_at.desc(),
    Game.player_id.desc(),
)
_ENTRIES = select(*COLUMNS).join(Player, Player.id == Game.player_id).where(_on_board(Game))

#: The first ``limit`` entries (the first ranks 1: no counts needed).
FIRST_PAGE = _ENTRIES.order_by(*_ORDER).limit(_LIMIT)
#: The ``limit`` entries after the cursor, each with the cursor's counts (the entries ranked
#: better than it, and its ties up to it).
NEXT_PAGE = (
    _ENTRIES.add_columns(*_rank_counts(_CURSOR, up_to=True))
    .where(_SELF.position() > _CURSOR.position())
    .order_by(*_ORDER)
    .limit(_LIMIT)
)
#: One player's entry with its counts (the entries ranked better, its ties before it).
OWN = _ENTRIES.add_columns(*_rank_counts(_SELF, up_to=False)).where(Game.player_id == _PLAYER)
#: Some players' entries, each with its counts, in board order (the friends' view).
OWN_MANY = (
    _ENTRIES.add_columns(*_rank_counts(_SELF, up_to=False))
    .where(Game.player_id.in_(bindparam("player_ids", expanding=True)))
    .order_by(*_ORDER)
)


def _around() -> CompoundSelect[Any]:
    """One statement for a window around a player: the player's entry with its counts
    (``part`` 0), and up to ``limit`` entries above it (1) and below it (2)."""
    own = OWN.cte("own")
    at_own = tuple_(-own.c.score, own.c.moves, own.c.elapsed_ms, own.c.finished_at, own.c.player_id)
    # LATERAL, so that the player's row drives the index scans (a plan scanning the board
    # from one end and filtering on the player's position would read half of it).
    nearer = _ENTRIES.where(_SELF.position() < at_own).order_by(*_REVERSE).limit(_LIMIT)
    farther = _ENTRIES.where(_SELF.position() > at_own).order_by(*_ORDER).limit(_LIMIT)
    above, below = nearer.lateral("above"), farther.lateral("below")

    def columns(source: Any) -> list[Any]:
        return [source.c[column.key] for column in COLUMNS]

    return union_all(
        select(literal_column("0").label("part"), *columns(own), own.c.better, own.c.ties),
        select(literal_column("1"), *columns(above), null(), null()).select_from(
            own.join(above, true())
        ),
        select(literal_column("2"), *columns(below), null(), null()).select_from(
            own.join(below, true())
        ),
    )


AROUND = _around()
#: The counts of the cursor (the entries ranked better, its ties before it).
COUNTS = select(*_rank_counts(_CURSOR, up_to=False))


def better_on_its_date() -> ColumnElement[Any]:
    """For a statement selecting from ``games`` (no parameter): how many entries of the row's
    own date's board rank strictly better than the row (its rank there, minus one, when it is
    an entry), summed as :data:`OWN` sums them (``leaderboard_counts`` ranges and the board
    index), correlated with the row's ``daily_date``. Labelled ``better``."""
    return _rank_counts(_SELF, up_to=False, date=Game.daily_date.expression)[0]


__all__ = [
    "AROUND",
    "COLUMNS",
    "COUNTS",
    "FIRST_PAGE",
    "NEXT_PAGE",
    "OWN",
    "OWN_MANY",
    "Placed",
    "better_on_its_date",
    "key_values",
]
