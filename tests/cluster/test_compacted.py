"""mqttq/cluster/compacted.py against a real Kafka: a compacted one-partition topic read
to its end at start (marker record), other processes' writes applied, own writes not."""

from __future__ import annotations

import asyncio

import pytest

from mqttq.cluster.compacted import CompactedTopic
from mqttq.errors import StorageError
from mqttq.storage.kafka.client import KafkaAdmin, KafkaProducer
from tests.kafka_service import KafkaServer

pytestmark = pytest.mark.slow

DEADLINE = 60.0


class Copy:
    """An in-memory copy of the topic as a replica applies it."""

    def __init__(self) -> None:
        self.state: dict[str, bytes] = {}
        self.changed = asyncio.Event()

    def apply(self, key: str, value: bytes | None) -> None:
        if value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value
        self.changed.set()

    async def wait_for(self, key: str, value: bytes | None) -> None:
        async with asyncio.timeout(DEADLINE):
            while self.state.get(key) != value:
                self.changed.clear()
                await self.changed.wait()


def test_replicas_catch_up_apply_others_and_skip_their_own(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}client.session"

    async def scenario() -> None:
        producer = KafkaProducer(kafka.bootstrap)
        first_copy = Copy()
        first = CompactedTopic(kafka.bootstrap, topic, "node-1", "w1", producer, first_copy.apply)
        await first.open()
        assert first_copy.state == {}
        await asyncio.gather(*(first.put(f"c{n}", b"v%d" % n) for n in range(50)))
        await first.put("c7", b"seven")
        await first.delete("c8")

        # A node started later knows everything written before it, once open returns.
        second_copy = Copy()
        second = CompactedTopic(kafka.bootstrap, topic, "node-2", "w2", producer, second_copy.apply)
        await second.open()
        expected = {f"c{n}": b"v%d" % n for n in range(50) if n != 8}
        expected["c7"] = b"seven"
        assert second_copy.state == expected

        # Writes of one process reach the other, never itself.
        await second.put("c1", b"from-2")
        await first_copy.wait_for("c1", b"from-2")
        await first.delete("c2")
        await second_copy.wait_for("c2", None)
        assert "c1" not in first_copy.state or first_copy.state["c1"] == b"from-2"
        assert second_copy.state.get("c1") == b"v1"  # its own write: applied by the writer
        # A restarted node (same node id, new process) reads its own past writes back.
        third_copy = Copy()
        third = CompactedTopic(kafka.bootstrap, topic, "node-1", "w3", producer, third_copy.apply)
        await third.open()
        assert third_copy.state["c7"] == b"seven"
        assert third_copy.state["c1"] == b"from-2"
        assert "c2" not in third_copy.state
        assert not any(key.startswith("\x00") for key in third_copy.state)  # no markers
        for replica in (first, second, third):
            await replica.close()
        await producer.close()

    asyncio.run(scenario())


def test_a_topic_with_several_partitions_is_refused(kafka: KafkaServer, kafka_prefix: str) -> None:
    topic = f"{kafka_prefix}client.subscriptions"

    async def scenario() -> None:
        await KafkaAdmin(kafka.bootstrap).ensure_topic(topic, 3)
        producer = KafkaProducer(kafka.bootstrap)
        replica = CompactedTopic(kafka.bootstrap, topic, "n", "w", producer, Copy().apply)
        with pytest.raises(StorageError, match="3 partitions"):
            await replica.open()
        await replica.close()
        await producer.close()

    asyncio.run(scenario())
