"""Several packs of an APPLICATION client in flight at once (the next pack is written while
the client acknowledges the earlier ones): order on the wire, offsets committed in Kafka
only up to the first message still unacknowledged, and the same packet ids after a
reconnect."""

from __future__ import annotations

import time

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from mqttq.storage.kafka.app_topics import app_group, app_topic
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.kafka_app.app_helpers import ServedBroker, connect_app
from tests.kafka_app.conftest import AppBrokerFactory
from tests.kafka_app.test_app_delivery import publish_all


def committed_offset(factory: AppBrokerFactory, client_id: str) -> int | None:
    """The offset the client's consumer group committed in Kafka (None: none yet)."""
    admin = AdminClient({"bootstrap.servers": factory.kafka.bootstrap})
    group = app_group(factory.prefix, client_id)
    partition = TopicPartition(app_topic(factory.prefix, client_id), 0)
    request = [ConsumerGroupTopicPartitions(group, [partition])]
    (future,) = admin.list_consumer_group_offsets(request).values()
    (found,) = future.result(timeout=10).topic_partitions
    return found.offset if found.offset >= 0 else None


def end_offset(factory: AppBrokerFactory, client_id: str) -> int:
    admin = AdminClient({"bootstrap.servers": factory.kafka.bootstrap})
    partition = TopicPartition(app_topic(factory.prefix, client_id), 0)
    (future,) = admin.list_offsets({partition: OffsetSpec.latest()}).values()
    return int(future.result(timeout=10).offset)


def backlog(
    app_broker: AppBrokerFactory, clients: Clients, client_id: str, count: int, **settings: object
) -> tuple[ServedBroker, list[bytes]]:
    """A broker whose APPLICATION client `client_id` (subscribed to p/#, QoS 1) was
    offline while `count` messages were published: (broker, payloads)."""
    broker = app_broker(**settings)
    app = connect_app(clients, broker, client_id)
    app.subscribe(("p/#", 1))
    app.disconnect()
    app.close()
    publisher = clients.connected(broker, "pub")
    payloads = [b"m%d" % n for n in range(count)]
    publish_all(publisher, "p/a", payloads)
    publisher.close()
    # Routed to the client's topic after the PUBACK: wait until every record is in.
    wait_for(
        lambda: end_offset(app_broker, client_id) == count, interval=0.2, what=f"{count} records"
    )
    return broker, payloads


def test_packs_in_flight_commit_only_up_to_the_first_unacknowledged(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    """Packs of 5, a client with Receive Maximum 6: six messages (more than a pack) arrive
    before any PUBACK. Everything but the very first message is acknowledged, in reverse
    order, as it arrives, so the second pack is complete and later ones go out; yet
    nothing is committed while the first pack is owed its first PUBACK. After a reconnect
    the unacknowledged come again with their ids and DUP=1, then the rest with new ids,
    and the commit reaches the end."""
    broker, payloads = backlog(app_broker, clients, "pipe1", 20, max_poll_records=5)
    app = connect_app(clients, broker, "pipe1", receive_maximum=6, expect_present=True)
    first = app.receive_messages(6, ack=False)
    assert [(m.payload, m.packet_id, m.dup) for m in first] == [
        (payloads[n], n + 1, False) for n in range(6)
    ]
    for message in reversed(first[1:]):
        app.ack(message)
    # The window opened: the broker goes on with the packs after them.
    more = app.receive_messages(5, ack=False)
    assert [(m.payload, m.packet_id) for m in more] == [(payloads[n], n + 1) for n in range(6, 11)]
    for message in reversed(more):
        app.ack(message)  # offsets 5-9, the second pack, now all acknowledged
    last = app.receive_messages(5, ack=False)
    assert [(m.payload, m.packet_id) for m in last] == [(payloads[n], n + 1) for n in range(11, 16)]
    app.ping()
    settle = time.monotonic() + 1.0  # time for a wrong commit to land, if one was sent
    while time.monotonic() < settle:
        time.sleep(0.1)
    assert committed_offset(app_broker, "pipe1") is None
    app.disconnect()
    app.close()
    again = connect_app(clients, broker, "pipe1", expect_present=True)
    resent = again.receive_messages(10)
    assert [(m.payload, m.packet_id, m.dup) for m in resent] == [
        (payloads[0], 1, True),
        *[(payloads[n], n + 1, True) for n in range(11, 16)],
        # Never sent before: new ids, after the restored ones.
        *[(payloads[n], n + 1, False) for n in range(16, 20)],
    ]
    wait_for(
        lambda: committed_offset(app_broker, "pipe1") == 20,
        interval=0.2,
        what="offset 20 committed",
    )
    again.expect_silence(0.5)


def test_backlog_of_many_packs_arrives_in_order_and_is_committed(
    app_broker: AppBrokerFactory, clients: Clients
) -> None:
    """150 messages in packs of 7, acknowledged in reverse order in batches of 10 (so
    acknowledgements of later packs often come first): every message arrives once, in
    order, with consecutive ids, and the committed offset ends at the topic's end."""
    broker, payloads = backlog(app_broker, clients, "pipe2", 150, max_poll_records=7)
    app: RawClient = connect_app(clients, broker, "pipe2", expect_present=True)
    got = []
    while len(got) < len(payloads):
        batch = app.receive_messages(min(10, len(payloads) - len(got)), ack=False)
        for message in reversed(batch):
            app.ack(message)
        got.extend(batch)
    assert [m.payload for m in got] == payloads
    assert [m.packet_id for m in got] == list(range(1, 151))
    assert not any(m.dup for m in got)
    wait_for(
        lambda: committed_offset(app_broker, "pipe2") == 150,
        interval=0.2,
        what="offset 150 committed",
    )
    app.expect_silence(0.5)
