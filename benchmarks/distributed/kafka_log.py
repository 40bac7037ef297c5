"""p2p QoS 1 through the Kafka message log next to embedded mode (a benchmark, not a test).

One run on this machine, same client options for both modes (`mqttq bench p2p`, 100
pairs, 62-byte payloads, MQTT 5, 100 in flight per publisher, one bench worker):

- embedded: `mqttq serve` with its defaults (SQLite, routing in-process);
- kafka: the same broker with `[storage] log = "kafka"`: every PUBLISH is produced to
  `tbmq.msg.all` (acks=all, idempotent) before its PUBACK, read back, routed, delivered.

The broker is pinned to one core and the bench tool to the other (`taskset`, as
compare.py does); Kafka (one KRaft node from scripts/kafka-local.sh, started fresh in a
temporary directory) is not pinned: it shares both. Before the measured Kafka run, an
unmeasured one (--kafka-warmup seconds, its own broker and topic) warms the JVM up. CPU
seconds of the broker and of Kafka come from /proc/<pid>/stat just before and after the
bench. Printed as Markdown (or JSON with --json):

    python benchmarks/distributed/kafka_log.py [--duration 15] [--pairs 100] [--kafka-warmup 20]
        [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `benchmarks`

from benchmarks.harness.brokers import (
    BrokerProcess,
    cores,
    install_sigterm_handler,
    pinned,
    start_mqttq,
    stop_all,
    stop_broker,
)
from benchmarks.harness.scenarios import Scenario, Timing, bench_argv, run_bench
from tests.kafka_service import KafkaServer

TBMQ_PER_CORE = 8_900
"""TBMQ's published figure: delivered msg/s per core, counting every component."""


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of `pid` so far (/proc/<pid>/stat)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kafka_config(bootstrap: str, prefix: str) -> str:
    return f"""
[storage]
log = "kafka"
[kafka]
bootstrap_servers = "{bootstrap}"
topic_prefix = "{prefix}"
"""


def run_mode(  # noqa: PLR0917 (one call site per mode)
    mode: str,
    scenario: Scenario,
    timing: Timing,
    workdir: Path,
    kafka: KafkaServer | None,
    prefix: str = "tbmq.",
) -> dict[str, Any]:
    broker_core, tool_core = cores()
    config = kafka_config(kafka.bootstrap, prefix) if kafka is not None else None
    broker: BrokerProcess = start_mqttq(
        workdir, core=broker_core, name=f"mqttq-{mode}", config_toml=config
    )
    kafka_pid = int((kafka.workdir / "kafka.pid").read_text()) if kafka is not None else None
    try:
        argv = pinned(tool_core, bench_argv(scenario, timing, broker.port))
        broker_cpu0 = broker.cpu_seconds()
        kafka_cpu0 = cpu_seconds(kafka_pid) if kafka_pid else 0.0
        result = run_bench(argv, timing.warmup + timing.duration + 2 * timing.drain_timeout + 120)
        broker_cpu = broker.cpu_seconds() - broker_cpu0
        kafka_cpu = cpu_seconds(kafka_pid) - kafka_cpu0 if kafka_pid else 0.0
    finally:
        stop_broker(broker)
    messages = result["messages"]
    received = max(1, messages["received"])
    delivered_per_s = result["rates"]["received_per_s"]
    cpu_per_msg = (broker_cpu + kafka_cpu) / received
    return {
        "mode": mode,
        "delivered_per_s": delivered_per_s,
        "e2e_p50_ms": result["latency_ms"]["e2e"]["p50"],
        "e2e_p99_ms": result["latency_ms"]["e2e"]["p99"],
        "puback_p50_ms": result["latency_ms"]["puback"]["p50"],
        "puback_p99_ms": result["latency_ms"]["puback"]["p99"],
        "published": messages["published"],
        "received": messages["received"],
        "lost": messages["lost"],
        "duplicates": messages["duplicates"],
        "broker_cpu_us_per_msg": broker_cpu / received * 1e6,
        "kafka_cpu_us_per_msg": kafka_cpu / received * 1e6,
        "msg_per_cpu_s": 1 / cpu_per_msg if cpu_per_msg else None,
        "warnings": result.get("warnings", []),
        "command": " ".join(argv),
    }


def render(rows: list[dict[str, Any]], pairs: int, duration: float) -> str:
    lines = [
        f"p2p QoS 1, {pairs} pairs, 62-byte payloads, {duration:g} s, full speed",
        "",
        "| mode | delivered msg/s | e2e p50 / p99 ms | PUBACK p50 / p99 ms | lost | dup "
        "| broker CPU µs/msg | Kafka CPU µs/msg | msg per CPU-second (all) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['delivered_per_s']:,.0f} | {r['e2e_p50_ms']:.1f} / "
            f"{r['e2e_p99_ms']:.1f} | {r['puback_p50_ms']:.1f} / {r['puback_p99_ms']:.1f} | "
            f"{r['lost']} | {r['duplicates']} | {r['broker_cpu_us_per_msg']:.0f} | "
            f"{r['kafka_cpu_us_per_msg']:.0f} | {r['msg_per_cpu_s']:,.0f} |"
        )
    by_mode = {r["mode"]: r for r in rows}
    if "embedded" in by_mode and "kafka" in by_mode:
        ratio = by_mode["kafka"]["delivered_per_s"] / max(
            1.0, by_mode["embedded"]["delivered_per_s"]
        )
        per_core = by_mode["kafka"]["msg_per_cpu_s"] or 0
        lines += [
            "",
            f"kafka / embedded delivered msg/s: {ratio:.2f}x (target >= 0.3x); "
            f"through Kafka {per_core:,.0f} msg per CPU-second of broker + Kafka "
            f"(TBMQ: ~{TBMQ_PER_CORE:,} msg/s per core, every component counted).",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument(
        "--kafka-warmup",
        type=float,
        default=20.0,
        help="seconds of unmeasured load through Kafka first (JIT warm-up); 0: none",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    install_sigterm_handler()
    scenario = Scenario("p2p-qos1", "p2p QoS 1", ("p2p", "--pairs", str(args.pairs)), 1)
    timing = Timing(args.duration, args.warmup, drain_timeout=30.0, inflight=100)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mqttq-kafka-bench-") as tmp:
        kafka = KafkaServer(Path(tmp) / "kafka")
        try:
            rows.append(run_mode("embedded", scenario, timing, Path(tmp) / "embedded", None))
            kafka.start()
            if args.kafka_warmup > 0:
                # A JVM just started runs interpreted until the JIT warms up: one unmeasured
                # run first, through a broker and topic of its own (its backlog must not be
                # read during the measured run).
                warm = Timing(args.kafka_warmup, 0.0, drain_timeout=30.0, inflight=100)
                run_mode("kafka", scenario, warm, Path(tmp) / "warmup", kafka, "warmup.")
            rows.append(run_mode("kafka", scenario, timing, Path(tmp) / "kafka-broker", kafka))
        finally:
            stop_all()
            kafka.stop()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(render(rows, args.pairs, args.duration))
        print("\nbench command: " + rows[-1]["command"])


if __name__ == "__main__":
    main()
