"""Storage latency: a fixed-bucket histogram per storage operation, for /metrics."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Final

__all__ = ["BUCKETS", "HistogramSnapshot", "LatencyHistograms"]

BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Upper bounds in seconds (from 0.5 ms, a group commit, to seconds, a stalled disk)."""


@dataclass(slots=True)
class HistogramSnapshot:
    """A cumulative histogram as Prometheus wants it."""

    buckets: list[tuple[float, int]]
    """(upper bound in seconds, observations <= bound), ascending; the last bound is inf."""
    total: float
    """Sum of observed values (seconds)."""
    count: int


class LatencyHistograms:
    """Observed durations per operation name; `observe` is a bisect and two additions."""

    __slots__ = ("_counts", "_sums")

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}
        """op -> one count per bucket plus one for +Inf (not cumulative)."""
        self._sums: dict[str, float] = {}

    def observe(self, op: str, seconds: float) -> None:
        counts = self._counts.get(op)
        if counts is None:
            counts = self._counts[op] = [0] * (len(BUCKETS) + 1)
            self._sums[op] = 0.0
        counts[bisect_left(BUCKETS, seconds)] += 1
        self._sums[op] += seconds

    def snapshot(self) -> dict[str, HistogramSnapshot]:
        """Cumulative buckets per operation, as Prometheus expects them."""
        result = {}
        for op, counts in self._counts.items():
            running = 0
            buckets = []
            for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                running += count
                buckets.append((bound, running))
            result[op] = HistogramSnapshot(buckets, self._sums[op], running)
        return result
