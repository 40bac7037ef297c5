"""APPLICATION clients on Kafka: each persistent APPLICATION session has its own topic,
and each connected one its own consumers (seed 002; ARCHITECTURE.md section 4).

`AppLog` (one per broker, with `storage.log = "kafka"`) produces the deliveries of
persistent APPLICATION sessions to `<prefix>msg.app.<client_id>` (or, for a `$share`
delivery, to `<prefix>msg.app.shared.<filter>`), creates those topics, and keeps the
`application_session_ctx` store. `AppClient` is one connected client: its consumer of its
own topic and one per shared subscription, all sharing the connection's packet ids.
`AppConsumer` runs the pack loop (poll up to max_poll_records, deliver, wait for every
ack up to pack_timeout, apply the ack strategy, commit) with the sans-I/O
`PackProcessor` deciding what goes on the wire.

Flow control: the client's transport buffer limits are the configured watermarks; above
the high one (`pause_writing`) nothing more is written and the consumers pause their Kafka
partitions before the next poll; below the low one they resume. So a client that does
not read holds at most one pack and the transport buffer in broker memory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from mqttq.codec.enums import ReasonCode
from mqttq.codec.packets import PubrelPacket
from mqttq.config import KafkaSettings
from mqttq.errors import MqttqError
from mqttq.model import AppContext, Message
from mqttq.protocol.app_pack import AckStrategy, PackProcessor, Record, Send
from mqttq.routing.topics import parse_shared
from mqttq.storage.app_context import AppContextStore
from mqttq.storage.app_inspect import AppSessionView, describe_app_session
from mqttq.storage.app_topics import app_group, app_topic, shared_group, shared_topic
from mqttq.storage.kafka_client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    KafkaProducer,
    TopicPartition,
)
from mqttq.storage.kafka_client import Record as KafkaRecord
from mqttq.storage.kafka_records import decode_message, encode_message

if TYPE_CHECKING:
    from mqttq.broker.client import Client
    from mqttq.broker.session import Session

__all__ = ["AppClient", "AppConsumer", "AppLog"]

logger = logging.getLogger("mqttq.broker.app")

_POLL_SECONDS = 0.2
"""How long one poll waits for records (also how fast a stop is noticed)."""
_OFFSET_ATTEMPTS = 5
"""Tries to read a topic's end offset (right after creation Kafka may lack its leader)."""
_LAG_EVERY = 1.0
"""Seconds between two measures of a client's consumer lag (for /metrics)."""
_CONSUMER_CONFIG = {"queued.max.messages.kbytes": 8192}
"""librdkafka prefetches up to 64 MB per consumer by default: with one consumer per client,
that, not the socket, would bound the memory a client that does not read costs."""
_SHARED_CONFIG = {**_CONSUMER_CONFIG, "session.timeout.ms": 10_000}
"""A member of a killed broker leaves its shared group after 10 s, not 45."""


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
        key, value, headers = encode_message(tenant, message)
        if share is None:
            return self._producer.produce(self.client_topic(client_id), value, key, headers)
        # No key: the records of a shared topic spread over its partitions, so the
        # members of the group share the load.
        return self._producer.produce(shared_topic(self.prefix, share[1]), value, None, headers)

    # ------------------------------------------------------------------ connections

    def attach(self, session: Session, client: Client) -> AppClient:
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


class AppClient:
    """The consumers of one connected APPLICATION client (see the module docstring)."""

    def __init__(self, log: AppLog, session: Session, client: Client) -> None:
        self.log = log
        self.session = session
        self.client = client
        self.taken: set[int] = set()
        """Packet ids in flight on this connection, over every consumer."""
        self.main: AppConsumer | None = None
        self.shared: dict[str, AppConsumer] = {}
        """Consumers of `$share` subscriptions, by the subscription's topic filter."""
        self.writable = asyncio.Event()
        self.writable.set()
        self._stopped = False
        settings = log.settings
        transport = client.transport
        if transport is not None:
            transport.set_write_buffer_limits(settings.high_watermark, settings.low_watermark)

    @property
    def consumers(self) -> list[AppConsumer]:
        main = [] if self.main is None else [self.main]
        return main + list(self.shared.values())

    def start(self) -> None:
        log = self.log
        client_id = self.session.client_id
        self.main = AppConsumer(
            self, log.client_topic(client_id), app_group(log.prefix, client_id), main=True
        )
        self.main.start()
        self.sync_shared()

    def sync_shared(self) -> asyncio.Future[None] | None:
        """Start a consumer for each `$share` subscription of the session without one and
        stop those whose subscription is gone; the future settles once the new shared
        topics exist (None when there are none)."""
        if self._stopped:
            return None
        session = self.session
        wanted: dict[str, str] = {}
        for subscription in session.space.router.subscriptions_of(session.client_id):
            share_name, inner = parse_shared(subscription.topic_filter)
            if share_name is not None:
                wanted[subscription.topic_filter] = share_name
        for topic_filter in [f for f in self.shared if f not in wanted]:
            consumer = self.shared.pop(topic_filter)
            session.hub.tasks.spawn(consumer.stop(), "app_consumer_stop", session.client_id)
        new = [(f, name) for f, name in wanted.items() if f not in self.shared]
        if not new:
            return None
        for topic_filter, share_name in new:
            _, inner = parse_shared(topic_filter)
            consumer = AppConsumer(
                self,
                shared_topic(self.log.prefix, inner),
                shared_group(self.log.prefix, share_name, inner),
                main=False,
            )
            self.shared[topic_filter] = consumer
        return asyncio.ensure_future(self._start_shared([f for f, _ in new]))

    async def _start_shared(self, filters: list[str]) -> None:
        for topic_filter in filters:
            _, inner = parse_shared(topic_filter)
            await self.log.ensure_shared_topic(inner)
            consumer = self.shared.get(topic_filter)
            if consumer is not None and not self._stopped:
                consumer.start()

    # ------------------------------------------------------------------ acks, flow

    def owner(self, packet_id: int) -> AppConsumer | None:
        for consumer in self.consumers:
            if consumer.pack is not None and consumer.pack.owns(packet_id):
                return consumer
        return None

    def on_puback(self, packet_id: int) -> None:
        consumer = self.owner(packet_id)
        if consumer is not None and consumer.pack is not None:
            consumer.pack.on_puback(packet_id)
            consumer.acked()

    def on_pubrec(self, packet_id: int, reason_code: ReasonCode) -> bool:
        """True when the PUBREL is to be sent."""
        consumer = self.owner(packet_id)
        if consumer is None or consumer.pack is None:
            return False
        send = consumer.pack.on_pubrec(packet_id, reason_code >= 0x80)
        consumer.acked()
        return send

    def on_pubcomp(self, packet_id: int) -> None:
        consumer = self.owner(packet_id)
        if consumer is not None and consumer.pack is not None:
            consumer.pack.on_pubcomp(packet_id)
            consumer.acked()

    def pubrel_for(self, packet_id: int) -> PubrelPacket:
        if self.owner(packet_id) is None:
            return PubrelPacket(packet_id, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)
        return PubrelPacket(packet_id)

    def pause_writing(self) -> None:
        """The write buffer passed the high watermark: nothing more is written, and each
        consumer pauses its partitions before it would poll again."""
        if self.writable.is_set():
            self.writable.clear()
            self.log.pauses += 1

    def resume_writing(self) -> None:
        self.writable.set()
        for consumer in self.consumers:
            consumer.pump()

    async def stop(self) -> None:
        """The connection ended: stop every consumer; the main one saves its context."""
        if self._stopped:
            return
        self._stopped = True
        self.writable.set()
        if self.log.clients.get(self.session.client_id) is self:
            del self.log.clients[self.session.client_id]
            self.log.lag.pop(self.session.client_id, None)  # measured while connected
        if self.session.app is self:
            self.session.app = None
        await asyncio.gather(*(consumer.stop() for consumer in self.consumers))


class AppConsumer:
    """One Kafka consumer of an APPLICATION client and its pack loop."""

    def __init__(self, app: AppClient, topic: str, group: str, *, main: bool) -> None:
        self.app = app
        self.topic = topic
        self.group = group
        self.main = main
        self.pack: PackProcessor | None = None
        self.committed: int | None = None
        """The last offset this consumer committed (next record to read)."""
        self._consumer: KafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._acked = asyncio.Event()
        self._prefetch: asyncio.Future[list[KafkaRecord]] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop polling, close the consumer (leaving the group), then for the main
        consumer save what is in flight (`application_session_ctx`)."""
        self._stopping = True
        self._acked.set()
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._prefetch is not None:
            await asyncio.gather(self._prefetch, return_exceptions=True)
            self._prefetch = None
        consumer = self._consumer
        pack = self.pack
        if self.main and pack is not None and pack.in_pack and pack.done:
            # The last PUBACK came just before the disconnect: the pack is complete.
            self.committed = pack.commit_offset
            pack.committed()
            self._account(pack)
        if consumer is not None:
            if self.committed is not None and self.main:
                # The last commit was only sent: make it land before the consumer goes, so
                # that operators see the offset (the context carries it in any case).
                try:
                    await consumer.commit({TopicPartition(self.topic, 0): self.committed})
                except MqttqError as error:
                    logger.info("consumer of %s: last commit failed: %s", self.topic, error)
            await consumer.close()
        if self.main and pack is not None:
            log = self.app.log
            context = pack.context(self.app.session.client_id, time.time())
            await log.contexts.save_app_context(context)
            self._account(pack)

    def acked(self) -> None:
        """An acknowledgement was applied: send what the window allows now (the pack loop
        wakes once the pack is done, not at every acknowledgement)."""
        self.pump()

    def pump(self) -> None:
        """Write what the window and the write buffer allow now."""
        pack = self.pack
        client = self.app.client
        if pack is None or self._stopping or client.closed or not self.app.writable.is_set():
            return
        window = client.conn.client_receive_maximum
        flush_every = self.app.log.settings.flush_every
        now = time.time()
        # In chunks of flush_every, each written out at once: the transport sees its
        # buffer grow (and calls pause_writing) before the rest of the pack is encoded.
        while self.app.writable.is_set() and not client.closed:
            sends = pack.next_sends(window, now, flush_every)
            if not sends:
                break
            self._write(sends)
            client.flush_now()
        if pack.done:
            self._acked.set()  # QoS 0 and expired records need no ack: the pack is over

    def _write(self, sends: list[Send]) -> None:
        session = self.app.session
        client = self.app.client
        pack = self.pack
        assert pack is not None
        for send in sends:
            message = send.message
            if message is None:
                assert send.packet_id is not None
                client.send(PubrelPacket(send.packet_id))
                continue
            qos = message.qos if send.packet_id is not None else 0
            sent = session.send_publish(client, message, qos, send.packet_id, send.dup)
            if not sent and send.packet_id is not None:
                pack.abandon(send.packet_id)  # too large for the client [MQTT-3.1.2-25]

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        app = self.app
        log = app.log
        client_id = app.session.client_id
        try:
            restored = await log.contexts.load_app_context(client_id) if self.main else None
            if self.main and restored is None:
                # Every APPLICATION session has a row, so that operators can list them.
                await log.contexts.save_app_context(AppContext(client_id, updated_at=time.time()))
            self.pack = PackProcessor(log.strategy, log.settings.retries, restored, app.taken)
            # The client's own topic is assigned, not subscribed: a consumer of a killed
            # broker would otherwise hold the group until its session timed out.
            self._consumer = KafkaConsumer(
                log.kafka.bootstrap_servers,
                self.group,
                [self.topic],
                client_id=f"mqttq-app-{client_id}"[:200],
                config=_CONSUMER_CONFIG if self.main else _SHARED_CONFIG,
                assign=[TopicPartition(self.topic, 0)] if self.main else None,
            )
            while not self._stopping:
                await self._one_pack()
        except asyncio.CancelledError:
            raise
        except MqttqError as error:
            logger.warning(
                "APPLICATION client %r: consumer of %s failed: %s", client_id, self.topic, error
            )
            client = app.client
            if not client.closed:
                client.kick(ReasonCode.SERVER_UNAVAILABLE, "message log unavailable")

    async def _one_pack(self) -> None:
        app = self.app
        log = app.log
        consumer = self._consumer
        pack = self.pack
        assert consumer is not None and pack is not None
        prefetched, self._prefetch = self._prefetch, None
        if prefetched is not None:
            records = await prefetched
        else:
            if not app.writable.is_set():
                paused = await consumer.assignment()
                await consumer.pause(paused)
                await app.writable.wait()
                await consumer.resume(paused)
            records = await consumer.poll_batch(log.settings.max_poll_records, _POLL_SECONDS)
        # One pack per partition (a shared topic has several): offsets order one only.
        by_partition: dict[TopicPartition, list[Record]] = {}
        for r in records:
            message = decode_message(r.key, r.value, r.headers)[1]
            part = by_partition.setdefault(TopicPartition(r.topic, r.partition), [])
            part.append(Record(r.offset, message))
        for partition, pack_records in by_partition.items():
            await self._process(partition, pack_records)
            if self._stopping:
                return

    async def _process(self, partition: TopicPartition, records: list[Record]) -> None:
        app = self.app
        log = app.log
        consumer = self._consumer
        pack = self.pack
        assert consumer is not None and pack is not None
        pack.start(records)
        self.pump()
        if self._prefetch is None and app.writable.is_set():
            # The next pack is fetched while this one waits for its acknowledgements (at
            # most one pack more in memory; uncommitted, so a stop loses nothing).
            self._prefetch = asyncio.ensure_future(
                consumer.poll_batch(log.settings.max_poll_records, _POLL_SECONDS)
            )
        timeout = log.settings.pack_timeout_ms / 1000
        while not pack.done:
            self._acked.clear()
            try:
                await asyncio.wait_for(self._acked.wait(), timeout)
            except TimeoutError:
                if not app.writable.is_set():
                    continue  # the client is not reading: the timeout starts once it does
                self._write(pack.timed_out())
                if pack.skipped_offsets:
                    logger.warning(
                        "APPLICATION client %r: %d messages of %s not acknowledged in time, "
                        "skipped (%s): offsets %s",
                        app.session.client_id,
                        len(pack.skipped_offsets),
                        self.topic,
                        log.strategy,
                        pack.skipped_offsets,
                    )
                self.pump()
            if self._stopping:
                return
        offset = pack.commit_offset
        assert offset is not None
        # The pack is over before the commit is sent: a disconnect now (which cancels
        # this task) saves a context at `offset`, and stop() commits it for good.
        self.committed = offset
        pack.committed()
        self._account(pack)
        try:
            # Sent, not waited for (a round trip per pack would cap the rate); after a
            # crash a commit that never landed only means the pack comes again.
            await consumer.commit({partition: offset}, wait=False)
        except MqttqError as error:
            if self.main:
                raise
            # A shared topic's group rebalanced: another member goes on from the last
            # commit (those records come again: at least once, never lost).
            logger.info("shared consumer of %s: commit not accepted: %s", self.topic, error)

    def _account(self, pack: PackProcessor) -> None:
        """Move the processor's counters into the broker's totals."""
        log = self.app.log
        log.skipped += pack.skipped
        log.expired += pack.expired
        log.retried += pack.retried
        pack.skipped = pack.expired = pack.retried = 0
