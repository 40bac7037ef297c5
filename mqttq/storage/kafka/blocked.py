"""KafkaBlockedStore: the blocked-client entries of a cluster, in the compacted Kafka topic
`<prefix>client.blocked` (TBMQ keeps them in `tbmq.client.blocked`).

One partition (two writes of one entry must be read in the order they were made), keyed by
the entry's id, the value the entry's JSON, a tombstone for a removal. Every node reads the
whole topic from its first offset (assigned, no consumer group: no rebalance, no committed
offset) into memory at open, up to the end offset Kafka reported then, and goes on reading;
an entry added on any node (or by `mqttq blocked add` on the topic) thus reaches every node
within a poll. Each record carries a `writer` header, one random id per process: a process
skips its own records when they come back (it applied them when it wrote them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Final

from mqttq.auth.blocked.entries import BlockedClient, decode_entry, encode_entry
from mqttq.auth.blocked.ports import BlockedStoreError, Changed
from mqttq.errors import StorageError
from mqttq.storage.kafka.client import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    KafkaProducer,
    Record,
    TopicPartition,
)

__all__ = ["TOPIC", "KafkaBlockedStore"]

logger = logging.getLogger("mqttq.storage.kafka.blocked")

TOPIC: Final = "client.blocked"
"""The topic's name after the `[kafka] topic_prefix`."""
WRITER_HEADER: Final = "writer"
READ_BATCH: Final = 500
READ_WAIT: Final = 0.1
LISTEN_CONFIG: Final = {"fetch.min.bytes": 1, "fetch.wait.max.ms": 200}


class KafkaBlockedStore:
    """The BlockedStore on a compacted Kafka topic (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic_prefix: str,
        *,
        client_id: str = "mqttq-blocked",
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = f"{topic_prefix}{TOPIC}"
        self.where = f"kafka: topic {self.topic} at {bootstrap_servers}"
        self.writer = uuid.uuid4().hex
        self._client_id = client_id
        self._timeout = timeout
        self._entries: dict[str, BlockedClient] = {}
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed: Changed | None = None

    async def open(self) -> None:
        """Create the topic when missing, read it to its end, then keep reading."""
        try:
            await self._open()
        except StorageError as exc:
            await self.close()
            raise BlockedStoreError(f"{self.where}: {exc}") from None

    async def _open(self) -> None:
        admin = KafkaAdmin(self.bootstrap_servers, client_id=self._client_id)
        await admin.ensure_topic(
            self.topic, 1, {"cleanup.policy": "compact"}, timeout=self._timeout
        )
        partition = TopicPartition(self.topic, 0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:  # a topic created a moment ago may have no leader yet
            try:
                end = (await admin.end_offsets([partition], timeout=self._timeout))[partition]
                break
            except KafkaClientError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)
        self._producer = KafkaProducer(self.bootstrap_servers, client_id=self._client_id)
        consumer = self._consumer = KafkaConsumer(
            self.bootstrap_servers,
            f"{self.topic}.{self.writer}",
            [],
            client_id=self._client_id,
            assign={partition: OFFSET_BEGINNING},
            config=LISTEN_CONFIG,
        )
        last = -1
        while last < end - 1:
            if loop.time() > deadline:
                raise BlockedStoreError(f"{self.where}: not read to its end in time")
            for record in await consumer.poll_batch(READ_BATCH, READ_WAIT):
                self._read(record)
                last = max(last, record.offset)
        self._task = loop.create_task(self._read_forever(consumer), name="blocked clients read")

    async def _read_forever(self, consumer: KafkaConsumer) -> None:
        while True:
            try:
                records = await consumer.poll_batch(READ_BATCH, READ_WAIT)
            except KafkaClientError as exc:
                logger.warning("%s: read failed (retrying): %s", self.topic, exc)
                await asyncio.sleep(1.0)
                continue
            for record in records:
                self._read(record)

    def _read(self, record: Record) -> None:
        if record.key is None:
            return
        own = any(
            name == WRITER_HEADER and value in (self.writer, self.writer.encode())
            for name, value in record.headers
        )
        if own:
            return
        entry_id = record.key.decode(errors="replace")
        entry: BlockedClient | None = None
        if record.value:
            try:
                entry = decode_entry(record.value)
            except ValueError as exc:
                logger.error("skipping record %s: %s", record.where, exc)
                return
            self._entries[entry_id] = entry
        elif self._entries.pop(entry_id, None) is None:
            return
        if self._changed is not None:
            self._changed(entry_id, entry)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.close()
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.close()

    async def load(self) -> list[BlockedClient]:
        return list(self._entries.values())

    async def _produce(self, key: str, value: bytes | None) -> None:
        if self._producer is None:
            raise BlockedStoreError(f"{self.where} is not open")
        headers = [(WRITER_HEADER, self.writer.encode())]
        try:
            await self._producer.produce(self.topic, value, key.encode(), headers)
        except KafkaClientError as exc:
            raise BlockedStoreError(f"{self.where}: {exc}") from None

    async def put(self, entry: BlockedClient) -> None:
        await self._produce(entry.id, encode_entry(entry))
        self._entries[entry.id] = entry

    async def delete(self, entry_id: str) -> bool:
        existed = entry_id in self._entries
        await self._produce(entry_id, None)
        self._entries.pop(entry_id, None)
        return existed

    def follow(self, changed: Changed) -> None:
        self._changed = changed
