"""The Kafka side of a distributed broker as an operator reads it: the topics under the
cluster's `[kafka] topic_prefix` (message log, retained and session replicas, APPLICATION
clients' topics) with their partitions and end offsets, and the consumer groups under
that prefix with their state, members and lag (end offset minus committed offset, summed
over the partitions the group has committed on).

Read with librdkafka's AdminClient in a worker thread (its calls block), each call bounded
by a timeout; an embedded broker has no Kafka and answers empty lists.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, cast

from mqttq.errors import MqttqError

if TYPE_CHECKING:
    from mqttq.config import Settings

__all__ = ["KafkaStatusError", "KafkaStatusReader"]

JSON = dict[str, Any]

TIMEOUT: Final = 5.0
"""Seconds each Kafka request may take."""


class KafkaStatusError(MqttqError):
    """Kafka could not be read (answered 503)."""


class KafkaStatusReader:
    """Reads the Kafka view of `settings`' cluster, with one AdminClient kept for every
    read (made at the first; librdkafka's client is thread-safe and keeps its connections)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._admin: Any = None

    async def read(self) -> JSON:
        """{"distributed", "topic_prefix", "topics": [{name, partitions, end_offset}],
        "consumer_groups": [{group, state, members, partitions, lag}]}, ordered by name.
        Raises KafkaStatusError when Kafka cannot be read."""
        settings = self._settings
        if settings.storage.log != "kafka":
            return {
                "distributed": False,
                "topic_prefix": None,
                "topics": [],
                "consumer_groups": [],
            }
        kafka = settings.kafka
        try:
            topics, groups = await asyncio.to_thread(self._read, kafka.topic_prefix)
        except Exception as exc:  # librdkafka raises KafkaException and TimeoutError kinds
            raise KafkaStatusError(f"kafka cannot be read: {exc}") from None
        return {
            "distributed": True,
            "topic_prefix": kafka.topic_prefix,
            "topics": topics,
            "consumer_groups": groups,
        }

    def _read(self, prefix: str) -> tuple[list[JSON], list[JSON]]:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient  # noqa: PLC0415 (distributed only)

            bootstrap = self._settings.kafka.bootstrap_servers
            self._admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "mqttq-admin"})
        return _read(self._admin, prefix)


def _read(admin: Any, prefix: str) -> tuple[list[JSON], list[JSON]]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition  # noqa: PLC0415 (distributed only)
    from confluent_kafka.admin._listoffsets import OffsetSpec  # noqa: PLC0415

    metadata = admin.list_topics(timeout=TIMEOUT)
    names = sorted(name for name in metadata.topics if name.startswith(prefix))
    partitions = [
        TopicPartition(name, partition)
        for name in names
        for partition in sorted(metadata.topics[name].partitions)
    ]
    ends: dict[tuple[str, int], int] = {}
    if partitions:
        latest = cast(Any, OffsetSpec).latest()  # untyped in confluent_kafka
        futures = admin.list_offsets({tp: latest for tp in partitions}, request_timeout=TIMEOUT)
        for tp, future in futures.items():
            ends[(tp.topic, tp.partition)] = int(future.result(timeout=TIMEOUT).offset)
    topics = [
        {
            "name": name,
            "partitions": len(metadata.topics[name].partitions),
            "end_offset": sum(end for (topic, _), end in ends.items() if topic == name),
        }
        for name in names
    ]
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    group_ids = sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))
    groups: list[JSON] = []
    if group_ids:
        described = admin.describe_consumer_groups(group_ids, request_timeout=TIMEOUT)
        for group_id in group_ids:
            info = described[group_id].result(timeout=TIMEOUT)
            request = [ConsumerGroupTopicPartitions(group_id)]
            offsets = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)
            committed = offsets[group_id].result(timeout=TIMEOUT).topic_partitions or []
            lag = 0
            seen = 0
            for tp in committed:
                if tp.offset < 0:
                    continue
                seen += 1
                lag += max(0, ends.get((tp.topic, tp.partition), tp.offset) - tp.offset)
            state = info.state
            groups.append(
                {
                    "group": group_id,
                    "state": str(getattr(state, "name", state)).lower(),
                    "members": len(info.members),
                    "partitions": seen,
                    "lag": lag,
                }
            )
    return topics, groups
