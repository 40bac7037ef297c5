"""`mqttq lake run` end to end (issue 36): messages published through a real broker on the
Kafka log appear in the lake with every field right; after `kill -9` of the driver and a
restart (on local-cluster[2,1,1024]) every Kafka offset is there exactly once; foreign
records go to the quarantine with their reason. The lake is read with pyarrow, which
knows nothing of mqttq."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pyarrow.dataset as ds
import pytest

from mqttq.lake.layout import MESSAGE_COLUMNS
from tests.lake.conftest import Scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("spark"),
    # The first test pays for the scenario: Kafka, a broker, three Spark drivers.
    pytest.mark.timeout(900),
]


def _rows(scenario: Scenario, table: str) -> list[dict[str, Any]]:
    dataset = ds.dataset(scenario.lake / table, format="parquet", partitioning="hive")
    return dataset.to_table().to_pylist()


def _micros(seconds: float) -> datetime:
    micros = math.floor(seconds * 1e6 + 0.5)
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(microsecond=micros % 1_000_000)


def test_the_restart_after_kill_9_finishes_the_log_on_a_local_cluster(
    lake_scenario: Scenario,
) -> None:
    """The killed run (local[2]) had written batches; the restart, on
    local-cluster[2,1,1024], wrote the rest and ended with exit 0."""
    assert [e for e in lake_scenario.first_run if e.get("event") == "batch"]
    assert lake_scenario.second_code == 0, lake_scenario.second_stderr
    stopped = lake_scenario.second_run[-1]
    assert stopped["event"] == "stopped"
    assert stopped["messages"] + stopped["quarantined"] > 0


def test_every_kafka_offset_is_in_the_lake_exactly_once(lake_scenario: Scenario) -> None:
    rows = _rows(lake_scenario, "messages")
    seen = Counter((r["kafka_partition"], r["kafka_offset"]) for r in rows)
    expected = {(p, o) for p, o, _, _ in lake_scenario.records}
    assert set(seen) == expected
    assert max(seen.values()) == 1


def test_every_field_is_right(lake_scenario: Scenario) -> None:
    """Each row holds what mqttq's own decoder reads from the same Kafka record."""
    rows = {(r["kafka_partition"], r["kafka_offset"]): r for r in _rows(lake_scenario, "messages")}
    for partition, offset, tenant, message in lake_scenario.records:
        row = rows[(partition, offset)]
        props = message.properties
        created = _micros(message.created_at)
        expected = {
            "tenant": tenant,
            "date": created.strftime("%Y-%m-%d"),
            "topic": message.topic,
            "topic_levels": message.topic.split("/"),
            "client_id": message.publisher_id,
            "qos": message.qos,
            "retain": message.retain,
            "created_at": created,
            "expires_at": None if message.expires_at is None else _micros(message.expires_at),
            "content_type": props.content_type,
            "response_topic": props.response_topic,
            "correlation_data": props.correlation_data,
            "payload_format": props.payload_format_indicator,
            "user_properties": [{"key": k, "value": v} for k, v in props.user_properties],
            "payload": message.payload,
            "payload_text": _text(message.payload),
            "kafka_partition": partition,
            "kafka_offset": offset,
        }
        actual = {name: row[name] for name, _, _ in MESSAGE_COLUMNS}
        assert actual == expected


def _text(payload: bytes) -> str | None:
    try:
        return payload.decode()
    except UnicodeDecodeError:
        return None


def test_mqtt5_properties_and_levels_are_columns(lake_scenario: Scenario) -> None:
    """The first sensor message carried every PUBLISH property: all are columns."""
    rows = [r for r in _rows(lake_scenario, "messages") if r["content_type"]]
    assert len(rows) == 1
    (row,) = rows
    assert row["response_topic"] == "replies/sensor-1"
    assert row["correlation_data"] == b"\x00\x01corr"
    assert row["payload_format"] == 1
    assert row["user_properties"] == [
        {"key": "site", "value": "north"},
        {"key": "site", "value": "south"},
        {"key": "a", "value": "1"},
    ]
    assert (row["expires_at"] - row["created_at"]).total_seconds() == pytest.approx(3600, abs=1)
    binary = [r for r in _rows(lake_scenario, "messages") if r["topic"] == "a/b//c"]
    assert binary[0]["topic_levels"] == ["a", "b", "", "c"]
    assert binary[0]["payload_text"] is None
    assert binary[0]["retain"] is True


def test_typed_columns_from_the_config_schema(lake_scenario: Scenario) -> None:
    """`[lake.schema."sensors/+/temp"]`: temperature and unit are columns; the payload that
    does not fit is kept as bytes with payload_typed_ok false, and counted."""
    rows = _rows(lake_scenario, "messages")
    sensors = sorted(
        (r for r in rows if r["topic"] == "sensors/s1/temp"), key=lambda r: r["kafka_offset"]
    )
    fits = [r for r in sensors if r["payload_typed_ok"]]
    assert len(fits) == 31
    assert {r["temperature"] for r in fits} == {21.5, *(i + 0.25 for i in range(30))}
    assert [r["unit"] for r in fits if r["temperature"] == 21.5] == ["C"]
    (misfit,) = [r for r in sensors if r["payload_typed_ok"] is False]
    assert misfit["temperature"] is None and misfit["payload"] == b'{"temperature": "warm"}'
    others = [r for r in rows if not r["topic"].startswith("sensors/")]
    assert all(r["payload_typed_ok"] is None and r["temperature"] is None for r in others)
    batches = lake_scenario.first_run + lake_scenario.second_run
    # The killed run's last batch may have been written again: the restart counts it too.
    assert lake_scenario.second_run[-1]["untyped"] <= 1
    assert sum(e.get("untyped", 0) for e in batches if e.get("event") == "batch") >= 1


def test_foreign_records_go_to_the_quarantine_with_their_reason(lake_scenario: Scenario) -> None:
    rows = _rows(lake_scenario, "quarantine")
    found = sorted((r["kafka_partition"], r["kafka_offset"], r["reason"]) for r in rows)
    assert found == sorted(lake_scenario.foreign)
    assert {r["reason"] for r in rows} == {
        "no mqttq header",
        "unknown header version 9",
        "corrupt header: truncated",
    }
    plain = next(r for r in rows if r["reason"] == "no mqttq header")
    assert (plain["key"], plain["value"], plain["kafka_topic"]) == (
        b"someone",
        b"hello",
        "t.lake.msg.all",
    )
