"""End to end: the real broker with SQLite sessions and Redis DEVICE queues, real clients.

The broker is `mqttq serve --config broker.toml` with `[storage] device = "redis"`, in the
test's process, or a subprocess for the tests that SIGKILL it (`broker_process`); Redis is
a real redis-server with an AOF, restarted or stopped under the broker.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import redis

from tests.integration.paho_client import PahoClient, PahoClients
from tests.integration.raw_client import (
    RawClient,
)
from tests.integration.waiting import (
    BrokerFactory,
    BrokerUnderTest,
    wait_for,
)
from tests.integration.wire import (
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    Packet,
    Prop,
    Will,
    ack_packet,
    publish_packet,
)
from tests.redis_fixtures import RedisFactory
from tests.services import RedisServer

HOST = "127.0.0.1"
KEEP = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
UNSPECIFIED_ERROR = 0x80


RedisBroker = BrokerUnderTest
"""The broker (`mqttq serve` composed, tests/harness.py) on a data directory (SQLite) and a
Redis URL, both kept across restarts."""


def redis_config(redis_url: str, cluster: bool) -> str:
    """broker.toml of a broker with its DEVICE queues in Redis at `redis_url`."""
    return (
        "[mqtt]\nmax_queued_messages = 65535\n"
        '[storage]\ndevice = "redis"\n'
        f'[redis]\nurl = "{redis_url}"\ncluster = {str(cluster).lower()}\n'
    )


@pytest.fixture
def start_broker(broker_factory: BrokerFactory) -> Callable[..., RedisBroker]:
    """`start_broker(redis_url, cluster=False)`: a started broker (a `mqttq serve` process
    when the test is marked `broker_process`)."""

    def start(redis_url: str, *, cluster: bool = False) -> RedisBroker:
        return broker_factory(redis_config(redis_url, cluster))

    return start


@pytest.fixture
def clients() -> Iterator[PahoClients]:
    registry = PahoClients()
    yield registry
    registry.close_all()


def persistent_subscriber(
    clients: PahoClients, broker: RedisBroker, client_id: str, topic: str, level: int
) -> None:
    """A new persistent session subscribed to `topic` at QoS 1, left offline
    (5.0: Clean Start 1 with an expiry; 3.1.1: Clean Session 0)."""
    client = clients.connect(
        broker.port, client_id, protocol=level, clean=level == 5, session_expiry=3600
    )
    assert client.subscribe(topic, 1) == [1]
    client.disconnect()


def resume(clients: PahoClients, broker: RedisBroker, client_id: str, level: int) -> PahoClient:
    """Reconnect to the stored session [MQTT-3.1.2-5]."""
    client = PahoClient(broker.port, client_id, protocol=level, clean=False, session_expiry=3600)
    clients.track(client)
    assert client.connect() is True
    return client


def publisher(clients: PahoClients, broker: RedisBroker, level: int = 5) -> PahoClient:
    return clients.connect(broker.port, "pub", protocol=level)


@pytest.mark.parametrize("level", [4, 5])
def test_offline_messages_live_in_redis_and_come_back_in_order(
    start_broker: Callable[..., RedisBroker], clients: PahoClients, redis_url: str, level: int
) -> None:
    broker = start_broker(redis_url)
    persistent_subscriber(clients, broker, "dev-9", "dev/9/cmd", level)
    pub = publisher(clients, broker, level)
    for n in range(5):
        assert pub.publish("dev/9/cmd", b"cmd-%d" % n, 1) == 0

    raw = redis.Redis.from_url(redis_url)
    members = raw.zrange("{dev-9}_messages", 0, -1, withscores=True)
    assert members == [(b"{dev-9}_messages_%d" % n, float(n)) for n in range(1, 6)]
    stored = [json.loads(raw.get(f"{{dev-9}}_messages_{n}") or b"") for n in range(1, 6)]
    assert [(s["clientId"], s["topicName"], s["qos"], s["packetId"]) for s in stored] == [
        ("dev-9", "dev/9/cmd", 1, n) for n in range(1, 6)
    ]
    assert [base64.b64decode(s["payload"]) for s in stored] == [b"cmd-%d" % n for n in range(5)]
    assert [s["packetType"] for s in stored] == ["PUBLISH"] * 5
    assert raw.get("{dev-9}_last_packet_id") == b"5"

    subscriber = resume(clients, broker, "dev-9", level)
    messages = subscriber.wait_messages(5)
    assert [(m.payload, m.mid, m.qos) for m in messages] == [
        (b"cmd-%d" % n, n + 1, 1) for n in range(5)
    ]
    # PUBACK removes each entry: the set and the strings go.
    wait_for(lambda: raw.exists("{dev-9}_messages") == 0, what="the queue to empty")
    assert raw.keys("{dev-9}_messages_*") == []
    raw.close()


def test_session_node_marker_follows_the_connection_and_guards_rm(
    start_broker: Callable[..., RedisBroker], clients: PahoClients, redis_url: str
) -> None:
    """`{id}_session_node` exists while the persistent client is connected, so `mqttq
    session rm` refuses without --force; it goes when the client leaves."""
    broker = start_broker(redis_url)
    raw = redis.Redis.from_url(redis_url)
    client = clients.connect(broker.port, "dev-rm", protocol=5, clean=True, session_expiry=3600)
    assert client.subscribe("dev/rm", 1) == [1]
    wait_for(lambda: raw.exists("{dev-rm}_session_node") == 1, what="the presence marker")

    rm = [sys.executable, "-m", "mqttq", "session", "rm", "dev-rm", "--redis", redis_url]
    refused = subprocess.run(rm, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    assert "connected" in refused.stderr
    assert "Traceback" not in refused.stderr

    client.disconnect()
    wait_for(lambda: raw.exists("{dev-rm}_session_node") == 0, what="the marker to go")
    assert publisher(clients, broker).publish("dev/rm", b"queued", 1) == 0
    assert raw.zcard("{dev-rm}_messages") == 1
    removed = subprocess.run(rm, capture_output=True, text=True, timeout=60, check=False)
    assert removed.returncode == 0, removed.stderr
    assert raw.keys("{dev-rm}_*") == []
    raw.close()


def test_redis_restart_loses_nothing_acknowledged(
    start_broker: Callable[..., RedisBroker], clients: PahoClients, redis_factory: RedisFactory
) -> None:
    server = redis_factory()
    broker = start_broker(server.url)
    persistent_subscriber(clients, broker, "dev-r", "dev/r", 5)
    pub = publisher(clients, broker)
    for n in range(10):
        assert pub.publish("dev/r", b"%02d" % n, 1) == 0
    server.restart()
    for n in range(10, 20):
        assert pub.publish("dev/r", b"%02d" % n, 1) == 0
    subscriber = resume(clients, broker, "dev-r", 5)
    assert subscriber.wait_messages(20) and subscriber.payloads() == [
        b"%02d" % n for n in range(20)
    ]


def test_redis_down_fails_persistent_deliveries_only_then_recovers(
    start_broker: Callable[..., RedisBroker], clients: PahoClients, redis_factory: RedisFactory
) -> None:
    server: RedisServer = redis_factory()
    broker = start_broker(server.url)
    persistent_subscriber(clients, broker, "dev-p", "to/persistent", 5)
    live = clients.connect(broker.port, "live", protocol=5)  # a clean (non-persistent) session
    assert live.subscribe("to/live", 1) == [1]
    pub = publisher(clients, broker)
    assert pub.publish("to/persistent", b"before", 1) == 0

    server.stop()
    # [MQTT-3.4.2.1] 0x80 Unspecified error: the message could not be stored, not a success.
    assert pub.publish("to/persistent", b"lost", 1) == UNSPECIFIED_ERROR
    assert pub.publish("to/live", b"still delivered", 1) == 0
    assert live.wait_messages(1)[0].payload == b"still delivered"

    server.start()
    assert pub.publish("to/persistent", b"after", 1) == 0
    subscriber = resume(clients, broker, "dev-p", 5)
    subscriber.wait_messages(2)
    assert subscriber.payloads() == [b"before", b"after"]


@pytest.mark.broker_process
def test_broker_kill9_loses_no_acknowledged_message(
    start_broker: Callable[..., RedisBroker], redis_url: str
) -> None:
    """Every message whose PUBACK reached the publisher before the SIGKILL is delivered to
    the persistent subscriber after the restart, in order, once."""
    broker = start_broker(redis_url)
    topic = "k9/redis"
    subscriber = RawClient(broker.port)
    publisher_ = RawClient(broker.port)
    try:
        subscriber.connect("k9-sub", level=5, clean=False, props=KEEP)
        assert subscriber.subscribe((topic, 1)).reason_codes == (1,)
        subscriber.disconnect()
        publisher_.connect("k9-pub", level=5)
        acked = publish_until_killed(broker, publisher_, topic)
    finally:
        subscriber.close()
        publisher_.close()

    subscriber = RawClient(broker.port)
    try:
        assert subscriber.connect("k9-sub", level=5, clean=False, props=KEEP).session_present
        got: list[int] = []
        while not set(acked) <= set(got):
            got.append(receive_one(subscriber))
        while (pkt := subscriber.try_recv(0.5)) is not None:
            got.append(receive_one(subscriber, pkt))
    finally:
        subscriber.close()
    assert got == sorted(set(got)), "out of order or duplicated after the restart"


def publish_until_killed(broker: RedisBroker, publisher: RawClient, topic: str) -> list[int]:
    """Keep 10 QoS 1 messages in flight; SIGKILL the broker once 60 are acknowledged;
    return the sequence numbers acknowledged (those in the socket at the kill included)."""
    in_flight: dict[int, int] = {}
    acked: list[int] = []
    sent = 0
    while len(acked) < 60:
        while sent < 200 and len(in_flight) < 10:
            in_flight[sent + 1] = sent
            packet = publish_packet(topic, b"%04d" % sent, v5=True, qos=1, packet_id=sent + 1)
            publisher.send(packet)
            sent += 1
        ack = publisher.recv()
        assert (ack.type, ack.reason_code) == (PUBACK, 0), ack
        assert ack.packet_id is not None
        acked.append(in_flight.pop(ack.packet_id))
    broker.kill9()
    for ack in publisher.wait_closed():
        if ack.type == PUBACK and ack.packet_id in in_flight:
            acked.append(in_flight.pop(ack.packet_id))
    return acked


def receive_one(subscriber: RawClient, pkt: Packet | None = None) -> int:
    """The sequence number of the next PUBLISH (acknowledged)."""
    pkt = pkt or subscriber.recv()
    assert pkt.type == PUBLISH, pkt
    subscriber.ack(pkt)
    return int(pkt.payload)


def test_on_a_redis_cluster(
    start_broker: Callable[..., RedisBroker], clients: PahoClients, redis_cluster_url: str
) -> None:
    broker = start_broker(redis_cluster_url, cluster=True)
    for n in range(6):  # client ids in different slots, on different masters
        persistent_subscriber(clients, broker, f"node-dev-{n}", f"c/{n}", 5)
    pub = publisher(clients, broker)
    for n in range(6):
        for m in range(3):
            assert pub.publish(f"c/{n}", b"%d-%d" % (n, m), 1) == 0
    raw = redis.RedisCluster.from_url(redis_cluster_url)
    assert [raw.zcard(f"{{node-dev-{n}}}_messages") for n in range(6)] == [3] * 6
    raw.close()
    for n in range(6):
        subscriber = resume(clients, broker, f"node-dev-{n}", 5)
        subscriber.wait_messages(3)
        assert subscriber.payloads() == [b"%d-%d" % (n, m) for m in range(3)]


@pytest.mark.broker_process
def test_qos2_ids_and_a_delayed_will_survive_kill9_in_redis_mode(
    start_broker: Callable[..., RedisBroker], redis_url: str
) -> None:
    """With DEVICE queues in Redis the session records (wills, inbound QoS 2 ids) stay
    in SQLite: a PUBLISH re-sent after the kill is routed once, and a will still due
    after an abnormal close is published once after the restart."""
    broker = start_broker(redis_url)
    watcher, publisher_, dying = (RawClient(broker.port) for _ in range(3))
    try:
        watcher.connect("r-watch", level=5, clean=False, props=KEEP)
        assert watcher.subscribe(("r/#", 2)).reason_codes == (2,)
        watcher.disconnect()
        publisher_.connect("r-pub", level=5, clean=False, props=KEEP)
        publisher_.send(publish_packet("r/once", b"one", v5=True, qos=2, packet_id=5))
        assert publisher_.wait_packet(PUBREC, packet_id=5).packet_id == 5
        will = Will("r/will", b"gone", qos=1, props=[(Prop.WILL_DELAY_INTERVAL, 2)])
        dying.connect("r-dev", level=5, clean=False, props=KEEP, will=will)
        dying.subscribe(("x", 0))  # the session record, its will with it, is committed
        dying.close()
        broker.kill9()
    finally:
        for client in (watcher, publisher_, dying):
            client.close()
    again = RawClient(broker.port)
    reader = RawClient(broker.port)
    try:
        assert again.connect("r-pub", level=5, clean=False, props=KEEP).session_present
        again.send(publish_packet("r/once", b"one", v5=True, qos=2, packet_id=5, dup=True))
        again.wait_packet(PUBREC, packet_id=5)
        again.send(ack_packet(PUBREL, 5, v5=True))
        again.wait_packet(PUBCOMP, packet_id=5)
        assert reader.connect("r-watch", level=5, clean=False, props=KEEP).session_present
        messages = reader.receive_messages(2)
        assert sorted((m.topic, m.payload) for m in messages) == [
            ("r/once", b"one"),
            ("r/will", b"gone"),
        ]
        reader.expect_silence(2.5)
    finally:
        again.close()
        reader.close()
