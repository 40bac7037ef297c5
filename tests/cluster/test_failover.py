"""Failover (issue 15): after `kill -9` of a node its clients reconnect to another node and
find their persistent sessions (DEVICE queue in Redis, APPLICATION topic and offsets),
with nothing acknowledged lost; `$share` groups whose members are on different nodes
split a stream, each message to exactly one member."""

from __future__ import annotations

import pytest
import redis

from tests.cluster.cluster_helpers import (
    DEADLINE,
    PERSISTENT,
    kill9,
    payloads,
    publish_acked,
    until_all,
    wait_routed,
)
from tests.cluster.conftest import Nodes
from tests.integration.helpers import Clients
from tests.integration.waiting import wait_for
from tests.kafka_app.app_helpers import add_app_credential, connect_app

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]


def test_kill9_of_a_node_loses_nothing_acknowledged(
    nodes: Nodes, redis_url: str, clients: Clients
) -> None:
    """A persistent DEVICE subscriber on node 2 reads part of a QoS 1 stream published on
    node 1; node 2 is killed; more is published; the subscriber reconnects to node 3:
    session present, every acknowledged message arrives (first arrivals in order), and
    the stream goes on live on node 3."""
    one, two, three = nodes(3)
    device = clients.connected(two, "device", level=5, clean=False, props=PERSISTENT)
    assert device.subscribe(("k/#", 1)).reason_codes == (1,)
    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, "k", device)

    sent = [b"m-%03d" % n for n in range(60)]
    publish_acked(publisher, "k/x", sent[:30])
    before = payloads(device, 10)  # the rest may or may not have arrived: no matter
    kill9(two)
    publish_acked(publisher, "k/x", sent[30:50])
    # Routed into the Redis queue (by whichever node holds the partition now).
    store = redis.Redis.from_url(redis_url)
    wait_for(
        lambda: store.zcard("{device}_messages") >= 20,
        timeout=DEADLINE,
        what="the messages published after the kill in the device's Redis queue",
    )

    again = clients.raw(three)
    connack = again.connect("device", level=5, clean=False, props=PERSISTENT)
    assert connack.session_present
    wait_routed(publisher, "k", again)
    publish_acked(publisher, "k/x", sent[50:])
    after = until_all(again, [p for p in sent if p not in before])
    first = list(dict.fromkeys(before + after))
    assert first == sent


def test_shared_group_split_across_nodes(nodes: Nodes, clients: Clients) -> None:
    """Members of `$share/g/s/#` on nodes 1 and 2, a publisher on node 3: every message
    reaches exactly one member, and both members get some."""
    one, two, three = nodes(3)
    members = [clients.connected(one, "member-1", level=5), clients.connected(two, "member-2")]
    for member in members:
        assert member.subscribe(("$share/g/s/#", 1)).reason_codes == (1,)
    publisher = clients.connected(three, "pub", level=5)
    wait_routed(publisher, "s", *members)

    sent = [b"s-%03d" % n for n in range(60)]
    publish_acked(publisher, "s/x", sent)
    got: list[list[bytes]] = [[], []]
    deadline_ok = True
    while sorted(got[0] + got[1]) != sent and deadline_ok:
        for index, member in enumerate(members):
            pkt = member.try_recv(0.2)
            if pkt is None:
                continue
            member.ack(pkt)
            if pkt.topic == "s/x":
                got[index].append(pkt.payload)
        deadline_ok = len(got[0]) + len(got[1]) <= len(sent)
    assert sorted(got[0] + got[1]) == sent  # each one exactly once
    assert got[0] and got[1]
    for member in members:
        member.ping()
        member.expect_silence(1.0)  # no late duplicate


def test_application_client_fails_over_with_its_kafka_topic(nodes: Nodes, clients: Clients) -> None:
    """A persistent APPLICATION client on node 2 (its messages in its own Kafka topic):
    node 2 is killed, the client reconnects to node 1 and gets every acknowledged message,
    the ones published while it was away included, in order."""
    one, two = nodes(2)
    for node in (one, two):
        add_app_credential(node)
    app = connect_app(clients, two, "analytics")
    assert app.subscribe(("a/#", 1)).reason_codes == (1,)
    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, "a", app)
    sent = [b"a-%02d" % n for n in range(20)]
    publish_acked(publisher, "a/x", sent[:10])
    before = payloads(app, 10)
    app.ping()
    kill9(two)
    app.close()
    publish_acked(publisher, "a/x", sent[10:])
    again = connect_app(clients, one, "analytics", expect_present=True)
    after = until_all(again, sent[10:])
    assert list(dict.fromkeys(before + after)) == sent
