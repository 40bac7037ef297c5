"""`mqttq serve --workers N`: N nodes on one port (SO_REUSEPORT) under one supervisor that
forwards SIGTERM, restarts nothing, and exits 0 only when every worker stopped cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_ops.nodes import cluster_status, nodes_by_id, run_cli
from tests.integration.helpers import Clients
from tests.integration.waiting import HOST, wait_for
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

START_DEADLINE = 60.0
"""Bounds a hang (two nodes connecting to Kafka on a loaded machine); not a measure."""


class Supervisor:
    """`mqttq serve --workers N` as a subprocess."""

    def __init__(self, workdir: Path, workers: int, config: str) -> None:
        self.data_dir = workdir / "data"
        self.ready_file = workdir / "ready.json"
        self.stderr_path = workdir / "stderr.log"
        config_path = workdir / "broker.toml"
        config_path.write_text(config)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MQTTQ_")}
        env["MQTTQ_ADMIN__PORT"] = "0"
        command = [sys.executable, "-m", "mqttq", "serve", "--workers", str(workers)]
        command += ["--port", "0", "--data-dir", str(self.data_dir), "--config", str(config_path)]
        command += ["--ready-file", str(self.ready_file), "--log-level", "info"]
        with self.stderr_path.open("ab") as stderr:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=env
            )
        self.port = 0
        self.host = HOST

    def wait_ready(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            assert self.process.poll() is None, self.stderr()
            try:
                return dict(json.loads(self.ready_file.read_text()))
            except (FileNotFoundError, json.JSONDecodeError):
                return None

        found = wait_for(ready, timeout=START_DEADLINE, interval=0.1, what="the workers")
        self.port = int(found["mqtt_port"])
        return found

    def worker_pids(self) -> list[int]:
        return [
            int(json.loads((self.data_dir / f"w{i}" / "ready.json").read_text())["pid"])
            for i in range(2)
        ]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_exit(self) -> int:
        """The supervisor's exit code; its log (and the workers') in the failure if it
        has not ended within the bound."""
        try:
            return self.process.wait(timeout=START_DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the supervisor did not exit; its log:\n{self.stderr()}")


@pytest.fixture
def supervisors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started: list[Supervisor] = []

    def make(workers: int, config: str) -> Supervisor:
        supervisor = Supervisor(tmp_path_factory.mktemp("workers"), workers, config)
        started.append(supervisor)
        return supervisor

    yield make
    for supervisor in started:
        if supervisor.process.poll() is None:
            supervisor.process.kill()
            supervisor.process.wait()


def _config(kafka: KafkaServer, prefix: str, redis_url: str) -> str:
    return f"""
[storage]
log = "kafka"
[kafka]
bootstrap_servers = "{kafka.bootstrap}"
topic_prefix = "{prefix}"
msg_all_partitions = 3
[redis]
url = "{redis_url}"
[cluster]
node_id = "wk"
heartbeat_interval_ms = 200
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_workers_share_the_port_and_stop_on_sigterm(
    kafka: KafkaServer,
    kafka_prefix: str,
    redis_url: str,
    supervisors: Any,
    clients: Clients,
) -> None:
    supervisor = supervisors(2, _config(kafka, kafka_prefix, redis_url))
    ready = supervisor.wait_ready()
    assert ready["pid"] == supervisor.process.pid
    pids = supervisor.worker_pids()
    assert len(set(pids)) == 2 and supervisor.process.pid not in pids
    for n in range(40):
        clients.connected(supervisor, f"c{n}")

    def spread() -> dict[str, Any] | None:
        nodes = nodes_by_id(cluster_status(redis_url))
        counts = {k: v.get("connections", 0) for k, v in nodes.items()}
        return nodes if set(counts) == {"wk-w0", "wk-w1"} and sum(counts.values()) == 40 else None

    nodes = wait_for(spread, interval=0.2, what="both workers' heartbeats with the 40 clients")
    assert nodes["wk-w0"]["connections"] > 0 and nodes["wk-w1"]["connections"] > 0
    assert {node["ports"]["tcp"] for node in nodes.values()} == {supervisor.port}
    assert {node["pid"] for node in nodes.values()} == set(pids)

    clients.close_all()
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.process.wait(timeout=START_DEADLINE) == 0, supervisor.stderr()
    assert not any(_alive(pid) for pid in pids)
    assert not supervisor.ready_file.exists()
    assert cluster_status(redis_url)["nodes"] == []  # both stopped cleanly


def test_a_dead_worker_is_logged_and_not_restarted(
    kafka: KafkaServer, kafka_prefix: str, redis_url: str, supervisors: Any
) -> None:
    supervisor = supervisors(2, _config(kafka, kafka_prefix, redis_url))
    supervisor.wait_ready()
    first, second = supervisor.worker_pids()
    os.kill(first, signal.SIGKILL)
    wait_for(
        lambda: "was killed by SIGKILL (exit code -9)" in supervisor.stderr(),
        what="the supervisor's log line",
    )
    assert _alive(second) and supervisor.process.poll() is None
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait_exit() == 1
    assert not _alive(second)


def test_workers_without_kafka_are_a_config_error() -> None:
    done = run_cli("serve", "--workers", "2", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "mqttq: error: config key 'storage.log': --workers 2 needs the distributed mode: "
        'set storage.log = "kafka" (with [kafka] bootstrap_servers and [redis]), or run '
        "one process without --workers"
    ]
