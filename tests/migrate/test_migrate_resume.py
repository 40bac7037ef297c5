"""`mqttq migrate pg-to-redis` interrupted, then `--resume`: after the test hook's crash at
the worst moment and after a real kill -9, every client is in Redis once and whole, with
its session record, and a further run is a no-op."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import redis

from tests.integration.waiting import wait_for
from tests.migrate.source_data import (
    MsgRow,
    SessionRow,
    b64,
    create_source,
    insert,
    migrate_json,
    migrate_subprocess,
    queue,
    redis_keys,
)


def test_crash_mid_run_then_resume_writes_each_client_once(
    postgres_url: str, redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    create_source(postgres_url)
    clients = [f"c{n:02d}" for n in range(30)]
    rows = [
        MsgRow(c, s, packet_id=s, payload=f"{c}/{s}".encode()) for c in clients for s in (1, 2, 3)
    ]
    insert(postgres_url, rows, [SessionRow(c, 3, 3) for c in clients])
    data_dir = tmp_path / "broker-data"
    args = ["pg-to-redis", "--pg", postgres_url, "--redis", redis_url, "--batch-size", "8"]
    args += ["--sessions-to", str(data_dir)]

    crashed = migrate_subprocess(*args, env={"MQTTQ_TEST_MIGRATE_CRASH_AFTER": "10"})
    assert crashed.returncode == 75, crashed.stderr
    written = {k for k in redis_keys(raw_redis) if k.endswith("}_migrated")}
    assert 10 <= len(written) < 30
    for marker in written:  # every client in Redis is whole
        client_id = marker[1:].split("}")[0]
        assert len(queue(raw_redis, client_id)) == 3

    resumed = migrate_json(*args[1:], "--resume")
    assert resumed["resumed_after"] is not None
    done_before = sorted(clients).index(resumed["resumed_after"].split(":", 1)[1]) + 1
    assert done_before < len(written)  # the crash came before the checkpoint moved
    assert resumed["clients"]["seen"] == 30 - done_before
    assert resumed["clients"]["already_migrated"] == len(written) - done_before
    assert resumed["clients"]["migrated"] == 30 - len(written)
    for client_id in clients:
        assert [m["payload"] for _, _, m in queue(raw_redis, client_id)] == [
            b64(f"{client_id}/{s}".encode()) for s in (1, 2, 3)
        ]
    with sqlite3.connect(data_dir / "mqttq.sqlite3") as db:
        stored = sorted(row[0] for row in db.execute("SELECT client_id FROM sessions"))
    assert stored == clients

    assert migrate_json(*args[1:], "--resume")["already_finished"] is True
    full = migrate_json(*args[1:])
    assert (full["clients"]["already_migrated"], full["clients"]["migrated"]) == (30, 0)


def test_kill_9_mid_run_then_resume_loses_and_duplicates_nothing(
    postgres_url: str, redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    """A real SIGKILL, not the test hook: once the first client is in Redis, Redis holds
    every write (CLIENT PAUSE WRITE) so that the kill lands mid-run whatever the machine's
    speed; whatever the migrator had sent but Redis had not run dies with its connection."""
    create_source(postgres_url)
    clients = [f"k{n:04d}" for n in range(2000)]
    rows = [MsgRow(c, s, packet_id=s, payload=f"{c}/{s}".encode()) for c in clients for s in (1, 2)]
    insert(postgres_url, rows, [SessionRow(c, 2, 2) for c in clients])
    data_dir = tmp_path / "broker-data"
    args = ["pg-to-redis", "--pg", postgres_url, "--redis", redis_url, "--batch-size", "16"]
    args += ["--sessions-to", str(data_dir)]

    child = subprocess.Popen(
        [sys.executable, "-m", "mqttq.cli.migrate", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: raw_redis.exists("{k0000}_migrated"), what="the first client in Redis")
        raw_redis.execute_command("CLIENT", "PAUSE", "60000", "WRITE")
        try:
            assert child.poll() is None, "the migration ended before it could be killed"
            child.kill()
            assert child.wait(timeout=30) == -signal.SIGKILL
        finally:
            raw_redis.execute_command("CLIENT", "UNPAUSE")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        assert child.stderr is not None
        child.stderr.close()

    written = {k for k in redis_keys(raw_redis) if k.endswith("}_migrated")}
    assert 1 <= len(written) < len(clients)
    for key in redis_keys(raw_redis):  # every client in Redis is whole, none half-way
        if key.endswith("}_messages"):
            client_id = key[1:].split("}")[0]
            assert f"{{{client_id}}}_migrated" in written
            assert len(queue(raw_redis, client_id)) == 2

    resumed = migrate_json(*args[1:], "--resume")
    assert resumed["clients"]["migrated"] == len(clients) - len(written)
    for client_id in clients:
        assert [
            (score, m["packetId"], m["payload"]) for score, _, m in queue(raw_redis, client_id)
        ] == [(s, s, b64(f"{client_id}/{s}".encode())) for s in (1, 2)]
    with sqlite3.connect(data_dir / "mqttq.sqlite3") as db:
        stored = sorted(row[0] for row in db.execute("SELECT client_id FROM sessions"))
    assert stored == clients
    assert migrate_json(*args[1:], "--resume")["already_finished"] is True
