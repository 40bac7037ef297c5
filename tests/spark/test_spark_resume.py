"""`--engine spark` killed for real (kill -9 of the driver process group: the Python driver,
its JVM, executors and Python workers), then `--resume`: every client in Redis exactly
once and whole, the interrupted partitions continued after their own checkpoints."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

from tests.integration.waiting import wait_for
from tests.migrate.source_data import (
    MsgRow,
    SessionRow,
    b64,
    create_source,
    insert,
    migrate_json,
    queue,
    redis_keys,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PARTITIONS = "4"


def alive_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


@pytest.mark.timeout(600)  # two Spark jobs and a Spark start in a child, on a busy machine
def test_kill_9_of_the_spark_driver_then_resume_writes_each_client_once(
    spark: SparkSession, postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    create_source(postgres_url)
    clients = [f"k{n:04d}" for n in range(800)]
    rows = [MsgRow(c, s, packet_id=s, payload=f"{c}/{s}".encode()) for c in clients for s in (1, 2)]
    insert(postgres_url, rows, [SessionRow(c, 2, 2) for c in clients])
    args = ["--pg", postgres_url, "--redis", redis_url, "--batch-size", "16"]
    args += ["--engine", "spark", "--partitions", PARTITIONS]
    raw = redis.Redis.from_url(redis_url)

    child = subprocess.Popen(
        [sys.executable, "-m", "mqttq.cli.migrate", "pg-to-redis", *args, "--master", "local[2]"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "HOME": os.environ.get("HOME", str(tmp_path))},
    )
    try:
        wait_for(
            lambda: any(k.endswith("}_migrated") for k in redis_keys(raw)),
            timeout=180,
            interval=0.05,
            what="the first client in Redis",
        )
        raw.execute_command("CLIENT", "PAUSE", "120000", "WRITE")
        try:
            assert child.poll() is None, "the migration ended before it could be killed"
            os.killpg(child.pid, signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL
            wait_for(lambda: not alive_in_group(child.pid), timeout=60, what="the job's end")
        finally:
            raw.execute_command("CLIENT", "UNPAUSE")
        # What the dead workers had sent while Redis was paused runs now (atomically per
        # client): wait until their connections are gone before counting.
        wait_for(lambda: len(raw.client_list()) == 1, timeout=60, what="the dead connections")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()

    written = {k for k in redis_keys(raw) if k.endswith("}_migrated")}
    assert 1 <= len(written) < len(clients)
    for key in redis_keys(raw):  # every client in Redis is whole, none half-way
        if key.endswith("}_messages"):
            client_id = key[1:].split("}")[0]
            assert f"{{{client_id}}}_migrated" in written
            assert len(queue(raw, client_id)) == 2

    resumed = migrate_json(*args, "--resume")
    assert resumed["resumed_after"] is not None
    assert resumed["resumed_after"].startswith("partition checkpoints")
    assert resumed["clients"]["migrated"] == len(clients) - len(written)
    # The partitions continued after their checkpoints: fewer clients read than in all.
    assert resumed["clients"]["seen"] < len(clients)
    for client_id in clients:
        assert [(score, m["packetId"], m["payload"]) for score, _, m in queue(raw, client_id)] == [
            (s, s, b64(f"{client_id}/{s}".encode())) for s in (1, 2)
        ]
    assert migrate_json(*args, "--resume")["already_finished"] is True
    full = migrate_json(*args)
    assert (full["clients"]["already_migrated"], full["clients"]["migrated"]) == (800, 0)
    raw.close()
