"""Fixtures of the lake tests: real Kafka (the session's node), a real broker writing
`<prefix>msg.all`, and `mqttq lake run` as a subprocess (its own Spark driver JVM, so that
`kill -9` of the driver is what it is in production).

Spark and Kafka are slow to start: the scenario runs once per session (`lake_scenario`) and
the tests read what it left, with pyarrow (a Parquet reader that knows nothing of mqttq).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from mqttq.model import Message
from mqttq.storage.formats.kafka_record import decode_message
from tests.harness import InProcessBroker
from tests.integration.raw_client import RawClient
from tests.integration.wire import Prop
from tests.kafka.log_helpers import log_config
from tests.kafka_service import KafkaServer

DEADLINE = 600.0
"""Bounds a hang (JVMs on a loaded 2-core machine, the connector's first download); never a
performance bound."""
PREFIX = "t.lake."
CLUSTER_MASTER = "local-cluster[2,1,1024]"
TOPIC = f"{PREFIX}msg.all"
SCHEMA = """
[lake.schema."sensors/+/temp"]
temperature = "double"
unit = "string"
"""


@dataclass
class Scenario:
    """What the scenario wrote and where: the lake, the records of the log (decoded by
    mqttq's own decoder), the run's JSON status lines."""

    lake: Path
    bootstrap: str
    records: list[tuple[int, int, str, Message]] = field(default_factory=list)
    """(partition, offset, tenant, message) of every mqttq record in the log."""
    foreign: list[tuple[int, int, str]] = field(default_factory=list)
    """(partition, offset, expected reason) of every record that is not mqttq's."""
    first_run: list[dict[str, Any]] = field(default_factory=list)
    second_run: list[dict[str, Any]] = field(default_factory=list)
    second_code: int | None = None
    second_stderr: str = ""
    background: dict[str, Background] = field(default_factory=dict)
    """Other lakes of the same log, written while the scenario runs."""


@dataclass
class InferredLake:
    """A second lake from the same log: `lake run --infer --hourly --available-now`."""

    lake: Path
    code: int
    lines: list[dict[str, Any]]
    stderr: str


def lake_command(*args: str) -> list[str]:
    """`mqttq lake ...` as this interpreter runs it."""
    return [sys.executable, "-m", "mqttq", "lake", *args]


def run_to_end(
    args: list[str], *, timeout: float = DEADLINE, env: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]], str]:
    """Run `mqttq lake ...` to its end: exit code, its JSON lines, its stderr."""
    done = subprocess.run(
        lake_command(*args),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines, done.stderr


def read_log(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The first `count` records of `topic` (all partitions), as confluent messages."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lake-test-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[Any] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < count and time.monotonic() < deadline:
            found += [m for m in consumer.consume(count - len(found), 1.0) if m.error() is None]
    finally:
        consumer.close()
    assert len(found) == count, f"read {len(found)} of {count} records of {topic}"
    return found


def publish_through_broker(port: int) -> int:
    """Publish the scenario's messages through the broker (QoS 1, each PUBACK awaited):
    MQTT 5 properties, typed and untyped JSON, binary and retained; returns how many."""
    count = 0
    sensor = RawClient(port, "127.0.0.1")
    sensor.connect("sensor-1", level=5)
    props = [
        (Prop.CONTENT_TYPE, "application/json"),
        (Prop.RESPONSE_TOPIC, "replies/sensor-1"),
        (Prop.CORRELATION_DATA, b"\x00\x01corr"),
        (Prop.PAYLOAD_FORMAT_INDICATOR, 1),
        (Prop.MESSAGE_EXPIRY_INTERVAL, 3600),
        (Prop.USER_PROPERTY, ("site", "north")),
        (Prop.USER_PROPERTY, ("site", "south")),
        (Prop.USER_PROPERTY, ("a", "1")),
    ]
    assert sensor.publish(
        "sensors/s1/temp", b'{"temperature": 21.5, "unit": "C"}', qos=1, props=props
    )
    count += 1
    for index in range(30):
        payload = f'{{"temperature": {index}.25}}'.encode()
        assert sensor.publish("sensors/s1/temp", payload, qos=1)
        count += 1
    # Does not fit the schema (a string where a double goes): kept as bytes, untyped.
    assert sensor.publish("sensors/s1/temp", b'{"temperature": "warm"}', qos=1)
    count += 1
    sensor.disconnect()
    other = RawClient(port, "127.0.0.1")
    other.connect("dev/2", level=4)
    assert other.publish("a/b//c", b"\xff\xfe binary", qos=1, retain=True)
    assert other.publish("a/b", b"text", qos=0) is None
    count += 2
    for index in range(20):
        assert other.publish("bulk/x", f"m{index}".encode(), qos=1)
        count += 1
    other.disconnect()
    return count


def produce_foreign(bootstrap: str) -> None:
    """Records that are not mqttq's, written with a plain Kafka producer."""
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(TOPIC, value=b"hello", key=b"someone")
    producer.produce(TOPIC, value=b"x", key=b"k2", headers=[("mqttq", b"\x09" + bytes(30))])
    producer.produce(TOPIC, value=b"y", key=b"k3", headers=[("mqttq", b"\x01\x01")])
    assert producer.flush(30) == 0


def expected_reason(headers: dict[str, bytes]) -> str:
    packed = headers.get("mqttq")
    if packed is None:
        return "no mqttq header"
    if len(packed) < 21:
        return "corrupt header: truncated"
    return f"unknown header version {packed[0]}"


def _wait_for_batches(proc: subprocess.Popen[str], batches: int) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{"):
            lines.append(json.loads(line))
            if sum(1 for e in lines if e.get("event") == "batch" and e["rows"]) >= batches:
                return lines
    stderr = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"lake run wrote {lines} and ended: {stderr}")


@pytest.fixture(scope="session")
def lake_scenario(
    kafka: KafkaServer, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Scenario]:
    """The scenario: a broker on the Kafka log, messages published through it and foreign
    records; `lake run` (local[2]) killed with SIGKILL after its second batch, then run
    again with `--available-now` to the end on `local-cluster[2,1,1024]`, both with
    `[lake.schema]` typed columns.

    The other lakes of the same log (`--infer --hourly`, `--format delta`) are written by
    drivers of their own started as soon as the log is full, while the scenario's runs go
    on: each JVM spends most of its start waiting on one core, so they overlap rather than
    queue (only those the session's tests ask for)."""
    work = tmp_path_factory.mktemp("lake")
    broker = InProcessBroker(work / "broker", log_config(kafka.bootstrap, PREFIX))
    broker.start()
    try:
        published = publish_through_broker(broker.port)
    finally:
        broker.stop()
    produce_foreign(kafka.bootstrap)
    total = published + 3
    scenario = Scenario(lake=work / "lake", bootstrap=kafka.bootstrap)
    for record in read_log(kafka.bootstrap, TOPIC, total):
        headers = {name: bytes(raw or b"") for name, raw in record.headers() or []}
        try:
            tenant, message = decode_message(record.key(), record.value(), list(headers.items()))
        except Exception:
            scenario.foreign.append((record.partition(), record.offset(), expected_reason(headers)))
            continue
        scenario.records.append((record.partition(), record.offset(), tenant, message))

    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    if "inferred_hourly_lake" in wanted:
        scenario.background["infer"] = _start_inferred_hourly(
            tmp_path_factory.mktemp("lake-inferred") / "lake", kafka.bootstrap
        )
    if "delta_lake" in wanted:
        scenario.background["delta"] = _start_delta(
            tmp_path_factory.mktemp("lake-delta") / "lake", kafka.bootstrap
        )
    try:
        yield _run_scenario(scenario, work, kafka)
    finally:
        for run in scenario.background.values():
            run.stop()


def _run_scenario(scenario: Scenario, work: Path, kafka: KafkaServer) -> Scenario:
    config = work / "broker.toml"
    config.write_text(log_config(kafka.bootstrap, PREFIX) + SCHEMA, "utf-8")
    # First, the schema goes with the run (same for both runs: a lake's columns are stable).
    proc = _start_killable_with_config(scenario.lake, config)
    try:
        scenario.first_run = _wait_for_batches(proc, 2)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    # The restart runs on a local cluster: executors in JVMs of their own, with their own
    # Python workers decoding the properties (one Spark start less than a separate test).
    # MQTTQ_PURE's source loader reads files by path and cannot import from the zip Spark
    # ships to those executors: the restart runs the build as installed.
    code, lines, stderr = run_to_end(
        [
            "run",
            "--lake",
            str(scenario.lake),
            "--config",
            str(config),
            "--available-now",
            "--master",
            CLUSTER_MASTER,
            "--conf",
            "spark.executor.memory=512m",
            "--json",
        ],
        env={k: v for k, v in os.environ.items() if k != "MQTTQ_PURE"},
    )
    scenario.second_code, scenario.second_run, scenario.second_stderr = code, lines, stderr
    return scenario


def _start_killable_with_config(lake: Path, config: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        lake_command(
            "run",
            "--lake",
            str(lake),
            "--config",
            str(config),
            "--trigger",
            "1s",
            "--max-offsets-per-trigger",
            "10",
            "--master",
            "local[2]",
            "--json",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.PIPE,  # the driver JVM ends when this pipe closes (kill -9 included)
        text=True,
    )


@dataclass
class Background:
    """A run started while the scenario goes on; its output goes to files (a pipe nobody
    reads yet would stall it once full)."""

    lake: Path
    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    @classmethod
    def start(cls, lake: Path, args: list[str]) -> Background:
        lake.parent.mkdir(parents=True, exist_ok=True)
        out, err = lake.parent / "stdout", lake.parent / "stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            proc = subprocess.Popen(args, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL)
        return cls(lake, proc, out, err)

    def finish(self) -> tuple[int, str, str]:
        """Wait for its end: (exit code, stdout, stderr)."""
        code = self.proc.wait(timeout=DEADLINE)
        return code, self.out.read_text("utf-8"), self.err.read_text("utf-8")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)


def _start_inferred_hourly(lake: Path, bootstrap: str) -> Background:
    """`lake run --infer --hourly --available-now` into a new lake, without a config
    (`--bootstrap-servers`, `--topic`): one Spark driver for both settings."""
    args = ["run", "--lake", str(lake), "--bootstrap-servers", bootstrap, "--topic", TOPIC]
    args += ["--infer", "--hourly", "--available-now", "--master", "local[2]", "--json"]
    return Background.start(lake, lake_command(*args))


def _start_delta(lake: Path, bootstrap: str) -> Background:
    """The log into a Delta lake through the command line (`tests.lake.delta_run`)."""
    module = [sys.executable, "-m", "tests.lake.delta_run"]
    return Background.start(lake, [*module, str(lake), bootstrap, TOPIC])


@pytest.fixture(scope="session")
def inferred_hourly_lake(lake_scenario: Scenario) -> InferredLake:
    """The scenario's log into a new lake with `--infer --hourly --available-now`."""
    run = lake_scenario.background["infer"]
    code, out, err = run.finish()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return InferredLake(run.lake, code, lines, err)


@pytest.fixture(scope="session")
def delta_lake(lake_scenario: Scenario) -> Any:
    """The scenario's log into a Delta lake (`tests.lake.delta_run`): what it read back."""
    code, out, err = lake_scenario.background["delta"].finish()
    assert code == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])
