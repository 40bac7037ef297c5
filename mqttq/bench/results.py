"""What each worker reports, and how the parent merges it into one run result.

Accounting rules (per publisher message, all messages including warm-up):
- expected: every subscriber that must receive a publisher's messages expects each one
  once; a shared group expects each once across its members.
- received: unique arrivals; lost = expected - received; duplicates: repeated arrivals
  (for a shared group, also a message that reached two members); out of order: a message
  arriving after a higher sequence number from the same publisher.
Rates and latencies count only messages sent after the warm-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mqttq.bench.options import BenchOptions
from mqttq.bench.scenarios import Plan
from mqttq.bench.stats import GroupAccount, LatencyHistogram, SequenceTracker

SATURATED_CPU = 0.9
"""A worker busier than this fraction of one core probably limited the measurement."""


@dataclass(slots=True)
class PublisherResult:
    index: int
    published: int = 0
    published_measured: int = 0
    acked: int = 0
    rejected: int = 0


@dataclass(slots=True)
class SubscriberResult:
    index: int
    trackers: dict[int, SequenceTracker] = field(default_factory=dict)
    foreign: int = 0
    """Messages whose payload is not a bench payload of this run."""
    session_present: bool | None = None
    """Persistent scenario: the CONNACK Session Present flag on reconnect [MQTT-3.2.2-2]."""
    drained_ns: int | None = None
    """Persistent scenario: when this subscriber had received its whole backlog."""


@dataclass(slots=True)
class WorkerResult:
    """Everything one worker measured; picklable, sent from the worker process to the parent."""

    worker: int
    publishers: list[PublisherResult] = field(default_factory=list)
    subscribers: list[SubscriberResult] = field(default_factory=list)
    e2e: LatencyHistogram = field(default_factory=LatencyHistogram)
    puback: LatencyHistogram = field(default_factory=LatencyHistogram)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    max_rss_mb: float = 0.0
    measure_start_ns: int = 0
    publish_end_ns: int = 0
    """When the last publisher of this worker sent its last message."""
    ack_end_ns: int = 0
    """When the last publisher of this worker had every publish acknowledged."""
    last_received_ns: int = 0
    """When this worker's subscribers received their last measured message."""
    reconnect_ns: int = 0
    disconnects: int = 0
    errors: list[str] = field(default_factory=list)
    fatal: str | None = None


@dataclass(slots=True)
class Timeline:
    """What the parent observed while orchestrating the phases."""

    drain_complete: bool = False
    interrupted: bool = False
    drain_s: float = 0.0


def _cpu_report(results: list[WorkerResult]) -> tuple[list[dict[str, Any]], list[str]]:
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    for r in sorted(results, key=lambda r: r.worker):
        busy = r.cpu_s / r.wall_s if r.wall_s > 0 else 0.0
        saturated = busy > SATURATED_CPU
        rows.append(
            {
                "worker": r.worker,
                "cpu_s": round(r.cpu_s, 3),
                "wall_s": round(r.wall_s, 3),
                "cpu_percent": round(100 * busy, 1),
                "max_rss_mb": round(r.max_rss_mb, 1),
                "saturated": saturated,
            }
        )
        if saturated:
            warnings.append(
                f"worker {r.worker} used {100 * busy:.0f}% of a core: the tool may be the "
                "bottleneck; add --workers or lower the load"
            )
    return rows, warnings


def merge(
    plan: Plan, options: BenchOptions, workers: list[WorkerResult], timeline: Timeline
) -> dict[str, Any]:
    """Merge the workers' results into the run's JSON-ready result."""
    sent: dict[int, int] = {}
    published = published_measured = acked = rejected = 0
    e2e = LatencyHistogram()
    puback = LatencyHistogram()
    trackers: dict[int, dict[int, SequenceTracker]] = {}
    subscribers: dict[int, SubscriberResult] = {}
    errors: list[str] = []
    disconnects = 0
    for w in workers:
        for p in w.publishers:
            sent[p.index] = p.published
            published += p.published
            published_measured += p.published_measured
            acked += p.acked
            rejected += p.rejected
        for s in w.subscribers:
            subscribers[s.index] = s
            trackers[s.index] = s.trackers
        e2e.merge(w.e2e)
        puback.merge(w.puback)
        errors.extend(w.errors)
        disconnects += w.disconnects

    expected = received = lost = duplicates = out_of_order = foreign = 0
    for spec in plan.subscribers:
        sub = subscribers.get(spec.index)
        own = trackers.get(spec.index, {})
        if sub is not None:
            foreign += sub.foreign
        wanted = plan.expected_publishers(spec)
        for publisher in wanted:
            n = sent.get(publisher, 0)
            expected += n
            tracker = own.get(publisher)
            if tracker is None:
                lost += n
                continue
            received += tracker.unique
            lost += tracker.lost(n)
            duplicates += tracker.duplicates
            out_of_order += tracker.out_of_order
        if spec.group is None:
            # Messages from publishers this subscriber should not hear from: misrouted.
            wanted_set = set(wanted)
            for publisher, tracker in own.items():
                if publisher not in wanted_set:
                    foreign += tracker.unique + tracker.duplicates
    if plan.shared_group is not None:
        for spec_p in plan.publishers:
            n = sent.get(spec_p.index, 0)
            members = [t[spec_p.index] for t in trackers.values() if spec_p.index in t]
            account = GroupAccount(members)
            expected += n
            received += account.unique
            lost += max(0, n - account.unique)
            duplicates += account.duplicates
            out_of_order += account.out_of_order

    start = min((w.measure_start_ns for w in workers if w.measure_start_ns), default=0)

    def seconds(ends: list[int]) -> float:
        end = max((e for e in ends if e), default=0)
        return (end - start) / 1e9 if start and end > start else 0.0

    window = seconds([w.publish_end_ns for w in workers])

    def rate(n: int, span: float) -> float:
        return round(n / span, 1) if span > 0 else 0.0

    cpu_rows, warnings = _cpu_report(workers)
    if lost:
        warnings.append(f"{lost} expected messages were not received")
    if duplicates:
        warnings.append(f"{duplicates} duplicate deliveries")
    if out_of_order:
        warnings.append(f"{out_of_order} messages arrived out of order")
    if foreign:
        warnings.append(f"{foreign} messages that this run did not expect were received")
    if options.qos and acked + rejected < published:
        warnings.append(f"{published - acked - rejected} publishes were never acknowledged")
    if rejected:
        warnings.append(f"{rejected} publishes were refused by the broker (reason code >= 0x80)")
    if e2e.negative:
        warnings.append(f"{e2e.negative} latencies were negative (clock skew), counted as 0")
    if timeline.interrupted:
        warnings.append("interrupted: partial results")

    result: dict[str, Any] = {
        "scenario": plan.scenario,
        "run_id": plan.run_id,
        "broker": f"{options.host}:{options.port}",
        "protocol": "5" if options.protocol == 5 else "3.1.1",
        "qos": options.qos,
        "payload_bytes": options.payload,
        "rate_per_publisher": options.rate,
        "publishers": len(plan.publishers),
        "subscribers": len(plan.subscribers),
        "workers": len(workers),
        "warmup_s": options.warmup,
        "measured_s": round(window, 3),
        "messages": {
            "published": published,
            "acknowledged": acked,
            "rejected": rejected,
            "expected": expected,
            "received": received,
            "lost": lost,
            "duplicates": duplicates,
            "out_of_order": out_of_order,
            "foreign": foreign,
        },
        "rates": {
            "published_per_s": rate(published_measured, window),
            "acknowledged_per_s": rate(puback.count, seconds([w.ack_end_ns for w in workers])),
            "received_per_s": rate(e2e.count, seconds([w.last_received_ns for w in workers])),
        },
        "latency_ms": {"e2e": e2e.summary_ms(), "puback": puback.summary_ms()},
        # The same latencies in microseconds, bucket by bucket: runs merge by adding them
        # (`LatencyHistogram.from_json`), as benchmarks/compare.py --interleave does.
        "histograms_us": {"e2e": e2e.to_json(), "puback": puback.to_json()},
        "tool": {"workers": cpu_rows, "saturated": any(r["saturated"] for r in cpu_rows)},
        "disconnects": disconnects,
        "warnings": warnings,
        "errors": errors,
    }
    if plan.persistent:
        result["persistent"] = _persistent_report(plan, workers, sent, timeline)
    return result


def _persistent_report(
    plan: Plan, workers: list[WorkerResult], sent: dict[int, int], timeline: Timeline
) -> dict[str, Any]:
    reconnects = [w.reconnect_ns for w in workers if w.reconnect_ns]
    subs = [s for w in workers for s in w.subscribers]
    drained = [s.drained_ns for s in subs if s.drained_ns is not None]
    backlog = sum(sent.values()) * len(plan.subscribers)
    complete = len(drained) == len(plan.subscribers) and bool(reconnects)
    drain_s = (max(drained) - min(reconnects)) / 1e9 if complete else None
    return {
        "backlog": backlog,
        "sessions_present": sum(1 for s in subs if s.session_present),
        "drained_subscribers": len(drained),
        "drain_s": round(drain_s, 3) if drain_s is not None else None,
        "drain_per_s": round(backlog / drain_s, 1) if drain_s else None,
        # The window's ends on the wall clock (ns since the epoch), to line it up with what
        # the broker did meanwhile (benchmarks/drain_timeline.py).
        "drain_started_ns": min(reconnects) if complete else None,
        "first_drained_ns": min(drained) if complete else None,
        "drain_ended_ns": max(drained) if complete else None,
    }
