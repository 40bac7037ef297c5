"""The worker with several batches in flight (the `kafka` sink's `batches_in_flight`):
the next batch is sent while the sink still confirms the earlier ones; batches are settled
in the order taken, and a failure in an earlier batch settles nothing past it and sends it
and every later batch again, in order. Against a real Kafka, and (for a failure of exactly
the first batch of two in flight) against a real HTTP receiver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from mqttq.integrations.memory import MemoryBacklog, MemoryDeadLetters
from mqttq.integrations.record import Delivery, envelope
from mqttq.integrations.sinks.http import HttpSink, HttpSinkSettings
from mqttq.integrations.sinks.kafka import KafkaSink
from mqttq.integrations.spec import DeliverySettings
from mqttq.integrations.worker import IntegrationWorker
from tests.integrations.http_receivers import Receiver
from tests.integrations.kafka_sink_helpers import deliveries, read_records, settings
from tests.kafka_fixtures import KafkaFactory
from tests.kafka_service import KafkaServer

DEADLINE = 60.0
"""Bounds a hang; never a performance bound."""


class CountingBacklog(MemoryBacklog):
    """A MemoryBacklog that notes the most deliveries taken and not yet settled at once."""

    def __init__(self, items: Sequence[Delivery] = ()) -> None:
        super().__init__(items)
        self.most_taken = 0

    async def take(self, max_items: int, linger: float) -> Sequence[Delivery]:
        batch = await super().take(max_items, linger)
        self.most_taken = max(self.most_taken, len(self.taken))
        return batch


async def wait_until(predicate: Any, timeout: float = DEADLINE) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def test_the_kafka_sink_has_batches_in_flight_within_max_in_flight() -> None:
    sink = KafkaSink(settings(bootstrap_servers="127.0.0.1:9", topic="t"), "k")
    backlog, dead = MemoryBacklog(), MemoryDeadLetters()
    roomy = DeliverySettings(batch_size=100, max_in_flight=1_000)
    assert IntegrationWorker("k", sink, backlog, dead, roomy).batches_in_flight == 3
    # max_in_flight bounds the deliveries held: two batches of 400 fit in 1,000, not three.
    tight = DeliverySettings(batch_size=400, max_in_flight=1_000)
    assert IntegrationWorker("k", sink, backlog, dead, tight).batches_in_flight == 2
    one = DeliverySettings(batch_size=1_000, max_in_flight=1_000)
    assert IntegrationWorker("k", sink, backlog, dead, one).batches_in_flight == 1
    # A sink without the attribute (http) gets one send at a time, as before.
    http = HttpSink(HttpSinkSettings.from_table({"url": "http://127.0.0.1:9/"}, "i"), "h")
    assert IntegrationWorker("h", http, backlog, dead, roomy).batches_in_flight == 1


def test_batches_in_flight_land_in_order_and_settle_in_order(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    topic = f"{kafka_prefix}pipelined"
    sink = KafkaSink(settings(bootstrap_servers=kafka.bootstrap, topic=topic), "pipelined")
    batch = deliveries(95)
    backlog = CountingBacklog(batch)
    dead = MemoryDeadLetters()
    delivery = DeliverySettings(batch_size=10, linger_ms=0, max_in_flight=100)
    worker = IntegrationWorker("pipelined", sink, backlog, dead, delivery)

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await wait_until(lambda: len(backlog.settled) == 95)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        records = await read_records(kafka.bootstrap, topic, 95)
        assert [json.loads(r.value) for r in records] == [envelope(d) for d in batch]
        assert [dict(r.headers)["mqttq.seq"] for r in records] == [b"%d" % n for n in range(1, 96)]

    asyncio.run(scenario())
    assert [d.seq for d in backlog.settled] == list(range(1, 96))
    assert backlog.most_taken > 10  # more than one batch was taken before the first settled
    assert backlog.most_taken <= 30  # never more than 3 batches of 10
    assert (worker.stats.delivered, worker.stats.failed, worker.stats.retried) == (95, 0, 0)
    assert dead.letters == []
    assert worker.state == "stopped"


def test_rejected_records_in_a_later_batch_go_to_the_dead_letters_in_order(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    # The topic is the MQTT topic's second level: "bad topic" is no Kafka topic name.
    sink = KafkaSink(
        settings(bootstrap_servers=kafka.bootstrap, topic=kafka_prefix + "{topic_level_2}"),
        "rejects",
    )
    batch = deliveries(30, topic="s/good")
    for index in (14, 25):
        batch[index] = Delivery(
            topic="s/bad topic", payload=b"x", client_id="dev-1", seq=batch[index].seq
        )
    backlog = MemoryBacklog(batch)
    dead = MemoryDeadLetters()
    delivery = DeliverySettings(batch_size=5, linger_ms=0, max_in_flight=50)
    worker = IntegrationWorker("rejects", sink, backlog, dead, delivery)

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await wait_until(lambda: len(backlog.settled) == 30)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        records = await read_records(kafka.bootstrap, f"{kafka_prefix}good", 28)
        assert [dict(r.headers)["mqttq.seq"] for r in records] == [
            b"%d" % d.seq for d in batch if d.topic == "s/good"
        ]

    asyncio.run(scenario())
    assert [d.seq for d in backlog.settled] == list(range(1, 31))
    assert [rejected.delivery.seq for _, rejected in dead.letters] == [15, 26]
    assert "not a valid topic name" in dead.letters[0][1].reason
    assert (worker.stats.delivered, worker.stats.dead_lettered) == (28, 2)


class PipelinedHttpSink(HttpSink):
    """The HTTP sink with two sends at once, as the Kafka sink does them."""

    batches_in_flight: ClassVar[int] = 2


def test_a_failure_in_the_first_of_two_batches_settles_nothing_past_it() -> None:
    async def scenario() -> None:
        first_refused = True

        def answer(body: bytes) -> int:
            numbers = [json.loads(item["payload"])["n"] for item in json.loads(body)]
            return 503 if first_refused and numbers[0] == 1 else 200

        async with Receiver(answer=answer) as receiver:
            items = [
                Delivery(
                    topic="sensors/1",
                    payload=json.dumps({"n": n}).encode(),
                    client_id="dev-1",
                    seq=n,
                )
                for n in range(1, 21)
            ]
            backlog = MemoryBacklog(items)
            dead = MemoryDeadLetters()
            sink = PipelinedHttpSink(
                HttpSinkSettings.from_table({"url": receiver.url(), "body": "array"}, "i"),
                "hook",
            )
            delivery = DeliverySettings(
                batch_size=10, linger_ms=0, retry_initial_ms=5, retry_max_ms=20
            )
            worker = IntegrationWorker("hook", sink, backlog, dead, delivery)
            assert worker.batches_in_flight == 2
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: worker.stats.failed >= 3)
            accepted = [r for r in receiver.received if r.status == 200]
            # The second batch was sent with the first and accepted; nothing is settled
            # while the first is refused.
            assert len(accepted) >= 1
            assert backlog.settled == []
            assert worker.state == "retrying"
            first_refused = False
            await wait_until(lambda: len(backlog.settled) == 20)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        numbers = [
            json.loads(item["payload"])["n"]
            for request in receiver.received
            if request.status == 200
            for item in request.json()
        ]
        # The second batch once while the first failed; then the first and the second again.
        assert numbers == [*range(11, 21), *range(1, 21)]
        assert [d.seq for d in backlog.settled] == list(range(1, 21))
        assert worker.stats.delivered == 20
        assert worker.stats.retried >= 20  # both batches sent again, the first at least once
        assert dead.letters == []

    asyncio.run(scenario())


@pytest.mark.slow
def test_kafka_down_with_batches_in_flight_then_back_nothing_lost_settled_in_order(
    kafka_factory: KafkaFactory, kafka_prefix: str
) -> None:
    node = kafka_factory()
    topic = f"{kafka_prefix}outage"
    sink = KafkaSink(
        settings(bootstrap_servers=node.bootstrap, topic=topic, value="raw", timeout_ms=2_000),
        "outage",
    )
    backlog = MemoryBacklog(deliveries(20))
    dead = MemoryDeadLetters()
    delivery = DeliverySettings(
        batch_size=5, linger_ms=0, retry_initial_ms=50, retry_max_ms=500, max_in_flight=50
    )
    worker = IntegrationWorker("outage", sink, backlog, dead, delivery)

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await wait_until(lambda: len(backlog.settled) == 20)
        await asyncio.to_thread(node.stop)
        for item in deliveries(60)[20:]:
            backlog.add(item)
        await wait_until(lambda: worker.stats.failed >= 2)
        assert [d.seq for d in backlog.settled] == list(range(1, 21))
        await asyncio.to_thread(node.start)
        await wait_until(lambda: len(backlog.settled) == 60)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        wanted = {b"m%d" % n for n in range(60)}
        count = 60
        values = [r.value for r in await read_records(node.bootstrap, topic, count)]
        while set(values) != wanted:  # duplicates came first: read as many more
            count += len(wanted - set(values))
            values = [r.value for r in await read_records(node.bootstrap, topic, count)]
        # At least once: every message is there; the last copy of each comes in order.
        last = sorted(set(values), key=lambda v: max(i for i, x in enumerate(values) if x == v))
        assert last == [b"m%d" % n for n in range(60)]

    asyncio.run(scenario())
    assert [d.seq for d in backlog.settled] == list(range(1, 61))
    assert worker.stats.delivered == 60
    assert dead.letters == []


def test_paused_with_batches_in_flight_they_settle_and_nothing_more_is_sent() -> None:
    async def scenario() -> None:
        async with Receiver(hold=True) as receiver:
            items = [
                Delivery(topic="s/1", payload=json.dumps({"n": n}).encode(), seq=n)
                for n in range(1, 31)
            ]
            backlog = MemoryBacklog(items[:20])
            dead = MemoryDeadLetters()
            sink = PipelinedHttpSink(
                HttpSinkSettings.from_table({"url": receiver.url(), "body": "array"}, "i"),
                "hook",
            )
            delivery = DeliverySettings(batch_size=10, linger_ms=0)
            worker = IntegrationWorker("hook", sink, backlog, dead, delivery)
            task = asyncio.create_task(worker.run())
            await wait_until(lambda: len(backlog.taken) == 20)  # both batches sent, held
            worker.pause()
            receiver.release()
            await wait_until(lambda: len(backlog.settled) == 20)
            for item in items[20:]:
                backlog.add(item)
            await asyncio.sleep(0.2)
            assert worker.state == "paused"
            assert len(receiver.received) == 2
            assert backlog.lag() == 10
            worker.resume()
            await wait_until(lambda: len(backlog.settled) == 30)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        numbers = [
            json.loads(item["payload"])["n"]
            for request in receiver.received
            for item in request.json()
        ]
        assert sorted(numbers[:20]) == list(range(1, 21))  # the two held batches, either order
        assert numbers[20:] == list(range(21, 31))
        assert [d.seq for d in backlog.settled] == list(range(1, 31))

    asyncio.run(scenario())
