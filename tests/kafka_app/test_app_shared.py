"""Shared subscriptions of APPLICATION clients: the members of `$share/<group>/<filter>`
split one Kafka topic's partitions (one consumer group), nothing lost or duplicated, QoS
min(publish, subscription)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient

from mqttq.storage.kafka.app_topics import shared_topic
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import DEADLINE
from tests.integration.wire import PUBLISH, PUBREL
from tests.kafka_app.app_helpers import connect_app
from tests.kafka_app.conftest import AppBrokerFactory

STREAM = 300


def drain(member: RawClient, into: list[bytes], timeout: float) -> None:
    """Read and acknowledge every message that arrives within `timeout`."""
    while (packet := member.try_recv(timeout)) is not None:
        if packet.type == PUBLISH:
            into.append(packet.payload)
            assert packet.qos == 1, packet  # min(publish QoS 2, subscription QoS 1)
        if packet.type in (PUBLISH, PUBREL):
            member.ack(packet)


@pytest.mark.parametrize("members", [2, 3])
def test_members_split_the_stream(
    app_broker: AppBrokerFactory, clients: Clients, members: int
) -> None:
    broker = app_broker(shared_topic_partitions=6)
    group = [connect_app(clients, broker, f"worker{n}") for n in range(members)]
    for member in group:
        assert member.subscribe(("$share/workers/jobs/+", 1)).reason_codes == (1,)
    topic = shared_topic(app_broker.prefix, "jobs/+")
    admin = AdminClient({"bootstrap.servers": app_broker.kafka.bootstrap})
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 6
    publisher = clients.connected(broker, "producer")
    # Probes until every member got one: the group has settled (no more rebalances).
    probes: list[list[bytes]] = [[] for _ in group]
    deadline = time.monotonic() + 6 * DEADLINE
    n = 0
    while not all(probes):
        assert time.monotonic() < deadline, f"members never all served: {probes}"
        publisher.publish("jobs/probe", b"probe%d" % n, qos=2)
        n += 1
        for member, got in zip(group, probes, strict=True):
            drain(member, got, 0.05)
    for member, got in zip(group, probes, strict=True):
        drain(member, got, 0.5)
    stream = [b"job%d" % n for n in range(STREAM)]
    for payload in stream:
        publisher.publish("jobs/work", payload, qos=2)
    received: list[list[bytes]] = [[] for _ in group]
    deadline = time.monotonic() + 3 * DEADLINE
    while sum(len(r) for r in received) < STREAM and time.monotonic() < deadline:
        for member, got in zip(group, received, strict=True):
            drain(member, got, 0.05)
    for member, got in zip(group, received, strict=True):
        drain(member, got, 0.5)  # anything more would be a duplicate
    everything = [p for got in received for p in got if p.startswith(b"job")]
    assert sorted(everything) == sorted(stream)  # nothing lost, nothing twice
    assert sum(1 for got in received if got) >= 2, [len(got) for got in received]
