"""scripts/kafka-local.sh: a real Kafka that takes acks=all produces, several at once, and
keeps its data across a restart on the same port."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from tests.kafka_fixtures import KafkaFactory
from tests.kafka_service import SCRIPT, KafkaServer

pytestmark = pytest.mark.slow


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures: list[str] = []

    def report(error: object, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    for key, value in records:
        producer.produce(topic, value, key, on_delivery=report)
    assert producer.flush(30) == 0
    assert failures == []


def _read(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes | None, bytes | None]] = []
    try:
        for _attempt in range(120):
            if len(got) >= count:
                break
            for message in consumer.consume(count - len(got), timeout=0.5):
                assert message.error() is None, message.error()
                got.append((message.key(), message.value()))
    finally:
        consumer.close()
    return got


def test_records_go_in_and_come_back_in_order(kafka: KafkaServer, kafka_prefix: str) -> None:
    topic = f"{kafka_prefix}orders"
    records = [(b"client-1", f"m{i}".encode()) for i in range(50)]
    _produce(kafka.bootstrap, topic, records)
    assert _read(kafka.bootstrap, topic, 50) == records


def test_two_nodes_at_once_and_a_restart_keeps_the_data(kafka_factory: KafkaFactory) -> None:
    first, second = kafka_factory(), kafka_factory()
    assert first.port != second.port
    _produce(first.bootstrap, "a", [(b"k", b"on the first")])
    _produce(second.bootstrap, "a", [(b"k", b"on the second")])
    first.restart()  # same port, same data directory
    assert _read(first.bootstrap, "a", 1) == [(b"k", b"on the first")]
    assert _read(second.bootstrap, "a", 1) == [(b"k", b"on the second")]


def test_stop_of_a_stopped_node_is_a_no_op_and_bad_usage_says_how(tmp_path: object) -> None:
    done = subprocess.run([str(SCRIPT), "stop", str(tmp_path)], capture_output=True, check=False)
    assert done.returncode == 0
    done = subprocess.run([str(SCRIPT), "frobnicate"], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert "start DIR [PORT]" in done.stderr
