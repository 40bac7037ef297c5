"""`mqttq lake query --lake DIR "SQL"` on a lake written by pyarrow: JSON (binary as
base64, times ISO 8601 UTC, user properties in order), CSV, a typed column from a file
that has one, and the one-line errors."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner, Result

from mqttq.cli.lake import lake_app
from mqttq.cli.report import report_app
from mqttq.integrations.record import Delivery
from mqttq.integrations.sinks.lake import LakeSink, LakeSinkSettings
from mqttq.lake.arrow_files import write_rows
from tests.lake.lake_rows import Row, arrow_rows, at, write_lake
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
ROWS = [
    Row(
        "acme",
        "s1",
        "sensors/s1/temp",
        at("2026-11-10T01:10:00.000123"),
        b"\x00\xffraw",
        user_properties=(("site", "north"), ("site", "south"), ("a", "1")),
        content_type="application/octet-stream",
    ),
    Row("acme", "s1", "sensors/s1/temp", at("2026-11-10T01:11:00"), b"two"),
    Row("42", "d9", "x", at("2026-11-11T03:00:00"), b"tenant named like a number"),
]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("query") / "lake"
    write_lake(path, ROWS)
    # A later file of the same partition with a typed column (as `lake run` writes them).
    typed = arrow_rows([Row("acme", "s2", "sensors/s2/temp", at("2026-11-10T02:00:00"), b"{}")])
    typed = typed.append_column("temperature", pa.array([21.5], pa.float64())).append_column(
        "payload_typed_ok", pa.array([True])
    )
    write_rows(path / "messages", typed, "part-000000000001-00000.parquet")
    return path


def query(lake: Path, sql: str, *args: str) -> Result:
    return runner.invoke(
        lake_app,
        ["query", "--lake", str(lake), sql, *args],
        env={"COLUMNS": "200"},
        catch_exceptions=False,
    )


def query_json(lake: Path, sql: str) -> list[dict[str, Any]]:
    result = query(lake, sql, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def test_query_json_csv_and_table(spark: SparkSession, lake: Path) -> None:
    counts = query_json(
        lake,
        "SELECT tenant, client_id, count(*) AS n, sum(length(payload)) AS bytes "
        "FROM messages GROUP BY tenant, client_id ORDER BY tenant, client_id",
    )
    assert counts == [
        {"tenant": "42", "client_id": "d9", "n": 1, "bytes": 26},
        {"tenant": "acme", "client_id": "s1", "n": 2, "bytes": 8},
        {"tenant": "acme", "client_id": "s2", "n": 1, "bytes": 2},
    ]
    (first,) = query_json(
        lake,
        "SELECT topic, date, payload, payload_text, user_properties, created_at, content_type "
        "FROM messages WHERE client_id = 's1' ORDER BY created_at LIMIT 1",
    )
    assert first == {
        "topic": "sensors/s1/temp",
        "date": "2026-11-10",
        "payload": base64.b64encode(b"\x00\xffraw").decode(),
        "payload_text": None,
        "user_properties": [
            {"key": "site", "value": "north"},
            {"key": "site", "value": "south"},
            {"key": "a", "value": "1"},
        ],
        "created_at": "2026-11-10T01:10:00.000123Z",
        "content_type": "application/octet-stream",
    }
    assert query_json(
        lake, "SELECT client_id, temperature FROM messages WHERE temperature > 0"
    ) == [{"client_id": "s2", "temperature": 21.5}]
    as_csv = query(lake, "SELECT client_id, qos FROM messages ORDER BY created_at", "--csv")
    assert as_csv.exit_code == 0, as_csv.stderr
    assert list(csv.reader(io.StringIO(as_csv.stdout))) == [
        ["client_id", "qos"],
        ["s1", "1"],
        ["s1", "1"],
        ["s2", "1"],
        ["d9", "1"],
    ]
    table = query(lake, "SELECT topic FROM messages WHERE tenant = '42'")
    assert table.exit_code == 0, table.stderr
    assert "x" in table.stdout
    assert "1 rows" in table.stdout


def test_query_errors_are_one_line(spark: SparkSession, lake: Path, tmp_path: Path) -> None:
    bad = query(lake, "SELEC * FROM messages", "--json")
    assert bad.exit_code == 2, (bad.stdout, bad.stderr)
    (line,) = bad.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: bad SQL: ")
    unknown = query(lake, "SELECT nope FROM messages")
    assert unknown.exit_code == 2
    (line,) = unknown.stderr.strip().splitlines()
    assert "nope" in line
    missing = query(tmp_path / "nowhere", "SELECT 1")
    assert missing.exit_code == 1
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith("mqttq: error: no lake at ")


def test_an_hourly_lake_from_the_embedded_sink(spark: SparkSession, tmp_path: Path) -> None:
    """An hourly lake (the `lake` sink with `hourly = true`): `hour` is an int column and
    the traffic report reads it too."""
    lake = tmp_path / "hourly"
    t0_ms = 1_794_306_000_000  # 2026-11-10T10:20:00Z

    async def write() -> None:
        sink = LakeSink(LakeSinkSettings(path=str(lake), hourly=True), "h")
        batch = [
            Delivery(
                f"t/{i % 2}", b"p" * i, client_id=f"c{i % 2}", timestamp_ms=t0_ms + i * 1_200_000
            )
            for i in range(1, 6)
        ]  # 10:40, 11:00, 11:20, 11:40, 12:00
        await sink.send(batch)
        await sink.close()

    asyncio.run(write())
    assert query_json(
        lake, "SELECT hour, count(*) AS n FROM messages GROUP BY hour ORDER BY hour"
    ) == [
        {"hour": 10, "n": 1},
        {"hour": 11, "n": 3},
        {"hour": 12, "n": 1},
    ]
    result = runner.invoke(
        report_app,
        [
            "traffic",
            "--lake",
            str(lake),
            "--since",
            "2026-11-10",
            "--until",
            "2026-11-11",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["summary"]["messages"], data["summary"]["payload_bytes"]) == (5, 15)
    assert [(h["hour"], h["messages"]) for h in data["hourly"]] == [
        ("2026-11-10T10:00Z", 1),
        ("2026-11-10T11:00Z", 3),
        ("2026-11-10T12:00Z", 1),
    ]
