"""The Kafka sink alone: CPU per record of the worker + `KafkaSink` (issue 33; not a test).

No broker: an `IntegrationWorker` with the `kafka` sink drains an in-memory backlog of N
ready-made deliveries (what the broker's log backlog hands it: 10 publishers, 62-byte JSON
payloads, QoS 1, as throughput.py's load) into a fresh one-node Kafka
(scripts/kafka-local.sh) on a topic of 3 partitions. The process runs pinned to one core
(Kafka is not pinned); after an unmeasured warm-up (the JVM), each trial reports the rate
and the CPU per record of the event loop's thread and of the whole process (librdkafka's
threads and the poll thread included), from /proc.

    python benchmarks/integrations/kafka_sink.py [--count 60000] [--batch-size 500]
        [--trials 3] [--core 0] [--sink-key KEY=VALUE ...] [--profile FILE]

`--sink-key` sets a key of the integration's table (e.g. `batch_size=2000`, `headers=false`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from benchmarks.integrations import services
from mqttq.integrations.record import Delivery
from mqttq.integrations.sink import Rejected
from mqttq.integrations.spec import parse_integration
from mqttq.integrations.worker import IntegrationWorker

TOPIC = "mqttq-bench-sink"
DEPTH = 0
"""--depth: the sink's batches in flight (0: its own)."""


class ListBacklog:
    """A `Backlog` over a list: `take` slices it, `settle` counts, in order."""

    def __init__(self, items: Sequence[Delivery]) -> None:
        self.items = deque(items)
        self.settled = 0
        self.done = asyncio.Event()
        self.total = len(items)
        self.next_seq = items[0].seq if items else 0

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        if not self.items:
            await asyncio.Event().wait()  # nothing more: wait for cancellation
        count = min(max_items, len(self.items))
        return [self.items.popleft() for _ in range(count)]

    async def settle(self, batch: Sequence[Delivery]) -> None:
        if batch[0].seq != self.next_seq:
            raise AssertionError(f"settled out of order: {batch[0].seq} != {self.next_seq}")
        self.next_seq = batch[-1].seq + 1
        self.settled += len(batch)
        if self.settled >= self.total:
            self.done.set()

    def lag(self) -> int:
        return len(self.items)

    def dropped(self) -> int:
        return 0


class NoDeadLetters:
    async def put(self, integration: str, rejected: Sequence[Rejected]) -> None:
        raise AssertionError(f"{len(rejected)} rejected: {rejected[0].reason}")


def deliveries(count: int, first_seq: int) -> list[Delivery]:
    """`count` deliveries as 10 publishers' messages arrive interleaved."""
    now = int(time.time() * 1000)
    out = []
    for n in range(count):
        publisher = n % 10
        payload = b'{"run":"bench","publisher":%d,"seq":%012d,"pad":"xxxxxxxx"}' % (publisher, n)
        out.append(
            Delivery(
                f"mqttq-bench/abcdef/pub/{publisher}",
                payload,
                1,
                False,
                f"mqbabcdefp{publisher}",
                "default",
                now,
                (),
                None,
                None,
                None,
                None,
                first_seq + n,
            )
        )
    return out


def thread_seconds(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/schedstat") as stat:
        return int(stat.read().split()[0]) / 1e9


def process_seconds() -> float:
    total = 0.0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError):
            continue
    return total


async def trial(table: dict[str, Any], items: list[Delivery]) -> dict[str, Any]:
    spec = parse_integration(table, "integration[0]")
    from mqttq.integrations.sinks.kafka import KafkaSink  # noqa: PLC0415

    sink = KafkaSink(spec.settings, spec.name)
    if DEPTH:
        sink.batches_in_flight = DEPTH  # type: ignore[misc]
    backlog = ListBacklog(items)
    worker = IntegrationWorker(spec.name, sink, backlog, NoDeadLetters(), spec.delivery)
    await sink.open()
    loop_tid = threading.get_native_id()
    poll_tid = sink._thread.native_id if sink._thread and sink._thread.native_id else loop_tid
    poll0 = thread_seconds(poll_tid)
    loop0, all0, wall0 = thread_seconds(loop_tid), process_seconds(), time.perf_counter()
    task = asyncio.create_task(worker.run())
    await backlog.done.wait()
    wall = time.perf_counter() - wall0
    loop_cpu = thread_seconds(loop_tid) - loop0
    all_cpu = process_seconds() - all0
    poll_cpu = thread_seconds(poll_tid) - poll0
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    count = len(items)
    return {
        "records": count,
        "per_s": round(count / wall),
        "loop_us": round(loop_cpu / count * 1e6, 2),
        "poll_thread_us": round(poll_cpu / count * 1e6, 2),
        "process_us": round(all_cpu / count * 1e6, 2),
        "delivered": worker.stats.delivered,
        "failed": worker.stats.failed,
    }


async def run(bootstrap: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    table: dict[str, Any] = {
        "name": "bench",
        "type": "kafka",
        "filters": ["mqttq-bench/#"],
        "bootstrap_servers": bootstrap,
        "topic": TOPIC,
        "batch_size": args.batch_size,
        "linger_ms": 5,
        "max_in_flight": max(1000, 10 * args.batch_size),
    }
    for item in args.sink_key:
        key, _, value = item.partition("=")
        table[key] = json.loads(value) if value[:1] in '0123456789tf[{"-' else value
    seq = 1
    await trial(table, deliveries(args.warmup, seq))  # the JVM warms up
    seq += args.warmup
    results = []
    for _ in range(args.trials):
        result = await trial(table, deliveries(args.count, seq))
        seq += args.count
        print(json.dumps(result), flush=True)
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--warmup", type=int, default=60_000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--sink-key", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--bootstrap", help="an existing Kafka (else one is started)")
    parser.add_argument("--depth", type=int, help="KafkaSink.batches_in_flight (else its own)")
    parser.add_argument(
        "--rdkafka",
        action="append",
        default=[],
        metavar="PROPERTY=VALUE",
        help="a librdkafka property over the sink's own (an experiment, e.g. linger.ms=5)",
    )
    args = parser.parse_args()
    global DEPTH
    DEPTH = args.depth or 0
    if args.rdkafka:
        from mqttq.integrations.sinks.kafka import KafkaSink  # noqa: PLC0415

        overrides = dict(item.partition("=")[::2] for item in args.rdkafka)
        own = KafkaSink._config

        def config(self: KafkaSink) -> dict[str, Any]:
            return {**own(self), **overrides}

        KafkaSink._config = config  # type: ignore[method-assign]
    from tests.kafka_service import KafkaServer  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="mqttq-kafka-sink-") as tmp:
        kafka = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            kafka = KafkaServer(Path(tmp) / "kafka")
            kafka.start()
            bootstrap = kafka.bootstrap
        try:
            try:
                services.create_log_append_topic(bootstrap, TOPIC, partitions=3)
            except Exception as exc:  # it exists already: a --bootstrap reused
                print(f"kafka_sink: topic: {exc}", file=sys.stderr)
            os.sched_setaffinity(0, {args.core})
            import uvloop  # noqa: PLC0415

            results = uvloop.run(run(bootstrap, args))
        finally:
            if kafka is not None:
                kafka.stop()
    median = sorted(results, key=lambda r: r["process_us"])[len(results) // 2]
    print(json.dumps({"median": median, "load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
