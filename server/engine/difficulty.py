"""How hard a deal is for a player who cannot see its face-down cards (docs/rules.md §4
"Difficulty").

The solver (:mod:`server.engine.solver`) sees every card; a player sees only the face-up cards
and the waste card. Two players who know nothing hidden play the deal here:

* **random play** — :data:`PLAYOUTS` playouts: whenever a removal is legal, one of the legal
  removals is chosen uniformly at random (listed by ascending position), otherwise the player
  draws; the game ends won or blocked. The random choices come from a stream derived from the
  deal's 52 cards (:func:`random_bytes`), so every process computes the same figures.
* **greedy play** — one game: whenever a removal is legal, the player plays the first card of
  the longest chain of removals that the cards face up now allow (each card of the chain a
  neighbour of the one before, the first a neighbour of the waste card; cards a removal would
  turn up are unknown, so they are not counted), the lowest position first among the first cards
  of the longest chains; otherwise the player draws.

From them, with the deal's par (the solver's best final score): the random playouts' win rate,
median score and mean **shortfall** (par − final score), and the greedy game's status, score
and shortfall. The **difficulty index** combines the two shortfalls (:func:`difficulty_index`)
and :func:`level_of` cuts it into four :class:`Level`\\ s at thresholds calibrated per rule set
(:data:`THRESHOLDS`).

The games run on a compact table (position bitmasks, precomputed cover masks, ranks as ints)
rather than :class:`~server.engine.game.Game`; ``tests/engine/test_difficulty.py`` replays their
lines through :class:`~server.engine.game.Game` to hold them to the rules.

>>> from server.engine.codes import GameCode
>>> from server.engine.solver import solve
>>> code = GameCode.parse("TP1-E-AAAAAAA")
>>> figures = measure(code.deal(), code.rules, solve(code.deal(), code.rules).par, playouts=200)
>>> figures.par, figures.random_wins, figures.greedy_status.value, figures.greedy_score
(759, 9, 'blocked', 552)
>>> figures.level.value
'expert'
>>> measure(code.deal(), code.rules, figures.par, playouts=200) == figures  # deterministic
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

from server.engine.actions import Action, Status
from server.engine.codes import RuleSet
from server.engine.deals import Deal
from server.engine.layout import COVERED_BY, COVERS, PEAK_OF, PEAKS, POSITION_COUNT
from server.engine.rules import PEAK_BONUS, START_SCORE

__all__ = [
    "GREEDY_WEIGHT",
    "PLAYOUTS",
    "THRESHOLDS",
    "Difficulty",
    "Level",
    "Playout",
    "difficulty_index",
    "greedy_game",
    "level_of",
    "measure",
    "random_bytes",
    "random_playouts",
]


class Level(StrEnum):
    """The four levels of difficulty, easiest first; the value is the wire name."""

    EASY = "easy"
    MEDIUM = "medium"
    HARD = "hard"
    EXPERT = "expert"


PLAYOUTS: Final = 1000
"""Random playouts per deal."""

GREEDY_WEIGHT: Final = 0.1
"""What one point of the greedy game's shortfall adds to the index (see
:func:`difficulty_index`)."""

# The quartiles of the index over 10,000 random winnable TP2 deals per rule set, printed by
# ``python benchmarks/daily_difficulty.py --deals 10000 --seed 2027`` (README "Daily difficulty").
THRESHOLDS: Final[Mapping[RuleSet, tuple[float, float, float]]] = MappingProxyType(
    {
        RuleSet.EASY: (54.16, 96.75, 143.61),
        RuleSet.CLASSIC: (109.50, 154.61, 199.52),
    }
)
"""Per rule set, the index at or below which a deal is easy, medium and hard (above the last:
expert): a quarter of winnable deals in each level."""

_SEED_LABEL: Final = b"TriPeaks-difficulty:"
_FULL: Final = (1 << POSITION_COUNT) - 1
_COVER_MASK: Final[tuple[int, ...]] = tuple(
    sum(1 << above for above in COVERED_BY[pos]) for pos in range(POSITION_COUNT)
)
_BOTTOM: Final = sum(1 << pos for pos in range(POSITION_COUNT) if not COVERED_BY[pos])
_PEAK_MASK: Final[tuple[int, ...]] = tuple(
    sum(1 << p for p in PEAKS[PEAK_OF[pos]]) for pos in range(POSITION_COUNT)
)
#: For a choice among ``k`` options, random bytes at or above ``_LIMIT[k]`` are skipped.
_LIMIT: Final[tuple[int, ...]] = (0, *(256 - 256 % k for k in range(1, POSITION_COUNT + 1)))
#: Random bytes made at first per playout (the stream is lengthened when they run out).
_BYTES_PER_PLAYOUT: Final = 32
_DRAW: Final = -1


@dataclass(frozen=True, slots=True)
class Playout:
    """One game played to its end by a policy.

    Attributes:
        status: won or blocked.
        score: the final score (docs/rules.md §2 "Score").
        line: the removals and draws played, in order.
    """

    status: Status
    score: int
    line: tuple[Action, ...]


@dataclass(frozen=True, slots=True)
class Difficulty:
    """The measures of one deal and its level.

    Attributes:
        par: the solver's best final score (the shortfalls count from it).
        playouts: random playouts played.
        random_wins: how many of them were won.
        random_median_score: their median final score (the lower median).
        random_mean_shortfall: their mean of ``par − score``.
        greedy_status: how the greedy game ended (won or blocked).
        greedy_score: its final score.
        index: :func:`difficulty_index` of the two shortfalls.
        level: :func:`level_of` the index under the deal's rule set.
    """

    par: int
    playouts: int
    random_wins: int
    random_median_score: int
    random_mean_shortfall: float
    greedy_status: Status
    greedy_score: int
    index: float
    level: Level

    @property
    def random_win_rate(self) -> float:
        """The share of random playouts won."""
        return self.random_wins / self.playouts

    @property
    def greedy_shortfall(self) -> int:
        """``par − greedy score``."""
        return self.par - self.greedy_score


@dataclass(frozen=True, slots=True)
class _Table:
    """A deal reduced to ints: ranks by position, the positions whose rank neighbours each rank,
    the stock's ranks in draw order, the waste card's rank."""

    ranks: tuple[int, ...]
    near: tuple[int, ...]
    stock: tuple[int, ...]
    waste: int

    @classmethod
    def of(cls, deal: Deal, rules: RuleSet) -> _Table:
        ranks = tuple(int(card.rank) for card in deal.tableau)
        near = [0] * 14
        for rank in range(1, 14):
            for pos, other in enumerate(ranks):
                gap = abs(other - rank)
                if gap == 1 or (gap == 12 and rules.wraps):
                    near[rank] |= 1 << pos
        return cls(ranks, tuple(near), tuple(int(c.rank) for c in deal.stock), int(deal.waste.rank))


def random_bytes(deal: Deal, length: int) -> bytes:
    """The first ``length`` bytes of the deal's random stream: SHAKE-256 of
    ``"TriPeaks-difficulty:"`` followed by the deal's 52 card indexes (docs/rules.md §3 "Deck
    before shuffling"; tableau by position, the waste card, the stock in draw order), one byte
    each. A longer stream begins with every shorter one."""
    seed = _SEED_LABEL + bytes(card.index for card in deal.deck)
    return hashlib.shake_256(seed).digest(length)


def _play_random(table: _Table, stream: bytes, at: int, line: list[int]) -> tuple[bool, int, int]:
    """One random playout from the deal, reading choices from ``stream[at:]`` and appending its
    positions (:data:`_DRAW` for a draw) to ``line``.

    A choice among ``k`` legal removals reads the next byte ``x``, skipping it while
    ``x ≥ 256 − 256 mod k``, and takes the ``(x mod k)``-th by ascending position; a lone legal
    removal reads nothing.

    Returns:
        Whether it was won, its final score and where the next playout reads from; the score
        is ``-1`` and nothing is played when the stream ran out (the caller lengthens it).
    """
    ranks, near, stock, limits = table.ranks, table.near, table.stock, _LIMIT
    cover, peak_mask, below_of = _COVER_MASK, _PEAK_MASK, COVERS
    present, playable, waste = _FULL, _BOTTOM, table.waste
    drawn, moves, bonus, end = 0, 0, 0, len(stream)
    while True:
        legal = playable & near[waste]
        if legal:
            count = legal.bit_count()
            if count > 1:
                if at >= end:
                    return False, -1, at
                byte = stream[at]
                at += 1
                while byte >= limits[count]:
                    if at >= end:
                        return False, -1, at
                    byte = stream[at]
                    at += 1
                for _ in range(byte % count):
                    legal &= legal - 1
            bit = legal & -legal
            pos = bit.bit_length() - 1
            present ^= bit
            playable ^= bit
            for below in below_of[pos]:
                if not present & cover[below]:
                    playable |= 1 << below
            moves += 1
            line.append(pos)
            waste = ranks[pos]
            if not present & peak_mask[pos]:
                bonus += PEAK_BONUS
                if not present:
                    return True, START_SCORE - moves + bonus, at
        elif drawn < len(stock):
            waste = stock[drawn]
            drawn += 1
            moves += 1
            line.append(_DRAW)
        else:
            return False, START_SCORE - moves + bonus, at


def _random_results(table: _Table, deal: Deal, count: int) -> list[tuple[bool, int, list[int]]]:
    """``count`` random playouts, each reading on in the one stream where the last stopped."""
    length = _BYTES_PER_PLAYOUT * max(count, 1)
    stream = random_bytes(deal, length)
    results: list[tuple[bool, int, list[int]]] = []
    at = 0
    while len(results) < count:
        line: list[int] = []
        won, score, after = _play_random(table, stream, at, line)
        if score < 0:  # ran out: the same stream, longer, and this playout again
            length *= 2
            stream = random_bytes(deal, length)
            continue
        results.append((won, score, line))
        at = after
    return results


def _actions(line: list[int]) -> tuple[Action, ...]:
    return tuple(Action.draw() if pos == _DRAW else Action.remove(pos) for pos in line)


def random_playouts(deal: Deal, rules: RuleSet, count: int = PLAYOUTS) -> list[Playout]:
    """The random playouts :func:`measure` plays, with their lines.

    Args:
        deal: the cards.
        rules: the rule set.
        count: how many (each the same for a given deal whatever ``count``: the first
            ``n`` of ``count > n`` playouts are the ``n`` playouts).
    """
    table = _Table.of(deal, rules)
    return [
        Playout(Status.WON if won else Status.BLOCKED, score, _actions(line))
        for won, score, line in _random_results(table, deal, count)
    ]


def _longest_chain(free: int, rank: int, table: _Table, memo: dict[tuple[int, int], int]) -> int:
    """The most removals in a row among the positions of ``free`` starting on ``rank``."""
    key = (free, rank)
    known = memo.get(key)
    if known is not None:
        return known
    best = 0
    options = free & table.near[rank]
    while options:
        bit = options & -options
        options ^= bit
        pos = bit.bit_length() - 1
        best = max(best, 1 + _longest_chain(free ^ bit, table.ranks[pos], table, memo))
    memo[key] = best
    return best


def _greedy_choice(playable: int, waste: int, table: _Table) -> int:
    """The greedy player's removal: the first card of a longest chain among the playable
    cards (lowest position among equals), or -1 when none is legal."""
    memo: dict[tuple[int, int], int] = {}
    best, choice = 0, -1
    options = playable & table.near[waste]
    while options:
        bit = options & -options
        options ^= bit
        pos = bit.bit_length() - 1
        length = 1 + _longest_chain(playable ^ bit, table.ranks[pos], table, memo)
        if length > best:
            best, choice = length, pos
    return choice


def greedy_game(deal: Deal, rules: RuleSet) -> Playout:
    """The greedy player's game (see the module's documentation)."""
    table = _Table.of(deal, rules)
    present, playable, waste = _FULL, _BOTTOM, table.waste
    drawn, score = 0, START_SCORE
    line: list[int] = []
    while present:
        pos = _greedy_choice(playable, waste, table)
        if pos >= 0:
            bit = 1 << pos
            present ^= bit
            playable ^= bit
            for below in COVERS[pos]:
                if not present & _COVER_MASK[below]:
                    playable |= 1 << below
            score += PEAK_BONUS if not present & _PEAK_MASK[pos] else 0
            waste = table.ranks[pos]
        elif drawn < len(table.stock):
            waste = table.stock[drawn]
            drawn += 1
            pos = _DRAW
        else:
            return Playout(Status.BLOCKED, score, _actions(line))
        score -= 1
        line.append(pos)
    return Playout(Status.WON, score, _actions(line))


def difficulty_index(random_mean_shortfall: float, greedy_shortfall: int) -> float:
    """The single number the levels cut, higher for harder deals: the random playouts' mean
    shortfall plus :data:`GREEDY_WEIGHT` times the greedy game's shortfall.

    The random mean weighs most because it averages a thousand games; the greedy game is one
    game, its shortfall near 0 or 100 to 300 as it wins or blocks, so it counts a tenth:
    enough to set apart deals whose most obvious line fails, not enough to swamp the mean
    (the weight the calibration data favour, docs/rules.md §4 "Difficulty")."""
    return random_mean_shortfall + GREEDY_WEIGHT * greedy_shortfall


def level_of(
    index: float, rules: RuleSet, thresholds: tuple[float, float, float] | None = None
) -> Level:
    """The level of a difficulty index under ``rules``: easy up to the first threshold
    included, medium up to the second, hard up to the third, expert above.

    Args:
        index: :func:`difficulty_index`.
        rules: the rule set, whose :data:`THRESHOLDS` apply.
        thresholds: other thresholds instead (a calibration trying its own).
    """
    easy, medium, hard = THRESHOLDS[rules] if thresholds is None else thresholds
    if index <= easy:
        return Level.EASY
    if index <= medium:
        return Level.MEDIUM
    if index <= hard:
        return Level.HARD
    return Level.EXPERT


def measure(deal: Deal, rules: RuleSet, par: int, playouts: int = PLAYOUTS) -> Difficulty:
    """Play the deal randomly ``playouts`` times and greedily once, and grade it.

    Args:
        deal: the cards.
        rules: the rule set.
        par: the deal's par (:func:`server.engine.solver.solve`).
        playouts: how many random playouts (at least 1).

    Returns:
        The :class:`Difficulty`; the same for the same arguments in every process.
    """
    if playouts < 1:
        raise ValueError(f"at least one playout is needed, got {playouts}")
    table = _Table.of(deal, rules)
    results = _random_results(table, deal, playouts)
    scores = sorted(score for _, score, _ in results)
    wins = sum(1 for won, _, _ in results if won)
    mean_shortfall = par - sum(scores) / playouts
    greedy = greedy_game(deal, rules)
    index = difficulty_index(mean_shortfall, par - greedy.score)
    return Difficulty(
        par=par,
        playouts=playouts,
        random_wins=wins,
        random_median_score=scores[(playouts - 1) // 2],
        random_mean_shortfall=mean_shortfall,
        greedy_status=greedy.status,
        greedy_score=greedy.score,
        index=index,
        level=level_of(index, rules),
    )
