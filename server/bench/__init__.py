"""Benchmark and load tools run on demand (not part of the running server)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1) of some values; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]
