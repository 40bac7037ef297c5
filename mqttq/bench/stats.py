"""Latency histogram and per-publisher sequence accounting for the bench tool.

`LatencyHistogram` is HDR-like: log-linear buckets with 128 sub-buckets per power of two,
so any recorded value is reported within 1/128 (< 0.8 %) of itself, in a fixed 4,352-slot
table whatever the number of samples. Histograms from several processes merge by adding, and
from several runs too: `to_json` gives the non-empty buckets and `from_json` reads them back.

`SequenceTracker` counts, for one (subscriber, publisher) pair, the unique, duplicated and
out-of-order sequence numbers received. It keeps the highest sequence seen and the sorted
list of gaps below it, so in-order delivery costs O(1) and memory grows only with the
number of missing ranges, not with the number of messages.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from typing import Any

_SUB_BITS = 7
_SUB = 1 << _SUB_BITS
_LINEAR_LIMIT = 2 * _SUB
MAX_VALUE = (1 << 40) - 1
"""Largest recordable value; larger values are clamped (about 12.7 days in microseconds)."""
_SLOTS = (MAX_VALUE.bit_length() - _SUB_BITS + 1) * _SUB
"""4,352: the linear range (2 x 128) and 128 sub-buckets for each power of two up to 2**39;
`_index(MAX_VALUE)` is the last."""


def _index(value: int) -> int:
    if value < _LINEAR_LIMIT:
        return value
    shift = value.bit_length() - (_SUB_BITS + 1)
    return (shift + 1) * _SUB + (value >> shift) - _SUB


def _bucket_bounds(index: int) -> tuple[int, int]:
    """Smallest and largest value that map to `index`."""
    if index < _LINEAR_LIMIT:
        return index, index
    shift = index // _SUB - 1
    low = (index % _SUB + _SUB) << shift
    return low, low + (1 << shift) - 1


class LatencyHistogram:
    """A bounded-memory histogram of non-negative integer values (the tool uses microseconds).

    Percentiles are the upper bound of the bucket holding the requested rank, clamped to the
    exact min and max, so p100 equals the true maximum.
    """

    __slots__ = ("_counts", "count", "max", "min", "negative", "total")

    def __init__(self) -> None:
        self._counts = [0] * _SLOTS
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0
        self.negative = 0
        """Samples below zero (clock skew between hosts), recorded as 0."""

    def record(self, value: int) -> None:
        """Add one sample; negative values count as 0, values above MAX_VALUE are clamped."""
        if value < 0:
            self.negative += 1
            value = 0
        elif value > MAX_VALUE:
            value = MAX_VALUE
        self._counts[_index(value)] += 1
        if self.count == 0:
            self.min = self.max = value
        elif value > self.max:
            self.max = value
        elif value < self.min:
            self.min = value
        self.count += 1
        self.total += value

    def merge(self, other: LatencyHistogram) -> None:
        """Add every sample of `other` to this histogram."""
        if other.count == 0:
            return
        counts = self._counts
        for index, n in enumerate(other._counts):
            if n:
                counts[index] += n
        if self.count == 0:
            self.min, self.max = other.min, other.max
        else:
            self.min = min(self.min, other.min)
            self.max = max(self.max, other.max)
        self.count += other.count
        self.total += other.total
        self.negative += other.negative

    def percentile(self, percent: float) -> int:
        """The value at or below which `percent` % of the samples lie (0 when empty)."""
        if self.count == 0:
            return 0
        rank = max(1, math.ceil(self.count * percent / 100.0))
        seen = 0
        for index, n in enumerate(self._counts):
            if n:
                seen += n
                if seen >= rank:
                    return max(self.min, min(self.max, _bucket_bounds(index)[1]))
        return self.max

    def to_json(self) -> dict[str, Any]:
        """The histogram as plain data: the exact count, total, min, max and negative, and
        `buckets` as [lowest value of the bucket, samples] for every non-empty bucket."""
        buckets = [[_bucket_bounds(i)[0], n] for i, n in enumerate(self._counts) if n]
        return {"count": self.count, "total": self.total, "min": self.min, "max": self.max,
                "negative": self.negative, "buckets": buckets}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencyHistogram:
        """The histogram `to_json` described; ValueError when the data does not add up."""
        histogram = cls()
        counts = histogram._counts
        for value, n in data["buckets"]:
            if not 0 <= value <= MAX_VALUE or n <= 0:
                raise ValueError(f"bad histogram bucket {[value, n]!r}")
            counts[_index(value)] += n
        histogram.count = data["count"]
        if sum(counts) != histogram.count:
            raise ValueError(
                f"histogram buckets hold {sum(counts)} samples, count says {histogram.count}"
            )
        histogram.total, histogram.negative = data["total"], data["negative"]
        histogram.min, histogram.max = data["min"], data["max"]
        return histogram

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def summary_ms(self) -> dict[str, float | int]:
        """count, min, mean, p50, p95, p99, p99.9 and max, converting microseconds to ms."""

        def ms(value: float) -> float:
            return round(value / 1000.0, 3)

        return {
            "count": self.count,
            "min": ms(self.min),
            "mean": ms(self.mean),
            "p50": ms(self.percentile(50)),
            "p95": ms(self.percentile(95)),
            "p99": ms(self.percentile(99)),
            "p999": ms(self.percentile(99.9)),
            "max": ms(self.max),
        }


class SequenceTracker:
    """Accounting of the sequence numbers one subscriber received from one publisher.

    A sequence is *unique* the first time it arrives, a *duplicate* after that, and
    *out of order* when it arrives after a higher sequence from the same publisher.
    """

    __slots__ = ("_gap_ends", "_gap_starts", "duplicates", "highest", "out_of_order", "unique")

    def __init__(self) -> None:
        self.highest = -1
        self.unique = 0
        self.duplicates = 0
        self.out_of_order = 0
        # Gaps are half-open ranges [start, end) of sequences below `highest` not yet seen.
        self._gap_starts: list[int] = []
        self._gap_ends: list[int] = []

    def record(self, sequence: int) -> bool:
        """Account one arrival; True when it is new (not a duplicate)."""
        highest = self.highest
        if sequence == highest + 1:
            self.highest = sequence
            self.unique += 1
            return True
        if sequence > highest:
            self._gap_starts.append(highest + 1)
            self._gap_ends.append(sequence)
            self.highest = sequence
            self.unique += 1
            return True
        starts, ends = self._gap_starts, self._gap_ends
        i = bisect_right(starts, sequence) - 1
        if i < 0 or sequence >= ends[i]:
            self.duplicates += 1
            return False
        start, end = starts[i], ends[i]
        if start == sequence and end == sequence + 1:
            del starts[i]
            del ends[i]
        elif start == sequence:
            starts[i] = sequence + 1
        elif end == sequence + 1:
            ends[i] = sequence
        else:
            ends[i] = sequence
            starts.insert(i + 1, sequence + 1)
            ends.insert(i + 1, end)
        self.unique += 1
        self.out_of_order += 1
        return True

    @property
    def gaps(self) -> list[tuple[int, int]]:
        """Missing half-open ranges below the highest sequence seen."""
        return list(zip(self._gap_starts, self._gap_ends, strict=True))

    def received_ranges(self) -> list[tuple[int, int]]:
        """The received sequences as sorted, disjoint half-open ranges."""
        ranges: list[tuple[int, int]] = []
        cursor = 0
        for start, end in zip(self._gap_starts, self._gap_ends, strict=True):
            if start > cursor:
                ranges.append((cursor, start))
            cursor = end
        if self.highest + 1 > cursor:
            ranges.append((cursor, self.highest + 1))
        return ranges

    def lost(self, expected: int) -> int:
        """Sequences in [0, expected) never received."""
        received_below = self.unique
        if self.highest >= expected:
            received_below -= sum(
                min(end, self.highest + 1) - max(start, expected)
                for start, end in self.received_ranges()
                if end > expected
            )
        return expected - received_below


class GroupAccount:
    """Accounting of one publisher's messages across the members of a shared group.

    Each message should reach exactly one member; a message received by two members counts
    as a duplicate [MQTT-4.8.2].
    """

    __slots__ = ("duplicates", "out_of_order", "unique")

    def __init__(self, trackers: Iterable[SequenceTracker]) -> None:
        intervals: list[tuple[int, int]] = []
        self.duplicates = 0
        self.out_of_order = 0
        for tracker in trackers:
            intervals.extend(tracker.received_ranges())
            self.duplicates += tracker.duplicates
            self.out_of_order += tracker.out_of_order
        total = sum(end - start for start, end in intervals)
        union = 0
        cursor = -1
        for start, end in sorted(intervals):
            if end <= cursor:
                continue
            union += end - max(start, cursor)
            cursor = end
        self.unique = union
        self.duplicates += total - union
