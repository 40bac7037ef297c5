"""`mqttq lake replay`: archived messages published again into a broker (back-fills, tests).

Extract with pyarrow alone (no Spark): the `date` partitions of the window are read, then
rows kept by time ([since, until)), tenant and topic filter (each distinct topic matched
once). Rows are sent in the original order of each publisher: by client id, then Kafka
partition and offset (the embedded sink's partition -1 and sequence serve the same way),
then creation time. Each becomes one QoS 1 PUBLISH on `prefix + topic` with its payload and
MQTT 5.0 properties (content type, response topic, correlation data, payload format, user
properties in order and with duplicates, and the message expiry interval it was sent with);
the retain flag only with `keep_retain`. `publish` returns once every PUBACK came.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqttq.lake.layout import MESSAGES, LakeError, read_lake_info
from mqttq.lake.window import Window
from mqttq.routing.topics import filter_matches

if TYPE_CHECKING:
    import pyarrow as pa

    from mqttq.codec import Properties

__all__ = ["ReplayOptions", "ReplayResult", "ReplayRow", "publish", "select_rows"]

COLUMNS = (
    "client_id",
    "topic",
    "qos",
    "retain",
    "created_at",
    "expires_at",
    "content_type",
    "response_topic",
    "correlation_data",
    "payload_format",
    "user_properties",
    "payload",
    "kafka_partition",
    "kafka_offset",
)


@dataclass(frozen=True)
class ReplayRow:
    """One archived message to publish again."""

    client_id: str
    topic: str
    payload: bytes
    retain: bool
    content_type: str | None
    response_topic: str | None
    correlation_data: bytes | None
    payload_format: int | None
    user_properties: tuple[tuple[str, str], ...]
    message_expiry_interval: int | None


@dataclass(frozen=True)
class ReplayOptions:
    """Where to publish and how fast (`rate` messages per second, 0: as fast as the
    broker acknowledges)."""

    host: str
    port: int
    prefix: str = ""
    rate: float = 0.0
    username: str | None = None
    password: str | None = None
    keep_retain: bool = False
    client_id: str = ""


@dataclass
class ReplayResult:
    """What a replay did."""

    selected: int = 0
    published: int = 0
    refused: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        rate = self.published / self.seconds if self.seconds > 0 else 0.0
        return {
            "selected": self.selected,
            "published": self.published,
            "refused": self.refused,
            "seconds": round(self.seconds, 3),
            "rate": round(rate, 1),
        }


def _dataset(lake: Path) -> Any:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415

    info = read_lake_info(lake)
    fields = [("tenant", pa.string()), ("date", pa.string())]
    if info is not None and info.hourly:
        fields.append(("hour", pa.int32()))
    table = lake / MESSAGES
    if not table.is_dir():
        raise LakeError(f"no lake at {lake}: {table} is missing; give the lake's --lake DIR")
    return ds.dataset(
        str(table),
        format="parquet",
        partitioning=ds.partitioning(pa.schema(fields), flavor="hive"),
        ignore_prefixes=[".", "_"],
    )


def select_rows(
    lake: Path, window: Window, topic_filter: str, *, tenant: str | None = None
) -> pa.Table:
    """The rows to replay, in replay order (see the module docstring)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415

    dataset = _dataset(lake)
    first, last = window.dates(window.since)
    since = pa.scalar(window.since, pa.timestamp("us", tz="UTC"))
    until = pa.scalar(window.until, pa.timestamp("us", tz="UTC"))
    condition = (
        (ds.field("date") >= first)
        & (ds.field("date") <= last)
        & (ds.field("created_at") >= since)
        & (ds.field("created_at") < until)
    )
    if tenant is not None:
        condition = condition & (ds.field("tenant") == tenant)
    table = dataset.to_table(columns=list(COLUMNS), filter=condition)
    topics = pc.unique(table["topic"]).to_pylist()
    wanted = [t for t in topics if filter_matches(topic_filter, t)]
    if len(wanted) < len(topics):
        table = table.filter(pc.is_in(table["topic"], pa.array(wanted, pa.string())))
    return table.sort_by(
        [
            ("client_id", "ascending"),
            ("kafka_partition", "ascending"),
            ("kafka_offset", "ascending"),
            ("created_at", "ascending"),
        ]
    )


def replay_rows(table: pa.Table) -> Iterator[ReplayRow]:
    """`table`'s rows as `ReplayRow`s, batch by batch."""
    for batch in table.to_batches(max_chunksize=10_000):
        for row in batch.to_pylist():
            created, expires = row["created_at"], row["expires_at"]
            interval = None
            if expires is not None and created is not None:
                interval = max(1, round((expires - created).total_seconds()))
            yield ReplayRow(
                client_id=row["client_id"],
                topic=row["topic"],
                payload=row["payload"] or b"",
                retain=bool(row["retain"]),
                content_type=row["content_type"],
                response_topic=row["response_topic"],
                correlation_data=row["correlation_data"],
                payload_format=row["payload_format"],
                user_properties=tuple((p["key"], p["value"]) for p in row["user_properties"] or ()),
                message_expiry_interval=interval,
            )


def properties(row: ReplayRow) -> Properties:
    """The MQTT 5.0 properties `row` was published with."""
    from mqttq.codec import Properties  # noqa: PLC0415

    return Properties(
        payload_format_indicator=row.payload_format,
        message_expiry_interval=row.message_expiry_interval,
        content_type=row.content_type,
        response_topic=row.response_topic,
        correlation_data=row.correlation_data,
        user_properties=list(row.user_properties),
    )


async def publish(
    table: pa.Table,
    options: ReplayOptions,
    progress: Callable[[int], None] | None = None,
) -> ReplayResult:
    """Publish `table`'s rows (QoS 1, in order) and wait for every PUBACK. Raises
    `LakeError` (one line) when the broker cannot be reached or the connection ends."""
    from mqttq.integrations.bridge.client import ClientError, ClientOptions, MqttClient  # noqa: PLC0415

    result = ReplayResult(selected=table.num_rows)
    client = MqttClient(
        ClientOptions(
            host=options.host,
            port=options.port,
            client_id=options.client_id or f"mqttq-replay-{time.monotonic_ns() % 1_000_000}",
            username=options.username,
            password=options.password,
            session_expiry_interval=0,
        )
    )
    started = time.monotonic()
    futures = []
    try:
        await client.connect()
        for index, row in enumerate(replay_rows(table)):
            if options.rate > 0:
                ahead = started + index / options.rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)
            future = await client.publish(
                options.prefix + row.topic,
                row.payload,
                qos=1,
                retain=row.retain and options.keep_retain,
                properties=properties(row),
            )
            assert future is not None
            future.add_done_callback(lambda _f: progress(1) if progress else None)
            futures.append(future)
        codes = await client.wait_acks(futures)
    except ClientError as exc:
        raise LakeError(f"replay to {options.host}:{options.port} failed: {exc}") from None
    finally:
        await client.close()
    result.seconds = time.monotonic() - started
    result.refused = sum(1 for code in codes if code >= 0x80)
    result.published = len(codes) - result.refused
    return result
