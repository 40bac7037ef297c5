"""An integration's backlog in distributed mode (issue 33): a consumer group on `msg.all`
against the suite's real Kafka, fed by KafkaMessageLog.append (the broker's own records).

What it promises: the integration's records (tenant, filters, payload filter) in order per
publisher; a new group starts at the log's end; settled records are never read again and
taken-not-settled ones are; two nodes split the partitions and see each record once; a node
that leaves hands its partitions (and what it had not settled) to the other; and end to end
through the worker and the real HTTP sink into a real aiohttp receiver."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest

from mqttq.codec.properties import Properties
from mqttq.integrations.kafka_backlog import KafkaBacklog, group_id
from mqttq.integrations.memory import MemoryDeadLetters
from mqttq.integrations.record import Delivery
from mqttq.integrations.sinks.http import HttpSink
from mqttq.integrations.spec import IntegrationSpec, parse_integration
from mqttq.integrations.worker import IntegrationWorker
from mqttq.model import Message
from mqttq.storage.kafka.client import KafkaAdmin, TopicPartition
from mqttq.storage.kafka.message_log import KafkaMessageLog
from tests.integrations.http_receivers import Receiver
from tests.kafka_service import KafkaServer

pytestmark = pytest.mark.slow

DEADLINE = 60.0
"""Bounds a hang (a JVM on a loaded 2-core machine); never a performance bound."""
PARTITIONS = 3


def spec_for(**table: Any) -> IntegrationSpec:
    """An http integration named "hook" taking `sensors/#` unless `table` says otherwise."""
    base: dict[str, Any] = {
        "name": "hook",
        "type": "http",
        "url": "http://127.0.0.1:9/ingest",
        "filters": ["sensors/#"],
    }
    return parse_integration({**base, **table}, "integration[0]")


def message(publisher: str, topic: str, n: int, **fields: Any) -> Message:
    return Message(
        topic,
        json.dumps({"n": n}).encode(),
        qos=1,
        created_at=fields.pop("created_at", time.time()),
        publisher_id=publisher,
        **fields,
    )


@asynccontextmanager
async def message_log(kafka: KafkaServer, prefix: str) -> AsyncIterator[KafkaMessageLog]:
    log = KafkaMessageLog(kafka.bootstrap, topic_prefix=prefix, partitions=PARTITIONS)
    await log.open()
    try:
        yield log
    finally:
        await log.close()


async def append(log: KafkaMessageLog, items: Sequence[tuple[str, Message]]) -> None:
    """Append in order (each publisher's records stay in order in its partition)."""
    await asyncio.gather(*(log.append(tenant, item) for tenant, item in items))


@asynccontextmanager
async def backlog_of(
    kafka: KafkaServer, prefix: str, spec: IntegrationSpec
) -> AsyncIterator[KafkaBacklog]:
    backlog = KafkaBacklog(spec, kafka.bootstrap, prefix, partitions=PARTITIONS)
    await backlog.open()
    try:
        yield backlog
    finally:
        await backlog.close()


async def take_until(
    backlog: KafkaBacklog, count: int, *, settle: bool = True, batch: int = 100
) -> list[Delivery]:
    """Take (and settle, unless told not to) until `count` deliveries came."""
    got: list[Delivery] = []
    while len(got) < count:
        taken = await backlog.take(min(batch, count - len(got)), 0.01)
        assert 0 < len(taken) <= min(batch, count - len(got))
        got += taken
        if settle:
            await backlog.settle(taken)
    return got


def round_robin(publishers: Sequence[str], count: int) -> list[tuple[str, Message]]:
    """`count` messages of each publisher on `sensors/t`, interleaved."""
    return [("default", message(p, "sensors/t", n)) for n in range(count) for p in publishers]


def numbers(deliveries: Sequence[Delivery]) -> list[int]:
    return [json.loads(d.payload)["n"] for d in deliveries]


def by_publisher(deliveries: Sequence[Delivery]) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for delivery in deliveries:
        found.setdefault(delivery.client_id, []).append(json.loads(delivery.payload)["n"])
    return found


async def wait_assigned(*backlogs: KafkaBacklog) -> list[set[TopicPartition]]:
    """Until every backlog holds partitions and together they hold each one once."""
    while True:
        owned = [set(await b.assignment()) for b in backlogs]
        every = [p for parts in owned for p in parts]
        if all(owned) and len(every) == len(set(every)) == PARTITIONS:
            return owned
        await asyncio.sleep(0.05)


async def committed_and_end(kafka: KafkaServer, prefix: str) -> list[tuple[int | None, int]]:
    admin = KafkaAdmin(kafka.bootstrap)
    group = group_id(prefix, "hook")
    return [
        await admin.offsets(group, TopicPartition(f"{prefix}msg.all", n)) for n in range(PARTITIONS)
    ]


async def wait_all_committed(kafka: KafkaServer, prefix: str) -> None:
    while True:
        offsets = await committed_and_end(kafka, prefix)
        if all(committed == end for committed, end in offsets):
            return
        await asyncio.sleep(0.05)


def test_take_gives_the_integrations_records_in_order_per_publisher(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    """Only records of the tenant, matching a filter and the payload filter, not expired;
    each publisher's in order; every field of the Delivery from the record."""
    spec = spec_for(
        tenant="acme", filters=["sensors/+/temp", "alarm/#"], payload_filter="$.n != 500"
    )

    async def scenario() -> None:
        async with (
            message_log(kafka, kafka_prefix) as log,
            backlog_of(kafka, kafka_prefix, spec) as backlog,
        ):
            now = time.time()
            props = Properties(content_type="application/json", user_properties=[("k", "v")])
            items: list[tuple[str, Message]] = []
            for n in range(20):
                for pub in ("dev-a", "dev-b", "dev-c"):
                    topic = "sensors/kitchen/temp" if n % 2 else "alarm/door"
                    items.append(("acme", message(pub, topic, n, created_at=now, properties=props)))
                    items.append(("other", message(pub, topic, 100 + n)))  # other tenant
                    items.append(("acme", message(pub, "sensors/kitchen", 200 + n)))
            items.append(("acme", message("dev-a", "alarm/x", 500)))  # payload filter
            expired = message("dev-b", "alarm/x", 300, created_at=now - 10, expires_at=now - 5)
            items.append(("acme", expired))
            lasting = message("dev-c", "alarm/x", 400, created_at=now, expires_at=now + 100)
            items.append(("acme", lasting))
            items += [("acme", message(pub, "alarm/end", 999)) for pub in ("dev-a", "dev-b")]
            await append(log, items)

            async with asyncio.timeout(DEADLINE):
                got = await take_until(backlog, 3 * 20 + 1 + 2)
            assert by_publisher(got) == {
                "dev-a": [*range(20), 999],
                "dev-b": [*range(20), 999],
                "dev-c": [*range(20), 400],
            }
            first = next(d for d in got if d.client_id == "dev-a")
            assert first.topic == "alarm/door"
            assert first.tenant == "acme"
            assert (first.qos, first.retain) == (1, False)
            assert first.content_type == "application/json"
            assert first.user_properties == (("k", "v"),)
            assert first.timestamp_ms == int(now * 1000)
            (kept,) = [d for d in got if numbers([d]) == [400]]
            assert kept.message_expiry_interval is not None
            assert 0 < kept.message_expiry_interval <= 100
            assert len({d.seq for d in got}) == len(got)
            for publisher in ("dev-a", "dev-b", "dev-c"):
                seqs = [d.seq for d in got if d.client_id == publisher]
                assert seqs == sorted(seqs)
            stats = backlog.statistics()
            assert stats["expired"] == 1
            assert stats["skipped"] == 2 * 3 * 20 + 1
            assert stats["held"] == 0

    asyncio.run(scenario())


def test_take_never_holds_more_than_max_in_flight(kafka: KafkaServer, kafka_prefix: str) -> None:
    """With max_in_flight 5, a take asking for 100 gets at most 5; settling makes room for
    the next ones, in order."""
    spec = spec_for(batch_size=5, max_in_flight=5)

    async def scenario() -> None:
        async with (
            message_log(kafka, kafka_prefix) as log,
            backlog_of(kafka, kafka_prefix, spec) as backlog,
        ):
            await append(log, [("default", message("dev", "sensors/t", n)) for n in range(23)])
            got: list[Delivery] = []
            async with asyncio.timeout(DEADLINE):
                while len(got) < 23:
                    taken = await backlog.take(100, 0.05)
                    assert 0 < len(taken) <= 5
                    assert backlog.statistics()["held"] <= 5
                    got += taken
                    await backlog.settle(taken)
            assert numbers(got) == list(range(23))

    asyncio.run(scenario())


def test_a_new_group_starts_at_the_end_and_a_restarted_one_where_it_settled(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    """Records older than the group are not read, even when its first node left before
    anything came; a node of the group continues after what was settled: taken and not
    settled is read again, settled never. Skipped records' offsets are committed too."""
    spec = spec_for()

    async def scenario() -> None:
        async with message_log(kafka, kafka_prefix) as log:
            await append(log, [("default", message("old", "sensors/t", -n)) for n in range(5)])
            async with backlog_of(kafka, kafka_prefix, spec):
                pass  # created, then gone before anything was published
            items = [("default", message("dev", "sensors/t", n)) for n in range(1, 11)]
            items += [("default", message(f"other-{n}", "elsewhere", 0)) for n in range(6)]
            await append(log, items)

            async with backlog_of(kafka, kafka_prefix, spec) as first:
                async with asyncio.timeout(DEADLINE):
                    settled = await take_until(first, 4, batch=2)
                    unsettled = await take_until(first, 3, settle=False)
                assert numbers(settled) == [1, 2, 3, 4]
                assert numbers(unsettled) == [5, 6, 7]
            async with backlog_of(kafka, kafka_prefix, spec) as second:
                async with asyncio.timeout(DEADLINE):
                    again = await take_until(second, 6)
                assert numbers(again) == [5, 6, 7, 8, 9, 10]
                assert [d.seq for d in again[:3]] == [d.seq for d in unsettled]
                async with asyncio.timeout(DEADLINE):
                    await wait_all_committed(kafka, kafka_prefix)
                    while second.lag() != 0:
                        await asyncio.sleep(0.05)
            offsets = await committed_and_end(kafka, kafka_prefix)
            assert sum(end for _, end in offsets) == 5 + 10 + 6

    asyncio.run(scenario())


def test_two_nodes_split_the_partitions_and_see_every_record_once(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    spec = spec_for()
    publishers = [f"pub-{n}" for n in range(12)]

    async def scenario() -> None:
        async with (
            message_log(kafka, kafka_prefix) as log,
            backlog_of(kafka, kafka_prefix, spec) as one,
            backlog_of(kafka, kafka_prefix, spec) as two,
        ):
            async with asyncio.timeout(DEADLINE):
                await wait_assigned(one, two)
            await append(log, round_robin(publishers, 20))
            seen: list[list[Delivery]] = [[], []]

            async def drain(backlog: KafkaBacklog, into: list[Delivery]) -> None:
                while True:
                    batch = await backlog.take(50, 0.01)
                    into += batch
                    await backlog.settle(batch)

            tasks = [asyncio.create_task(drain(b, s)) for b, s in ((one, seen[0]), (two, seen[1]))]
            try:
                async with asyncio.timeout(DEADLINE):
                    while len(seen[0]) + len(seen[1]) < 20 * len(publishers):
                        await asyncio.sleep(0.05)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            assert seen[0] and seen[1]
            assert not {d.client_id for d in seen[0]} & {d.client_id for d in seen[1]}
            together = by_publisher(seen[0]) | by_publisher(seen[1])
            assert together == {p: list(range(20)) for p in publishers}

    asyncio.run(scenario())


def test_a_node_that_leaves_hands_over_its_partitions_and_what_it_did_not_settle(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    """Node one settles a batch, takes another and leaves: node two gets its partitions
    and reads every record of them after the settled batch, the taken one included."""
    spec = spec_for(batch_size=5, max_in_flight=10)
    publishers = [f"pub-{n}" for n in range(12)]

    async def scenario() -> None:
        async with (
            message_log(kafka, kafka_prefix) as log,
            backlog_of(kafka, kafka_prefix, spec) as two,
        ):
            one = KafkaBacklog(spec, kafka.bootstrap, kafka_prefix, partitions=PARTITIONS)
            await one.open()
            try:
                async with asyncio.timeout(DEADLINE):
                    await wait_assigned(one, two)
                await append(log, round_robin(publishers, 20))
                async with asyncio.timeout(DEADLINE):
                    settled = await take_until(one, 5, batch=5)
                    unsettled = await take_until(one, 5, batch=5, settle=False)
            finally:
                await one.close()
            assert one.statistics()["held"] > 0  # it left with records it had not settled

            got: list[Delivery] = []
            async with asyncio.timeout(DEADLINE):
                while len({d.seq for d in got}) < 20 * len(publishers) - len(settled):
                    batch = await two.take(50, 0.01)
                    got += batch
                    await two.settle(batch)
                assert len(await two.assignment()) == PARTITIONS
            got_seqs = {d.seq for d in got}
            # At least once: node two's own rebalance may give it a batch twice, no more.
            assert len(got) - len(got_seqs) <= 50
            assert not got_seqs & {d.seq for d in settled}
            assert {d.seq for d in unsettled} <= got_seqs
            first_time = list({d.seq: d for d in got}.values())
            everything = by_publisher([*settled, *first_time])
            assert {p: sorted(ns) for p, ns in everything.items()} == {
                p: list(range(20)) for p in publishers
            }
            for publisher, ns in by_publisher(first_time).items():
                assert ns == sorted(ns), publisher

    asyncio.run(scenario())


def test_worker_delivers_from_kafka_into_a_real_http_receiver(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    """IntegrationWorker + HttpSink + KafkaBacklog: every message reaches the receiver in
    order per publisher as a JSON envelope; the offsets are committed to the log's end."""

    async def scenario() -> None:
        async with Receiver() as receiver, message_log(kafka, kafka_prefix) as log:
            spec = spec_for(url=receiver.url(), body="array", batch_size=10, linger_ms=5)
            async with backlog_of(kafka, kafka_prefix, spec) as backlog:
                worker = IntegrationWorker(
                    spec.name,
                    HttpSink(spec.settings, spec.name),
                    backlog,
                    MemoryDeadLetters(),
                    spec.delivery,
                )
                task = asyncio.create_task(worker.run())
                try:
                    await append(
                        log,
                        [
                            ("default", message(p, f"sensors/{p}", n))
                            for n in range(30)
                            for p in ("dev-1", "dev-2")
                        ],
                    )
                    async with asyncio.timeout(DEADLINE):
                        while worker.stats.delivered < 60:
                            await asyncio.sleep(0.05)
                        await wait_all_committed(kafka, kafka_prefix)
                finally:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
        bodies = [item for request in receiver.received for item in request.json()]
        assert all(request.status == 200 for request in receiver.received)
        assert all(len(request.json()) <= 10 for request in receiver.received)
        order: dict[str, list[int]] = {}
        for body in bodies:
            assert body["topic"] == f"sensors/{body['client_id']}"
            assert body["tenant"] == "default"
            assert body["qos"] == 1
            assert body["timestamp"] > 0
            order.setdefault(body["client_id"], []).append(json.loads(body["payload"])["n"])
        assert order == {"dev-1": list(range(30)), "dev-2": list(range(30))}
        assert (worker.stats.dead_lettered, worker.stats.failed) == (0, 0)

    asyncio.run(scenario())


def test_a_stuck_sink_pauses_reading_and_a_new_node_still_joins(
    kafka: KafkaServer, kafka_prefix: str
) -> None:
    """Node one takes max_in_flight deliveries and settles none (its sink is stuck): it
    pauses reading, yet keeps serving the group, so node two joins and gets partitions;
    once one settles, it reads on. Together they deliver every record, in order per
    publisher on each node."""
    spec = spec_for(batch_size=5, max_in_flight=5)
    publishers = [f"pub-{n}" for n in range(6)]

    async def scenario() -> None:
        async with (
            message_log(kafka, kafka_prefix) as log,
            backlog_of(kafka, kafka_prefix, spec) as one,
        ):
            await append(log, round_robin(publishers, 10))
            async with asyncio.timeout(DEADLINE):
                stuck = await take_until(one, 5, batch=5, settle=False)
                while one.statistics()["pauses"] == 0:
                    await asyncio.sleep(0.05)
            assert one.statistics()["held"] == 5
            async with backlog_of(kafka, kafka_prefix, spec) as two:
                async with asyncio.timeout(DEADLINE):
                    await wait_assigned(one, two)
                await one.settle(stuck)  # ignored for what the rebalance took back
                seen: list[list[Delivery]] = [list(stuck), []]

                async def drain(backlog: KafkaBacklog, into: list[Delivery]) -> None:
                    while True:
                        batch = await backlog.take(5, 0.01)
                        into += batch
                        await backlog.settle(batch)

                pairs = ((one, seen[0]), (two, seen[1]))
                tasks = [asyncio.create_task(drain(b, s)) for b, s in pairs]
                try:
                    async with asyncio.timeout(DEADLINE):
                        while len({d.seq for d in seen[0] + seen[1]}) < 10 * len(publishers):
                            await asyncio.sleep(0.05)
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
            together = by_publisher(list({d.seq: d for d in seen[0] + seen[1]}.values()))
            assert {p: sorted(ns) for p, ns in together.items()} == {
                p: list(range(10)) for p in publishers
            }
            for node in seen:
                for publisher, ns in by_publisher(node).items():
                    # In order, once its own redelivery (after the rebalance) is left out.
                    firsts = list(dict.fromkeys(ns))
                    assert firsts == sorted(firsts), publisher

    asyncio.run(scenario())
