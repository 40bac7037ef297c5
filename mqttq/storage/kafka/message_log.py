"""The message log in Apache Kafka: topic `<prefix>msg.all` (issue 11).

Every PUBLISH is produced with the publisher's client id as the key (one partition per
publisher, so its messages stay in order), acks=all and idempotence. One consumer group
(`<prefix>msg.all.consumers`) reads the topic; offsets are committed only for batches the
broker marked `done`, so records read but not yet durably delivered are read again after a
crash. A brand-new group starts at the earliest offset: nothing a publisher had
acknowledged is skipped.

A node killed without leaving the group holds its partitions until its session times out
(SESSION_TIMEOUT_MS, Kafka's smallest by default): a node restarted at once reads again
after that. (Static membership would avoid the wait, but librdkafka fences a static member
for good when the Kafka node restarts under it.) A consumer that fails for good is
replaced by a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Final

from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import decode_message, encode_message
from mqttq.storage.kafka.client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
)
from mqttq.storage.ports import LogBatch

__all__ = ["MSG_ALL", "KafkaMessageLog"]

logger = logging.getLogger("mqttq.storage.kafka_log")

MSG_ALL: Final = "msg.all"
"""The log topic's name after the prefix."""
READ_BATCH: Final = 1000
"""Records read (and routed) as one batch at most."""
READ_WAIT: Final = 0.1
"""Seconds one read waits for a first record (also bounds how long a commit waits)."""
COMMIT_INTERVAL: Final = 0.05
"""Seconds between offset commits at most (each carries every batch done meanwhile)."""
REVOKE_WAIT: Final = 5.0
"""Seconds a rebalance waits at most for the records read from the partitions it takes
away to be done (delivered, durable), before it commits their offsets."""
LAG_INTERVAL: Final = 2.0
"""Seconds between consumer lag measurements."""

SESSION_TIMEOUT_MS: Final = 6_000
"""A node gone for this long loses its partitions to the other nodes of the group."""

Offsets = dict[TopicPartition, int]


class KafkaMessageLog:
    """`MessageLog` over one Kafka topic (see the module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        topic_prefix: str = "tbmq.",
        partitions: int = 12,
        produce_timeout_ms: int = 10_000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = f"{topic_prefix}{MSG_ALL}"
        self.group_id = f"{self.topic}.consumers"
        self.partitions = partitions
        self.produce_timeout_ms = produce_timeout_ms
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._pending: Offsets = {}
        self._read_upto: Offsets = {}
        """Per partition, the offset after the last record `read` returned."""
        self._done_upto: Offsets = {}
        """Per partition, the offset after the last record marked `done`."""
        self._closing = False
        """Set by `close`: leaving the group waits for nothing more to be done."""
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._retired: set[asyncio.Future[None]] = set()
        """Closing producers that failed for good."""
        self._lag = 0
        self._undecodable = 0

    async def open(self) -> None:
        """Create `<prefix>msg.all` when missing, then start producing and consuming.
        Raises KafkaClientError when Kafka does not answer within the produce timeout."""
        admin = KafkaAdmin(self.bootstrap_servers)
        created = await admin.ensure_topic(
            self.topic, self.partitions, timeout=self.produce_timeout_ms / 1000
        )
        if created:
            logger.info("created Kafka topic %s (%d partitions)", self.topic, self.partitions)
        self._producer = self._new_producer()
        self._consumer = self._new_consumer()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._commit_loop()), loop.create_task(self._lag_loop())]

    def _new_producer(self) -> KafkaProducer:
        return KafkaProducer(self.bootstrap_servers, delivery_timeout_ms=self.produce_timeout_ms)

    def _new_consumer(self) -> KafkaConsumer:
        return KafkaConsumer(
            self.bootstrap_servers,
            self.group_id,
            [self.topic],
            config={"session.timeout.ms": SESSION_TIMEOUT_MS},
            on_revoke=self._revoked,
        )

    def _revoked(self, partitions: set[TopicPartition]) -> Offsets:
        """On the consumer's thread, in a rebalance: the offsets to commit for the
        partitions going to another node. It first waits (REVOKE_WAIT at most) until the
        event loop has done every record already read from them, so the new owner reads
        nothing again. (Copies of dicts the event loop updates: a copy holds the GIL.)"""
        deadline = time.monotonic() + (0.0 if self._closing else REVOKE_WAIT)
        while True:
            read, done = dict(self._read_upto), dict(self._done_upto)
            behind = [p for p in partitions if done.get(p, -1) < read.get(p, -1)]
            if not behind or time.monotonic() >= deadline:
                break
            time.sleep(0.005)
        if behind:
            logger.warning(
                "rebalance: %d partitions given away before their records were done "
                "(read again by their next owner)",
                len(behind),
            )
        for part in partitions:  # a later owner moves them on: no stale offsets kept
            self._read_upto.pop(part, None)
            self._done_upto.pop(part, None)
        return {p: done[p] for p in partitions if p in done}

    def append(self, tenant: str, message: Message) -> asyncio.Future[Any]:
        """Produce `message`; resolves once every in-sync replica has it."""
        producer = self._producer
        if producer is None:
            raise StorageError("kafka: the message log is not open")
        if producer.failed:  # fatal for this producer: a new one, the old one closed
            logger.warning("the Kafka producer failed for good; starting a new one")
            closing = asyncio.ensure_future(producer.close(0))
            self._retired.add(closing)
            closing.add_done_callback(self._retired.discard)
            producer = self._producer = self._new_producer()
        key, value, headers = encode_message(tenant, message)
        return producer.produce(self.topic, value, key, headers)

    async def read(self) -> LogBatch | None:
        """Up to READ_BATCH records (waiting up to READ_WAIT for the first), decoded."""
        consumer = self._consumer
        if consumer is None:
            raise StorageError("kafka: the message log is not open")
        try:
            records = await consumer.poll_batch(READ_BATCH, READ_WAIT)
        except KafkaClientError:
            # Fatal for this consumer: start over from the committed offsets.
            self._consumer = self._new_consumer()
            with contextlib.suppress(KafkaClientError):
                await consumer.close()
            raise
        if not records:
            return None
        messages: list[tuple[str, Message]] = []
        position: Offsets = {}
        for record in records:
            position[TopicPartition(record.topic, record.partition)] = record.offset + 1
            try:
                messages.append(decode_message(record.key, record.value, record.headers))
            except StorageError as exc:
                self._undecodable += 1
                logger.error("skipping record %s: %s", record.where, exc)
        self._read_upto.update(position)
        return LogBatch(messages, position)

    def done(self, position: object) -> None:
        """Commit the batch ending at `position` soon (merged with later ones)."""
        assert isinstance(position, dict)
        self._pending.update(position)
        self._done_upto.update(position)
        self._wake.set()

    async def _commit_loop(self) -> None:
        # Sent without waiting for Kafka, at most every COMMIT_INTERVAL: a failed commit
        # is only counted, the next one carries the same or later offsets.
        while True:
            await self._wake.wait()
            self._wake.clear()
            consumer = self._consumer
            if self._pending and consumer is not None:
                offsets, self._pending = self._pending, {}
                try:
                    await consumer.commit(offsets, wait=False)
                except KafkaClientError as exc:
                    logger.warning("offsets not committed (retried later): %s", exc)
                    for part, offset in offsets.items():
                        self._pending.setdefault(part, offset)
                    self._wake.set()
            await asyncio.sleep(COMMIT_INTERVAL)

    async def _lag_loop(self) -> None:
        while True:
            await asyncio.sleep(LAG_INTERVAL)
            if self._consumer is not None:
                with contextlib.suppress(KafkaClientError):  # Kafka away: keep the last
                    self._lag = await self._consumer.lag()

    def statistics(self) -> dict[str, int]:
        """`log_consumer_lag`, `log_produce_queued`, `log_commit_failures`,
        `log_undecodable`."""
        queued = self._producer.statistics()["queued"] if self._producer is not None else 0
        failures = self._consumer.statistics()["commit_failures"] if self._consumer else 0
        return {
            "log_consumer_lag": self._lag,
            "log_produce_queued": queued,
            "log_commit_failures": failures,
            "log_undecodable": self._undecodable,
        }

    async def close(self) -> None:
        """Commit what is done, leave the group, flush the producer. Idempotent."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        self._closing = True
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            if self._pending:
                try:
                    await consumer.commit(self._pending)
                except KafkaClientError as exc:
                    logger.warning("offsets not committed at close: %s", exc)
                self._pending = {}
            await consumer.close()
        if self._retired:
            await asyncio.wait(self._retired)
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.close(self.produce_timeout_ms / 1000)
