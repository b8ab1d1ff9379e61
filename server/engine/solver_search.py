"""The solver's searches, on a :class:`Problem` (ranks only) and the configuration tables.

**The sweep.** A search state is (configuration, cards drawn ``d``, waste rank ``w``). Two facts
make one pass over the configurations enough:

* Drawing earlier never hurts: from (c, d, w) every line open to (c, d', w) with ``d' > d`` can be
  followed with the same removals and at most as many draws in the end (double its first draw, or
  if it never draws, finish with fewer draws). So for winning, and for winning with the fewest
  draws, only ``m(c, w)``, the fewest draws reaching (c, w), matters.
* Removals only grow the configuration; draws keep it. Configurations numbered by size
  (:mod:`server.engine.solver_tables`) are therefore visited after every state leading to them.

Each configuration keeps one integer ``X[c]`` of 25 *fields* of :data:`FIELD_BITS` bits. Bit ``w``
(the rank, 1..13) of field ``f`` for ``f`` in 0..23 means "(c, w) is reachable with at most ``f``
draws" — monotone in ``f``, so the minimum over paths is a bitwise OR. Field 24 (:data:`EXACT`)
means "reachable with exactly 23 draws", the only draw count at which a game can end blocked.
Visiting ``c``: add the draws (from ``m = m(c)``, the lowest non-empty field, each later stock card
``s_j`` gives its rank from field ``j + 1`` on, and ``s_22`` gives field 24), then push to every
successor ``c + p`` the fields where a neighbour of ``rank(p)`` is set: ``(X << 1 | X >> 1)`` (and
``<< 12 | >> 12`` for the K–A wrap) masked with ``rank(p)``'s bit. Fields are wide enough that these
shifts never carry a rank into another field's rank bits.

The deal is winnable iff the full configuration gets a bit; its lowest field is the fewest draws.
Lines are traced backwards from the goal through the fields (see :func:`trace`).

**The quick search** (:func:`quick_win`): a depth-first search with the same dominance (a state
is skipped when its (configuration, waste rank) was expanded with no more draws), trying removals
first, those turning up the most cards first. From each configuration every later draw count is
pushed at once, so the dominance never cuts a run of draws short. It finds a win within a few
thousand states on most Easy deals; otherwise the sweep decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from server.engine.deals import STOCK_SIZE
from server.engine.solver_tables import ConfigTables

__all__ = [
    "EXACT",
    "FIELD_BITS",
    "Problem",
    "Step",
    "Sweep",
    "best_blocked",
    "fewest_draws",
    "quick_win",
    "sweep",
    "trace",
]

FIELD_BITS: Final = 25
"""Bits per field: ranks use bits 1..13; shifts by 1 and 12 land outside any field's rank bits."""

EXACT: Final = STOCK_SIZE + 1
"""The field of states reached with exactly ``STOCK_SIZE`` (23) draws."""

_FIELDS: Final = EXACT + 1
_RANK_BITS: Final = 0b11111111111110  # ranks 1..13 within a field
_FIELD_MASK: Final = (1 << FIELD_BITS) - 1
_FROM: Final[tuple[int, ...]] = tuple(
    sum(1 << (FIELD_BITS * f) for f in range(first, STOCK_SIZE + 1))
    for first in range(STOCK_SIZE + 2)
)
"""``_FROM[j]``: bit 0 of every monotone field ``j..23``."""
_EVERY_FIELD: Final = sum(1 << (FIELD_BITS * f) for f in range(_FIELDS))


@dataclass(frozen=True, slots=True)
class Problem:
    """A position reduced to what the search needs.

    Attributes:
        ranks: the rank (1..13) of the card dealt at each of the 28 positions.
        stock: 23 ranks in draw order by absolute draw number: ``stock[j]`` is the rank of the
            card drawn by the ``(j + 1)``-th draw. Entries before ``drawn`` are not used.
        drawn: cards drawn so far (``23 - cards left in the stock``).
        waste: the rank of the waste card.
        start: the current configuration's number.
        wraps: whether K and A are neighbours (Easy).
    """

    ranks: tuple[int, ...]
    stock: tuple[int, ...]
    drawn: int
    waste: int
    start: int
    wraps: bool

    def neighbours(self, rank: int) -> int:
        """The ranks next to ``rank`` under the rules, as a bitmask (bit ``r`` for rank ``r``)."""
        bits = (1 << (rank - 1)) | (1 << (rank + 1))
        if self.wraps:
            bits |= (1 << 1 if rank == 13 else 0) | (1 << 13 if rank == 1 else 0)
        return bits & _RANK_BITS

    def adjacent_positions(self) -> list[int]:
        """For each waste rank 0..13, the positions whose card may go onto it, as a bitmask."""
        table = [0] * 14
        for waste in range(1, 14):
            near = self.neighbours(waste)
            table[waste] = sum(1 << pos for pos, rank in enumerate(self.ranks) if near >> rank & 1)
        return table


@dataclass(frozen=True, slots=True)
class Sweep:
    """The result of :func:`sweep`: ``fields[c]`` is ``X[c]`` (0 when unreachable)."""

    fields: list[int]
    expanded: int


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a traced line: remove ``pos``, or (``pos`` ``None``) draw until ``drawn``."""

    pos: int | None
    drawn: int


def _draw_packs(problem: Problem, exact_end: bool) -> list[int]:
    """Per lowest-set-bit length: the bits the draws add to a configuration whose ``m(c)`` is its
    field (``0`` for the empty integer)."""
    stock, drawn = problem.stock, problem.drawn
    by_first: list[int] = [0] * (STOCK_SIZE + 1)
    first_draw: dict[int, int] = {}
    for j in range(STOCK_SIZE - 1, drawn - 1, -1):
        first_draw[stock[j]] = j
        pack = 0
        for rank, at in first_draw.items():
            pack |= _FROM[at + 1] << rank
        if exact_end:
            pack |= 1 << (FIELD_BITS * EXACT + stock[STOCK_SIZE - 1])
        by_first[j] = pack
    packs = [0] * (FIELD_BITS * _FIELDS + 1)
    for length in range(1, len(packs)):
        field = (length - 1) // FIELD_BITS
        packs[length] = by_first[field] if field <= STOCK_SIZE else 0
    return packs


def sweep(problem: Problem, tables: ConfigTables, *, exact_end: bool) -> Sweep:
    """Fill ``X[c]`` for every configuration reachable from the problem's position.

    Args:
        problem: the position.
        tables: the configuration tables.
        exact_end: also fill field :data:`EXACT` (needed only to rank blocked endings).

    Returns:
        The :class:`Sweep`.
    """
    every = _EVERY_FIELD if exact_end else _FROM[0]
    rank_fields = [every << rank for rank in problem.ranks]
    packs = _draw_packs(problem, exact_end)
    fields = [0] * len(tables.masks)
    first = _FROM[problem.drawn]
    if exact_end and problem.drawn == STOCK_SIZE:
        first |= 1 << (FIELD_BITS * EXACT)
    fields[problem.start] = first << problem.waste
    succ = tables.succ
    # The hot loop, once with the K–A wrap and once without (no test inside the loop).
    if problem.wraps:
        for config in range(problem.start, tables.full):
            x = fields[config]
            if x:
                x |= packs[(x & -x).bit_length()]
                fields[config] = x
                near = (x << 1) | (x >> 1) | (x << 12) | (x >> 12)
                for pos, after in succ[config]:
                    pushed = near & rank_fields[pos]
                    if pushed:
                        fields[after] |= pushed
    else:
        for config in range(problem.start, tables.full):
            x = fields[config]
            if x:
                x |= packs[(x & -x).bit_length()]
                fields[config] = x
                near = (x << 1) | (x >> 1)
                for pos, after in succ[config]:
                    pushed = near & rank_fields[pos]
                    if pushed:
                        fields[after] |= pushed
    expanded = len(fields) - fields.count(0) - (1 if fields[tables.full] else 0)
    return Sweep(fields, expanded)


def _field(x: int, field: int) -> int:
    return (x >> (FIELD_BITS * field)) & _FIELD_MASK


def _lowest_field(x: int) -> int:
    return ((x & -x).bit_length() - 1) // FIELD_BITS


def fewest_draws(tables: ConfigTables, result: Sweep) -> int | None:
    """The fewest total draws of a win, or ``None`` when the position cannot be won."""
    goal = result.fields[tables.full]
    return _lowest_field(goal) if goal else None


def best_blocked(problem: Problem, tables: ConfigTables, result: Sweep) -> tuple[int, int] | None:
    """The best blocked ending: stock empty, no playable card next to the waste.

    Args:
        problem: the position.
        tables: the configuration tables.
        result: a sweep made with ``exact_end=True``.

    Returns:
        ``(configuration, waste rank)`` maximising ``100 × peaks cleared − cards removed``
        (ties: the first configuration in index order, then the lowest rank), or ``None`` when no
        blocked ending is reachable.
    """
    adjacent = problem.adjacent_positions()
    best: tuple[int, int] | None = None
    best_value = 0
    shift = FIELD_BITS * EXACT
    fields, playable, value = result.fields, tables.playable, tables.value
    for config in range(problem.start, tables.full):
        ending = fields[config] >> shift
        if not ending or (best is not None and value[config] <= best_value):
            continue
        free = playable[config]
        for rank in range(1, 14):
            if ending >> rank & 1 and not free & adjacent[rank]:
                best, best_value = (config, rank), value[config]
                break
    return best


def trace(
    problem: Problem, tables: ConfigTables, result: Sweep, goal: tuple[int, int, int]
) -> list[Step]:
    """A line from the problem's position to ``goal``, read backwards through the fields.

    Args:
        problem: the position.
        tables: the configuration tables.
        result: the sweep (with ``exact_end=True`` when ``goal`` is in field :data:`EXACT`).
        goal: ``(configuration, waste rank, field)`` with that rank set in that field.

    Returns:
        The steps in playing order. Every step is legal in turn; the line makes at most ``field``
        draws (exactly 23 for field :data:`EXACT`).
    """
    fields, masks, index = result.fields, tables.masks, tables.index
    stock, drawn = problem.stock, problem.drawn
    config, rank, field = goal
    backwards: list[Step] = []
    while True:
        at_start = config == problem.start and rank == problem.waste
        if at_start and (drawn <= field < EXACT or (field == EXACT and drawn == STOCK_SIZE)):
            break
        # Was the waste card drawn (by the draw numbered j + 1)? Taking a draw whenever one
        # explains the state puts draws as late as possible, so lines play removals first.
        x = fields[config]
        last = STOCK_SIZE - 1 if field == EXACT else field - 1
        low = STOCK_SIZE - 1 if field == EXACT else drawn
        for j in range(low, last + 1):
            before = _field(x, j) & _RANK_BITS
            if stock[j] == rank and before and config != tables.full:
                backwards.append(Step(None, j + 1))
                field, rank = j, (before & -before).bit_length() - 1
                break
        else:
            previous = _removal_before(problem, fields, masks, index, config, rank, field)
            if previous is None:  # pragma: no cover - the sweep's fields explain themselves
                raise AssertionError("solver trace found no predecessor")
            pos, config, rank = previous
            backwards.append(Step(pos, -1))
    line: list[Step] = []
    count = drawn
    for step in reversed(backwards):
        if step.pos is None:
            line.append(step)
            count = step.drawn
        else:
            line.append(Step(step.pos, count))
    return line


def _removal_before(
    problem: Problem,
    fields: list[int],
    masks: tuple[int, ...],
    index: Mapping[int, int],
    config: int,
    rank: int,
    field: int,
) -> tuple[int, int, int] | None:
    """A state one removal before (config, rank) in ``field``: ``(pos, configuration, rank)``."""
    mask = masks[config]
    near = problem.neighbours(rank)
    rest = mask & ~masks[problem.start]
    while rest:
        low = rest & -rest
        rest ^= low
        pos = low.bit_length() - 1
        if problem.ranks[pos] != rank:
            continue
        before = index.get(mask ^ low)
        if before is None:
            continue
        waste = _field(fields[before], field) & near
        if waste:
            return pos, before, (waste & -waste).bit_length() - 1
    return None


def quick_win(problem: Problem, tables: ConfigTables, budget: int) -> tuple[bool | None, int]:
    """Depth-first search for a win, removals before draws, within ``budget`` states.

    Returns:
        ``(True, nodes)`` when a win was found, ``(False, nodes)`` when the whole space was searched
        without one, ``(None, nodes)`` when the budget ran out first.
    """
    succ, playable, full = tables.succ, tables.playable, tables.full
    ranks, stock = problem.ranks, problem.stock
    adjacent = problem.adjacent_positions()
    fewest: dict[int, int] = {}
    draws_from: dict[int, int] = {}
    stack = [(problem.start, problem.drawn, problem.waste)]
    nodes = 0
    while stack:
        config, drawn, waste = stack.pop()
        key = config << 4 | waste
        if fewest.get(key, _FIELDS) <= drawn:
            continue
        fewest[key] = drawn
        nodes += 1
        if config == full:
            return True, nodes
        if nodes >= budget:
            return None, nodes
        # Draws: every later draw count is open from here (one state per count, not a chain of
        # single draws, which the dominance check would cut short). Counts already opened from an
        # earlier visit of this configuration with fewer draws are not pushed again.
        opened = draws_from.get(config, STOCK_SIZE)
        if drawn < opened:
            draws_from[config] = drawn
            stack += [(config, j + 1, stock[j]) for j in range(opened - 1, drawn - 1, -1)]
        legal = playable[config] & adjacent[waste]
        if legal:
            free = playable[config]
            moves = [(pos, after) for pos, after in succ[config] if legal >> pos & 1]
            # Removals that turn up the most cards are tried first (pushed last).
            moves.sort(key=lambda move: (playable[move[1]] & ~free).bit_count())
            stack += [(after, drawn, ranks[pos]) for pos, after in moves]
    return False, nodes
