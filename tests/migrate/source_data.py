"""TBMQ 1.x source rows for the migration tests: how to write them, and the CLI runner.

Rows are inserted with COPY into the tables `mqttq migrate init-source` creates; what a
test expects in Redis is spelled out in the test from these rows, not computed with the
migration's own code.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from dataclasses import astuple, dataclass, field, fields
from typing import Any

import psycopg
import redis
from typer.testing import CliRunner, Result

from mqttq.cli.migrate import migrate_app
from mqttq.migrate import init_source

DAY_MS = 86_400_000
runner = CliRunner()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class MsgRow:
    """One device_publish_msg row (columns in the table's order)."""

    client_id: str
    serial_number: int
    topic: str = "dev/cmd"
    time: int = field(default_factory=now_ms)
    packet_id: int | None = 1
    packet_type: str | None = "PUBLISH"
    qos: int = 1
    payload: Any = b"payload"
    user_properties: str | None = None
    retain: bool | None = False
    msg_expiry_interval: int | None = None
    payload_format_indicator: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None


@dataclass
class SessionRow:
    """One device_session_ctx row."""

    client_id: str
    last_serial_number: int | None
    last_packet_id: int | None
    last_updated_time: int = field(default_factory=now_ms)


MSG_COLUMNS = ", ".join(f.name for f in fields(MsgRow))


def create_source(url: str) -> None:
    """TBMQ 1.x's tables, as `mqttq migrate init-source` makes them."""
    asyncio.run(init_source(url))


def insert(url: str, messages: list[MsgRow], sessions: list[SessionRow] = ()) -> None:  # type: ignore[assignment]
    """COPY the rows into the source tables."""
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        if messages:
            with cursor.copy(f"COPY device_publish_msg ({MSG_COLUMNS}) FROM STDIN") as copy:
                for row in messages:
                    copy.write_row(astuple(row))
        if sessions:
            copy_sessions = (
                "COPY device_session_ctx "
                "(client_id, last_serial_number, last_packet_id, last_updated_time) FROM STDIN"
            )
            with cursor.copy(copy_sessions) as copy:
                for session in sessions:
                    copy.write_row(astuple(session))


def invoke(*args: str) -> Result:
    """`mqttq migrate ARGS` in this process."""
    return runner.invoke(migrate_app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def migrate_json(*args: str, expect_exit: int = 0) -> dict[str, Any]:
    """`mqttq migrate pg-to-redis ARGS --json`: its report (exit status checked)."""
    result = invoke("pg-to-redis", *args, "--json")
    assert result.exit_code == expect_exit, (result.exit_code, result.stdout, result.stderr)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def migrate_subprocess(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m mqttq.cli.migrate ARGS` as a child process."""
    return subprocess.run(
        [sys.executable, "-m", "mqttq.cli.migrate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def redis_keys(client: redis.Redis | redis.RedisCluster) -> set[str]:
    """Every key (on every master of a cluster), decoded."""
    if isinstance(client, redis.RedisCluster):
        keys = client.keys(target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        keys = client.keys()
    return {k.decode() if isinstance(k, bytes) else str(k) for k in keys}


def queue(
    client: redis.Redis | redis.RedisCluster, client_id: str
) -> list[tuple[int, str, dict[str, Any]]]:
    """A client's queue: (score, member, decoded JSON) in score order."""
    members: list[tuple[bytes, float]] = client.zrange(  # type: ignore[assignment]
        f"{{{client_id}}}_messages", 0, -1, withscores=True
    )
    result = []
    for member, score in members:
        value = client.get(member)
        assert value is not None, f"{member!r} has no value"
        result.append((int(score), member.decode(), json.loads(value)))
    return result
