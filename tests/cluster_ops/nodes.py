"""Helpers of the cluster operations tests: a node's broker.toml, `mqttq cluster status`
run as a user would, and a look into Redis."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import redis

INTERVAL_MS = 200
"""Heartbeat interval of the test nodes: their keys live 600 ms after the last beat."""


def node_config(node_id: str, bootstrap: str, prefix: str, redis_url: str, extra: str = "") -> str:
    """A distributed node's broker.toml (`storage.log = "kafka"`, DEVICE queues in SQLite)."""
    return f"""
[storage]
log = "kafka"
[kafka]
bootstrap_servers = "{bootstrap}"
topic_prefix = "{prefix}"
msg_all_partitions = 3
[redis]
url = "{redis_url}"
[cluster]
node_id = "{node_id}"
heartbeat_interval_ms = {INTERVAL_MS}
{extra}
"""


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`mqttq <args>` in a subprocess, the environment free of MQTTQ_* settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MQTTQ_")}
    return subprocess.run(
        [sys.executable, "-m", "mqttq", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def cluster_status(redis_url: str) -> dict[str, Any]:
    """`mqttq cluster status --json` against `redis_url` (asserting exit 0)."""
    done = run_cli("cluster", "status", "--json", "--redis", redis_url)
    assert done.returncode == 0, done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def kill_node(broker: Any) -> None:
    """SIGKILL a broker of `broker_factory` and leave it stopped (no clean stop at all)."""
    broker.process.kill()
    broker.process.wait()
    broker.process = None


def nodes_by_id(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["node_id"]: node for node in status["nodes"]}


@contextlib.contextmanager
def redis_client(url: str) -> Iterator[redis.Redis]:
    """A client of the Redis at `url`, closed on leaving (no socket left to the GC)."""
    client = redis.Redis.from_url(url)
    try:
        yield client
    finally:
        client.close()
