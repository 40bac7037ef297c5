"""Helpers for the `kafka` sink's tests: read back what the sink wrote to a real Kafka."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from confluent_kafka.admin import AdminClient

from mqttq.integrations.record import Delivery
from mqttq.integrations.sinks.kafka import KafkaSink, KafkaSinkSettings
from mqttq.storage.kafka.client import OFFSET_BEGINNING, KafkaConsumer, Record, TopicPartition

DEADLINE = 60.0
"""Bounds a hang while reading records back; never a performance bound."""


def settings(where: str = "integration[0]", **table: Any) -> KafkaSinkSettings:
    """`KafkaSinkSettings.from_table` of `table`, as the spec parser would call it."""
    return KafkaSinkSettings.from_table(table, where)


async def read_records(bootstrap: str, topic: str, count: int) -> list[Record]:
    """The first `count` records of partition 0 of `topic` (the test Kafka makes topics of
    one partition), in offset order; fails after DEADLINE when fewer come."""
    consumer = KafkaConsumer(
        bootstrap, f"{topic}.reader", [], assign={TopicPartition(topic, 0): OFFSET_BEGINNING}
    )
    records: list[Record] = []
    try:
        async with asyncio.timeout(DEADLINE):
            while len(records) < count:
                records += await consumer.poll_batch(count - len(records), 0.5)
    finally:
        await consumer.close()
    return records


async def send_all(sink: KafkaSink, batch: list[Delivery]) -> list[Any]:
    """Open `sink`, send `batch`, close; the rejected deliveries."""
    await sink.open()
    try:
        return list(await sink.send(batch))
    finally:
        await sink.close()


async def topic_names(bootstrap: str) -> set[str]:
    """The topics the cluster has (asking for all of them creates none)."""

    def names() -> set[str]:
        return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics)

    return await asyncio.to_thread(names)


def deliveries(count: int, **fields: Any) -> list[Delivery]:
    """`count` deliveries `m0`, `m1`, ... with `fields` in common and seq 1, 2, ..."""
    common: Mapping[str, Any] = {"topic": "sensors/kitchen/temp", "client_id": "dev-1"} | fields
    return [
        Delivery(payload=b"m%d" % n, seq=n + 1, timestamp_ms=1_700_000_000_000 + n, **common)
        for n in range(count)
    ]
