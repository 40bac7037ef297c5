"""The layout of a lake directory: the contract every lake writer and reader shares.

A lake `DIR` holds:

- `DIR/messages/`: Parquet, Hive-style partitions `tenant=<tenant>/date=<YYYY-MM-DD>` (and
  `/hour=<H>` when the lake was created hourly: the hour 0-23 as Spark writes an int, `hour=0`
  at midnight), the columns of `MESSAGE_COLUMNS` (typed columns from JSON payloads come after
  them, plus `payload_typed_ok`).
- `DIR/quarantine/`: records that are not mqttq's, with the `reason`, partitioned by `date`.
- `DIR/_lake.json`: `{"version": 1, "partitioning": [...], "format": "parquet"|"delta"}`,
  written once when the lake is created; a later run with other settings is refused.
- `DIR/_checkpoints/`: the streaming job's checkpoints; `DIR/_embedded/`: the embedded
  sink's own state; `DIR/_trash/`: what compact and expire took away, kept a while for
  readers that listed it before the swap.

Any Parquet reader (pyarrow, DuckDB, Spark) reads `DIR/messages` without mqttq: names
starting with `_` or `.` are ignored by all of them, which is why every file or folder
that is not data starts so.

This module imports neither pyspark nor pyarrow at import time.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mqttq.errors import MqttqError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "CHECKPOINTS",
    "EMBEDDED",
    "LAKE_FILE",
    "LAYOUT_VERSION",
    "MESSAGES",
    "MESSAGE_COLUMNS",
    "PARTITIONS_DAILY",
    "PARTITIONS_HOURLY",
    "QUARANTINE",
    "QUARANTINE_COLUMNS",
    "TRASH",
    "LakeError",
    "LakeInfo",
    "arrow_message_schema",
    "arrow_quarantine_schema",
    "read_lake_info",
    "spark_message_schema",
    "spark_quarantine_schema",
    "write_lake_info",
]

LAYOUT_VERSION: Final = 1
MESSAGES: Final = "messages"
QUARANTINE: Final = "quarantine"
CHECKPOINTS: Final = "_checkpoints"
EMBEDDED: Final = "_embedded"
TRASH: Final = "_trash"
LAKE_FILE: Final = "_lake.json"

PARTITIONS_DAILY: Final = ("tenant", "date")
PARTITIONS_HOURLY: Final = ("tenant", "date", "hour")
FORMATS: Final = ("parquet", "delta")

# (name, Spark SQL type, nullable): the order is the order of the Parquet columns (the
# partition columns `tenant`, `date`, `hour` are folders, not columns in the files).
MESSAGE_COLUMNS: Final[tuple[tuple[str, str, bool], ...]] = (
    ("tenant", "string", False),
    ("date", "string", False),
    ("topic", "string", False),
    ("topic_levels", "array<string>", False),
    ("client_id", "string", False),
    ("qos", "int", False),
    ("retain", "boolean", False),
    ("created_at", "timestamp", False),
    ("expires_at", "timestamp", True),
    ("content_type", "string", True),
    ("response_topic", "string", True),
    ("correlation_data", "binary", True),
    ("payload_format", "int", True),
    ("user_properties", "array<struct<key:string,value:string>>", False),
    ("payload", "binary", False),
    ("payload_text", "string", True),
    ("kafka_partition", "int", False),
    ("kafka_offset", "bigint", False),
)
"""The columns of `DIR/messages` in a daily lake; an hourly lake adds `hour` int after
`date`. `kafka_partition` -1 means written by the embedded sink (`kafka_offset` is then a
per-lake sequence), so (kafka_partition, kafka_offset) is unique in a lake."""
HOUR_COLUMN: Final = ("hour", "int", False)
TYPED_OK_COLUMN: Final = "payload_typed_ok"
"""Boolean after the typed columns: false when the payload did not fit the schema of its
topic (it stays in `payload`), null on topics without a schema."""

QUARANTINE_COLUMNS: Final[tuple[tuple[str, str, bool], ...]] = (
    ("date", "string", False),
    ("reason", "string", False),
    ("kafka_topic", "string", False),
    ("kafka_partition", "int", False),
    ("kafka_offset", "bigint", False),
    ("kafka_timestamp", "timestamp", True),
    ("key", "binary", True),
    ("value", "binary", True),
    ("headers", "array<struct<key:string,value:binary>>", True),
)
"""The columns of `DIR/quarantine` (partitioned by `date`, the Kafka timestamp's UTC day)."""


class LakeError(MqttqError):
    """A lake directory that cannot be used as asked (the CLI prints the one line)."""


@dataclass(frozen=True)
class LakeInfo:
    """What `DIR/_lake.json` records: the layout version, the partition columns, the format."""

    partitioning: tuple[str, ...] = PARTITIONS_DAILY
    format: str = "parquet"
    version: int = LAYOUT_VERSION

    @property
    def hourly(self) -> bool:
        """True when partitions go down to the hour."""
        return "hour" in self.partitioning

    def to_json(self) -> dict[str, Any]:
        """The `_lake.json` document."""
        return {
            "version": self.version,
            "partitioning": list(self.partitioning),
            "format": self.format,
        }


def read_lake_info(lake: Path) -> LakeInfo | None:
    """The lake's `_lake.json`, or None when `lake` has none yet. Raises `LakeError` for a
    file that is not one this version of mqttq wrote."""
    path = lake / LAKE_FILE
    try:
        document = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LakeError(f"{path}: not readable ({exc}); is {lake} a lake directory?") from None
    if not isinstance(document, dict) or document.get("version") != LAYOUT_VERSION:
        raise LakeError(f"{path}: unknown lake layout version; expected {LAYOUT_VERSION}")
    partitioning = tuple(document.get("partitioning") or ())
    if partitioning not in (PARTITIONS_DAILY, PARTITIONS_HOURLY):
        raise LakeError(f"{path}: unknown partitioning {list(partitioning)}")
    fmt = document.get("format", "parquet")
    if fmt not in FORMATS:
        raise LakeError(f"{path}: unknown format {fmt!r}")
    return LakeInfo(partitioning, fmt)


def write_lake_info(lake: Path, info: LakeInfo) -> None:
    """Write `_lake.json` atomically (a temporary file renamed over it)."""
    lake.mkdir(parents=True, exist_ok=True)
    temporary = lake / f".{LAKE_FILE}.{os.getpid()}"
    temporary.write_text(json.dumps(info.to_json(), indent=2) + "\n", "utf-8")
    temporary.replace(lake / LAKE_FILE)


def message_columns(hourly: bool) -> tuple[tuple[str, str, bool], ...]:
    """`MESSAGE_COLUMNS`, with `hour` after `date` when `hourly`."""
    if not hourly:
        return MESSAGE_COLUMNS
    return (*MESSAGE_COLUMNS[:2], HOUR_COLUMN, *MESSAGE_COLUMNS[2:])


def spark_message_schema(hourly: bool = False) -> StructType:
    """The Spark schema of a `DIR/messages` row (partition columns included)."""
    return _spark_schema(message_columns(hourly))


def spark_quarantine_schema() -> StructType:
    """The Spark schema of a `DIR/quarantine` row (partition column included)."""
    return _spark_schema(QUARANTINE_COLUMNS)


def _spark_schema(columns: tuple[tuple[str, str, bool], ...]) -> StructType:
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string  # noqa: PLC0415

    return StructType(
        [
            StructField(name, _parse_datatype_string(kind), nullable)
            for name, kind, nullable in columns
        ]
    )


def arrow_message_schema(hourly: bool = False) -> pa.Schema:
    """The Arrow schema of a `DIR/messages` row (partition columns included; timestamps
    in microseconds, UTC)."""
    return _arrow_schema(message_columns(hourly))


def arrow_quarantine_schema() -> pa.Schema:
    """The Arrow schema of a `DIR/quarantine` row (partition column included)."""
    return _arrow_schema(QUARANTINE_COLUMNS)


def _arrow_schema(columns: tuple[tuple[str, str, bool], ...]) -> pa.Schema:
    import pyarrow as pa  # noqa: PLC0415

    scalar = {
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "array<string>": pa.list_(pa.string()),
        "array<struct<key:string,value:string>>": pa.list_(
            pa.struct([("key", pa.string()), ("value", pa.string())])
        ),
        "array<struct<key:string,value:binary>>": pa.list_(
            pa.struct([("key", pa.string()), ("value", pa.binary())])
        ),
    }
    return pa.schema([pa.field(name, scalar[kind], nullable) for name, kind, nullable in columns])
