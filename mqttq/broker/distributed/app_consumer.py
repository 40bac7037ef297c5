"""The pack loop of one Kafka consumer of an APPLICATION client (seed 002): poll packs of up
to max_poll_records, deliver, wait for every acknowledgement up to pack_timeout, apply the
ack strategy, commit; the sans-I/O `PackProcessor` decides what goes on the wire.

Up to `_PACKS_IN_FLIGHT` packs are out at once: the next pack is polled and written while
the client still acknowledges the earlier ones (within its Receive Maximum), so polling,
writing and the client's round trip overlap instead of following one another. Offsets are
committed in the packs' order, only up to the oldest pack still owed an acknowledgement.

A consumer names what it needs, not who provides it: the connected client it serves is a
`ConsumerOwner` (app_session.py's `AppClient`), the Kafka side of every APPLICATION client
a `ConsumerLog` (app_log.py's `AppLog`). Both are `typing.Protocol`s: these modules are
not compiled, and a consumer's calls are per pack, not per message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Protocol

from mqttq.codec.packets import PubrelPacket
from mqttq.errors import MqttqError
from mqttq.model import AppContext
from mqttq.protocol.app_pack import AckStrategy, PackProcessor, Record, Send
from mqttq.reasons import ReasonCode
from mqttq.storage.formats.kafka_record import decode_message
from mqttq.storage.kafka.client import KafkaConsumer, TopicPartition
from mqttq.storage.kafka.client import Record as KafkaRecord

if TYPE_CHECKING:
    from mqttq.broker.sessions.outlet import Outlet
    from mqttq.broker.sessions.session import Session
    from mqttq.config import KafkaApplicationSettings, KafkaSettings
    from mqttq.storage.ports import AppContextStore

__all__ = ["AppConsumer", "ConsumerLog", "ConsumerOwner"]

logger = logging.getLogger("mqttq.broker.app")

_POLL_SECONDS = 0.2
"""How long one poll waits for records (also how fast a stop is noticed)."""
_PACKS_IN_FLIGHT = 4
"""Packs written and not yet committed, at most: enough that the client always has the
next pack to read while it acknowledges one, few enough that a client that stops reading
holds little in broker memory (nothing more is polled while its socket buffer is full)."""
_CONSUMER_CONFIG = {"queued.max.messages.kbytes": 8192}
"""librdkafka prefetches up to 64 MB per consumer by default: with one consumer per client,
that, not the socket, would bound the memory a client that does not read costs."""
_SHARED_CONFIG = {**_CONSUMER_CONFIG, "session.timeout.ms": 10_000}
"""A member of a killed broker leaves its shared group after 10 s, not 45."""


class ConsumerLog(Protocol):
    """What a consumer needs of the Kafka side of APPLICATION clients (`AppLog`): the
    settings, the ack strategy, the stored contexts, and the totals it adds its packs'
    counters to."""

    skipped: int
    expired: int
    retried: int

    @property
    def kafka(self) -> KafkaSettings: ...

    @property
    def settings(self) -> KafkaApplicationSettings: ...

    @property
    def strategy(self) -> AckStrategy: ...

    @property
    def contexts(self) -> AppContextStore: ...


class ConsumerOwner(Protocol):
    """What a consumer needs of the connected APPLICATION client it serves (`AppClient`):
    its session and connection, the packet ids in flight over all its consumers, whether
    the connection takes writes, and the Kafka side."""

    @property
    def log(self) -> ConsumerLog: ...

    @property
    def session(self) -> Session: ...

    @property
    def client(self) -> Outlet: ...

    @property
    def taken(self) -> set[int]: ...

    @property
    def writable(self) -> asyncio.Event: ...


class AppConsumer:
    """One Kafka consumer of an APPLICATION client and its pack loop."""

    def __init__(self, app: ConsumerOwner, topic: str, group: str, *, main: bool) -> None:
        self.app = app
        self.topic = topic
        self.group = group
        self.main = main
        self.pack: PackProcessor | None = None
        self.committed: int | None = None
        """The last offset this consumer committed (next record to read)."""
        self._consumer: KafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        """Set when the loop has something to do: records polled, the oldest pack
        resolved, the client readable again, a stop."""
        self._poll: asyncio.Future[list[KafkaRecord]] | None = None
        self._paused: list[TopicPartition] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop polling, close the consumer (leaving the group), then for the main
        consumer save what is in flight (`application_session_ctx`)."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._poll is not None:
            await asyncio.gather(self._poll, return_exceptions=True)
            self._poll = None
        consumer = self._consumer
        pack = self.pack
        if self.main and pack is not None:
            # The last PUBACKs may have come just before the disconnect.
            self._take_commits(pack)
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
        """An acknowledgement was applied: send what the window allows now (the loop
        wakes once the oldest pack is resolved, not at every acknowledgement)."""
        self.pump()

    def resumed(self) -> None:
        """The client's write buffer went below the low watermark: write, poll again."""
        self.pump()
        self._wake.set()

    def pump(self) -> None:
        """Write what the window and the write buffer allow now; wake the loop when the
        oldest pack is resolved (QoS 0 and expired records need no acknowledgement)."""
        pack = self.pack
        if pack is None:
            return
        app = self.app
        client = app.client
        if pack.waiting and not self._stopping and not client.closed and app.writable.is_set():
            window = client.conn.client_receive_maximum
            flush_every = app.log.settings.flush_every
            now = app.session.hub.clock()
            # In chunks of flush_every, each written out at once: the transport sees its
            # buffer grow (and calls pause_writing) before the rest is encoded.
            while app.writable.is_set() and not client.closed:
                sends = pack.next_sends(window, now, flush_every)
                if not sends:
                    break
                self._write(sends)
                client.flush_now()
        if pack.committable:
            self._wake.set()

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
            self.pack = PackProcessor(
                log.strategy,
                log.settings.retries,
                restored,
                app.taken,
                pack_timeout=log.settings.pack_timeout_ms / 1000,
            )
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
                await self._step()
        except asyncio.CancelledError:
            raise
        except MqttqError as error:
            logger.warning(
                "APPLICATION client %r: consumer of %s failed: %s", client_id, self.topic, error
            )
            client = app.client
            if not client.closed:
                client.kick(ReasonCode.SERVER_UNAVAILABLE, "message log unavailable")

    async def _step(self) -> None:
        """One turn of the loop: commit what is resolved, take polled records, poll (or
        pause while the client does not read), apply a pack timeout, then wait."""
        pack = self.pack
        assert pack is not None
        loop = asyncio.get_running_loop()
        self._wake.clear()
        await self._commit(pack)
        polled = self._poll
        if polled is not None and polled.done():
            self._poll = None
            self._start_packs(pack, polled.result())
            await self._commit(pack)  # a pack of expired or QoS 0 records only
        await self._fetch(pack)
        deadline = pack.next_deadline
        if deadline is not None and deadline <= loop.time():
            self._timed_out(pack, loop.time())
            return
        try:
            async with asyncio.timeout_at(deadline):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _fetch(self, pack: PackProcessor) -> None:
        """Poll the next pack while there is room for it and the client reads; while it
        does not, pause the partitions (librdkafka would go on prefetching them)."""
        if self._poll is not None:
            return
        consumer = self._consumer
        assert consumer is not None
        if not self.app.writable.is_set():
            if self._paused is None:
                self._paused = await consumer.assignment()
                await consumer.pause(self._paused)
            return
        if pack.packs >= _PACKS_IN_FLIGHT:
            return
        if self._paused is not None:
            await consumer.resume(self._paused)
            self._paused = None
        poll = asyncio.ensure_future(
            consumer.poll_batch(self.app.log.settings.max_poll_records, _POLL_SECONDS)
        )
        poll.add_done_callback(lambda _: self._wake.set())
        self._poll = poll

    def _start_packs(self, pack: PackProcessor, records: list[KafkaRecord]) -> None:
        """Decode polled records into one pack per partition (a shared topic has several:
        offsets order one only) and write what can be written."""
        by_partition: dict[int, list[Record]] = {}
        for r in records:
            message = decode_message(r.key, r.value, r.headers)[1]
            sids = message.properties.subscription_identifiers
            if sids:  # back where Session.send_publish puts them on the wire
                props = dataclasses.replace(message.properties, subscription_identifiers=[])
                message = dataclasses.replace(
                    message, properties=props, subscription_identifiers=tuple(sids)
                )
            by_partition.setdefault(r.partition, []).append(Record(r.offset, message))
        now = asyncio.get_running_loop().time()
        for partition, pack_records in by_partition.items():
            pack.start(pack_records, now, partition)
        self.pump()

    def _timed_out(self, pack: PackProcessor, now: float) -> None:
        app = self.app
        if not app.writable.is_set():
            pack.postpone(now)  # the client is not reading: the timeout starts once it does
            return
        self._write(pack.timed_out(now))
        if pack.skipped_offsets:
            logger.warning(
                "APPLICATION client %r: %d messages of %s not acknowledged in time, "
                "skipped (%s): offsets %s",
                app.session.client_id,
                len(pack.skipped_offsets),
                self.topic,
                app.log.strategy,
                pack.skipped_offsets,
            )
        self.pump()

    def _take_commits(self, pack: PackProcessor) -> dict[TopicPartition, int]:
        """The offsets of the resolved packs at the head of the order, as committed."""
        commits = pack.pop_commits()
        if not commits:
            return {}
        if self.main:
            self.committed = commits[0]
        self._account(pack)
        return {TopicPartition(self.topic, p): offset for p, offset in commits.items()}

    async def _commit(self, pack: PackProcessor) -> None:
        offsets = self._take_commits(pack)
        if not offsets:
            return
        consumer = self._consumer
        assert consumer is not None
        try:
            # Sent, not waited for (a round trip per pack would cap the rate); after a
            # crash a commit that never landed only means the packs come again.
            await consumer.commit(offsets, wait=False)
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
