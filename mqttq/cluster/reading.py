"""Reading a node's own topics from where they end now (downlinks, session events).

What was written before a node started is of no concern to it (its connections are all
new), so its consumer is assigned every partition at the end offset Kafka reports at
start: no consumer group, no committed offsets, no rebalance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from mqttq.storage.kafka.client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    Record,
    TopicPartition,
)

__all__ = [
    "LISTEN_CONFIG",
    "open_at_end",
    "partitions_of",
    "read_forever",
    "retried",
    "stop_reading",
]

T = TypeVar("T")

logger = logging.getLogger("mqttq.cluster")

READ_BATCH: Final = 500
READ_WAIT: Final = 0.1
RETRY_PAUSE: Final = 1.0
LISTEN_CONFIG: Final = {"fetch.min.bytes": 1, "fetch.wait.max.ms": 500}
"""Consumers of the cluster's own topics: Kafka answers a fetch as soon as one record is
there (min 1 byte), so the wait bounds only how often an idle consumer asks, twice a
second instead of 100 times (librdkafka's CPU and Kafka's, on every node)."""


async def retried(call: Callable[[], Awaitable[T]], timeout: float) -> T:
    """`call()`, tried again while it raises KafkaClientError, for up to `timeout`
    seconds (a topic created a moment ago may not be in Kafka's metadata yet, or have no
    partition leader)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            return await call()
        except KafkaClientError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.2)


async def partitions_of(admin: KafkaAdmin, topic: str, timeout: float) -> int:
    """How many partitions `topic` has (see `retried`)."""
    return await retried(lambda: admin.partitions(topic, timeout=timeout), timeout)


async def open_at_end(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    topics: list[str],
    group_id: str,
    timeout: float,
) -> KafkaConsumer:
    """A consumer of every partition of `topics` (which exist), from their end now."""
    partitions: list[TopicPartition] = []
    for topic in topics:
        count = await partitions_of(admin, topic, timeout)
        partitions.extend(TopicPartition(topic, p) for p in range(count))
    ends = await retried(lambda: admin.end_offsets(partitions, timeout=timeout), timeout)
    return KafkaConsumer(bootstrap_servers, group_id, [], assign=ends, config=LISTEN_CONFIG)


async def read_forever(
    consumer: KafkaConsumer, handle: Callable[[list[Record]], None], what: str
) -> None:
    """Hand every batch `consumer` reads to `handle` (on the event loop) until cancelled."""
    while True:
        try:
            records = await consumer.poll_batch(READ_BATCH, READ_WAIT)
        except KafkaClientError as exc:
            logger.warning("%s: read failed (retrying): %s", what, exc)
            await asyncio.sleep(RETRY_PAUSE)
            continue
        if records:
            handle(records)


async def stop_reading(task: asyncio.Task[None] | None, consumer: KafkaConsumer | None) -> None:
    """Cancel a `read_forever` task, then close its consumer (either may be None)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if consumer is not None:
        await consumer.close()
