"""An integration's backlog in distributed mode: a Kafka consumer group on `<prefix>msg.all`.

Every node runs one `KafkaBacklog` per integration, all in the group
`<prefix>integration.<name>`: Kafka spreads the log's partitions over the nodes, and a node
that leaves (or dies: after the session timeout) hands its partitions to the others. One
publisher's messages share a partition (the record key is its client id), so they come out
in the order they were published.

What `take` hands out is what the log holds for the integration: records of its tenant
whose topic matches one of its filters and whose payload passes its payload filter. Other
records are skipped; their offsets move on with the ones around them. An expired message
(its Message Expiry Interval passed before it was read) is skipped as a subscriber would
not get it [MQTT-3.3.2-5]; one that has not expired carries the time it has left.

Offsets are committed only for what was settled (the worker settles a batch once the sink
accepted it), soon after `settle` and at `close`. Delivery is at least once: what was taken
and not settled when a node dies, or when a rebalance gives its partition to another node,
is read again by the partition's next owner; so are settled records whose commit had not
reached Kafka yet (at most COMMIT_INTERVAL of them).

A brand-new group starts at the end of the log ("latest at creation": a new webhook gets
what is published from now on, not the whole history). The first `open` of the group
commits the log's end offsets before joining, so a group that has not received anything yet
still starts where it was created, not where it was when its first node came back. A group
with committed offsets continues from them; a partition it has none for (one added to the
topic later, or one whose offset is past the log's retention) starts at its earliest record,
so nothing is skipped there. A group Kafka forgot (no member for `offsets.retention.minutes`,
7 days by default) is new again. Records appended while the group's very first nodes start
together may be skipped (each fixes the start at the end it sees, until one has joined).

`Delivery.seq` is derived from the record's partition and offset (`record_seq`), so a record
read again carries the same one.

Memory is bounded by the integration's `max_in_flight`: records are read only while fewer
than that many deliveries are held (read and not settled); when that many stay held for
PAUSE_AFTER (a slow or stopped sink), the partitions are paused, which also drops what
librdkafka had fetched ahead (its queue is bounded by FETCH_QUEUE_KBYTES anyway).
librdkafka runs on the consumer's own thread (mqttq.storage.kafka.client): nothing here
blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

import confluent_kafka

from mqttq.errors import StorageError
from mqttq.integrations.record import Delivery, delivery_of
from mqttq.integrations.spec import IntegrationSpec
from mqttq.model import Message
from mqttq.routing.topics import filter_matches
from mqttq.storage.formats.kafka_record import decode_message
from mqttq.storage.kafka.client import (
    KafkaAdmin,
    KafkaClientError,
    KafkaConsumer,
    Record,
    TopicPartition,
)
from mqttq.storage.kafka.message_log import MSG_ALL

__all__ = ["KafkaBacklog", "group_id", "record_seq"]

log = logging.getLogger(__name__)

READ_WAIT: Final = 0.1
"""Seconds one read waits for a first record (also how long a commit or a pause may wait
for the consumer's thread)."""
COMMIT_INTERVAL: Final = 0.1
"""Seconds between offset commits at most (each carries every settle meanwhile)."""
LAG_INTERVAL: Final = 1.0
"""Seconds between consumer lag measurements."""
SESSION_TIMEOUT_MS: Final = 6_000
"""A node gone for this long loses its partitions to the other nodes of the group."""
FETCH_QUEUE_KBYTES: Final = 4_096
"""librdkafka's prefetch queue per consumer (its default, 64 MB, is per integration here)."""
PAUSE_AFTER: Final = 1.0
"""Seconds full (max_in_flight held) before the partitions are paused."""
START_RETRY: Final = 0.2
"""Seconds between attempts to read or set a group's offsets at `open`."""
FAILED_WAIT: Final = 1.0
"""Seconds before a consumer that failed for good is replaced."""

Offsets = dict[TopicPartition, int]


def record_seq(record: Record) -> int:
    """The `Delivery.seq` of `record`: (offset + 1) * 2**16 + partition. It grows with each
    partition's records (so with each publisher's), is unique in the integration, never 0,
    and is the same whenever the record is read again, on this node or another: a sink
    that deduplicates by it drops a redelivery (at least once). It does not grow across
    partitions: a batch may mix them."""
    return ((record.offset + 1) << 16) | record.partition


def group_id(topic_prefix: str, name: str) -> str:
    """The consumer group of integration `name`: `<prefix>integration.<name>`."""
    return f"{topic_prefix}integration.{name}"


class KafkaBacklog:
    """A `Backlog` (mqttq.integrations.worker) over the Kafka message log; see the module
    docstring. `open()` before use, `close()` to leave the group."""

    def __init__(
        self,
        spec: IntegrationSpec,
        bootstrap_servers: str,
        topic_prefix: str = "tbmq.",
        *,
        partitions: int = 12,
        max_in_flight: int | None = None,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`partitions`: how many `msg.all` gets if this backlog creates it (give the log's
        own setting). `max_in_flight`: deliveries held at most (default: the spec's)."""
        self.spec = spec
        self._filters = spec.topic_filters
        self.bootstrap_servers = bootstrap_servers
        self.topic = f"{topic_prefix}{MSG_ALL}"
        self.group_id = group_id(topic_prefix, spec.name)
        self.partitions = partitions
        self.max_in_flight = max_in_flight or spec.delivery.max_in_flight
        self.timeout = timeout
        self._clock = clock
        self._consumer: KafkaConsumer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self._failure: Exception | None = None

        self._ready: deque[Delivery] = deque()
        """Read, matching, not yet taken, in the order read."""
        self._held: dict[int, tuple[TopicPartition, int]] = {}
        """Every delivery read and not settled (ready or taken): seq -> (partition, offset)."""
        self._unsettled: dict[TopicPartition, dict[int, int]] = {}
        """Per partition, its held deliveries: seq -> offset, in the order read."""
        self._read_upto: Offsets = {}
        """Per partition, the offset after the last record read."""
        self._safe: Offsets = {}
        """Per partition, the offset to commit: the first one held, or `_read_upto`.
        Replaced whole (never changed in place): the consumer's thread reads it."""
        self._committed: Offsets = {}
        self._revoked: list[set[TopicPartition]] = []
        """Appended on the consumer's thread by a rebalance, handled on the event loop."""
        self._pausing = False
        """Full for PAUSE_AFTER: the partitions are paused until half the room is back."""
        self._paused: frozenset[TopicPartition] = frozenset()
        """The partitions paused (empty after a rebalance: pause them again)."""
        self._room = asyncio.Event()
        self._arrived = asyncio.Event()
        self._wake_commit = asyncio.Event()
        self._lag = 0
        self._stats = {
            "skipped": 0,
            "expired": 0,
            "undecodable": 0,
            "dropped_on_rebalance": 0,
            "consumer_restarts": 0,
            "pauses": 0,
        }

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Create `msg.all` when missing, fix a new group's start at the log's end, join
        the group and start reading. KafkaClientError when Kafka does not answer."""
        admin = KafkaAdmin(self.bootstrap_servers)
        await admin.ensure_topic(self.topic, self.partitions, timeout=self.timeout)
        await self._start_new_group_at_end(admin)
        self._consumer = self._new_consumer()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_loop(), name=f"integration-{self.spec.name}-read"),
            loop.create_task(self._commit_loop(), name=f"integration-{self.spec.name}-commit"),
            loop.create_task(self._lag_loop(), name=f"integration-{self.spec.name}-lag"),
        ]

    async def _start_new_group_at_end(self, admin: KafkaAdmin) -> None:
        # A consumer assigned (not subscribed) reads and commits the group's offsets
        # without joining it. Kafka takes such a commit only while the group has no
        # member, so a node starting beside running ones cannot move them. A Kafka just
        # started answers NOT_COORDINATOR for a while: retried until `timeout`.
        count = await admin.partitions(self.topic, timeout=self.timeout)
        parts = [TopicPartition(self.topic, n) for n in range(count)]
        probe = KafkaConsumer(
            self.bootstrap_servers, self.group_id, [], client_id=self._client_id(), assign=parts
        )
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                try:
                    committed = await probe.committed(parts)
                    if any(offset >= 0 for offset in committed.values()):
                        return
                    await probe.commit(await admin.end_offsets(parts, timeout=self.timeout))
                except (KafkaClientError, confluent_kafka.KafkaException) as exc:
                    if time.monotonic() >= deadline:
                        raise KafkaClientError(
                            f"kafka: cannot read or set the offsets of group "
                            f"{self.group_id!r}: {exc}"
                        ) from None
                    await asyncio.sleep(START_RETRY)
                    continue  # another node may have set them meanwhile: read again
                log.info(
                    "integration %s: new consumer group %s starts at the end of %s",
                    self.spec.name,
                    self.group_id,
                    self.topic,
                )
                return
        finally:
            await probe.close()

    def _client_id(self) -> str:
        return f"mqttq-integration-{self.spec.name}"

    def _new_consumer(self) -> KafkaConsumer:
        return KafkaConsumer(
            self.bootstrap_servers,
            self.group_id,
            [self.topic],
            client_id=self._client_id(),
            auto_offset_reset="earliest",
            config={
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 1_000,
                "queued.max.messages.kbytes": FETCH_QUEUE_KBYTES,
            },
            on_revoke=self._on_revoke,
        )

    async def close(self) -> None:
        """Commit what was settled and leave the group (its partitions go to the other
        nodes at once). What was taken and not settled is read again by their next owner.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        try:
            await consumer.commit(self._safe)
        except KafkaClientError as exc:
            log.warning("integration %s: offsets not committed at close: %s", self.spec.name, exc)
        await consumer.close()
        self._arrived.set()  # a take still waiting ends

    # -- Backlog -----------------------------------------------------------------------

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        """Wait for at least one delivery, then up to `linger` seconds for `max_items`,
        and return at most `max_items` of the oldest not yet taken, in the order read.
        StorageError once the backlog is closed or its reading failed."""
        if max_items < 1:
            raise ValueError(f"max_items must be at least 1, got {max_items}")
        loop = asyncio.get_running_loop()
        while True:
            while not self._ready:
                self._check_usable()
                self._arrived.clear()
                await self._arrived.wait()
            deadline = loop.time() + linger
            while len(self._ready) < max_items and (left := deadline - loop.time()) > 0:
                self._arrived.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await self._arrived.wait()
                self._check_usable()
            if self._ready:  # (a rebalance may have taken it all back meanwhile)
                count = min(max_items, len(self._ready))
                return [self._ready.popleft() for _ in range(count)]

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise StorageError(f"kafka backlog {self.spec.name!r}: {self._failure}")
        if self._closed:
            raise StorageError(f"kafka backlog {self.spec.name!r} is closed")

    async def settle(self, batch: Sequence[Delivery]) -> None:
        """`batch` is done: its offsets (and those of the records skipped around it) are
        committed soon. Deliveries a rebalance took back are ignored: their partition's
        new owner reads them again."""
        touched: set[TopicPartition] = set()
        for delivery in batch:
            where = self._held.pop(delivery.seq, None)
            if where is None:
                continue
            part = where[0]
            self._unsettled[part].pop(delivery.seq, None)
            touched.add(part)
        if touched:
            self._update_safe(touched)
            self._wake_commit.set()
            self._room.set()

    def lag(self) -> int:
        """Records of the assigned partitions not yet read (measured every LAG_INTERVAL;
        they include records other integrations want), plus the deliveries held."""
        return self._lag + len(self._held)

    # -- inspection ----------------------------------------------------------------------

    async def assignment(self) -> list[TopicPartition]:
        """The partitions of `msg.all` this node reads for the integration now."""
        consumer = self._consumer
        return [] if consumer is None else await consumer.assignment()

    def dropped(self) -> int:
        """Records that expired before their turn (the log itself never drops one)."""
        return self._stats["expired"]

    def statistics(self) -> dict[str, int]:
        """`held` (read, not settled), `skipped` (records for other integrations),
        `expired`, `undecodable`, `dropped_on_rebalance` (taken back by a rebalance: read
        again by the next owner), `consumer_restarts`, `pauses` (times it was full long
        enough to pause reading), `commit_failures`."""
        consumer = self._consumer
        failures = consumer.statistics()["commit_failures"] if consumer is not None else 0
        return {"held": len(self._held), **self._stats, "commit_failures": failures}

    # -- reading -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        try:
            while True:
                consumer = self._consumer
                assert consumer is not None
                try:
                    records = await self._read_some(consumer)
                except KafkaClientError as exc:
                    await self._replace_consumer(consumer, exc)
                    continue
                if self._revoked:
                    records = await self._after_rebalance(consumer, records)
                if records:
                    self._add(records)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # take() says so instead of waiting forever
            self._failure = exc
            self._arrived.set()
            log.exception("integration %s: reading the log failed", self.spec.name)
            raise

    async def _read_some(self, consumer: KafkaConsumer) -> list[Record]:
        """The next records, as many as there is room for. When full for PAUSE_AFTER (the
        sink is slow or down), the partitions are paused, and polled all the same (a
        rebalance is served only by a poll: a member that stops polling stalls the whole
        group's rebalance) until half the room is back. librdkafka drops what it had
        fetched of a paused partition, and a resume costs it most of a second: hence the
        wait before pausing, and the half."""
        held = len(self._held)
        if self._pausing:
            if held > self.max_in_flight // 2:
                await self._pause(consumer)
                return await consumer.poll_batch(1, READ_WAIT)
            await consumer.resume(await consumer.assignment())
            self._pausing = False
            self._paused = frozenset()
        elif held >= self.max_in_flight:
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PAUSE_AFTER):
                    await self._room.wait()
            if len(self._held) >= self.max_in_flight:
                self._pausing = True
                self._stats["pauses"] += 1
                await self._pause(consumer)
            return []
        return await consumer.poll_batch(self.max_in_flight - held, READ_WAIT)

    async def _pause(self, consumer: KafkaConsumer) -> None:
        # Pause again whenever the assignment is not the one paused (a rebalance).
        parts = frozenset(await consumer.assignment())
        if parts != self._paused:
            await consumer.pause(parts)
            self._paused = parts

    async def _replace_consumer(self, consumer: KafkaConsumer, exc: KafkaClientError) -> None:
        # Fatal for this consumer: a new one starts over from the committed offsets, so
        # everything held is read again.
        log.error("integration %s: %s; starting a new consumer", self.spec.name, exc)
        self._stats["consumer_restarts"] += 1
        self._drop(set(self._read_upto) | {part for part, _ in self._held.values()})
        with contextlib.suppress(KafkaClientError):
            await consumer.close()
        await asyncio.sleep(FAILED_WAIT)
        self._pausing = False
        self._paused = frozenset()
        self._consumer = self._new_consumer()

    def _on_revoke(self, partitions: set[TopicPartition]) -> Offsets:
        """On the consumer's thread, in a rebalance: what was settled of `partitions`,
        committed before they go. What is held of them is dropped on the event loop."""
        self._revoked.append(set(partitions))
        safe = self._safe
        return {part: safe[part] for part in partitions if part in safe}

    async def _after_rebalance(
        self, consumer: KafkaConsumer, records: list[Record]
    ) -> list[Record]:
        revoked: set[TopicPartition] = set()
        while self._revoked:
            revoked |= self._revoked.pop(0)
        self._drop(revoked)
        self._paused = frozenset()
        # Records of this poll from a partition now owned by another node are theirs.
        owned = set(await consumer.assignment())
        if not self._pausing and owned:  # a partition paused once may come back paused
            await consumer.resume(owned)
        return [r for r in records if TopicPartition(r.topic, r.partition) in owned]

    def _drop(self, partitions: set[TopicPartition]) -> None:
        dropped = 0
        for part in partitions:
            for seq in self._unsettled.pop(part, {}):
                dropped += self._held.pop(seq, None) is not None
            self._read_upto.pop(part, None)
            self._committed.pop(part, None)
        self._ready = deque(d for d in self._ready if d.seq in self._held)
        self._safe = {p: o for p, o in self._safe.items() if p not in partitions}
        self._stats["dropped_on_rebalance"] += dropped
        self._room.set()

    def _add(self, records: list[Record]) -> None:
        now = self._clock()
        touched: set[TopicPartition] = set()
        added = False
        for record in records:
            part = TopicPartition(record.topic, record.partition)
            touched.add(part)
            self._read_upto[part] = record.offset + 1
            try:
                tenant, message = decode_message(record.key, record.value, record.headers)
            except StorageError as exc:
                self._stats["undecodable"] += 1
                log.error("integration %s: skipping %s: %s", self.spec.name, record.where, exc)
                continue
            if not self._wanted(tenant, message):
                self._stats["skipped"] += 1
                continue
            if message.expires_at is not None and message.expires_at <= now:
                self._stats["expired"] += 1
                continue
            delivery = delivery_of(message, tenant, record_seq(record), now)
            self._held[delivery.seq] = (part, record.offset)
            self._unsettled.setdefault(part, {})[delivery.seq] = record.offset
            self._ready.append(delivery)
            added = True
        self._update_safe(touched)
        self._wake_commit.set()  # skipped records move the offsets on too
        if added:
            self._arrived.set()

    def _wanted(self, tenant: str, message: Message) -> bool:
        spec = self.spec
        if tenant != spec.tenant:
            return False
        topic = message.topic
        if not any(filter_matches(topic_filter, topic) for topic_filter in self._filters):
            return False
        return spec.payload_filter is None or spec.payload_filter.matches(message.payload)

    def _update_safe(self, partitions: set[TopicPartition]) -> None:
        safe = dict(self._safe)
        for part in partitions:
            upto = self._read_upto.get(part)
            if upto is None:
                continue
            unsettled = self._unsettled.get(part)
            safe[part] = min(unsettled.values()) if unsettled else upto
        self._safe = safe

    # -- commits and lag ---------------------------------------------------------------

    def _to_commit(self) -> Offsets:
        return {p: o for p, o in self._safe.items() if self._committed.get(p) != o}

    async def _commit_loop(self) -> None:
        # Sent without waiting for Kafka, at most every COMMIT_INTERVAL: a failed commit
        # is only counted; the next one carries the same or later offsets.
        while True:
            await self._wake_commit.wait()
            self._wake_commit.clear()
            consumer = self._consumer
            offsets = self._to_commit()
            if offsets and consumer is not None:
                try:
                    await consumer.commit(offsets, wait=False)
                except KafkaClientError as exc:
                    log.warning("integration %s: offsets not committed: %s", self.spec.name, exc)
                    self._wake_commit.set()
                else:
                    for part, offset in offsets.items():
                        if part in self._safe:  # not taken back meanwhile
                            self._committed[part] = offset
            await asyncio.sleep(COMMIT_INTERVAL)

    async def _lag_loop(self) -> None:
        while True:
            consumer = self._consumer
            if consumer is not None:
                with contextlib.suppress(KafkaClientError):  # Kafka away: keep the last
                    self._lag = await consumer.lag()
            await asyncio.sleep(LAG_INTERVAL)
