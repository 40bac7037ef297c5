"""`mqttq lake run` end to end (issue 36): messages published through a real broker on the
Kafka log appear in the lake with every field right; after `kill -9` of the driver and a
restart (on local-cluster[2,1,1024]) every Kafka offset is there exactly once; foreign
records go to the quarantine with their reason. The lake is read with pyarrow, which
knows nothing of mqttq."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from mqttq.lake.layout import MESSAGE_COLUMNS
from tests.lake.conftest import InferredLake, Scenario

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


def test_infer_types_the_json_payloads_of_the_log(
    lake_scenario: Scenario, inferred_hourly_lake: InferredLake
) -> None:
    """`--infer` (no [lake.schema]): the sample's JSON objects give `temperature` (double:
    31 numbers against one string) and `unit` (string) as columns for every topic; payloads
    that are not such objects keep their bytes, flagged and counted, never dropped."""
    run = inferred_hourly_lake
    assert run.code == 0, run.stderr
    dataset = ds.dataset(run.lake / "messages", format="parquet", partitioning="hive")
    assert dataset.schema.field("temperature").type == pa.float64()
    assert dataset.schema.field("unit").type == pa.string()
    rows = dataset.to_table().to_pylist()
    assert len(rows) == len(lake_scenario.records)
    sensors = [r for r in rows if r["topic"] == "sensors/s1/temp"]
    fits = [r for r in sensors if r["payload_typed_ok"]]
    assert {r["temperature"] for r in fits} == {21.5, *(i + 0.25 for i in range(30))}
    assert [r["unit"] for r in fits if r["unit"] is not None] == ["C"]
    (misfit,) = [r for r in sensors if not r["payload_typed_ok"]]
    assert misfit["temperature"] is None and misfit["payload"] == b'{"temperature": "warm"}'
    bulk = sorted((r for r in rows if r["topic"] == "bulk/x"), key=lambda r: r["kafka_offset"])
    assert [r["payload"] for r in bulk] == [f"m{i}".encode() for i in range(20)]
    assert all(r["payload_typed_ok"] is False for r in bulk)
    stopped = run.lines[-1]
    assert stopped["event"] == "stopped"
    assert stopped["untyped"] == len(lake_scenario.records) - len(fits)


def test_an_hourly_lake_is_partitioned_by_hour_through_the_stream(
    lake_scenario: Scenario, inferred_hourly_lake: InferredLake
) -> None:
    """`--hourly`: every message is under `tenant=/date=/hour=H/` of its created time (the
    hour an int 0-23, as Spark writes an int partition: `hour=0` at midnight), and the lake
    says so in `_lake.json`."""
    run = inferred_hourly_lake
    assert run.code == 0, run.stderr
    info = json.loads((run.lake / "_lake.json").read_text("utf-8"))
    assert info["partitioning"] == ["tenant", "date", "hour"]
    written = {(p, o): (t, _micros(m.created_at)) for p, o, t, m in lake_scenario.records}
    table = ds.dataset(run.lake / "messages", format="parquet", partitioning="hive")
    seen = 0
    for fragment in table.get_fragments():
        relative = Path(fragment.path).relative_to(run.lake / "messages").parts
        hour = relative[2]
        assert hour.startswith("hour=") and 0 <= int(hour.removeprefix("hour=")) <= 23
        for row in fragment.to_table(columns=["kafka_partition", "kafka_offset"]).to_pylist():
            tenant, when = written[(row["kafka_partition"], row["kafka_offset"])]
            assert relative[:3] == (
                f"tenant={tenant}",
                f"date={when:%Y-%m-%d}",
                f"hour={when.hour}",
            )
            seen += 1
    assert seen == len(lake_scenario.records)


def test_format_delta_writes_a_delta_lake_every_offset_once(
    lake_scenario: Scenario, delta_lake: dict[str, Any]
) -> None:
    """`mqttq lake run --format delta` (delta-spark 4.4.0 on Spark 4.2.0): the log into
    Delta tables, read back through Delta; a second `--available-now` run finds nothing new."""
    offsets = Counter((p, o) for p, o in delta_lake["offsets"])
    assert set(offsets) == {(p, o) for p, o, _, _ in lake_scenario.records}
    assert max(offsets.values()) == 1
    assert sorted(tuple(q) for q in delta_lake["quarantine"]) == sorted(lake_scenario.foreign)
    first, second = delta_lake["runs"]
    assert first == {
        "messages": len(lake_scenario.records),
        "quarantined": len(lake_scenario.foreign),
    }
    assert second == {"messages": 0, "quarantined": 0}
    assert delta_lake["stopped_events"] == ["stopped", "stopped"]
    assert {"tenant", "date", "topic", "payload", "kafka_offset"} <= set(delta_lake["columns"])


def test_a_delta_lake_compacts_with_optimize_and_expires_with_delete(
    lake_scenario: Scenario, delta_lake: dict[str, Any]
) -> None:
    """`mqttq lake compact` = OPTIMIZE (no row lost), `mqttq lake expire --older-than 90d` =
    DELETE + VACUUM: nothing of today goes; a year later every row of the messages and the
    quarantine goes."""
    assert delta_lake["compact_format"] == "delta"
    assert delta_lake["compact"]["files_removed"] >= delta_lake["compact"]["files_added"]
    assert delta_lake["rows_after_compact"] == len(lake_scenario.records)
    # `lake query` and `report traffic --lake` read the table through Delta's log, not the
    # files OPTIMIZE replaced (still on disk): each message once.
    count = len(lake_scenario.records)
    assert delta_lake["query_after_compact"] == [{"n": count, "o": count}]
    assert delta_lake["traffic_after_compact"] == count
    assert delta_lake["expired_now"] == 0
    everything = len(lake_scenario.records) + len(lake_scenario.foreign)
    assert delta_lake["expired_a_year_later"] == everything
    assert delta_lake["rows_after_expire"] == 0
