"""What one subscribing client of the bench received: each payload's header read, its
sequence accounted per publisher (unique, duplicate, out of order), its end-to-end latency
recorded. Called once per delivered message, so it is compiled with mypyc with the client
that reads the packets (`mqttq.build`): the load tool must stay faster than the brokers it
measures.
"""

from __future__ import annotations

import time

from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.payload import FLAG_WARMUP, unpack_header
from mqttq.bench.results import SubscriberResult
from mqttq.bench.scenarios import SubscriberSpec
from mqttq.bench.stats import LatencyHistogram, SequenceTracker

__all__ = ["Subscriber"]


class Subscriber:
    """Receives one subscriber's messages and accounts them per publisher."""

    __slots__ = (
        "_counters",
        "_histogram",
        "backlog",
        "client",
        "result",
        "spec",
        "unique",
    )

    def __init__(self, spec: SubscriberSpec, counters: Counters, histogram: LatencyHistogram):
        self.spec = spec
        self.result = SubscriberResult(spec.index)
        self.client: BenchClient | None = None
        self.unique = 0
        self.backlog = -1
        """Persistent scenario: messages to receive before the backlog counts as drained."""
        self._counters = counters
        self._histogram = histogram

    def on_payload(self, payload: bytes) -> None:
        now = time.time_ns()
        header = unpack_header(payload)
        if header is None:
            self.result.foreign += 1
            return
        flags, publisher, sequence, sent_ns = header
        trackers = self.result.trackers
        tracker = trackers.get(publisher)
        if tracker is None:
            tracker = trackers[publisher] = SequenceTracker()
        counters = self._counters
        if not tracker.record(sequence):
            counters.duplicates += 1
            return
        counters.received += 1
        if not flags & FLAG_WARMUP:
            counters.received_measured += 1
            counters.last_received_ns = now
            self._histogram.record((now - sent_ns) // 1000)
        self.unique += 1
        if self.unique == self.backlog:
            self.result.drained_ns = now
