"""Lake rows written with pyarrow (the layout's schema, no Spark, no mqttq writer): known
input for the report, query and replay tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from mqttq.lake.arrow_files import write_rows
from mqttq.lake.layout import LakeInfo, arrow_message_schema, write_lake_info


@dataclass(frozen=True)
class Row:
    """One archived message (the fields the tests vary; the rest take defaults)."""

    tenant: str
    client_id: str
    topic: str
    created_at: datetime
    payload: bytes = b"x"
    qos: int = 1
    retain: bool = False
    offset: int = 0
    partition: int = 0
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    user_properties: tuple[tuple[str, str], ...] = ()
    expires_at: datetime | None = None


def at(text: str) -> datetime:
    """An ISO time, UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def arrow_rows(rows: list[Row]) -> pa.Table:
    """`rows` as a table of the layout's daily schema."""

    def text(payload: bytes) -> str | None:
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            return None

    columns = {
        "tenant": [r.tenant for r in rows],
        "date": [r.created_at.strftime("%Y-%m-%d") for r in rows],
        "topic": [r.topic for r in rows],
        "topic_levels": [r.topic.split("/") for r in rows],
        "client_id": [r.client_id for r in rows],
        "qos": [r.qos for r in rows],
        "retain": [r.retain for r in rows],
        "created_at": [r.created_at for r in rows],
        "expires_at": [r.expires_at for r in rows],
        "content_type": [r.content_type for r in rows],
        "response_topic": [r.response_topic for r in rows],
        "correlation_data": [r.correlation_data for r in rows],
        "payload_format": [None for _ in rows],
        "user_properties": [[{"key": k, "value": v} for k, v in r.user_properties] for r in rows],
        "payload": [r.payload for r in rows],
        "payload_text": [text(r.payload) for r in rows],
        "kafka_partition": [r.partition for r in rows],
        "kafka_offset": [r.offset for r in rows],
    }
    return pa.Table.from_pydict(columns, schema=arrow_message_schema())


def write_lake(lake: Path, rows: list[Row], name: str = "part-000000000000-00000.parquet") -> None:
    """A daily lake holding `rows` (written by pyarrow)."""
    write_lake_info(lake, LakeInfo())
    write_rows(lake / "messages", arrow_rows(rows), name)
