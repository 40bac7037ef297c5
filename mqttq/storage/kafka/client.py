"""The one asyncio wrapper over confluent-kafka (librdkafka): producer, consumer, topic admin.

Import this module only when Kafka is configured: it imports confluent_kafka at once, and
the embedded broker must not load it (the composition root imports it lazily).

- `KafkaProducer.produce` returns a future resolved on the event loop from the delivery
  report (acks=all, idempotent: a record is acknowledged once, in order per partition). A
  thread polls the producer; a delivery Kafka does not confirm within `delivery_timeout_ms`
  fails instead of waiting forever.
- `KafkaConsumer` runs a confluent Consumer on one thread of its own (the Consumer is not
  safe for concurrent use); every call (`poll_batch`, `commit`, `pause`, `resume`, `close`)
  is serialized there. Offsets are committed only explicitly (enable.auto.commit=false).
- `KafkaAdmin.ensure_topic` creates a topic, or finds it there already.

Failures surface as `KafkaClientError` (a StorageError): the caller decides what a failed
produce means for its publisher.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, cast

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

from mqttq.errors import StorageError

__all__ = [
    "OFFSET_BEGINNING",
    "KafkaAdmin",
    "KafkaClientError",
    "KafkaConsumer",
    "KafkaProducer",
    "Record",
    "TopicPartition",
]

Headers = list[tuple[str, bytes]]
"""Record headers as librdkafka gives and takes them: (name, value) pairs, in order."""

OFFSET_BEGINNING: Final = confluent_kafka.OFFSET_BEGINNING
"""Start offset of `KafkaConsumer(assign={partition: OFFSET_BEGINNING})`: the first record."""

_POLL_SECONDS: Final = 0.05
"""How long the producer's poll thread blocks per call (also bounds how long close waits)."""


class KafkaClientError(StorageError):
    """Kafka refused or did not confirm an operation (the text says which and why)."""


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """One partition of one topic."""

    topic: str
    partition: int


class Record(NamedTuple):
    """A consumed record: where it is, and what it holds; `timestamp_ms` is Kafka's
    record timestamp (create time), ms since the epoch. A tuple, not a frozen dataclass:
    one is built per record on the consumer thread, which holds the GIL meanwhile, and a
    tuple is built about three times faster."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: Headers
    timestamp_ms: int

    @property
    def where(self) -> str:
        """`topic[partition]@offset`, for a log line about this record."""
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where Kafka stored a produced record."""

    partition: int
    offset: int


_LIBRDKAFKA_LOG: Final = logging.getLogger("mqttq.storage.librdkafka")
_LOG: Final = logging.getLogger("mqttq.storage.kafka")


def _common(bootstrap_servers: str, client_id: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        # Through Python logging, not librdkafka's own stderr lines; only critical ones:
        # an unreachable Kafka surfaces as failed deliveries and errors instead of a
        # "Connect failed" line per retry.
        "logger": _LIBRDKAFKA_LOG,
        "log_level": 2,
    }


class KafkaProducer:
    """An idempotent acks=all producer; `produce` is called on the event loop thread."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        delivery_timeout_ms: int = 10_000,
        linger_ms: float = 5.0,
        client_id: str = "mqttq",
    ) -> None:
        config = _common(bootstrap_servers, client_id)
        config.update(
            {
                "acks": "all",
                "enable.idempotence": True,
                "delivery.timeout.ms": delivery_timeout_ms,
                # A request must time out before the delivery does, or librdkafka refuses.
                "request.timeout.ms": min(30_000, max(1, delivery_timeout_ms - 1)),
                "linger.ms": linger_ms,
                "compression.type": "none",
            }
        )
        self._producer = confluent_kafka.Producer(config)
        self._loop = asyncio.get_running_loop()
        # Delivery reports arrive on whichever thread polls (the poll thread, or flush's);
        # deque appends and pops are thread-safe.
        self._done: collections.deque[tuple[asyncio.Future[Delivered], Any, Any]] = (
            collections.deque()
        )
        self.failed = False
        """True once librdkafka reported a fatal error (an idempotent producer can end up
        fenced): every later produce would fail; replace the producer."""
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="mqttq-kafka-producer", daemon=True)
        self._thread.start()

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
    ) -> asyncio.Future[Delivered]:
        """Send one record (`value` None: a tombstone); the future resolves once Kafka
        acknowledged it (all in-sync replicas), or fails with KafkaClientError. Records
        with the same key go to the same partition in the order of the calls."""
        future: asyncio.Future[Delivered] = self._loop.create_future()
        report = functools.partial(_report, self._done, future)
        try:
            self._producer.produce(
                topic, value, key, headers=cast(Any, headers), on_delivery=report
            )
        except BufferError:
            future.set_exception(KafkaClientError("kafka: producer queue is full"))
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, confluent_kafka.KafkaError) and error.fatal():
                self.failed = True
            future.set_exception(KafkaClientError(f"kafka: produce failed: {exc}"))
        return future

    def _poll(self) -> None:
        producer = self._producer
        while not self._closing.is_set() or len(producer):
            producer.poll(_POLL_SECONDS)
            done = self._done
            if done:
                batch = [done.popleft() for _ in range(len(done))]
                if any(error is not None and error.fatal() for _, error, _ in batch):
                    self.failed = True
                try:
                    self._loop.call_soon_threadsafe(_settle, batch)
                except RuntimeError:  # the loop closed: nobody is waiting any more
                    return

    async def flush(self, timeout: float = 10.0) -> int:
        """Wait until every record sent so far is delivered or failed (at most `timeout`
        seconds); how many are still outstanding."""
        return int(await asyncio.to_thread(self._producer.flush, timeout))

    async def close(self, timeout: float = 10.0) -> None:
        """Flush (bounded by `timeout`), then stop the poll thread. Idempotent."""
        if self._closing.is_set():
            return
        await self.flush(timeout)
        self._closing.set()
        # Anything still queued after the flush bound is purged: its futures fail.
        self._producer.purge()
        await asyncio.to_thread(self._thread.join, timeout)

    def statistics(self) -> dict[str, int]:
        """`queued`: records sent but not yet acknowledged or failed."""
        return {"queued": len(self._producer)}


def _report(
    done: collections.deque[tuple[asyncio.Future[Delivered], Any, Any]],
    future: asyncio.Future[Delivered],
    error: Any,
    message: Any,
) -> None:
    done.append((future, error, message))  # on a polling thread: settled on the loop


def _settle(batch: list[tuple[asyncio.Future[Delivered], Any, Any]]) -> None:
    for future, error, message in batch:
        if future.done():
            continue
        if error is not None:
            future.set_exception(KafkaClientError(f"kafka: did not confirm the record: {error}"))
        else:
            future.set_result(Delivered(message.partition(), message.offset()))


class KafkaConsumer:
    """A consumer in group `group_id`, subscribed to `topics`, with explicit commits.

    Every method runs on the consumer's own thread, one at a time; `poll_batch` blocks that
    thread for at most `timeout`, so other calls wait at most that long.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        topics: Iterable[str],
        *,
        client_id: str = "mqttq",
        auto_offset_reset: str = "earliest",
        config: Mapping[str, Any] | None = None,
        assign: Iterable[TopicPartition] | Mapping[TopicPartition, int] | None = None,
        on_revoke: Callable[[set[TopicPartition]], Mapping[TopicPartition, int]] | None = None,
    ) -> None:
        """With `assign`, the consumer reads those partitions without joining the group
        (no rebalance, so no wait for a dead member's session to time out); the group
        only keeps its committed offsets, where reading starts, unless `assign` maps each
        partition to the offset to start at (OFFSET_BEGINNING for the first record).
        `topics` is then unused. Without it, `on_revoke` (called on the consumer's
        thread when a rebalance takes partitions away) returns offsets of theirs to
        commit before they go: the member that gets them reads less again."""
        settings = _common(bootstrap_servers, client_id)
        settings.update(
            {
                "group.id": group_id,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": auto_offset_reset,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
                # Fewer, larger fetches: Kafka's CPU is per request more than per record.
                "fetch.min.bytes": 65_536,
                "fetch.wait.max.ms": 10,
            }
        )
        settings["on_commit"] = self._committed_cb
        settings.update(config or {})
        self._commit_failures = 0
        self._executor = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="mqttq-kafka-consumer"
        )
        self._consumer = confluent_kafka.Consumer(settings)
        self._on_revoke = on_revoke
        if assign is None and on_revoke is not None:
            self._consumer.subscribe(list(topics), on_revoke=self._revoked)
        elif assign is None:
            self._consumer.subscribe(list(topics))
        else:
            self._consumer.assign(_native(assign))
        self._closed = False

    async def _run(self, function: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function, *args)

    async def poll_batch(self, max_records: int, timeout: float) -> list[Record]:
        """Up to `max_records` records, waiting at most `timeout` seconds for the first;
        [] when none came. Raises KafkaClientError on a fatal consumer error."""
        return list(await self._run(self._poll_batch, max_records, timeout))

    def _poll_batch(self, max_records: int, timeout: float) -> list[Record]:
        records: list[Record] = []
        # consume(n, timeout) waits for n records or the timeout: wait for the first
        # one only, then take what is already fetched.
        first = self._consumer.poll(timeout)
        if first is None:
            return records
        messages = [first]
        if max_records > 1:
            messages += self._consumer.consume(max_records - 1, 0)
        for message in messages:
            error = message.error()
            if error is not None:
                if error.fatal():
                    raise KafkaClientError(f"kafka: consumer failed: {error}")
                continue  # transient (broker down, rebalance): librdkafka retries
            _, timestamp = message.timestamp()
            records.append(
                Record(
                    message.topic() or "",
                    message.partition() or 0,
                    message.offset() or 0,
                    message.key(),
                    message.value() or b"",
                    cast(Headers, message.headers() or []),
                    timestamp,
                )
            )
        return records

    async def commit(self, offsets: Mapping[TopicPartition, int], *, wait: bool = True) -> None:
        """Commit `offsets` (the NEXT offset to read, i.e. last processed + 1). With
        `wait`, until Kafka confirmed (KafkaClientError when it does not); without, the
        commit is only sent, and a failure is counted in `statistics()`."""
        if offsets:
            await self._run(self._commit, dict(offsets), wait)

    def _commit(self, offsets: dict[TopicPartition, int], wait: bool) -> None:
        partitions = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
            for tp, offset in offsets.items()
        ]
        try:
            if wait:
                self._consumer.commit(offsets=partitions, asynchronous=False)
            else:
                self._consumer.commit(offsets=partitions, asynchronous=True)
        except confluent_kafka.KafkaException as exc:
            self._commit_failures += 1
            raise KafkaClientError(f"kafka: offset commit failed: {exc}") from None

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:  # on the consumer thread
        assert self._on_revoke is not None
        offsets = self._on_revoke({TopicPartition(p.topic, p.partition) for p in partitions})
        if not offsets:
            return
        try:
            consumer.commit(offsets=_native(offsets), asynchronous=False)
        except confluent_kafka.KafkaException as exc:  # e.g. lost, not revoked: too late
            self._commit_failures += 1
            _LOG.warning("offsets of revoked partitions not committed: %s", exc)

    def _committed_cb(self, error: Any, _partitions: Any) -> None:  # on the consumer thread
        if error is not None:
            self._commit_failures += 1

    def statistics(self) -> dict[str, int]:
        """`commit_failures`: offset commits Kafka refused (sent or waited for)."""
        return {"commit_failures": self._commit_failures}

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets (-1001 where none), for lag and inspection."""
        asked = [confluent_kafka.TopicPartition(p.topic, p.partition) for p in partitions]
        found = await self._run(self._consumer.committed, asked, 10.0)
        return {TopicPartition(p.topic, p.partition): p.offset for p in found}

    async def lag(self) -> int:
        """Records in the assigned partitions not yet consumed (high watermark minus
        position); 0 when nothing is assigned. KafkaClientError when Kafka cannot say."""
        try:
            return int(await self._run(self._lag))
        except confluent_kafka.KafkaException as exc:
            raise KafkaClientError(f"kafka: consumer lag unknown: {exc}") from None

    def _lag(self) -> int:
        consumer = self._consumer
        total = 0
        for part in consumer.assignment():
            _, high = consumer.get_watermark_offsets(part, cached=True) or (0, 0)
            position = consumer.position([part])[0].offset
            if position >= 0 and high >= 0:
                total += max(0, high - position)
        return total

    async def assignment(self) -> list[TopicPartition]:
        """The partitions the group currently gives this consumer."""
        parts = await self._run(self._consumer.assignment)
        return [TopicPartition(p.topic, p.partition) for p in parts]

    async def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching `partitions` (records already fetched may still come)."""
        await self._run(self._consumer.pause, _native(partitions))

    async def resume(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch `partitions` again after `pause`."""
        await self._run(self._consumer.resume, _native(partitions))

    async def close(self) -> None:
        """Leave the group (without committing anything) and stop the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._run(self._consumer.close)
        finally:
            self._executor.shutdown(wait=False)


def _native(
    partitions: Iterable[TopicPartition] | Mapping[TopicPartition, int],
) -> list[confluent_kafka.TopicPartition]:
    if isinstance(partitions, Mapping):
        return [
            confluent_kafka.TopicPartition(p.topic, p.partition, offset)
            for p, offset in partitions.items()
        ]
    return [confluent_kafka.TopicPartition(p.topic, p.partition) for p in partitions]


class KafkaAdmin:
    """Topic administration through librdkafka's AdminClient."""

    def __init__(self, bootstrap_servers: str, *, client_id: str = "mqttq") -> None:
        self._admin = AdminClient(_common(bootstrap_servers, client_id))

    async def ensure_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, str] | None = None,
        *,
        timeout: float = 30.0,
    ) -> bool:
        """Create topic `name` with `partitions` partitions (replication factor: the
        broker's default) and topic `config`; True when created, False when it existed
        already (its settings are left as they are). Raises KafkaClientError otherwise,
        also when Kafka does not answer within `timeout` seconds."""
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=-1, config=dict(config or {})
        )
        futures = self._admin.create_topics([topic], request_timeout=timeout)
        try:
            await asyncio.wait_for(asyncio.wrap_future(futures[name]), timeout)
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, confluent_kafka.KafkaError) else None
            if code == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            raise KafkaClientError(f"kafka: cannot create topic {name!r}: {exc}") from None
        except TimeoutError:
            raise KafkaClientError(
                f"kafka: cannot create topic {name!r}: no answer from Kafka in {timeout:g} s"
            ) from None
        return True

    async def offsets(
        self, group: str, partition: TopicPartition, *, timeout: float = 10.0
    ) -> tuple[int | None, int]:
        """(offset committed by `group` or None, end offset) of `partition`, for
        inspection. Raises KafkaClientError when Kafka does not answer."""
        native = confluent_kafka.TopicPartition(partition.topic, partition.partition)
        request = [confluent_kafka.ConsumerGroupTopicPartitions(group, [native])]
        try:
            committed_f = self._admin.list_consumer_group_offsets(request, request_timeout=timeout)
            latest = cast(Any, OffsetSpec).latest()  # untyped in confluent_kafka
            ends_f = self._admin.list_offsets({native: latest}, request_timeout=timeout)
            found = await asyncio.wait_for(asyncio.wrap_future(committed_f[group]), timeout)
            end = await asyncio.wait_for(asyncio.wrap_future(ends_f[native]), timeout)
        except (confluent_kafka.KafkaException, TimeoutError) as exc:
            raise KafkaClientError(
                f"cannot read the offsets of {partition.topic!r}: {exc}"
            ) from None
        committed = [p.offset for p in found.topic_partitions if p.offset >= 0]
        return (committed[0] if committed else None), int(end.offset)

    async def end_offsets(
        self, partitions: Iterable[TopicPartition], *, timeout: float = 10.0
    ) -> dict[TopicPartition, int]:
        """The end offset (next offset to be written) of each partition; KafkaClientError
        when Kafka does not answer."""
        latest = cast(Any, OffsetSpec).latest()
        asked = {confluent_kafka.TopicPartition(p.topic, p.partition): latest for p in partitions}
        try:
            futures = self._admin.list_offsets(asked, request_timeout=timeout)
            ends: dict[TopicPartition, int] = {}
            for native, future in futures.items():
                found = await asyncio.wait_for(asyncio.wrap_future(future), timeout)
                ends[TopicPartition(native.topic, native.partition)] = int(found.offset)
        except (confluent_kafka.KafkaException, TimeoutError) as exc:
            raise KafkaClientError(f"kafka: end offsets unknown: {exc}") from None
        return ends

    async def partitions(self, name: str, *, timeout: float = 10.0) -> int:
        """How many partitions topic `name` has; KafkaClientError when it does not exist."""

        def describe() -> int:
            metadata = self._admin.list_topics(name, timeout=timeout)
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                raise KafkaClientError(f"kafka: topic {name!r} not found")
            return len(topic.partitions)

        try:
            return await asyncio.to_thread(describe)
        except confluent_kafka.KafkaException as exc:
            raise KafkaClientError(f"kafka: cannot describe topic {name!r}: {exc}") from None
