"""A compacted Kafka topic replicated into every node's memory (TBMQ's cluster state).

`CompactedTopic` owns one topic with `cleanup.policy=compact` and exactly one partition (a
topic of several partitions would let two writes of one key be read in either order:
TBMQ issue #255; one found with more partitions is refused at start). Every node reads
the whole topic with `assign` from the first offset (no consumer group, so no rebalance
and no committed offset), and hands each record another process wrote to `apply`
(replica.py says which). `open` returns once the topic was read to its end: it writes a
marker record with a random key, reads until the marker comes back, then tombstones it.

Writes go through the caller's producer (acks=all, idempotent): `put(key, value)` and
`delete(key)` return the produce future, so a caller can wait for durability.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from mqttq.cluster.reading import (
    LISTEN_CONFIG,
    READ_BATCH,
    READ_WAIT,
    partitions_of,
    read_forever,
    stop_reading,
)
from mqttq.cluster.replica import ReplicaReader, new_marker, record_headers
from mqttq.errors import StorageError
from mqttq.storage.kafka.client import (
    OFFSET_BEGINNING,
    Delivered,
    KafkaAdmin,
    KafkaConsumer,
    KafkaProducer,
    Record,
    TopicPartition,
)

__all__ = ["COMPACT_CONFIG", "CompactedTopic"]

logger = logging.getLogger("mqttq.cluster.compacted")

COMPACT_CONFIG: Final = {"cleanup.policy": "compact"}

Apply = Callable[[str, bytes | None], None]
"""Called on the event loop with (key, value), value None for a delete."""


class CompactedTopic:
    """One replicated compacted topic (see the module docstring)."""

    def __init__(  # noqa: PLR0917 (what a replica is made of)
        self,
        bootstrap_servers: str,
        topic: str,
        node_id: str,
        writer: str,
        producer: KafkaProducer,
        apply: Apply,
        *,
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.node_id = node_id
        self._headers = record_headers(node_id, writer)
        self._reader = ReplicaReader(writer)
        self._producer = producer
        self._apply = apply
        self._timeout = timeout
        self._consumer: KafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self.applied = 0
        """Records of other processes applied so far."""

    async def open(self) -> None:
        """Create the topic when missing, read it to its end, then keep reading.
        Raises StorageError when Kafka does not answer or the topic has more than one
        partition."""
        admin = KafkaAdmin(self.bootstrap_servers)
        created = await admin.ensure_topic(self.topic, 1, COMPACT_CONFIG, timeout=self._timeout)
        if created:
            logger.info("created compacted Kafka topic %s", self.topic)
        partitions = await partitions_of(admin, self.topic, self._timeout)
        if partitions != 1:
            raise StorageError(
                f"kafka topic {self.topic!r} has {partitions} partitions: a replicated "
                "topic must have exactly one (updates of one key would be reordered)"
            )
        self._consumer = KafkaConsumer(
            self.bootstrap_servers,
            f"{self.topic}.replica.{self.node_id}",
            [],
            assign={TopicPartition(self.topic, 0): OFFSET_BEGINNING},
            config=LISTEN_CONFIG,
        )
        marker = new_marker()
        self._reader.marker = marker
        self._reader.caught_up = False
        await self._producer.produce(self.topic, b"1", marker.encode(), self._headers)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while not self._reader.caught_up:
            if loop.time() > deadline:
                raise StorageError(f"kafka: {self.topic!r} not read to its end in time")
            await self._read_once()
        await self._producer.produce(self.topic, None, marker.encode(), self._headers)
        self._task = loop.create_task(read_forever(self._consumer, self._handle, self.topic))

    async def _read_once(self) -> None:
        assert self._consumer is not None
        self._handle(await self._consumer.poll_batch(READ_BATCH, READ_WAIT))

    def _handle(self, records: list[Record]) -> None:
        reader = self._reader
        apply = self._apply
        for record in records:
            change = reader.read(record.key, record.value, record.headers)
            if change is not None:
                self.applied += 1
                try:
                    apply(change.key, change.value)
                except StorageError as exc:
                    logger.error("%s: record %r not applied: %s", self.topic, change.key, exc)

    def put(self, key: str, value: bytes) -> asyncio.Future[Delivered]:
        """Write `key` = `value`; resolves once Kafka has it."""
        return self._producer.produce(self.topic, value, key.encode(), self._headers)

    def delete(self, key: str) -> asyncio.Future[Delivered]:
        """Write a tombstone for `key`; resolves once Kafka has it."""
        return self._producer.produce(self.topic, None, key.encode(), self._headers)

    async def close(self) -> None:
        """Stop reading. Idempotent."""
        task, self._task = self._task, None
        consumer, self._consumer = self._consumer, None
        await stop_reading(task, consumer)
