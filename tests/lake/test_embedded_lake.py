"""Embedded mode end to end: `mqttq serve` with a `lake` integration writes the lake's
layout itself (no Kafka); the files are read back with pyarrow (DuckDB is not installed
here), then `mqttq report traffic`, `mqttq lake query` and `mqttq lake replay` work on that
lake as on one `mqttq lake run` wrote."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.dataset as ds
import pytest
from typer.testing import CliRunner

from mqttq.cli.lake import lake_app
from mqttq.cli.report import report_app
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import Prop
from tests.spark.conftest import spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark"]

pytestmark = [
    pytest.mark.broker_process,
    pytest.mark.mqttq_only,
    pytest.mark.xdist_group("spark"),
    pytest.mark.slow,
    pytest.mark.timeout(900),  # a hang guard: a broker and Spark jobs on a busy machine
]

runner = CliRunner()


def lake_config(lake: Path) -> str:
    return (
        '[[integration]]\nname = "archive"\ntype = "lake"\nfilters = ["sensors/#", "bulk/#"]\n'
        f'path = "{lake}"\nroll_seconds = 1\nlinger_ms = 1\n'
    )


def lake_rows(lake: Path) -> list[dict[str, Any]]:
    table = lake / "messages"
    if not table.is_dir():
        return []
    dataset = ds.dataset(
        str(table), format="parquet", partitioning="hive", ignore_prefixes=[".", "_"]
    )
    return sorted(dataset.to_table().to_pylist(), key=lambda r: r["kafka_offset"])


def publish_all(port: int) -> None:
    """sensor-1: 1 message with MQTT 5 properties + 4 plain (QoS 1), 1 at QoS 0;
    dev-2 (MQTT 3.1.1): 3 on bulk/x at QoS 1; and one on a topic the filters leave out."""
    sensor = RawClient(port)
    sensor.connect("sensor-1", level=5)
    props = [
        (Prop.CONTENT_TYPE, "application/json"),
        (Prop.RESPONSE_TOPIC, "replies/sensor-1"),
        (Prop.CORRELATION_DATA, b"\x00\x01"),
        (Prop.USER_PROPERTY, ("site", "north")),
        (Prop.USER_PROPERTY, ("site", "south")),
    ]
    assert sensor.publish("sensors/s1/temp", b'{"t": 1}', qos=1, props=props)
    for index in range(2, 6):
        assert sensor.publish("sensors/s1/temp", f'{{"t": {index}}}'.encode(), qos=1)
    sensor.publish("sensors/s1/temp", b"q0", qos=0)
    sensor.publish("ignored/x", b"not archived", qos=1)
    sensor.disconnect()
    other = RawClient(port)
    other.connect("dev-2", level=4)
    for index in range(3):
        assert other.publish("bulk/x", f"m{index}".encode(), qos=1)
    other.disconnect()


def test_embedded_lake_end_to_end(
    spark: SparkSession, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    broker = broker_factory(lake_config(lake))
    before = datetime.now(UTC)
    publish_all(broker.port)
    rows = wait_for(lambda: (r := lake_rows(lake)) and len(r) == 9 and r, what="9 rows")
    # Per publisher, the lake keeps the order of publication (the embedded sequence).
    assert [r["payload"] for r in rows if r["client_id"] == "sensor-1"] == [
        b'{"t": 1}', b'{"t": 2}', b'{"t": 3}', b'{"t": 4}', b'{"t": 5}', b"q0"
    ]  # fmt: skip
    assert [r["payload"] for r in rows if r["client_id"] == "dev-2"] == [b"m0", b"m1", b"m2"]
    first = rows[0]
    assert (first["tenant"], first["topic"], first["qos"], first["retain"]) == (
        "default",
        "sensors/s1/temp",
        1,
        False,
    )
    assert first["date"] == first["created_at"].strftime("%Y-%m-%d")
    assert first["content_type"] == "application/json"
    assert first["response_topic"] == "replies/sensor-1"
    assert first["correlation_data"] == b"\x00\x01"
    assert first["user_properties"] == [
        {"key": "site", "value": "north"},
        {"key": "site", "value": "south"},
    ]
    assert first["payload_text"] == '{"t": 1}'
    assert {r["kafka_partition"] for r in rows} == {-1}
    assert len({r["kafka_offset"] for r in rows}) == 9
    assert before - timedelta(seconds=5) <= first["created_at"] <= datetime.now(UTC)

    window = (
        "--since",
        (before - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--until",
        (before + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    report = runner.invoke(
        report_app, ["traffic", "--lake", str(lake), *window, "--json"], catch_exceptions=False
    )
    assert report.exit_code == 0, (report.stdout, report.stderr)
    traffic = json.loads(report.stdout)
    summary = traffic["summary"]
    assert (summary["messages"], summary["publishers"], summary["topics"]) == (9, 2, 2)
    assert (summary["qos0"], summary["qos1"], summary["qos2"]) == (1, 8, 0)
    assert summary["payload_bytes"] == sum(len(r["payload"]) for r in rows)
    assert [(t["client_id"], t["messages"]) for t in traffic["top_talkers"]] == [
        ("sensor-1", 6),
        ("dev-2", 3),
    ]

    query = runner.invoke(
        lake_app,
        ["query", "--lake", str(lake), "--json",
         "SELECT client_id, count(*) AS n FROM messages GROUP BY client_id ORDER BY client_id"],
        catch_exceptions=False,
    )  # fmt: skip
    assert query.exit_code == 0, query.stderr
    assert json.loads(query.stdout) == [
        {"client_id": "dev-2", "n": 3},
        {"client_id": "sensor-1", "n": 6},
    ]

    subscriber = RawClient(broker.port)
    subscriber.connect("replayed", level=5)
    subscriber.subscribe(("replay/#", 1))
    replayed = runner.invoke(
        lake_app,
        ["replay", "--lake", str(lake), *window, "--filter", "sensors/#", "--prefix", "replay/",
         "--port", str(broker.port), "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert replayed.exit_code == 0, (replayed.stdout, replayed.stderr)
    assert json.loads(replayed.stdout)["published"] == 6
    received = subscriber.receive_messages(6)
    assert [m.payload for m in received] == [
        b'{"t": 1}', b'{"t": 2}', b'{"t": 3}', b'{"t": 4}', b'{"t": 5}', b"q0"
    ]  # fmt: skip
    assert received[0].props.get(Prop.CONTENT_TYPE) == "application/json"
    assert received[0].props.all(Prop.USER_PROPERTY) == [("site", "north"), ("site", "south")]
    subscriber.disconnect()
