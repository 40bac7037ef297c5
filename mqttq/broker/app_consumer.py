"""The pack loop of one Kafka consumer of an APPLICATION client (seed 002): poll up to
max_poll_records, deliver, wait for every acknowledgement up to pack_timeout, apply the ack
strategy, commit; the sans-I/O `PackProcessor` decides what goes on the wire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING

from mqttq.codec.enums import ReasonCode
from mqttq.codec.packets import PubrelPacket
from mqttq.errors import MqttqError
from mqttq.model import AppContext
from mqttq.protocol.app_pack import PackProcessor, Record, Send
from mqttq.storage.kafka_client import KafkaConsumer, TopicPartition
from mqttq.storage.kafka_client import Record as KafkaRecord
from mqttq.storage.kafka_records import decode_message

if TYPE_CHECKING:
    from mqttq.broker.app_session import AppClient

__all__ = ["AppConsumer"]

logger = logging.getLogger("mqttq.broker.app")

_POLL_SECONDS = 0.2
"""How long one poll waits for records (also how fast a stop is noticed)."""
_CONSUMER_CONFIG = {"queued.max.messages.kbytes": 8192}
"""librdkafka prefetches up to 64 MB per consumer by default: with one consumer per client,
that, not the socket, would bound the memory a client that does not read costs."""
_SHARED_CONFIG = {**_CONSUMER_CONFIG, "session.timeout.ms": 10_000}
"""A member of a killed broker leaves its shared group after 10 s, not 45."""


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
            sids = message.properties.subscription_identifiers
            if sids:  # back where Session.send_publish puts them on the wire
                props = dataclasses.replace(message.properties, subscription_identifiers=[])
                message = dataclasses.replace(
                    message, properties=props, subscription_identifiers=tuple(sids)
                )
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
