"""The sessions of a node killed with `kill -9` (dead_nodes.py): once its heartbeat keys
have expired, the live node with the smallest id (node-1 here) cleans up after it. A
non-persistent session is removed for every node; a persistent one is offline from the
dead node's last heartbeat and expires by its own interval (its Redis queue with it), or
moves to the node its client reconnects to."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import redis

from mqttq.cluster.compacted import CompactedTopic
from mqttq.cluster.records import SessionInfo, decode_session
from mqttq.storage.kafka.client import KafkaProducer
from tests.cluster.cluster_helpers import DEADLINE, kill9, payloads, publish_acked, wait_routed
from tests.cluster.conftest import Nodes
from tests.conftest import BrokerProcess
from tests.integration.helpers import Clients
from tests.integration.raw_client import RawClient
from tests.integration.waiting import wait_for
from tests.integration.wire import Prop, Will
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

HEARTBEAT_MS = 250
"""A dead node is gone after three intervals: under a second."""


def replicated(bootstrap: str, topic: str) -> dict[str, bytes]:
    """What a node starting now reads of a compacted topic: key -> value (deletes
    applied)."""
    state: dict[str, bytes] = {}

    def apply(key: str, value: bytes | None) -> None:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value

    async def read() -> None:
        producer = KafkaProducer(bootstrap)
        replica = CompactedTopic(bootstrap, topic, "test", "test-reader", producer, apply)
        try:
            await replica.open()
        finally:
            await replica.close()
            await producer.close(10)

    asyncio.run(read())
    return state


def session_record(bootstrap: str, prefix: str, client_id: str) -> SessionInfo | None:
    raw = replicated(bootstrap, f"{prefix}client.session").get(client_id)
    return None if raw is None else decode_session(raw)


def test_non_persistent_session_of_a_killed_node_is_removed(
    nodes: Nodes, kafka: KafkaServer, kafka_prefix: str, clients: Clients
) -> None:
    """A non-persistent subscriber on node 2, with a will; node 2 is killed: its will is
    published by the node cleaning up, its session and subscriptions records are deleted
    (tombstones), so no node routes to it any more, while the subscriber on node 3 keeps
    its own."""
    one, two, three = nodes(3, heartbeat_ms=HEARTBEAT_MS)
    doomed = clients.connected(two, "doomed", level=5, will=Will("a/will", b"doomed-gone"))
    alive = clients.connected(three, "alive", level=5)
    for subscriber in (doomed, alive):
        assert subscriber.subscribe(("a/#", 1)).reason_codes == (1,)
    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, "a", doomed, alive)
    assert session_record(kafka.bootstrap, kafka_prefix, "doomed") is not None

    kill9(two)
    wait_for(
        lambda: "doomed" not in replicated(kafka.bootstrap, f"{kafka_prefix}client.session"),
        timeout=DEADLINE,
        interval=0.5,
        what="the killed node's non-persistent session record deleted",
    )
    subscriptions = replicated(kafka.bootstrap, f"{kafka_prefix}client.subscriptions")
    assert "doomed" not in subscriptions
    assert "alive" in subscriptions
    info = session_record(kafka.bootstrap, kafka_prefix, "alive")
    assert info is not None and info.node == "node-3"
    publish_acked(publisher, "a/x", [b"after"])
    # Two publishers, two msg.all partitions: the will and "after" in either order.
    assert sorted(payloads(alive, 2)) == [b"after", b"doomed-gone"]


def _device_on_killed_node(
    nodes: Nodes,
    clients: Clients,
    props: list[tuple[Prop, int]],
    topic: str,
    *,
    before_kill: Callable[[RawClient], None] = lambda _publisher: None,
    will: Will | None = None,
) -> tuple[BrokerProcess, RawClient]:
    """Three nodes; persistent DEVICE client `dev` subscribed to `<topic>/#` (QoS 1) on
    node 2, which is then killed (after `before_kill(publisher)`). Returns node 3 and a
    publisher connected to node 1."""
    one, two, three = nodes(3, heartbeat_ms=HEARTBEAT_MS)
    device = clients.connected(two, "dev", level=5, clean=False, props=props, will=will)
    assert device.subscribe((f"{topic}/#", 1)).reason_codes == (1,)
    publisher = clients.connected(one, "pub", level=5)
    wait_routed(publisher, topic, device)
    before_kill(publisher)
    kill9(two)
    return three, publisher


def test_persistent_session_of_a_killed_node_expires_with_its_queue(
    nodes: Nodes, kafka: KafkaServer, kafka_prefix: str, redis_url: str, clients: Clients
) -> None:
    """A persistent DEVICE session (expiry 2 s) on node 2 with a message delivered to it
    and not acknowledged (queued in Redis); node 2 is killed: the session expires 2 s
    after its last heartbeat, its Redis queue and records are deleted, and the client
    reconnecting finds no session. Its will (delay 1 s) is published by node 1."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 2)]
    store = redis.Redis.from_url(redis_url)
    will = Will("w/dev", b"dev-gone", props=[(Prop.WILL_DELAY_INTERVAL, 1)])

    def queue_one(publisher: RawClient) -> None:
        assert publisher.subscribe(("w/#", 0)).reason_codes == (0,)
        wait_routed(publisher, "w", publisher)
        # Delivered, never acknowledged: the entry stays in Redis.
        publish_acked(publisher, "b/x", [b"queued"])
        wait_for(
            lambda: store.zcard("{dev}_messages") >= 1,
            timeout=DEADLINE,
            what="the message queued in Redis",
        )

    three, publisher = _device_on_killed_node(
        nodes, clients, props, "b", before_kill=queue_one, will=will
    )
    assert payloads(publisher, 1) == [b"dev-gone"]
    wait_for(
        lambda: not store.keys("{dev}*"),
        timeout=DEADLINE,
        interval=0.5,
        what="the expired session's Redis keys deleted",
    )
    wait_for(
        lambda: session_record(kafka.bootstrap, kafka_prefix, "dev") is None,
        timeout=DEADLINE,
        interval=0.5,
        what="the expired session's record deleted",
    )
    assert "dev" not in replicated(kafka.bootstrap, f"{kafka_prefix}client.subscriptions")
    again = clients.raw(three)
    connack = again.connect("dev", level=5, clean=False, props=props)
    assert not connack.session_present


def test_persistent_session_of_a_killed_node_moves_to_its_client(
    nodes: Nodes, kafka: KafkaServer, kafka_prefix: str, clients: Clients
) -> None:
    """A persistent DEVICE session (expiry 1 h) on node 2; node 2 is killed and node 1
    records it offline since node 2's last heartbeat; the client reconnects to node 3:
    session present, with the message queued meanwhile, and the session is node 3's."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
    three, publisher = _device_on_killed_node(nodes, clients, props, "c")

    def offline() -> bool:
        info = session_record(kafka.bootstrap, kafka_prefix, "dev")
        return info is not None and info.node is None and info.last_node == "node-1"

    wait_for(offline, timeout=DEADLINE, interval=0.5, what="the session recorded offline")
    info = session_record(kafka.bootstrap, kafka_prefix, "dev")
    assert info is not None and info.disconnected_at is not None and info.expiry == 3600
    publish_acked(publisher, "c/x", [b"while-away"])

    again = clients.raw(three)
    connack = again.connect("dev", level=5, clean=False, props=props)
    assert connack.session_present
    assert payloads(again, 1) == [b"while-away"]

    def on_three() -> bool:
        info = session_record(kafka.bootstrap, kafka_prefix, "dev")
        return info is not None and info.node == "node-3"

    wait_for(on_three, timeout=DEADLINE, interval=0.5, what="the session recorded on node-3")
    publish_acked(publisher, "c/x", [b"live"])
    assert payloads(again, 1) == [b"live"]


def test_a_reconnect_before_the_clean_up_keeps_its_session(
    nodes: Nodes, kafka: KafkaServer, kafka_prefix: str, redis_url: str, clients: Clients
) -> None:
    """The client of a killed node reconnects to node 3 at once, before node 2 is seen
    gone: once node 1 has beaten twice after node 2's keys expired, the session is still
    node 3's (no clean-up record overrode it) and gets its messages live."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
    three, publisher = _device_on_killed_node(nodes, clients, props, "d")
    again = clients.raw(three)
    assert again.connect("dev", level=5, clean=False, props=props).session_present
    store = redis.Redis.from_url(redis_url)
    wait_for(
        lambda: not store.exists("mqttq:cluster:{node-2}:node"),
        timeout=DEADLINE,
        what="node 2's heartbeat keys expired",
    )
    gone_at = time.time() * 1000
    wait_for(
        lambda: (store.zscore("mqttq:cluster:nodes", "node-1") or 0) > gone_at + 2 * HEARTBEAT_MS,
        timeout=DEADLINE,
        what="two heartbeats of node 1 after node 2 is gone",
    )
    info = session_record(kafka.bootstrap, kafka_prefix, "dev")
    assert info is not None and info.node == "node-3"
    publish_acked(publisher, "d/x", [b"live"])
    assert payloads(again, 1) == [b"live"]
