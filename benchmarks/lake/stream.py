"""`mqttq lake run` on this machine, local[2] (a benchmark, not a test; issue 36).

Three figures, one fresh Kafka node (scripts/kafka-local.sh) in a temporary directory:

1. **keeps up**: `--records` records of 62-byte payloads (the broker's own encoding,
   `encode_message`, 12 partitions, 1,000 publishers) are put in the log first, then
   `mqttq lake run --available-now --master local[2] --max-offsets-per-trigger N` writes
   them with N = 30 s of 30,000 msg/s: each batch's rows / its duration is the rate the
   stream sustains (it keeps up with 30,000 msg/s when a 30 s batch takes <= 30 s).
2. **visible after PUBACK**: a broker on the Kafka log, `lake run --trigger T` running; a
   QoS 1 message every second for `--visibility-seconds`; the time from each PUBACK until
   the row is readable with pyarrow, in triggers (target <= 2).
3. **broker throughput while the lake job reads**: `mqttq bench p2p` QoS 1 (100 pairs,
   62-byte payloads) through the Kafka log, alone and then with `lake run --trigger 5s`
   consuming the same log (target >= 0.8x).

    python benchmarks/lake/stream.py [--records 1800000] [--trigger 10] [--json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks.distributed import kafka_log
from benchmarks.distributed.kafka_log import kafka_config, run_mode
from benchmarks.harness.brokers import install_sigterm_handler, start_mqttq, stop_all, stop_broker
from benchmarks.harness.scenarios import Scenario, Timing
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import encode_message
from tests.integration.raw_client import RawClient
from tests.kafka_service import KafkaServer

PAYLOAD = b"x" * 62
RATE = 30_000
"""The rate the stream must keep up with (msg/s)."""


def lake_argv(lake: Path, bootstrap: str, topic: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mqttq",
        "lake",
        "run",
        "--lake",
        str(lake),
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        topic,
        "--master",
        "local[2]",
        "--json",
        *extra,
    ]


def fill_log(bootstrap: str, topic: str, records: int) -> float:
    """Put `records` records in `topic` (12 partitions); returns the seconds it took."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 12, 1)])[topic].result(60)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
        }
    )
    started = time.monotonic()
    now = time.time()
    for index in range(records):
        message = Message(
            f"bench/{index % 1000}/t",
            PAYLOAD,
            1,
            False,
            None,
            now + index / RATE,
            None,
            f"dev-{index % 1000}",
        )
        key, value, headers = encode_message("default", message)
        while True:
            try:
                producer.produce(topic, value, key, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    return time.monotonic() - started


def keeps_up(work: Path, bootstrap: str, records: int) -> dict[str, Any]:
    topic = "bench.msg.all"
    fill_seconds = fill_log(bootstrap, topic, records)
    per_batch = RATE * 30
    started = time.monotonic()
    done = subprocess.run(
        lake_argv(
            work / "lake-rate",
            bootstrap,
            topic,
            "--available-now",
            "--max-offsets-per-trigger",
            str(per_batch),
        ),
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"lake run failed: {done.stderr.strip()[-2000:]}")
    batches = [json.loads(x) for x in done.stdout.splitlines() if '"event":"batch"' in x]
    rates = [b["rows"] / b["batch_seconds"] for b in batches if b["batch_seconds"]]
    full = [b for b in batches if b["rows"] >= per_batch // 2]
    return {
        "records": records,
        "fill_seconds": round(fill_seconds, 1),
        "batches": [{k: b[k] for k in ("rows", "batch_seconds", "write_seconds")} for b in batches],
        "rate_per_batch": [round(r) for r in rates],
        "sustained_rate": round(
            sum(b["rows"] for b in full) / sum(b["batch_seconds"] for b in full)
        )
        if full
        else None,
        "wall_seconds": round(wall, 1),
        "command": " ".join(
            lake_argv(
                Path("LAKE"),
                "KAFKA",
                topic,
                "--available-now",
                "--max-offsets-per-trigger",
                str(per_batch),
            )
        ),
    }


def visibility(work: Path, kafka: KafkaServer, trigger: float, seconds: float) -> dict[str, Any]:
    import pyarrow.dataset as ds  # noqa: PLC0415

    prefix = "vis."
    config = kafka_config(kafka.bootstrap, prefix)
    broker = start_mqttq(work / "vis-broker", core=None, name="mqttq-vis", config_toml=config)
    lake = work / "lake-vis"
    job = subprocess.Popen(
        lake_argv(lake, kafka.bootstrap, f"{prefix}msg.all", "--trigger", f"{trigger}s"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    acked: dict[str, float] = {}
    seen: dict[str, float] = {}
    stop = threading.Event()

    def watch() -> None:
        read: set[Path] = set()
        while not stop.is_set():
            folder = lake / "messages"
            files = set(folder.rglob("part-*.parquet")) if folder.is_dir() else set()
            for path in sorted(files - read):
                now = time.time()
                table = ds.dataset(path, format="parquet").to_table(columns=["payload_text"])
                for text in table["payload_text"].to_pylist():
                    seen.setdefault(text, now)
                read.add(path)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # The first batch pays the JVM's start: wait for the job's first line.
        assert job.stdout is not None
        job.stdout.readline()
        client = RawClient(broker.port, "127.0.0.1")
        client.connect("vis-pub", level=5)
        client.publish("warm/up", b"warm", qos=1)
        deadline = time.monotonic() + 600
        while "warm" not in seen and time.monotonic() < deadline:
            time.sleep(0.2)
        end = time.monotonic() + seconds
        index = 0
        while time.monotonic() < end:
            text = f"marker-{index}"
            client.publish("vis/marker", text.encode(), qos=1)
            acked[text] = time.time()
            index += 1
            time.sleep(1.0)
        deadline = time.monotonic() + 4 * trigger + 120
        while any(t not in seen for t in acked) and time.monotonic() < deadline:
            time.sleep(0.2)
        client.disconnect()
    finally:
        stop.set()
        job.terminate()
        job.wait(120)
        stop_broker(broker)
    delays = sorted(seen[t] - acked[t] for t in acked if t in seen)
    return {
        "trigger_seconds": trigger,
        "messages": len(acked),
        "visible": len(delays),
        "delay_p50_s": round(delays[len(delays) // 2], 2) if delays else None,
        "delay_max_s": round(delays[-1], 2) if delays else None,
        "max_in_triggers": round(delays[-1] / trigger, 2) if delays else None,
    }


def broker_ratio(work: Path, kafka: KafkaServer, duration: float) -> dict[str, Any]:
    scenario = Scenario("p2p-qos1", "p2p QoS 1", ("p2p", "--pairs", "100"), 1)
    timing = Timing(duration, 3.0, drain_timeout=30.0, inflight=100)
    run_mode(
        "kafka",
        Scenario("p2p-qos1", "warm", ("p2p", "--pairs", "100"), 1),
        Timing(10.0, 0.0, drain_timeout=30.0, inflight=100),
        work / "warm",
        kafka,
        "warm.",
    )
    alone = run_mode("kafka", scenario, timing, work / "alone", kafka, "alone.")
    job = subprocess.Popen(
        lake_argv(work / "lake-ratio", kafka.bootstrap, "with.msg.all", "--trigger", "5s"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert job.stdout is not None
        job.stdout.readline()  # Spark is up and the query started
        time.sleep(10)
        beside = run_mode("kafka", scenario, timing, work / "with", kafka, "with.")
    finally:
        job.terminate()
        job.wait(120)
    return {
        "alone_msg_s": round(alone["delivered_per_s"]),
        "with_lake_msg_s": round(beside["delivered_per_s"]),
        "ratio": round(beside["delivered_per_s"] / max(1.0, alone["delivered_per_s"]), 2),
        "command": alone["command"],
    }


def keep_pure_brokers() -> None:
    """With MQTTQ_PURE=1 here (compiled modules older than the tree), the brokers this
    script starts run the sources too: `start_mqttq` drops MQTTQ_* variables otherwise."""
    if os.environ.get("MQTTQ_PURE") != "1":
        return
    pure = functools.partial(start_mqttq, settings_env={"MQTTQ_PURE": "1"})
    globals()["start_mqttq"] = pure
    kafka_log.start_mqttq = pure  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=1_800_000)
    parser.add_argument("--trigger", type=float, default=10.0)
    parser.add_argument("--visibility-seconds", type=float, default=40.0)
    parser.add_argument("--duration", type=float, default=15.0, help="each p2p run")
    parser.add_argument("--only", choices=("rate", "visibility", "ratio"), action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    install_sigterm_handler()
    keep_pure_brokers()
    only = set(args.only or ("rate", "visibility", "ratio"))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mqttq-lake-bench-") as tmp:
        work = Path(tmp)
        kafka = KafkaServer(work / "kafka")
        try:
            kafka.start()
            if "rate" in only:
                results["keeps_up"] = keeps_up(work, kafka.bootstrap, args.records)
                print(json.dumps({"keeps_up": results["keeps_up"]}), file=sys.stderr)
            if "visibility" in only:
                results["visibility"] = visibility(
                    work, kafka, args.trigger, args.visibility_seconds
                )
                print(json.dumps({"visibility": results["visibility"]}), file=sys.stderr)
            if "ratio" in only:
                results["broker_ratio"] = broker_ratio(work, kafka, args.duration)
        finally:
            stop_all()
            kafka.kill()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
