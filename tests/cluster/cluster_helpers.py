"""Helpers of the cluster tests: `mqttq serve` nodes sharing one Kafka prefix and one
Redis, each with its own data dir and node id, and waiting until a route exists."""

from __future__ import annotations

import itertools
import time

from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient

from tests.conftest import BrokerProcess
from tests.integration.raw_client import RawClient
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import PUBLISH, Packet, Prop
from tests.kafka.log_helpers import log_config

DEADLINE = 60.0
"""Bounds a hang (JVMs and three brokers on a loaded 2-core machine); never a
performance bound."""
PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
PROBE = "probe"
"""Topic level of the messages `wait_routed` publishes: ignored by `payloads`."""


def node_config(
    bootstrap: str, prefix: str, redis_url: str, node_id: str, heartbeat_ms: int | None = None
) -> str:
    """broker.toml of one node: the Kafka log under `prefix`, DEVICE queues in Redis;
    `heartbeat_ms`: `cluster.heartbeat_interval_ms` (else the default)."""
    extra = f'[redis]\nurl = "{redis_url}"\n[cluster]\nnode_id = "{node_id}"\n'
    if heartbeat_ms is not None:
        extra += f"heartbeat_interval_ms = {heartbeat_ms}\n"
    return log_config(bootstrap, prefix, extra, device="redis")


def start_nodes(  # noqa: PLR0917 (a cluster's settings)
    broker_factory: BrokerFactory,
    bootstrap: str,
    prefix: str,
    redis_url: str,
    count: int,
    first: int = 1,
    *,
    heartbeat_ms: int | None = None,
) -> list[BrokerProcess]:
    """`count` nodes named node-<first>, node-<first + 1>, ..., once msg.all's consumer
    group has every node up to them (so no rebalance replays records in mid-test)."""
    nodes = []
    for n in range(first, first + count):
        config = node_config(bootstrap, prefix, redis_url, f"node-{n}", heartbeat_ms)
        node = broker_factory(config)
        assert isinstance(node, BrokerProcess)
        nodes.append(node)
    wait_group(bootstrap, prefix, first + count - 1)
    return nodes


def wait_group(bootstrap: str, prefix: str, members: int) -> None:
    """Wait until the consumer group of `<prefix>msg.all` is stable with `members`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = f"{prefix}msg.all.consumers"

    def stable() -> bool:
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        return bool(
            described.state == ConsumerGroupState.STABLE and len(described.members) == members
        )

    wait_for(stable, timeout=DEADLINE, interval=0.5, what=f"{members} members in {group}")


def kill9(node: BrokerProcess) -> None:
    """SIGKILL the node, and leave it dead."""
    assert node.process is not None
    node.process.kill()
    node.process.wait()
    node.process = None


_probes = itertools.count()


def wait_routed(publisher: RawClient, topic_prefix: str, *subscribers: RawClient) -> None:
    """Publish QoS 0 probes on `<topic_prefix>/probe` until every subscriber got one: the
    node that routes this publisher's messages knows their subscriptions. The
    subscribers' filters must match it. Other PUBLISHes are left for the next reads."""
    waiting = list(subscribers)
    kept: dict[RawClient, list[Packet]] = {subscriber: [] for subscriber in subscribers}
    deadline = time.monotonic() + DEADLINE
    while waiting:
        assert time.monotonic() < deadline, "no route to the subscribers"
        publisher.publish(f"{topic_prefix}/{PROBE}", b"probe-%d" % next(_probes))
        next_round = time.monotonic() + 0.5
        for subscriber in list(waiting):
            while True:
                pkt = subscriber.try_recv(max(0.0, next_round - time.monotonic()))
                if pkt is None:
                    break
                if pkt.type == PUBLISH and not pkt.topic.endswith(PROBE):
                    kept[subscriber].append(pkt)  # acknowledged when read again
                    continue
                subscriber.ack(pkt)
                if pkt.type == PUBLISH:
                    waiting.remove(subscriber)
                    break
    for subscriber, packets in kept.items():
        subscriber._stash.extend(packets)  # read again by the next receive


def payloads(subscriber: RawClient, count: int, *, timeout: float = DEADLINE) -> list[bytes]:
    """The payloads of the next `count` PUBLISHes that are not probes (flows completed)."""
    found: list[Packet] = []
    deadline = time.monotonic() + timeout
    while len(found) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"received {len(found)} of {count}: {[p.payload for p in found]}"
        batch = subscriber.receive_messages(1, timeout=remaining)
        found += [p for p in batch if not (p.topic or "").endswith(PROBE)]
    return [p.payload for p in found]


def until_all(subscriber: RawClient, expected: list[bytes]) -> list[bytes]:
    """Payloads received (probes aside, flows completed) until each of `expected` came at
    least once; a duplicate is kept (the log's delivery is at least once)."""
    missing = set(expected)
    got: list[bytes] = []
    while missing:
        batch = payloads(subscriber, 1)
        got += batch
        missing.difference_update(batch)
    return got


def publish_acked(publisher: RawClient, topic: str, messages: list[bytes], qos: int = 1) -> None:
    """Publish each message at `qos` (1 or 2), asserting every flow ended with success."""
    for payload in messages:
        ack = publisher.publish(topic, payload, qos=qos)
        assert ack is not None and ack.reason_code == 0, ack
