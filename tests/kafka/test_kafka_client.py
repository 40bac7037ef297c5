"""mqttq/storage/kafka_client.py against a real Kafka: topic admin, the async producer's
delivery futures, the threaded consumer's batches, explicit commits, pause and resume."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.storage.kafka.client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    KafkaProducer,
    Record,
    TopicPartition,
)
from tests.kafka_service import KafkaServer

pytestmark = pytest.mark.slow

DEADLINE = 60.0


async def _read(consumer: KafkaConsumer, count: int) -> list[Record]:
    records: list[Record] = []
    async with asyncio.timeout(DEADLINE):
        while len(records) < count:
            records += await consumer.poll_batch(count - len(records), 0.5)
    return records


def test_admin_producer_consumer_round_trip(kafka: KafkaServer, kafka_prefix: str) -> None:
    topic = f"{kafka_prefix}client"

    async def scenario() -> None:
        admin = KafkaAdmin(kafka.bootstrap)
        assert await admin.ensure_topic(topic, 2, {"retention.ms": "3600000"}) is True
        assert await admin.ensure_topic(topic, 2) is False  # there already: left alone
        assert await admin.partitions(topic) == 2

        producer = KafkaProducer(kafka.bootstrap)
        sent = [producer.produce(topic, b"v%d" % n, b"key", [("h", b"%d" % n)]) for n in range(5)]
        delivered = await asyncio.gather(*sent)
        assert [d.offset for d in delivered] == [0, 1, 2, 3, 4]  # one key: one partition
        assert len({d.partition for d in delivered}) == 1
        await producer.close()

        consumer = KafkaConsumer(kafka.bootstrap, f"{kafka_prefix}g", [topic])
        records = await _read(consumer, 5)
        assert [(r.key, r.value, r.headers, r.offset) for r in records] == [
            (b"key", b"v%d" % n, [("h", b"%d" % n)], n) for n in range(5)
        ]
        part = TopicPartition(topic, records[0].partition)
        await consumer.commit({part: 3})
        assert (await consumer.committed([part]))[part] == 3
        await consumer.pause([part])
        await consumer.resume([part])
        await consumer.close()

        # A new member of the group starts at the committed offset.
        again = KafkaConsumer(kafka.bootstrap, f"{kafka_prefix}g", [topic])
        assert [r.value for r in await _read(again, 2)] == [b"v3", b"v4"]
        await again.close()

    asyncio.run(scenario())


def test_produce_to_an_unreachable_kafka_fails_within_the_timeout() -> None:
    async def scenario() -> None:
        producer = KafkaProducer("127.0.0.1:1", delivery_timeout_ms=1000)
        with pytest.raises(KafkaClientError, match="kafka: did not confirm"):
            await asyncio.wait_for(producer.produce("t", b"v"), DEADLINE)
        await producer.close(0)

    asyncio.run(scenario())
