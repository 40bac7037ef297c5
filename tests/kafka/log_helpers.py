"""Helpers of the message log tests: the broker.toml, and reading `msg.all` back."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer

DEADLINE = 60.0
"""Bounds a hang (a JVM on a loaded 2-core machine); never a performance bound."""


def log_config(
    bootstrap: str,
    prefix: str,
    extra: str = "",
    *,
    timeout_ms: int = 10_000,
    device: str = "sqlite",
) -> str:
    """A broker.toml that routes every PUBLISH through `<prefix>msg.all` (3 partitions);
    `extra`: more TOML sections; `device`: storage.device."""
    return f"""
[storage]
log = "kafka"
device = "{device}"
[kafka]
bootstrap_servers = "{bootstrap}"
topic_prefix = "{prefix}"
produce_timeout_ms = {timeout_ms}
msg_all_partitions = 3
{extra}
"""


def read_topic(
    bootstrap: str, topic: str, count: int
) -> list[tuple[bytes | None, bytes, dict[str, bytes]]]:
    """The first `count` records of `topic` (all partitions) as (key, value, headers), read
    by a consumer group of its own."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list[tuple[bytes | None, bytes, dict[str, bytes]]] = []
    deadline = time.monotonic() + DEADLINE
    try:
        while len(found) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(found), 1.0):
                if message.error() is None:
                    headers = {name: bytes(raw or b"") for name, raw in message.headers() or []}
                    found.append((message.key(), message.value() or b"", headers))
    finally:
        consumer.close()
    assert len(found) == count, f"read {len(found)} of {count} records of {topic}: {found}"
    return found


__all__ = ["DEADLINE", "log_config", "read_topic"]
