"""The Kafka side of APPLICATION clients on one broker (seed 002; ARCHITECTURE.md
section 4), with `storage.log = "kafka"`.

`AppLog` produces the deliveries of persistent APPLICATION sessions to
`<prefix>msg.app.<client_id>` (or, for a `$share` delivery, to
`<prefix>msg.app.shared.<filter>`), creates those topics, keeps the
`application_session_ctx` store, starts an `AppClient`
(mqttq.broker.distributed.app_session) for each connected client, and measures each
one's lag for /metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from mqttq.broker.distributed.app_session import AppClient
from mqttq.config import KafkaSettings
from mqttq.errors import MqttqError
from mqttq.model import AppContext, Message
from mqttq.protocol.app_pack import AckStrategy
from mqttq.storage.formats.kafka_record import encode_message
from mqttq.storage.kafka.app_inspect import AppSessionView, describe_app_session
from mqttq.storage.kafka.app_topics import app_group, app_topic, shared_topic
from mqttq.storage.kafka.client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaProducer,
    TopicPartition,
)
from mqttq.storage.ports import AppContextStore

if TYPE_CHECKING:
    from mqttq.broker.sessions.outlet import Outlet
    from mqttq.broker.sessions.session import Session

__all__ = ["AppLog"]

logger = logging.getLogger("mqttq.broker.app")

_OFFSET_ATTEMPTS = 5
"""Tries to read a topic's end offset (right after creation Kafka may lack its leader)."""
_LAG_EVERY = 1.0
"""Seconds between two measures of a client's consumer lag (for /metrics)."""


class AppLog:
    """The Kafka side of every APPLICATION client of one broker."""

    def __init__(self, kafka: KafkaSettings, contexts: AppContextStore) -> None:
        self.kafka = kafka
        self.settings = kafka.application
        self.prefix = kafka.topic_prefix
        self.contexts = contexts
        self.strategy = AckStrategy(self.settings.ack_strategy)
        self.clients: dict[str, AppClient] = {}
        """Connected APPLICATION clients by client id."""
        self._producer: KafkaProducer | None = None
        self._admin: KafkaAdmin | None = None
        self._topics: set[str] = set()
        self._created: set[str] = set()
        """Topics this broker created and no session has been reset on yet."""
        self._lag_task: asyncio.Future[None] | None = None
        self.pauses = 0
        """Times a consumer paused because its client's write buffer was full."""
        self.skipped = 0
        """Messages the ack strategy gave up on (each one logged with its offset)."""
        self.expired = 0
        self.retried = 0
        self.lag: dict[str, int] = {}
        """Records not yet consumed, per client id (last measured)."""

    async def open(self) -> None:
        await self.contexts.open()
        self._producer = KafkaProducer(
            self.kafka.bootstrap_servers,
            delivery_timeout_ms=self.kafka.produce_timeout_ms,
            client_id="mqttq-app",
        )
        self._admin = KafkaAdmin(self.kafka.bootstrap_servers, client_id="mqttq-app")
        self._lag_task = asyncio.ensure_future(self._measure_lag())

    async def _measure_lag(self) -> None:
        """Every second, the lag of each connected client's group (the topic's end minus
        the committed offset, as Kafka's tools count it), for /metrics; apart from the
        pack loops, so a paused or waiting consumer is measured too."""
        assert self._admin is not None
        while True:
            await asyncio.sleep(_LAG_EVERY)
            for client_id in list(self.clients):
                partition = TopicPartition(self.client_topic(client_id), 0)
                group = app_group(self.prefix, client_id)
                try:
                    committed, end = await self._admin.offsets(group, partition)
                except MqttqError:
                    continue  # Kafka unreachable: the consumer says so itself
                if client_id in self.clients:
                    self.lag[client_id] = max(0, end - (committed or 0))

    async def close(self) -> None:
        """Stop every consumer (saving contexts), flush the producer, close the store."""
        if self._lag_task is not None:
            self._lag_task.cancel()
        for app in list(self.clients.values()):
            await app.stop()
        if self._producer is not None:
            await self._producer.close()
        await self.contexts.close()

    # ------------------------------------------------------------------ topics

    def client_topic(self, client_id: str) -> str:
        return app_topic(self.prefix, client_id)

    async def ensure_client_topic(self, client_id: str) -> None:
        """Create the client's topic (1 partition, the configured retention and segment
        size) unless this broker saw it already. Raises KafkaClientError."""
        await self._ensure(self.client_topic(client_id), 1)

    async def ensure_shared_topic(self, topic_filter: str) -> None:
        await self._ensure(
            shared_topic(self.prefix, topic_filter), self.settings.shared_topic_partitions
        )

    async def _ensure(self, topic: str, partitions: int) -> None:
        if topic in self._topics:
            return
        assert self._admin is not None
        config = {
            "retention.ms": str(self.settings.topic_retention_ms),
            "segment.bytes": str(self.settings.topic_segment_bytes),
        }
        if await self._admin.ensure_topic(topic, partitions, config):
            logger.info("created Kafka topic %s (%d partitions)", topic, partitions)
            self._created.add(topic)
        self._topics.add(topic)

    # ------------------------------------------------------------------ publish side

    def produce(
        self, tenant: str, client_id: str, message: Message, share: tuple[str, str] | None
    ) -> asyncio.Future[Any]:
        """Append a delivery for `client_id` (or for the `$share` group `share`) to its
        topic; the future settles when Kafka acknowledged it (acks=all)."""
        assert self._producer is not None
        sids = message.subscription_identifiers
        if sids:
            # They travel in the record's PUBLISH properties [MQTT-3.3.4-3].
            props = dataclasses.replace(message.properties, subscription_identifiers=list(sids))
            message = dataclasses.replace(message, properties=props)
        key, value, headers = encode_message(tenant, message)
        if share is None:
            return self._producer.produce(self.client_topic(client_id), value, key, headers)
        # No key: the records of a shared topic spread over its partitions, so the
        # members of the group share the load.
        return self._producer.produce(shared_topic(self.prefix, share[1]), value, None, headers)

    # ------------------------------------------------------------------ connections

    def attach(self, session: Session, client: Outlet) -> AppClient:
        """Start the consumers of a connected persistent APPLICATION session."""
        app = AppClient(self, session, client)
        self.clients[session.client_id] = app
        session.app = app
        app.start()
        return app

    async def reset(self, client_id: str) -> None:
        """A new session for `client_id` (clean start): what its topic holds from an
        earlier session is passed over [MQTT-3.1.2-4] (a context saying every record up to
        the topic's end was handled). Raises KafkaClientError."""
        assert self._admin is not None
        topic = self.client_topic(client_id)
        if topic in self._created:
            # Created by this CONNECT: empty (and its leader may not be known yet).
            self._created.discard(topic)
            await self.contexts.delete_app_context(client_id)
            return
        for attempt in range(_OFFSET_ATTEMPTS):
            try:
                _, end = await self._admin.offsets(
                    app_group(self.prefix, client_id), TopicPartition(topic, 0)
                )
                break
            except KafkaClientError:
                if attempt + 1 == _OFFSET_ATTEMPTS:
                    raise
                await asyncio.sleep(0.2)  # a leader being elected
        await self.contexts.save_app_context(AppContext(client_id, end, [], time.time()))

    async def forget(self, client_id: str) -> None:
        """The session ended: its saved context goes too."""
        self.lag.pop(client_id, None)
        await self.contexts.delete_app_context(client_id)

    async def describe(self, client_id: str) -> AppSessionView | None:
        """The operator's view of an APPLICATION session (None: no context saved)."""
        app = self.clients.get(client_id)
        main = None if app is None else app.main
        if main is not None and main.pack is not None:
            context: AppContext | None = main.pack.context(client_id, time.time())
        else:
            context = await self.contexts.load_app_context(client_id)
        if context is None:
            return None
        assert self._admin is not None
        return await describe_app_session(self._admin, self.prefix, context, app is not None)

    def statistics(self) -> dict[str, int]:
        return {
            "app_clients": len(self.clients),
            "app_pauses": self.pauses,
            "app_skipped": self.skipped,
            "app_expired": self.expired,
            "app_retried": self.retried,
        }
