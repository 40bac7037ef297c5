"""`mqttq migrate pg-to-redis --engine spark` on the shared local-cluster session: the same
Redis as the local engine key by key (standalone and Redis Cluster), partitions that hold
each client whole, the rejects file, and one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from mqttq.migrate.rejects import read_rejects
from mqttq.spark.migrate_source import KIND, read_source
from tests.migrate.source_data import MsgRow, SessionRow, create_source, insert, invoke, redis_keys
from tests.migrate.test_migrate_pg_to_redis import T, standard_rows
from tests.postgres_fixtures import PostgresServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CHECKPOINT = "mqttq:migrate:checkpoint:"
TTL_SLACK_MS = 1000


def bad_rows() -> list[MsgRow]:
    """Two clients the planner rejects: a duplicate live packet id, a bad QoS."""
    return [
        MsgRow("dup", 1, time=T, packet_id=9),
        MsgRow("dup", 2, time=T, packet_id=9),
        MsgRow("badqos", 1, time=T, packet_id=1, qos=7),
    ]


@pytest.fixture
def mixed_source(postgres_url: str) -> str:
    """standard_rows() (wrap across 65535, PUBREL, MQTT 5, expired, trimmed, a session
    without messages), rejected clients, and 40 small clients over every partition."""
    create_source(postgres_url)
    messages, sessions = standard_rows()
    many = [MsgRow(f"dev-{n:02d}", s, time=T, packet_id=s) for n in range(40) for s in (1, 2)]
    insert(postgres_url, messages + bad_rows() + many, [*sessions, SessionRow("dev-07", 9, 9)])
    return postgres_url


def dump(client: redis.Redis | redis.RedisCluster) -> dict[str, Any]:
    """Every key but the checkpoints: value (a marker's message count; a set's members and
    scores) and the absolute expiry time in ms (-1: none)."""
    result: dict[str, Any] = {}
    for key in redis_keys(client):
        if key.startswith(CHECKPOINT):
            continue
        if key.endswith("}_messages"):
            value: Any = client.zrange(key, 0, -1, withscores=True)
        elif key.endswith("}_migrated"):
            value = json.loads(client.get(key) or b"")["messages"]
        else:
            value = client.get(key)
        result[key] = (value, client.pexpiretime(key))
    return result


def assert_same(local: dict[str, Any], spark: dict[str, Any]) -> None:
    assert sorted(spark) == sorted(local)
    for key, (value, expires) in local.items():
        spark_value, spark_expires = spark[key]
        assert spark_value == value, key
        assert (expires < 0) == (spark_expires < 0), key
        assert abs(spark_expires - expires) <= TTL_SLACK_MS, key


def migrate(*args: str, expect_exit: int = 0) -> dict[str, Any]:
    result = invoke("pg-to-redis", *args, "--json", "--limit", "8", "--allow-rejects")
    assert result.exit_code == expect_exit, (result.stdout, result.stderr)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("target", ["standalone", "cluster"])
def test_both_engines_write_the_same_redis_key_by_key(
    *,
    spark: SparkSession,
    mixed_source: str,
    redis_url: str,
    redis_cluster_url: str,
    tmp_path: Path,
    target: str,
) -> None:
    local_url = redis_url.rsplit("/", 1)[0] + "/1"
    local = migrate(
        "--pg", mixed_source, "--redis", local_url, "--rejects", str(tmp_path / "l.csv")
    )
    spark_target = ["--redis", redis_url]
    if target == "cluster":
        spark_target = ["--redis", redis_cluster_url, "--cluster"]
    rejects = tmp_path / "rejects.parquet"
    report = migrate(
        "--pg", mixed_source, *spark_target, "--engine", "spark", "--partitions", "3",
        "--rejects", str(rejects), "--verify",
    )  # fmt: skip

    for section in ("clients", "messages"):
        assert report[section] == local[section], section
    listed = report["rejected"].pop("listed")
    assert sorted(listed, key=str) == sorted(local["rejected"].pop("listed"), key=str)
    assert report["rejected"] == local["rejected"]
    assert report["rows_read"] == local["rows_read"] == len(standard_rows()[0]) + 3 + 80
    assert report["clients"]["migrated"] == 4 + 40
    assert report["verify"]["ok"] is True
    assert report["verify"]["clients_equal"] == 44

    spark_redis: redis.Redis | redis.RedisCluster = (
        redis.RedisCluster.from_url(redis_cluster_url)
        if target == "cluster"
        else redis.Redis.from_url(redis_url)
    )
    local_redis = redis.Redis.from_url(local_url)
    try:
        assert_same(dump(local_redis), dump(spark_redis))
        assert len(dump(spark_redis)) > 80
    finally:
        spark_redis.close()
        local_redis.close()

    got = {(p.client_id, p.serial_number, p.reason.value) for p in read_rejects(rejects)}
    assert got == {
        (p.client_id, p.serial_number, p.reason.value) for p in read_rejects(tmp_path / "l.csv")
    }
    assert {(client, serial) for client, serial, _ in got} == {
        ("dup", 1), ("dup", 2), ("badqos", 1)
    }  # fmt: skip

    again = migrate("--pg", mixed_source, *spark_target, "--engine", "spark")
    assert again["clients"]["migrated"] == 0
    assert again["clients"]["already_migrated"] == 44


def test_every_client_is_in_exactly_one_partition_in_order(
    spark: SparkSession, mixed_source: str
) -> None:
    frame = read_source(spark, mixed_source, 4)

    def rows_of(index: int, rows: Any) -> Any:
        for row in rows:
            yield index, row[0], row[KIND], row[1]

    seen = frame.rdd.mapPartitionsWithIndex(rows_of).collect()
    partitions_of: dict[str, set[int]] = {}
    for index, client_id, _kind, _serial in seen:
        partitions_of.setdefault(client_id, set()).add(index)
    assert {len(found) for found in partitions_of.values()} == {1}
    assert len({next(iter(found)) for found in partitions_of.values()}) == 4
    assert set(partitions_of) == {"wrap", "big", "idle", "other-1", "dup", "badqos"} | {
        f"dev-{n:02d}" for n in range(40)
    }
    for index in range(4):
        order = [(c, k, s if s is not None else -1) for i, c, k, s in seen if i == index]
        assert order == sorted(order)
    assert [(k, s) for _, c, k, s in seen if c == "dev-07"] == [(0, None), (1, 1), (1, 2)]


def test_spark_errors_are_one_line_and_exit_non_zero(
    *,
    spark: SparkSession,
    mixed_source: str,
    postgres_server: PostgresServer,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = ["pg-to-redis", "--pg", mixed_source, "--redis", redis_url, "--engine", "spark"]
    cases = [
        (["--master", "nowhere:7077"], 2, "bad --master 'nowhere:7077'"),
        (["--conf", "spark.executor.memory"], 2, "bad --conf 'spark.executor.memory'"),
        (["--partitions", "0"], 2, "--partitions 0: must be at least 1"),
    ]
    for extra, code, line in cases:
        result = invoke(*base, *extra)
        assert result.exit_code == code, result.stderr
        assert result.stderr.startswith(f"mqttq: error: {line}")
        assert len(result.stderr.strip().splitlines()) == 1
    local = invoke("pg-to-redis", "--pg", mixed_source, "--redis", redis_url, "--master", "local")
    assert local.exit_code == 2
    assert "--master: only with --engine spark" in local.stderr

    for pg, says in (
        (mixed_source + "x", 'database "'),
        (postgres_server.create_database(), 'relation "device_publish_msg" does not exist'),
    ):
        failed = invoke(*base, "--pg", pg)
        assert failed.exit_code == 1
        assert failed.stderr.startswith("mqttq: error: ")
        assert says in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1

    monkeypatch.setitem(sys.modules, "pyspark", None)
    result = invoke(*base)
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("pip install -e '.[spark]' (or pip install "
                                          "'mqttq[spark]'); Spark also needs Java 17")  # fmt: skip
