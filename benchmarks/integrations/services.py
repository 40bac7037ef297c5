"""What the integration benchmarks run around the broker (not a test): the HTTP receiver
process, a subscriber at Mosquitto that notes arrival times, the integration's counters
through the broker's admin API, and reading a Kafka topic back.

Every process started here gets its own process group and is stopped by `stop_all`
(benchmarks.harness.brokers.stop_group), like the brokers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.harness.brokers import HOST, REPO, BrokerProcess, RunFailed, pinned, stop_group
from mqttq.admin.client import AdminClient
from mqttq.admin.token import TOKEN_FILE, read_discovery

POLL = 0.05
"""Seconds between two looks at the integration's counters."""

_STARTED: list[subprocess.Popen[bytes]] = []


def stop_all() -> None:
    """Stop every process started here (receivers, subscribers)."""
    while _STARTED:
        stop_group(_STARTED.pop(), grace=5.0)


def _spawn(argv: list[str], stdout: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _STARTED.append(process)
    return process


class Receiver:
    """benchmarks/integrations/receiver.py in a process of its own, on `core`."""

    def __init__(self, core: str | None, port: int = 0) -> None:
        script = str(Path(__file__).with_name("receiver.py"))
        self.process = _spawn(
            pinned(core, [sys.executable, script, "--port", str(port)]), subprocess.PIPE
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode().strip()
        if not line.startswith("port="):
            raise RunFailed(f"the HTTP receiver did not start (it printed {line!r})")
        self.port = int(line.partition("=")[2])
        self.pid = self.process.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/ingest"

    def stats(self) -> dict[str, Any]:
        """{"messages", "requests", "duplicate_requests", "first", "last"}."""
        with urllib.request.urlopen(f"http://{HOST}:{self.port}/stats", timeout=10) as answer:
            result: dict[str, Any] = json.loads(answer.read())
        return result


class MosquittoSubscriber:
    """`mosquitto_sub -F %U` on '#' at QoS 1: one Unix timestamp (ns) per message, in a
    file. `wait_subscribed` publishes probes until one arrives, so no message of the run
    can come before the subscription."""

    def __init__(self, core: str | None, port: int, workdir: Path) -> None:
        self.port = port
        self.path = workdir / "arrivals.txt"
        argv = ["mosquitto_sub", "-h", HOST, "-p", str(port), "-V", "mqttv5", "-q", "1"]
        argv += ["-t", "#", "-F", "%U %t"]
        self.process = _spawn(pinned(core, argv), self.path.open("wb"))

    def wait_subscribed(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            argv = ["mosquitto_pub", "-h", HOST, "-p", str(self.port), "-t", "probe", "-m", "x"]
            subprocess.run(argv, check=False, capture_output=True, timeout=10)
            if self.path.exists() and self.path.stat().st_size:
                return
            time.sleep(0.1)
        raise RunFailed("mosquitto_sub received no probe within 15 s")

    def arrivals(self) -> list[float]:
        """The arrival time of every message but the probes, in order."""
        times = []
        for line in self.path.read_text().splitlines():
            stamp, _, topic = line.partition(" ")
            if topic != "probe" and stamp:
                times.append(float(stamp))
        return times


class Integrations:
    """The broker's integrations through its admin API (the data dir's admin.json and
    admin-token, as `mqttq integration ls` finds them)."""

    def __init__(self, broker: BrokerProcess) -> None:
        data_dir = broker.workdir / "data"
        deadline = time.monotonic() + 30
        discovery = read_discovery(data_dir)
        while discovery is None and time.monotonic() < deadline:
            time.sleep(POLL)
            discovery = read_discovery(data_dir)
        if discovery is None:
            raise RunFailed(f"no admin.json in {data_dir}")
        token = (data_dir / TOKEN_FILE).read_text().strip()
        self.client = AdminClient(str(discovery["url"]), token, timeout=30.0)
        self.broker = broker

    def metric(self, family: str) -> float:
        """The sum of every sample of one /metrics family (all its labels)."""
        request = urllib.request.Request(
            f"{self.client.url}/metrics", headers={"Authorization": f"Bearer {self.client.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
        total = 0.0
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in (family, f"{family}_total"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def status(self, name: str) -> dict[str, Any]:
        """The integration as `mqttq integration ls --json` prints it."""
        return self.client.get_integration(name)

    def wait(
        self, name: str, key: str, target: int, stall: float, *, short_ok: bool = False
    ) -> dict[str, Any]:
        """Poll until the integration's `key` counter reaches `target`; when it does not
        move for `stall` seconds, RunFailed, or with `short_ok` the status as it is then
        (RunFailed too when the broker exits)."""
        last, moved = -1, time.monotonic()
        while True:
            status = self.status(name)
            value = int(status[key])
            if value >= target:
                return status
            if value != last:
                last, moved = value, time.monotonic()
            elif time.monotonic() - moved > stall:
                if short_ok:
                    return status
                raise RunFailed(
                    f"integration {name}: {key} stuck at {value} of {target} for {stall:g} s "
                    f"(state {status.get('state')}, last error {status.get('last_error')!r})"
                )
            if not self.broker.alive:
                raise RunFailed(f"the broker exited: {self.broker.log_tail()}")
            time.sleep(POLL)


def create_log_append_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create `topic` with message.timestamp.type=LogAppendTime: each record's timestamp is
    when Kafka wrote it, the sink-side time the delivered rate is measured over."""
    from confluent_kafka.admin import AdminClient as KafkaAdmin  # noqa: PLC0415
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # noqa: PLC0415

    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    config = {"message.timestamp.type": "LogAppendTime"}
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])
    for future in futures.values():
        future.result(60)


def topic_end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The high watermark of every partition of `topic`."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mqttq-bench-reader"})
    try:
        metadata = consumer.list_topics(topic, timeout=30)
        ends = {}
        for partition in metadata.topics[topic].partitions:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            ends[partition] = high
        return ends
    finally:
        consumer.close()


def read_topic_times(bootstrap: str, topic: str, start: dict[int, int]) -> list[float]:
    """The LogAppendTime (s) of every record of `topic` from the offsets `start` on."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    end = topic_end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mqttq-bench-reader",
            "enable.auto.commit": False,
        }
    )
    times: list[float] = []
    try:
        consumer.assign([TopicPartition(topic, p, start.get(p, 0)) for p in end])
        wanted = sum(end[p] - start.get(p, 0) for p in end)
        deadline = time.monotonic() + 120
        while len(times) < wanted and time.monotonic() < deadline:
            for record in consumer.consume(10_000, timeout=1.0):
                if record.error() is None:
                    times.append(record.timestamp()[1] / 1000)
        return times
    finally:
        consumer.close()


class Profiler:
    """`py-spy record` of process `pid` (every thread, GIL idle excluded) into `path` as
    collapsed stacks (--format raw), until `stop()`. Needs py-spy on PATH or next to python."""

    def __init__(self, pid: int, path: Path) -> None:
        spy = Path(sys.executable).with_name("py-spy")
        argv = [str(spy) if spy.exists() else "py-spy", "record", "--pid", str(pid)]
        argv += ["--output", str(path), "--format", "raw", "--rate", "250", "--threads"]
        self.path = path
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        time.sleep(0.5)  # attached before the load starts
        if self.process.poll() is not None:
            assert self.process.stderr is not None
            raise RunFailed(f"py-spy failed: {self.process.stderr.read().decode().strip()}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """On-CPU seconds so far of each live thread of `pid`, summed by thread name (comm).
    CPython does not name its OS threads: every Python thread (the event loop, the SQLite
    writer, executor pools) counts under the process's name ("python"); native threads
    (librdkafka's rdk:*, libuv's workers) under their own."""
    by_name: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            seconds = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        by_name[name] = by_name.get(name, 0.0) + seconds
    return by_name
