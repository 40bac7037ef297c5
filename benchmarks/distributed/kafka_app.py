"""Fan-in of N publishers into one persistent APPLICATION subscriber, through Kafka (a
benchmark, not a test).

One broker with `[storage] log = "kafka"` (a fresh one-node Kafka from
scripts/kafka-local.sh in a temporary directory), one APPLICATION client (credential of
client type APPLICATION, persistent session, `bench/#` at QoS 1) and N QoS 1 publishers
(window 100 each, 64-byte payloads carrying a sequence number and the send time):

1. live: the publishers send for --duration seconds while the subscriber is connected;
   delivered msg/s, end-to-end latency p50/p99 (publish -> delivery), loss, duplicates;
2. offline: the subscriber disconnects (its session stays), the publishers send for
   --offline seconds, the records land in its topic; then it reconnects and reads the
   backlog: the catch-up rate is the backlog divided by the time from CONNACK to its last
   message, with the broker's and Kafka's CPU seconds in that time (CPU per message moves
   less than the rate when other processes share the machine). Loss counts every
   acknowledged publish that never arrived.

The broker is pinned to the first core and this script (every client) to the second;
Kafka shares both. CPU seconds of broker and Kafka come from /proc. Prints Markdown
(or JSON with --json):

    python benchmarks/distributed/kafka_app.py [--publishers 10] [--duration 10] [--offline 10]
        [--max-poll-records 200] [--rate 0] [--no-pin] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from benchmarks.distributed.kafka_log import TBMQ_PER_CORE, cpu_seconds
from benchmarks.harness.brokers import (
    cores,
    install_sigterm_handler,
    start_mqttq,
    stop_all,
    stop_broker,
)
from mqttq.auth.model import ClientType, Credential
from mqttq.auth.passwords import hash_password
from mqttq.bench.client import BenchClient, Counters
from mqttq.bench.payload import PayloadBuilder, unpack_header
from mqttq.bench.stats import LatencyHistogram
from mqttq.storage.kafka.app_topics import app_topic
from mqttq.storage.sqlite.auth import SqliteAuthStore
from tests.kafka_service import KafkaServer

PREFIX = "tbmq."
SUBSCRIBER = "appsub"
PASSWORD = "app-secret"


class Subscriber:
    """The APPLICATION client: counts unique (publisher, sequence) pairs and latency."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, int]] = set()
        self.duplicates = 0
        self.latency = LatencyHistogram()
        self.measure = True
        self.last_at = 0.0
        self.client: BenchClient | None = None

    def on_payload(self, payload: bytes) -> None:
        header = unpack_header(payload)
        if header is None:
            return
        _, publisher, sequence, sent_ns = header
        key = (publisher, sequence)
        if key in self.seen:
            self.duplicates += 1
            return
        self.seen.add(key)
        self.last_at = time.monotonic()
        if self.measure:
            self.latency.record(max(0, time.time_ns() - sent_ns) // 1000)

    async def connect(self, port: int) -> float:
        client = self.client = BenchClient(SUBSCRIBER, 5, Counters(), on_payload=self.on_payload)
        await client.connect(
            "127.0.0.1",
            port,
            clean_start=False,
            session_expiry=3600,
            username=SUBSCRIBER,
            password=PASSWORD,
        )
        connected = time.monotonic()
        await client.subscribe([("bench/#", 1)])
        return connected

    async def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.seen) < count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return len(self.seen) >= count


async def publish_for(
    port: int, publishers: int, seconds: float, first_sequence: int, rate: float = 0.0
) -> tuple[int, float, float]:
    """N publishers for `seconds`, each at `rate` msg/s (0: full speed, window 100):
    (acknowledged publishes, start time (monotonic), seconds taken)."""
    clients = [BenchClient(f"pub{n}", 5, Counters(), window=100) for n in range(publishers)]
    for client in clients:
        await client.connect("127.0.0.1", port)
    started = time.monotonic()
    end = started + seconds

    async def run(index: int, client: BenchClient) -> int:
        builder = PayloadBuilder(index, 64)
        sequence = first_sequence
        topic = f"bench/{index}"
        while time.monotonic() < end:
            await client.wait_window(60)
            if rate:
                due = started + (sequence - first_sequence) / rate
                if due > time.monotonic():
                    await asyncio.sleep(due - time.monotonic())
                client.publish(topic, builder.build(sequence, time.time_ns()), 1)
                sequence += 1
                client.flush()
                continue
            while not client.window_full and time.monotonic() < end:
                client.publish(topic, builder.build(sequence, time.time_ns()), 1)
                sequence += 1
            client.flush()
        await client.wait_inflight_empty(60)
        return sequence - first_sequence - client.rejected

    sent = await asyncio.gather(*(run(n, c) for n, c in enumerate(clients)))
    taken = time.monotonic() - started
    for client in clients:
        await client.disconnect()
    return sum(sent), started, taken


def end_offset(bootstrap: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partition = TopicPartition(topic, 0)
    (future,) = admin.list_offsets({partition: OffsetSpec.latest()}).values()
    return int(future.result(timeout=10).offset)


async def add_credential(data_dir: Path) -> None:
    store = SqliteAuthStore(data_dir / "auth.db")
    await store.open()
    try:
        await store.put_credential(
            Credential(SUBSCRIBER, hash_password(PASSWORD), client_type=ClientType.APPLICATION)
        )
    finally:
        await store.close()


async def scenario(
    port: int, bootstrap: str, pids: tuple[int, int], args: argparse.Namespace
) -> dict[str, Any]:
    """Both phases; `pids`: broker and Kafka, whose CPU the catch-up also reports."""
    sub = Subscriber()
    await sub.connect(port)
    # Live fan-in.
    published, started, taken = await publish_for(
        port, args.publishers, args.duration, 0, args.rate
    )
    ok = await sub.wait_for(published, 120)
    live = {
        "published": published,
        "received": len(sub.seen),
        "lost": published - len(sub.seen),
        "duplicates": sub.duplicates,
        "publish_seconds": taken,
        "delivered_per_s": len(sub.seen) / max(sub.last_at - started, 1e-9),
        "e2e_p50_ms": sub.latency.percentile(50) / 1000,
        "e2e_p99_ms": sub.latency.percentile(99) / 1000,
        "complete": ok,
    }
    # Offline, then catch-up.
    assert sub.client is not None
    await sub.client.disconnect()
    sub.measure = False
    before = len(sub.seen)
    topic = app_topic(PREFIX, SUBSCRIBER)
    offset_before = end_offset(bootstrap, topic)
    backlog, _, offline_taken = await publish_for(port, args.publishers, args.offline, 10**8)
    deadline = time.monotonic() + 120
    while end_offset(bootstrap, topic) < offset_before + backlog and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # routed through msg.all into the client's topic
    cpu0 = [cpu_seconds(pid) for pid in pids]
    connected = await sub.connect(port)
    ok = await sub.wait_for(before + backlog, 300)
    drained = sub.last_at - connected
    # CPU of the catch-up alone: less sensitive than its rate to a machine shared with others.
    broker_cpu, kafka_cpu = (
        cpu_seconds(pid) - start for pid, start in zip(pids, cpu0, strict=True)
    )
    catch_up = {
        "offline_seconds": offline_taken,
        "backlog": backlog,
        "received": len(sub.seen) - before,
        "lost": before + backlog - len(sub.seen),
        "duplicates": sub.duplicates - live["duplicates"],
        "drain_seconds": drained,
        "catch_up_per_s": backlog / drained if drained > 0 else 0.0,
        "broker_cpu_s": broker_cpu,
        "kafka_cpu_s": kafka_cpu,
        "broker_cpu_us_per_msg": broker_cpu / max(backlog, 1) * 1e6,
        "complete": ok,
    }
    await sub.client.disconnect()
    return {"live": live, "catch_up": catch_up}


def render(result: dict[str, Any], args: argparse.Namespace) -> str:
    live, catch = result["live"], result["catch_up"]
    cpu = result["cpu"]
    total = live["received"] + catch["received"]
    per_cpu = total / max(cpu["broker_s"] + cpu["kafka_s"], 1e-9)
    return "\n".join(
        [
            f"fan-in: {args.publishers} QoS 1 publishers -> 1 persistent APPLICATION "
            f"subscriber (bench/#, QoS 1), 64-byte payloads, Kafka log on, "
            f"max_poll_records {args.max_poll_records}",
            "",
            "| phase | messages | delivered msg/s | e2e p50 / p99 ms | lost | dup |",
            "|---|---:|---:|---:|---:|---:|",
            f"| live ({args.duration:g} s, "
            f"{'full speed' if not args.rate else f'{args.rate:g} msg/s per publisher'}) | "
            f"{live['received']:,} | "
            f"{live['delivered_per_s']:,.0f} | {live['e2e_p50_ms']:.1f} / "
            f"{live['e2e_p99_ms']:.1f} | {live['lost']} | {live['duplicates']} |",
            f"| catch-up after {catch['offline_seconds']:.0f} s offline | "
            f"{catch['backlog']:,} | {catch['catch_up_per_s']:,.0f} | - | {catch['lost']} | "
            f"{catch['duplicates']} |",
            "",
            f"catch-up: {catch['backlog']:,} messages in {catch['drain_seconds']:.2f} s from "
            f"CONNACK (target >= 50,000 msg/s); CPU: broker {cpu['broker_s']:.1f} s, Kafka "
            f"{cpu['kafka_s']:.1f} s for {total:,} deliveries = {per_cpu:,.0f} msg per "
            f"CPU-second (TBMQ: ~{TBMQ_PER_CORE:,} msg/s per core). The catch-up alone: "
            f"broker {catch['broker_cpu_s']:.2f} s ({catch['broker_cpu_us_per_msg']:.1f} µs per "
            f"message), Kafka {catch['kafka_cpu_s']:.2f} s.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--publishers", type=int, default=10)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--offline", type=float, default=10.0)
    parser.add_argument("--max-poll-records", type=int, default=200)
    parser.add_argument(
        "--rate", type=float, default=0.0, help="live phase: msg/s per publisher (0: full speed)"
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="let broker and clients use every core"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    install_sigterm_handler()
    broker_core, tool_core = (None, None) if args.no_pin else cores()
    if tool_core is not None:
        os.sched_setaffinity(0, {int(tool_core)})
    with tempfile.TemporaryDirectory(prefix="mqttq-kafka-app-bench-") as tmp:
        kafka = KafkaServer(Path(tmp) / "kafka")
        try:
            kafka.start()
            config = (
                f'[storage]\nlog = "kafka"\n[kafka]\nbootstrap_servers = "{kafka.bootstrap}"\n'
                f'topic_prefix = "{PREFIX}"\n'
                f"[kafka.application]\nmax_poll_records = {args.max_poll_records}\n"
            )
            workdir = Path(tmp) / "broker"
            broker = start_mqttq(workdir, core=broker_core, name="mqttq-kafka", config_toml=config)
            kafka_pid = int((kafka.workdir / "kafka.pid").read_text())
            asyncio.run(add_credential(workdir / "data"))
            broker_cpu0, kafka_cpu0 = broker.cpu_seconds(), cpu_seconds(kafka_pid)
            pids = (broker.pid, kafka_pid)
            result = asyncio.run(scenario(broker.port, kafka.bootstrap, pids, args))
            result["cpu"] = {
                "broker_s": broker.cpu_seconds() - broker_cpu0,
                "kafka_s": cpu_seconds(kafka_pid) - kafka_cpu0,
            }
            stop_broker(broker)
        finally:
            stop_all()
            kafka.stop()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result, args))


if __name__ == "__main__":
    main()
