"""`mqttq report traffic --lake DIR` on known input: a lake written by pyarrow with the
layout (no mqttq writer), read on the shared Spark session; every number exact."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner, Result

from mqttq.cli.report import report_app
from tests.lake.lake_rows import Row, at, write_lake
from tests.spark.conftest import spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark"]

pytestmark = [
    pytest.mark.xdist_group("spark"),
    pytest.mark.slow,
    pytest.mark.timeout(900),  # a hang guard: Spark jobs on a busy 2-core machine
]

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WINDOW = ("--since", "2026-11-10T00:00:00Z", "--until", "2026-11-11T00:00:00Z")

ROWS = [
    # acme, in the window
    Row("acme", "s1", "sensors/s1/temp", at("2026-11-10T01:10:00"), b"a" * 10, qos=1, retain=True),
    Row("acme", "s1", "sensors/s1/temp", at("2026-11-10T01:20:00"), b"a" * 20, qos=1),
    Row("acme", "s1", "sensors/s1/temp", at("2026-11-10T02:05:00"), b"a" * 30, qos=0),
    Row("acme", "s2", "sensors/s2/temp", at("2026-11-10T02:30:00"), b"b" * 5, qos=2),
    Row("acme", "s2", "sensors/s2/temp", at("2026-11-10T23:59:59.999999"), b"b" * 5, qos=1),
    # acme, the previous window: s1 published then too; `gone` only then
    Row("acme", "s1", "sensors/s1/temp", at("2026-11-09T08:00:00"), b"p", qos=1),
    Row("acme", "gone", "sensors/g/temp", at("2026-11-09T11:00:00"), b"g", qos=1),
    Row("acme", "gone", "sensors/g/temp", at("2026-11-09T12:00:00"), b"g", qos=1),
    # acme, after the window (its end is excluded)
    Row("acme", "late", "sensors/l/temp", at("2026-11-11T00:00:00"), b"l" * 7, qos=1),
    # beta
    Row("beta", "b1", "alerts/x", at("2026-11-10T05:00:00"), b"\xff" * 100, qos=0),
    Row("beta", "bgone", "alerts/y", at("2026-11-09T00:00:00"), b"y", qos=1),
    Row("beta", "old", "alerts/z", at("2026-11-08T12:00:00"), b"z", qos=1),
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traffic") / "lake"
    write_lake(path, ROWS)
    return path


def report(*args: str) -> Result:
    return runner.invoke(report_app, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def traffic_json(lake: Path, *args: str) -> dict[str, Any]:
    result = report("traffic", "--lake", str(lake), *WINDOW, *args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_traffic_numbers_exact(spark: SparkSession, lake: Path) -> None:
    data = traffic_json(lake)
    assert data["report"] == "traffic"
    assert data["summary"] == {
        "since": "2026-11-10T00:00:00Z",
        "until": "2026-11-11T00:00:00Z",
        "window_hours": 24.0,
        "tenants": 2,
        "publishers": 3,
        "topics": 3,
        "messages": 6,
        "payload_bytes": 170,
        "qos0": 2,
        "qos1": 3,
        "qos2": 1,
        "retained": 1,
        "messages_per_hour": 0.25,
        "silent_devices": 2,
    }
    assert data["tenants"] == [
        {
            "tenant": "acme",
            "publishers": 2,
            "topics": 2,
            "messages": 5,
            "payload_bytes": 70,
            "qos0": 1,
            "qos1": 3,
            "qos2": 1,
            "retained": 1,
            "messages_per_hour": 0.208,
        },
        {
            "tenant": "beta",
            "publishers": 1,
            "topics": 1,
            "messages": 1,
            "payload_bytes": 100,
            "qos0": 1,
            "qos1": 0,
            "qos2": 0,
            "retained": 0,
            "messages_per_hour": 0.042,
        },
    ]
    assert [
        (t["tenant"], t["client_id"], t["messages"], t["payload_bytes"])
        for t in data["top_talkers"]
    ] == [
        ("acme", "s1", 3, 60),
        ("acme", "s2", 2, 10),
        ("beta", "b1", 1, 100),
    ]
    assert [(t["topic"], t["messages"]) for t in data["top_topics"]] == [
        ("sensors/s1/temp", 3),
        ("sensors/s2/temp", 2),
        ("alerts/x", 1),
    ]
    assert data["hourly"] == [
        {"hour": "2026-11-10T01:00Z", "messages": 2, "payload_bytes": 30},
        {"hour": "2026-11-10T02:00Z", "messages": 2, "payload_bytes": 35},
        {"hour": "2026-11-10T05:00Z", "messages": 1, "payload_bytes": 100},
        {"hour": "2026-11-10T23:00Z", "messages": 1, "payload_bytes": 5},
    ]
    assert data["silent"] == [
        {
            "tenant": "acme",
            "client_id": "gone",
            "previous_messages": 2,
            "last_seen": "2026-11-09T12:00:00Z",
        },
        {
            "tenant": "beta",
            "client_id": "bgone",
            "previous_messages": 1,
            "last_seen": "2026-11-09T00:00:00Z",
        },
    ]


def test_traffic_by_level_and_tenant(spark: SparkSession, lake: Path) -> None:
    data = traffic_json(lake, "--level", "1")
    assert [
        (t["tenant"], t["topic"], t["publishers"], t["messages"]) for t in data["top_topics"]
    ] == [
        ("acme", "sensors", 2, 5),
        ("beta", "alerts", 1, 1),
    ]
    beta = traffic_json(lake, "--tenant", "beta")
    assert beta["summary"]["messages"] == 1
    assert beta["summary"]["payload_bytes"] == 100
    assert [s["client_id"] for s in beta["silent"]] == ["bgone"]


def test_traffic_table_out_and_chart(spark: SparkSession, lake: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    chart = tmp_path / "hourly.png"
    result = report(
        "traffic", "--lake", str(lake), *WINDOW, "--out", str(out), "--chart", str(chart)
    )
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "per tenant (usage)" in result.stdout
    assert "silent devices" in result.stdout
    assert chart.read_bytes().startswith(PNG_MAGIC)
    (clients_csv,) = (out / "clients").glob("part-*.csv")
    with clients_csv.open() as handle:
        clients = list(csv.DictReader(handle))
    assert [(c["tenant"], c["client_id"], c["messages"]) for c in clients] == [
        ("acme", "s1", "3"),
        ("acme", "s2", "2"),
        ("beta", "b1", "1"),
    ]


def test_traffic_errors_are_one_line(tmp_path: Path) -> None:
    missing = report("traffic", "--lake", str(tmp_path / "nowhere"), "--json")
    assert missing.exit_code == 1, missing.stderr
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: no lake at ")
    bad = report("traffic", "--lake", str(tmp_path), "--since", "yesterday-ish")
    assert bad.exit_code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: bad --since 'yesterday-ish'")
