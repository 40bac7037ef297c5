"""The reports' transforms on small hand-built DataFrames, with the exact rows expected
(run on the shared `spark` fixture: executors are separate JVMs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from mqttq.spark.reports.migration_check import check_clients, check_summary, differences
from mqttq.spark.reports.migration_plan import (
    CLIENT_OVERHEAD,
    ENTRY_OVERHEAD,
    JSON_FIXED,
    KEY_FIXED,
    plan_clients,
    plan_summary,
)
from mqttq.spark.reports.redis_source import entry_schema
from mqttq.spark.reports.sessions import session_clients, sessions_summary, tenant_summary
from mqttq.spark.reports.transforms import bucket_labels, histogram, largest, mark_kept

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NOW = 1_700_000_000_000
DAY_S = 86_400
MESSAGES = (
    "client_id string, serial_number long, time long, packet_id int, packet_type string, "
    "qos int, msg_expiry_interval int, payload_bytes long, topic_bytes long, mqtt5_bytes long"
)
SESSIONS = "client_id string, last_serial_number long, last_packet_id int"


def msg(
    client: str,
    serial: int,
    *,
    age_s: int = 10,
    expiry: int | None = None,
    packet_type: str = "PUBLISH",
    payload: int = 10,
) -> tuple[Any, ...]:
    packet_id = (serial - 1) % 65535 + 1
    return (client, serial, NOW - age_s * 1000, packet_id, packet_type, 2, expiry, payload, 5, 0)


def rows(frame: DataFrame, order: str = "client_id") -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.orderBy(order).collect()]


def test_bucket_labels() -> None:
    assert bucket_labels()[:5] == ["0", "1", "2-4", "5-9", "10-19"]
    assert bucket_labels()[-2:] == ["20000-49999", "50000+"]


def test_histogram_keeps_the_empty_buckets_between_the_first_and_the_last(
    spark: SparkSession,
) -> None:
    per_client = spark.createDataFrame(
        [("a", 1), ("b", 1), ("c", 3), ("d", 12), ("e", 4)], "client_id string, backlog long"
    )
    assert [tuple(r) for r in histogram(per_client, "backlog").collect()] == [
        ("1", 1, 2, 2),
        ("2-4", 2, 2, 7),
        ("5-9", 5, 0, 0),
        ("10-19", 10, 1, 12),
    ]


def test_largest_orders_by_size_then_client_id(spark: SparkSession) -> None:
    per_client = spark.createDataFrame(
        [("b", 5), ("a", 5), ("c", 9), ("d", 1)], "client_id string, backlog long"
    )
    assert [r.client_id for r in largest(per_client, "backlog", 3).collect()] == ["c", "a", "b"]


def test_mark_kept_trims_beyond_the_limit_then_skips_the_expired(spark: SparkSession) -> None:
    messages = spark.createDataFrame(
        [
            msg("a", 1),  # beyond the newest 3: trimmed (even though live)
            msg("a", 2, age_s=8 * DAY_S),  # older than the default TTL (7 days): expired
            msg("a", 3, age_s=5, expiry=10),  # expiry interval not over: kept
            msg("a", 4, age_s=5, expiry=5),  # deadline == now: expired
            msg("b", 70_000),
        ],
        MESSAGES,
    )
    marked = mark_kept(messages, limit=3, default_ttl_s=7 * DAY_S, now_ms=NOW)
    got = [
        (r.client_id, r.serial_number, r.deadline_ms, r.trimmed, r.expired, r.kept)
        for r in marked.orderBy("client_id", "serial_number").collect()
    ]
    week_ms = 7 * DAY_S * 1000
    assert got == [
        ("a", 1, NOW - 10_000 + week_ms, True, False, False),
        ("a", 2, NOW - 8 * DAY_S * 1000 + week_ms, False, True, False),
        ("a", 3, NOW + 5_000, False, False, True),
        ("a", 4, NOW, False, True, False),
        ("b", 70_000, NOW - 10_000 + week_ms, False, False, True),
    ]


def test_plan_clients_and_summary(spark: SparkSession) -> None:
    messages = spark.createDataFrame(
        [
            msg("a", 1, payload=3),
            msg("a", 2, age_s=8 * DAY_S),
            msg("a", 3, packet_type="PUBREL", payload=4),
            msg("w", 65_536, payload=0),  # packet id 1 again: the ids wrapped
        ],
        MESSAGES,
    )
    sessions = spark.createDataFrame(
        [("a", 3, 3), ("s", 70_000, 4465), ("t", None, None)], SESSIONS
    )
    per_client = plan_clients(
        messages, sessions, limit=2, default_ttl_s=7 * DAY_S, now_ms=NOW, key_prefix_length=2
    )

    def entry(payload_b64: int) -> int:  # client id "a"/"w": 1 byte, topic 5 bytes
        return JSON_FIXED + 1 + 5 + payload_b64 + (1 + KEY_FIXED + 2) * 2 + ENTRY_OVERHEAD

    common = {"over_limit": False, "expired": 0, "trimmed": 0, "pubrel": 0}
    assert rows(per_client) == [
        {
            "client_id": "a",
            "rows": 3,
            "payload_bytes": 17,
            "to_migrate": 1,
            "expired": 1,
            "trimmed": 1,
            "pubrel": 1,
            "last_serial": 3,
            "wraps": False,
            "over_limit": True,
            "has_session": True,
            "redis_bytes": entry(8) + CLIENT_OVERHEAD,
        },
        {
            **common,
            "client_id": "s",
            "rows": 0,
            "payload_bytes": 0,
            "to_migrate": 0,
            "last_serial": 70_000,
            "wraps": True,
            "has_session": True,
            "redis_bytes": CLIENT_OVERHEAD,
        },
        {
            **common,
            "client_id": "t",
            "rows": 0,
            "payload_bytes": 0,
            "to_migrate": 0,
            "last_serial": None,
            "wraps": False,
            "has_session": True,
            "redis_bytes": CLIENT_OVERHEAD,
        },
        {
            **common,
            "client_id": "w",
            "rows": 1,
            "payload_bytes": 0,
            "to_migrate": 1,
            "last_serial": 65_536,
            "wraps": True,
            "has_session": False,
            "redis_bytes": entry(0) + CLIENT_OVERHEAD,
        },
    ]
    [summary] = plan_summary(per_client, rows_per_s=2).collect()
    assert summary.asDict() == {
        "clients": 4,
        "clients_with_messages": 2,
        "sessions_without_messages": 2,
        "rows": 4,
        "payload_bytes": 17,
        "expired_rows": 1,
        "trimmed_rows": 1,
        "pubrel_rows": 1,
        "rows_to_migrate": 2,
        "clients_wrapped_past_65535": 2,
        "clients_over_limit": 1,
        "redis_estimate_bytes": entry(8) + entry(0) + 4 * CLIENT_OVERHEAD,
        "migration_estimate_s": 2.0,
    }


def entry_rows(spark: SparkSession, data: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(data, entry_schema())


def test_session_clients_with_tenants_and_the_totals(spark: SparkSession) -> None:
    entries = entry_rows(
        spark,
        [
            # client_id, serial, packet_id, packet_type, time_ms, bytes, ttl_ms, present
            ("a", 1, 1, "PUBLISH", NOW - 90_500, 100, 7_200_000, True),
            ("a", 2, 2, "PUBREL", NOW - 1_000, 50, 1_800_999, True),
            ("a", 3, 3, None, None, None, None, False),  # its message expired
            ("b", 7, 7, "PUBLISH", NOW - 5_000, 10, None, True),  # no TTL
            ("x", 9, 9, None, None, None, None, False),  # only a dangling reference
        ],
    )
    tenants = spark.createDataFrame(
        [("a", "acme"), ("b", "acme"), ("c", "zeta")], "client_id string, tenant string"
    )
    per_client = session_clients(entries, tenants, now_ms=NOW, expiring_within_s=3600)
    none = {"gone": 0, "expiring": 0, "pubrel": 0, "min_ttl_s": None, "oldest_age_s": None}
    assert rows(per_client) == [
        {
            "client_id": "a",
            "tenant": "acme",
            "backlog": 2,
            "gone": 1,
            "bytes": 150,
            "oldest_age_s": 90,
            "expiring": 1,
            "min_ttl_s": 1800,
            "pubrel": 1,
        },
        {**none, "client_id": "b", "tenant": "acme", "backlog": 1, "bytes": 10, "oldest_age_s": 5},
        {**none, "client_id": "c", "tenant": "zeta", "backlog": 0, "bytes": 0},
        {**none, "client_id": "x", "tenant": None, "backlog": 0, "gone": 1, "bytes": 0},
    ]
    [summary] = sessions_summary(per_client).collect()
    assert summary.asDict() == {
        "sessions": 4,
        "sessions_with_messages": 2,
        "messages": 3,
        "message_bytes": 160,
        "oldest_message_age_s": 90,
        "expired_references": 2,
        "sessions_expiring_soon": 1,
        "messages_expiring_soon": 1,
        "sessions_waiting_on_pubrel": 1,
        "largest_backlog": 2,
    }
    assert [r.asDict() for r in tenant_summary(per_client).collect()] == [
        {
            "tenant": "acme",
            "sessions": 2,
            "messages": 3,
            "message_bytes": 160,
            "oldest_message_age_s": 90,
            "messages_expiring_soon": 1,
            "sessions_waiting_on_pubrel": 1,
        },
        {
            "tenant": "zeta",
            "sessions": 1,
            "messages": 0,
            "message_bytes": 0,
            "oldest_message_age_s": None,
            "messages_expiring_soon": 0,
            "sessions_waiting_on_pubrel": 0,
        },
    ]


def test_session_clients_without_tenants(spark: SparkSession) -> None:
    entries = entry_rows(spark, [("a", 1, 1, "PUBLISH", NOW - 2_000, 5, 60_000, True)])
    [row] = session_clients(entries, None, now_ms=NOW, expiring_within_s=30).collect()
    assert (row.tenant, row.backlog, row.expiring, row.min_ttl_s) == (None, 1, 0, 60)


@pytest.fixture
def check_frames(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    messages = spark.createDataFrame(
        [
            msg("same", 1),
            msg("same", 2),
            msg("missing", 5),
            msg("missing", 6),
            msg("gone", 1),  # not in Redis at all
            msg("wrongid", 3),
            msg("old", 1, age_s=8 * DAY_S),  # expired: expected nowhere
            msg("soon", 1, age_s=5, expiry=6),  # expires within the tolerance: not compared
        ],
        MESSAGES,
    )
    entries = entry_rows(
        spark,
        [
            ("same", 1, 1, "PUBLISH", NOW, 1, 60_000, True),
            ("same", 2, 2, "PUBLISH", NOW, 1, 60_000, True),
            ("missing", 6, 6, "PUBLISH", NOW, 1, 60_000, True),
            ("missing", 7, 7, "PUBLISH", NOW, 1, 60_000, True),
            (
                "missing",
                5,
                5,
                None,
                None,
                None,
                None,
                False,
            ),  # the reference is left, not the message
            ("wrongid", 3, 4, "PUBLISH", NOW, 1, 60_000, True),
            ("extra", 1, 1, "PUBLISH", NOW, 1, None, True),
        ],
    )
    return messages, entries


def test_check_clients_differences_and_summary(
    check_frames: tuple[DataFrame, DataFrame],
) -> None:
    messages, entries = check_frames
    per_client = check_clients(
        messages, entries, limit=10, default_ttl_s=7 * DAY_S, now_ms=NOW, tolerance_ms=2000
    )
    assert [tuple(r) for r in per_client.orderBy("client_id").collect()] == [
        # client_id, expected, present, missing, extra, wrong_packet_id
        ("extra", 0, 1, 0, 1, 0),
        ("gone", 1, 0, 1, 0, 0),
        ("missing", 2, 2, 1, 1, 0),
        ("same", 2, 2, 0, 0, 0),
        ("wrongid", 1, 1, 0, 0, 1),
    ]
    assert [(r.client_id, r.difference) for r in differences(per_client).collect()] == [
        ("extra", "not expected by PostgreSQL"),
        ("gone", "not in Redis"),
        ("missing", "1 missing, 1 extra"),
        ("wrongid", "1 with another packet id"),
    ]
    [summary] = check_summary(per_client).collect()
    assert summary.asDict() == {
        "clients_expected": 4,
        "clients_in_redis": 4,
        "clients_equal": 1,
        "clients_different": 4,
        "entries_expected": 6,
        "entries_in_redis": 6,
        "entries_missing": 2,
        "entries_extra": 2,
        "entries_wrong_packet_id": 1,
    }
