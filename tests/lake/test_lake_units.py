"""The lake's pieces that need neither Spark nor Kafka: topic filters as regexes, the
`[lake.schema]` table, the properties UDF's body, the per-batch publish (idempotent for a
rerun of the same batch), the schema `--infer` reads."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from mqttq.codec.enums import PacketType
from mqttq.codec.properties import Properties, encode_properties
from mqttq.lake.decode import (
    TypedSchema,
    _decode_properties_series,
    filter_regex,
    parse_typed_schemas,
)
from mqttq.lake.layout import LakeError
from mqttq.lake.sink import publish_staged
from mqttq.lake.stream import _object_fields

TOPICS = ["a", "a/b", "a/b/c", "$SYS/x", "b/x", "/x"]


@pytest.mark.parametrize(
    ("topic_filter", "matched"),
    [
        ("#", ["a", "a/b", "a/b/c", "b/x", "/x"]),
        ("+", ["a"]),
        ("a/#", ["a", "a/b", "a/b/c"]),
        ("a/+/c", ["a/b/c"]),
        ("+/x", ["b/x", "/x"]),
        ("$SYS/#", ["$SYS/x"]),
    ],
)
def test_topic_filters_match_as_mqtt_says(topic_filter: str, matched: list[str]) -> None:
    pattern = filter_regex(topic_filter)
    assert [t for t in TOPICS if re.search(pattern, t)] == matched


@pytest.mark.parametrize("bad", ["", "a/#/b", "a+", "a/b#"])
def test_a_bad_filter_is_named(bad: str) -> None:
    with pytest.raises(LakeError, match="not a valid MQTT topic filter"):
        filter_regex(bad)


def test_the_schema_table() -> None:
    raw = {"sensors/+/temp": {"temperature": "double", "unit": "STRING"}, "x/#": {"n": "int"}}
    assert parse_typed_schemas(raw) == (
        TypedSchema("sensors/+/temp", (("temperature", "double"), ("unit", "string"))),
        TypedSchema("x/#", (("n", "int"),)),
    )
    with pytest.raises(LakeError, match=r"temperature: unknown type 'decimal'"):
        parse_typed_schemas({"a": {"temperature": "decimal"}})
    with pytest.raises(LakeError, match="topic: not a usable column name"):
        parse_typed_schemas({"a": {"topic": "string"}})
    with pytest.raises(LakeError, match="double, but string under another filter"):
        parse_typed_schemas({"a": {"t": "string"}, "b": {"t": "double"}})


def test_the_properties_udf_body() -> None:
    props = Properties(
        payload_format_indicator=1,
        content_type="text/plain",
        response_topic="r/t",
        correlation_data=b"\x00c",
        user_properties=[("k", "v"), ("k", "w")],
    )
    packed = encode_properties(props, PacketType.PUBLISH)
    out = _decode_properties_series(
        pd.Series([packed, None, b"\x00", b"\x02\x99\x00", b"\x05\x03"])
    )
    rows = out.to_dict("records")
    assert rows[0] == {
        "error": None,
        "payload_format": 1,
        "content_type": "text/plain",
        "response_topic": "r/t",
        "correlation_data": b"\x00c",
        "user_properties": [{"key": "k", "value": "v"}, {"key": "k", "value": "w"}],
    }
    assert rows[1]["error"] is None and rows[1]["user_properties"] == []
    assert rows[2]["error"] is None
    assert rows[3]["error"] == "corrupt header: properties: unknown property identifier 0x99"
    assert rows[4]["error"] == "corrupt header: properties: truncated"


def _stage(staged: Path, names: list[str]) -> None:
    folder = staged / "tenant=a" / "date=2026-01-01"
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_bytes(name.encode())


def test_publishing_a_batch_again_replaces_what_an_interrupted_attempt_left(tmp_path: Path) -> None:
    table = tmp_path / "messages"
    _stage(tmp_path / "s1", ["part-x1.parquet", "part-x2.parquet", "part-x3.parquet"])
    assert publish_staged(tmp_path / "s1", table, 7) == 3
    # The rerun of batch 7 writes the same rows split differently: 2 files, not 3.
    _stage(tmp_path / "s2", ["part-y1.parquet", "part-y2.parquet"])
    assert publish_staged(tmp_path / "s2", table, 7) == 2
    folder = table / "tenant=a" / "date=2026-01-01"
    assert sorted(p.name for p in folder.iterdir()) == [
        "part-000000000007-00000.parquet",
        "part-000000000007-00001.parquet",
    ]
    assert (folder / "part-000000000007-00000.parquet").read_bytes() == b"part-y1.parquet"


def test_the_fields_infer_keeps() -> None:
    schema = (
        "OBJECT<humidity: BIGINT, nested: OBJECT<a: INT>, t: DECIMAL(3,1), u: STRING, "
        "topic: STRING>"
    )
    assert _object_fields(schema) == [("humidity", "bigint"), ("t", "double"), ("u", "string")]
    assert _object_fields("ARRAY<INT>") == []


def test_the_terminal_line_of_a_batch() -> None:
    """On a terminal each batch is one line: messages, quarantined, untyped, rate,
    duration and the lag behind the log."""
    import io  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from mqttq.cli.lake import _printer  # noqa: PLC0415

    out = io.StringIO()
    emit = _printer(Console(file=out, width=200, highlight=False))
    emit(
        {
            "event": "batch",
            "batch": 3,
            "messages": 901877,
            "quarantined": 2,
            "untyped": 12,
            "processed_rate": 30980.4,
            "batch_seconds": 29.1,
            "lag": 1220,
        }
    )
    assert out.getvalue() == (
        "batch 3: 901,877 messages (2 quarantined, 12 untyped) · 30,980 msg/s · 29.1s · lag 1,220\n"
    )


def test_hourly_partitions_close_with_their_hour(tmp_path: Path) -> None:
    from datetime import UTC, datetime  # noqa: PLC0415

    from mqttq.lake.partitions import Partition, partitions  # noqa: PLC0415

    table = tmp_path / "messages"
    for hour in ("09", "10"):
        (table / "tenant=a" / "date=2026-01-01" / f"hour={hour}").mkdir(parents=True)
    (table / "tenant=a" / ".date=2026-01-01.compact-1").mkdir()  # hidden: not a partition
    found = sorted(str(p.relative) for p in partitions(table))
    assert found == ["tenant=a/date=2026-01-01/hour=09", "tenant=a/date=2026-01-01/hour=10"]
    now = datetime(2026, 1, 1, 10, 30, tzinfo=UTC)
    nine = Partition(table, Path("tenant=a/date=2026-01-01/hour=09"))
    ten = Partition(table, Path("tenant=a/date=2026-01-01/hour=10"))
    assert (nine.closed(now), ten.closed(now)) == (True, False)


def test_infer_takes_the_type_most_payloads_give_a_key() -> None:
    from mqttq.lake.stream import majority_fields  # noqa: PLC0415

    shapes = [
        ("OBJECT<temperature: DECIMAL(3,1), unit: STRING>", 30),
        ("OBJECT<temperature: BIGINT>", 5),
        ("OBJECT<temperature: STRING>", 1),
        ("OBJECT<ok: BOOLEAN>", 2),
    ]
    assert majority_fields(shapes) == [
        ("temperature", "double"),
        ("unit", "string"),
        ("ok", "boolean"),
    ]
