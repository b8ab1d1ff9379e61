"""What a load run measured (:class:`Stats`) and its printed report."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from server.bench import percentile


@dataclass
class Stats:
    """What the simulated players measured."""

    latencies_ms: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    reply_bytes: list[int] = field(default_factory=list)
    request_bytes: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    games: int = 0
    server_cpu_s: float | None = None
    #: Paced play: actions sent later than planned (the previous ack was late), and how late.
    late: int = 0
    late_ms: list[float] = field(default_factory=list)
    #: Times a simulated player was told ``server_busy`` while getting in, and came back.
    busy_retries: int = 0

    def merge(self, other: Stats) -> None:
        self.busy_retries += other.busy_retries
        self.late += other.late
        self.late_ms += other.late_ms
        self.latencies_ms += other.latencies_ms
        self.outcomes.update(other.outcomes)
        self.reply_bytes += other.reply_bytes
        self.request_bytes += other.request_bytes
        self.errors.update(other.errors)
        self.games += other.games


def report(title: str, stats: Stats, seconds: float) -> float:
    """Print throughput and latency figures; returns actions per second."""
    done = sum(stats.outcomes.values())
    rate = done / seconds if seconds else 0.0
    lat = stats.latencies_ms
    print(f"{title}: {done} replies in {seconds:.1f} s = {rate:,.0f}/s")
    if lat:
        print(
            f"  latency ms: p50 {statistics.median(lat):.2f}  p95 {percentile(lat, 0.95):.2f}  "
            f"p99 {percentile(lat, 0.99):.2f}  max {max(lat):.2f}"
        )
    if stats.outcomes:
        print(f"  outcomes: {dict(stats.outcomes)}")
    if stats.games:
        print(f"  games started: {stats.games} ({done / stats.games:.1f} replies each)")
    print(f"  errors: {dict(stats.errors) or 0}")
    if stats.server_cpu_s is not None and done:
        print(
            f"  server CPU: {stats.server_cpu_s / seconds:.0%} of one core, "
            f"{stats.server_cpu_s / done * 1e6:,.0f} us per reply"
        )
    return rate
