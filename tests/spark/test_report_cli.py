"""`mqttq report` end to end through the CLI against real PostgreSQL, Redis (and Redis
Cluster) and SQLite, on the shared Spark session: the JSON, the files of --out read back,
the PNG of --chart, the tables, and the one-line errors."""

from __future__ import annotations

import asyncio
import csv
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis
from typer.testing import CliRunner, Result

from mqttq.cli.report import report_app
from mqttq.model import Message
from mqttq.storage.ports import SessionRecord
from mqttq.storage.sqlite.store import SqliteStorage
from tests.migrate.source_data import (
    DAY_MS,
    MsgRow,
    SessionRow,
    create_source,
    insert,
    migrate_json,
    now_ms,
)
from tests.postgres_fixtures import PostgresServer
from tests.services import free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def report(*args: str) -> Result:
    return runner.invoke(report_app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def report_json(*args: str, expect_exit: int = 0) -> dict[str, Any]:
    result = report(*args, "--json")
    assert result.exit_code == expect_exit, (result.exit_code, result.stdout, result.stderr)
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def one_error_line(result: Result, expect_exit: int = 1) -> str:
    assert result.exit_code == expect_exit, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mqttq: error: ")
    return lines[0]


@pytest.fixture(scope="module")
def source(postgres_server: PostgresServer) -> str:
    """TBMQ 1.x tables: a (3 rows, over a limit of 2), b (wrapped past 65535, a PUBREL),
    c (one expired row), d (a session row only)."""
    url = postgres_server.create_database()
    create_source(url)
    old = now_ms() - 8 * DAY_MS
    insert(
        url,
        [
            MsgRow("a", 1, packet_id=1),
            MsgRow("a", 2, packet_id=2),
            MsgRow("a", 3, packet_id=3),
            MsgRow("b", 65_536, packet_id=1, qos=2),
            MsgRow("b", 65_537, packet_id=2, qos=2, packet_type="PUBREL"),
            MsgRow("c", 1, packet_id=1, time=old),
        ],
        [SessionRow("a", 3, 3), SessionRow("b", 65_537, 2), SessionRow("d", 5, 5)],
    )
    return url


@pytest.fixture
def migrated(source: str, redis_url: str) -> str:
    """The source migrated with a limit of 2 into a flushed Redis; its URL."""
    done = migrate_json("--pg", source, "--redis", redis_url, "--limit", "2")
    assert done["messages"]["migrated"] == 4
    return redis_url


def part_file(directory: Path, suffix: str) -> Path:
    [found] = [p for p in directory.iterdir() if p.name.startswith("part-") and p.suffix == suffix]
    return found


def test_migration_plan_json_out_and_chart(source: str, tmp_path: Path) -> None:
    chart = tmp_path / "rows.png"
    data = report_json(
        "migration-plan", "--pg", source, "--limit", "2", "--rate", "3",
        "--out", str(tmp_path / "out"), "--chart", str(chart),
    )  # fmt: skip
    summary = data["summary"]
    assert summary == summary | {
        "clients": 4,
        "clients_with_messages": 3,
        "sessions_without_messages": 1,
        "rows": 6,
        "payload_bytes": 6 * len(b"payload"),
        "expired_rows": 1,
        "trimmed_rows": 1,
        "pubrel_rows": 1,
        "rows_to_migrate": 4,
        "clients_wrapped_past_65535": 1,
        "clients_over_limit": 1,
        "migration_estimate_s": 2.0,
    }
    assert summary["redis_estimate_bytes"] > 4 * 300
    assert [(c["client_id"], c["rows"], c["to_migrate"]) for c in data["largest"]] == [
        ("a", 3, 2),
        ("b", 2, 2),
        ("c", 1, 0),
        ("d", 0, 0),
    ]
    assert [(h["bucket"], h["clients"]) for h in data["histogram"]] == [
        ("0", 1),
        ("1", 1),
        ("2-4", 2),
    ]
    assert "clients" not in data  # per client: --out only
    with part_file(tmp_path / "out" / "clients", ".csv").open() as file:
        per_client = list(csv.DictReader(file))
    assert [(r["client_id"], r["rows"], r["wraps"]) for r in per_client] == [
        ("a", "3", "false"),
        ("b", "2", "true"),
        ("c", "1", "false"),
        ("d", "0", "false"),
    ]
    with part_file(tmp_path / "out" / "summary", ".csv").open() as file:
        assert next(csv.DictReader(file))["rows_to_migrate"] == "4"
    png = chart.read_bytes()
    assert png.startswith(PNG_MAGIC)
    assert 10_000 < len(png) < 200_000


def test_migration_check_equal_then_every_difference_listed(source: str, migrated: str) -> None:
    data = report_json("migration-check", "--pg", source, "--redis", migrated, "--limit", "2")
    assert data["summary"] == {
        "clients_expected": 2,
        "clients_in_redis": 2,
        "clients_equal": 2,
        "clients_different": 0,
        "entries_expected": 4,
        "entries_in_redis": 4,
        "entries_missing": 0,
        "entries_extra": 0,
        "entries_wrong_packet_id": 0,
    }
    assert data["differences"] == []
    with redis.Redis.from_url(migrated) as client:
        assert client.delete("{a}_messages_3") == 1  # its reference stays in the ZSET
        client.zadd("{zz}_messages", {"{zz}_messages_1": 1})
        client.set("{zz}_messages_1", '{"time": 1, "packetType": "PUBLISH"}')
    result = report("migration-check", "--pg", source, "--redis", migrated, "--limit", "2")
    line = one_error_line(result)
    assert line == "mqttq: error: 2 client(s) differ between PostgreSQL and Redis"
    assert "differences" in result.stdout
    assert "1 missing" in result.stdout
    assert "not expected by PostgreSQL" in result.stdout


def test_sessions_in_redis_json_chart_and_parquet(
    spark: SparkSession, migrated: str, tmp_path: Path
) -> None:
    chart = tmp_path / "backlog.png"
    out = tmp_path / "out"
    data = report_json(
        "sessions", "--redis", migrated, "--chart", str(chart),
        "--out", str(out), "--format", "parquet",
    )  # fmt: skip
    summary = data["summary"]
    assert summary == summary | {
        "sessions": 2,
        "sessions_with_messages": 2,
        "messages": 4,
        "expired_references": 0,
        "sessions_expiring_soon": 0,
        "sessions_waiting_on_pubrel": 1,
        "largest_backlog": 2,
    }
    assert 0 <= summary["oldest_message_age_s"] < 600
    assert summary["message_bytes"] > 4 * 100
    assert data["histogram"] == [{"bucket": "2-4", "low": 2, "clients": 2, "messages": 4}]
    assert [(r["client_id"], r["backlog"], r["pubrel"]) for r in data["largest"]] == [
        ("a", 2, 0),
        ("b", 2, 1),
    ]
    assert "tenants" not in data  # Redis does not know them
    assert chart.read_bytes().startswith(PNG_MAGIC)
    per_client = spark.read.parquet(str(out / "clients")).orderBy("client_id").collect()
    assert [(r.client_id, r.backlog, r.gone) for r in per_client] == [("a", 2, 0), ("b", 2, 0)]


def test_sessions_table_in_a_redis_cluster(source: str, redis_cluster_url: str) -> None:
    migrate_json("--pg", source, "--redis", redis_cluster_url, "--cluster", "--limit", "2")
    result = report("sessions", "--redis", redis_cluster_url, "--cluster")
    assert result.exit_code == 0, result.stderr
    assert "sessions in Redis Cluster at" in result.stdout
    assert "the 10 largest queues" in result.stdout
    for text in ("sessions", "waiting on pubrel", "2-4"):
        assert text in result.stdout


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Path]:
    """An embedded database: t1 (tenant acme, 2 queued, one of them expired), t2 (tenant
    zeta, none queued)."""
    path = tmp_path / "mqttq.sqlite3"
    now = time.time()

    async def fill() -> None:
        storage = SqliteStorage(path)
        await storage.open()
        try:
            for client, tenant in (("t1", "acme"), ("t2", "zeta")):
                await storage.save_session(SessionRecord(client, 5, 3600, tenant=tenant))
            await storage.enqueue(
                [
                    ("t1", Message("x/1", b"hello", 1, created_at=now - 30)),
                    ("t1", Message("x/2", b"gone", 1, created_at=now - 30, expires_at=now - 1)),
                ]
            )
        finally:
            await storage.close()

    asyncio.run(fill())
    yield path


def test_sessions_in_sqlite_per_tenant(sqlite_db: Path) -> None:
    data = report_json("sessions", "--sqlite", str(sqlite_db))
    summary = data["summary"]
    assert (summary["sessions"], summary["messages"], summary["expired_references"]) == (2, 1, 1)
    assert 29 <= summary["oldest_message_age_s"] < 600
    assert [(t["tenant"], t["sessions"], t["messages"]) for t in data["tenants"]] == [
        ("acme", 1, 1),
        ("zeta", 1, 0),
    ]
    assert [(r["client_id"], r["tenant"], r["backlog"]) for r in data["largest"]] == [
        ("t1", "acme", 1),
        ("t2", "zeta", 0),
    ]


# --- errors: one line, no traceback -------------------------------------------------------


def test_postgres_unreachable_missing_tables_and_empty(postgres_server: PostgresServer) -> None:
    closed = f"postgresql://postgres@127.0.0.1:{free_port()}/db"
    line = one_error_line(report("migration-plan", "--pg", closed))
    assert line.startswith(f"mqttq: error: cannot read PostgreSQL at {closed}: ")
    fresh = postgres_server.create_database()
    assert one_error_line(report("migration-plan", "--pg", fresh)).endswith(
        "has no table device_session_ctx: is it TBMQ 1.x's database?"
    )
    create_source(fresh)
    assert one_error_line(report("migration-check", "--pg", fresh)).endswith(
        "device_publish_msg and device_session_ctx are empty"
    )


def test_redis_unreachable_sqlite_missing_and_bad_options(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    line = one_error_line(report("sessions", "--redis", url))
    assert line.startswith(f"mqttq: error: cannot reach Redis at {url}: ")
    missing = tmp_path / "nothing.sqlite3"
    assert one_error_line(report("sessions", "--sqlite", str(missing))).startswith(
        f"mqttq: error: no SQLite database at {missing}"
    )
    not_ours = tmp_path / "other.sqlite3"
    not_ours.write_bytes(b"")
    assert one_error_line(report("sessions", "--sqlite", str(not_ours))).endswith(
        "is not an mqttq database: no table queue, sessions"
    )
    both = report("sessions", "--sqlite", str(missing), "--redis", url)
    assert "give either --sqlite or --redis" in one_error_line(both, 2)
    bad_conf = report("sessions", "--sqlite", str(missing), "--conf", "spark.x")
    assert "bad --conf 'spark.x'" in one_error_line(bad_conf, 2)


def test_empty_redis_is_an_error_before_spark_starts(source: str, redis_url: str) -> None:
    expected = f"mqttq: error: no DEVICE queue in Redis at {redis_url}"
    assert one_error_line(report("sessions", "--redis", redis_url)) == expected
    assert (
        one_error_line(report("migration-check", "--pg", source, "--redis", redis_url)) == expected
    )
