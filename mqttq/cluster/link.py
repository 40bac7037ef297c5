"""ClusterLink: this node's Kafka side of the cluster (topics in the package docstring).

It owns one producer for every cluster record, the three replicated compacted topics, this
node's downlink topics and the session event topic, and hands what it reads to the
`ClusterHandlers` the broker gives it (on the event loop, decoded). It decides nothing
about sessions or routing: `mqttq.broker.distributed.cluster_node` does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, Final, Protocol

from mqttq.cluster.compacted import CompactedTopic
from mqttq.cluster.reading import open_at_end, read_forever, stop_reading
from mqttq.cluster.records import (
    DOWNLINK_START,
    Downlinked,
    SessionInfo,
    decode_downlinks,
    decode_retained,
    decode_session,
    decode_subscriptions,
    encode_downlink,
    encode_retained,
    encode_session,
    encode_subscriptions,
    retained_key,
    split_retained_key,
)
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.kafka.client import (
    Delivered,
    KafkaAdmin,
    KafkaConsumer,
    KafkaProducer,
    Record,
)
from mqttq.storage.ports import QueuedMessage

__all__ = ["ClusterHandlers", "ClusterLink", "downlink_topic"]

logger = logging.getLogger("mqttq.cluster")

SESSION: Final = "client.session"
SUBSCRIPTIONS: Final = "client.subscriptions"
RETAINED: Final = "msg.retained"
SESSION_EVENT: Final = "client.session.event"
DOWNLINK_BASIC: Final = "msg.downlink.basic"
DOWNLINK_PERSISTED: Final = "msg.downlink.persisted"
EVENT_PARTITIONS: Final = 6
DOWNLINK_PARTITIONS: Final = 6
DOWNLINK_RECORD_BYTES: Final = 256 * 1024
"""A downlink record is sent once its deliveries reach this size (Kafka's default limit
for one record is 1 MB)."""


def downlink_topic(prefix: str, kind: str, node_id: str) -> str:
    """`<prefix>msg.downlink.<basic|persisted>.<node>`."""
    return f"{prefix}msg.downlink.{kind}.{node_id}"


class ClusterHandlers(Protocol):
    """What the broker does with what other nodes wrote (called on the event loop)."""

    def on_session(self, client_id: str, info: SessionInfo | None) -> None: ...

    def on_subscriptions(
        self, client_id: str, tenant: str | None, subscriptions: list[Subscription]
    ) -> None: ...

    def on_retained(self, tenant: str, topic: str, message: Message | None) -> None: ...

    def on_downlink(self, delivery: Downlinked) -> None: ...

    def on_connect_event(
        self, client_id: str, node_id: str, request: str, clean_start: bool
    ) -> None: ...


class ClusterLink:
    """The cluster's Kafka topics as seen by node `node_id`."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic_prefix: str,
        node_id: str,
        *,
        produce_timeout_ms: int = 10_000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.prefix = topic_prefix
        self.node_id = node_id
        self._key = node_id.encode()
        self.writer = uuid.uuid4().hex
        """This process's id in the records' `writer` header."""
        self.timeout = max(10.0, produce_timeout_ms / 1000)
        self._produce_timeout_ms = produce_timeout_ms
        self._producer: KafkaProducer | None = None
        self._handlers: ClusterHandlers | None = None
        self._topics: list[CompactedTopic] = []
        self._consumer: KafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self.event_topic = f"{topic_prefix}{SESSION_EVENT}"
        self.own_downlinks = (
            downlink_topic(topic_prefix, "basic", node_id),
            downlink_topic(topic_prefix, "persisted", node_id),
        )
        self.undecodable = 0
        self._outbox: dict[str, _Outgoing] = {}
        """Downlink topic -> the deliveries to it not sent yet (sent at the end of the
        event loop's current round)."""
        self._downlink_topics: dict[tuple[str, bool], str] = {}

    def _compacted(self, name: str, apply: Any) -> CompactedTopic:
        assert self._producer is not None
        return CompactedTopic(
            self.bootstrap_servers,
            f"{self.prefix}{name}",
            self.node_id,
            self.writer,
            self._producer,
            apply,
            timeout=self.timeout,
        )

    async def open(self, handlers: ClusterHandlers) -> None:
        """Create the topics when missing, read the replicated ones to their end (the
        handlers get every record), then listen to this node's downlinks and to the
        session events. Raises StorageError when Kafka does not answer in time."""
        self._handlers = handlers
        self._producer = KafkaProducer(
            self.bootstrap_servers,
            delivery_timeout_ms=self._produce_timeout_ms,
            client_id=f"mqttq-cluster-{self.node_id}",
        )
        self.sessions = self._compacted(SESSION, self._apply_session)
        self.subscriptions = self._compacted(SUBSCRIPTIONS, self._apply_subscriptions)
        self.retained = self._compacted(RETAINED, self._apply_retained)
        self._topics = [self.sessions, self.subscriptions, self.retained]
        await asyncio.gather(*(topic.open() for topic in self._topics))
        admin = KafkaAdmin(self.bootstrap_servers)
        for topic in self.own_downlinks:
            await admin.ensure_topic(topic, DOWNLINK_PARTITIONS, timeout=self.timeout)
        await admin.ensure_topic(self.event_topic, EVENT_PARTITIONS, timeout=self.timeout)
        self._consumer = await open_at_end(
            self.bootstrap_servers,
            admin,
            [*self.own_downlinks, self.event_topic],
            f"{self.prefix}cluster.{self.node_id}",
            self.timeout,
        )
        self._task = asyncio.get_running_loop().create_task(
            read_forever(self._consumer, self._handle, f"node {self.node_id} topics")
        )

    # ------------------------------------------------------------------ reading

    def _apply_session(self, key: str, value: bytes | None) -> None:
        assert self._handlers is not None
        self._handlers.on_session(key, None if value is None else decode_session(value))

    def _apply_subscriptions(self, key: str, value: bytes | None) -> None:
        assert self._handlers is not None
        if value is None:
            self._handlers.on_subscriptions(key, None, [])
        else:
            self._handlers.on_subscriptions(key, *decode_subscriptions(value))

    def _apply_retained(self, key: str, value: bytes | None) -> None:
        assert self._handlers is not None
        tenant, topic = split_retained_key(key)
        self._handlers.on_retained(tenant, topic, None if value is None else decode_retained(value))

    def _handle(self, records: list[Record]) -> None:
        handlers = self._handlers
        assert handlers is not None
        for record in records:
            deliveries: list[Downlinked] = []
            try:
                if record.topic == self.event_topic:
                    event = json.loads(record.value)
                    handlers.on_connect_event(
                        str(event["client"]),
                        str(event["node"]),
                        str(event["request"]),
                        bool(event.get("clean", False)),
                    )
                else:
                    deliveries = decode_downlinks(record.value)
            except (StorageError, ValueError, KeyError, TypeError) as exc:
                self.undecodable += 1
                logger.error("skipping record %s: %s", record.where, exc)
            for delivery in deliveries:
                try:
                    handlers.on_downlink(delivery)
                except Exception:  # one delivery's failure must not stop this reader
                    logger.exception("delivery to %r failed", delivery.client_id)

    # ------------------------------------------------------------------ writing

    def put_session(self, client_id: str, info: SessionInfo | None) -> asyncio.Future[Delivered]:
        """Write (None: delete) the client's session record."""
        if info is None:
            return self.sessions.delete(client_id)
        return self.sessions.put(client_id, encode_session(info))

    def put_subscriptions(
        self, client_id: str, tenant: str, subscriptions: list[Subscription]
    ) -> asyncio.Future[Delivered]:
        """Write the client's whole subscription set (none: a delete)."""
        if not subscriptions:
            return self.subscriptions.delete(client_id)
        return self.subscriptions.put(client_id, encode_subscriptions(tenant, subscriptions))

    def put_retained(
        self, tenant: str, topic: str, message: Message | None
    ) -> asyncio.Future[Delivered]:
        """Write (None: delete) the retained message of `topic` in `tenant`."""
        key = retained_key(tenant, topic)
        if message is None:
            return self.retained.delete(key)
        return self.retained.put(key, encode_retained(message))

    def send_downlink(
        self,
        node_id: str,
        client_id: str,
        tenant: str,
        message: Message,
        entry: QueuedMessage | None = None,
    ) -> asyncio.Future[Delivered]:
        """A delivery for `client_id`, connected to `node_id`: on its basic downlink, or
        with `entry` (queued in Redis) on its persisted one. The deliveries to one topic
        made in one round of the event loop go as one record (keyed by this node, so they
        stay in the order they were made); the future, shared by them, resolves once Kafka
        has it."""
        topic = self._downlink_topics.get((node_id, entry is None))
        if topic is None:
            topic = downlink_topic(self.prefix, "basic" if entry is None else "persisted", node_id)
            self._downlink_topics[node_id, entry is None] = topic
        encoded = encode_downlink(client_id, tenant, message, entry)
        outgoing = self._outbox.get(topic)
        if outgoing is None:
            if not self._outbox:
                asyncio.get_running_loop().call_soon(self._send_outbox)
            outgoing = self._outbox[topic] = _Outgoing()
        outgoing.parts.append(encoded)
        outgoing.size += len(encoded)
        if outgoing.size >= DOWNLINK_RECORD_BYTES:
            del self._outbox[topic]
            self._send(topic, outgoing)
        return outgoing.future

    def _send_outbox(self) -> None:
        outbox, self._outbox = self._outbox, {}
        for topic, outgoing in outbox.items():
            self._send(topic, outgoing)

    def _send(self, topic: str, outgoing: _Outgoing) -> None:
        future = outgoing.future
        producer = self._producer
        if producer is None:  # closed meanwhile
            future.set_exception(StorageError("cluster link closed"))
            return
        outgoing.parts[0] = DOWNLINK_START + outgoing.parts[0]
        produced = producer.produce(topic, b"".join(outgoing.parts), self._key)
        produced.add_done_callback(future_copier(future))

    def connect_event(
        self, client_id: str, request: str, clean_start: bool
    ) -> asyncio.Future[Delivered]:
        """Write a connect event of `client_id` made by this node (`clean_start`: the
        connection starts a new session, so the old one ends)."""
        assert self._producer is not None
        event: dict[str, str | bool] = {
            "client": client_id,
            "node": self.node_id,
            "request": request,
            "clean": clean_start,
        }
        value = json.dumps(event)
        return self._producer.produce(self.event_topic, value.encode(), client_id.encode())

    async def close(self) -> None:
        """Stop reading, flush what was written. Idempotent."""
        self._send_outbox()
        task, self._task = self._task, None
        consumer, self._consumer = self._consumer, None
        await stop_reading(task, consumer)
        for topic in self._topics:
            await topic.close()
        self._topics = []
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.close(self.timeout)


class _Outgoing:
    """Deliveries to one downlink topic, encoded, waiting to go as one record."""

    __slots__ = ("future", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.future: asyncio.Future[Delivered] = asyncio.get_running_loop().create_future()


def future_copier(
    target: asyncio.Future[Delivered],
) -> Callable[[asyncio.Future[Delivered]], None]:
    """A done callback that settles `target` as the future it is called with settled."""

    def copy(source: asyncio.Future[Delivered]) -> None:
        if target.done():
            return
        if source.cancelled():
            target.cancel()
        elif (error := source.exception()) is not None:
            target.set_exception(error)
        else:
            target.set_result(source.result())

    return copy
