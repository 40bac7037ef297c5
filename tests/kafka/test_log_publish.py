"""The Kafka message log (issue 11): every PUBLISH goes through `<prefix>msg.all`, is
acknowledged once Kafka has it, and is delivered when read back: to live subscribers and
to DEVICE queues (SQLite or Redis), in order per publisher. Wills go the same way."""

from __future__ import annotations

import pytest
import redis

from mqttq.storage.formats.kafka_record import decode_message
from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerFactory, wait_for
from tests.integration.wire import PUBACK, PUBLISH, Prop, Will, publish_packet
from tests.kafka.log_helpers import DEADLINE, log_config, read_topic
from tests.kafka_service import KafkaServer

pytestmark = [pytest.mark.mqttq_only, pytest.mark.slow]

PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]


def test_puback_comes_with_the_record_in_msg_all(
    kafka: KafkaServer, kafka_prefix: str, broker_factory: BrokerFactory, clients: Clients
) -> None:
    """The PUBACK arrives once the record is in msg.all: keyed by the publisher, the payload
    as value, the rest in headers (MQTT 5 properties in wire form)."""
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix))
    live = clients.connected(broker, "live-1", level=5)
    live.subscribe(("a/b", 1))
    publisher = clients.connected(broker, "pub-1", level=5)
    props = [(Prop.CONTENT_TYPE, "text/plain"), (Prop.USER_PROPERTY, ("k", "v"))]
    puback = publisher.publish("a/b", b"hello", qos=1, retain=True, props=props)
    assert puback is not None and puback.reason_code == 0

    ((key, value, headers),) = read_topic(kafka.bootstrap, f"{kafka_prefix}msg.all", 1)
    assert (key, value) == (b"pub-1", b"hello")
    tenant, logged = decode_message(key, value, list(headers.items()))
    assert tenant == "default"
    assert (logged.topic, logged.qos, logged.retain, logged.publisher_id) == (
        "a/b",
        1,
        True,
        "pub-1",
    )
    assert logged.properties.content_type == "text/plain"
    assert logged.properties.user_properties == [("k", "v")]
    assert logged.created_at > 0

    # Routed when read back: delivered, and retained for a later subscriber.
    (message,) = live.receive_messages(1)
    assert (message.topic, message.payload, message.retain) == ("a/b", b"hello", False)
    subscriber = clients.connected(broker, "sub-1", level=5)
    subscriber.subscribe(("a/b", 1))
    (message,) = subscriber.receive_messages(1)
    assert (message.topic, message.payload, message.retain) == ("a/b", b"hello", True)
    assert message.props.get(Prop.CONTENT_TYPE) == "text/plain"


@pytest.mark.parametrize("device", ["sqlite", "redis"])
def test_qos_0_1_2_reach_live_subscribers_and_device_queues(  # noqa: PLR0917 (fixtures)
    kafka: KafkaServer,
    kafka_prefix: str,
    broker_factory: BrokerFactory,
    clients: Clients,
    request: pytest.FixtureRequest,
    device: str,
) -> None:
    """Through the log, QoS 0/1/2 reach a live subscriber, and QoS 1/2 wait in an offline
    persistent session's queue (in Redis: its `{id}_messages` ZSET) until it reconnects."""
    url = request.getfixturevalue("redis_url") if device == "redis" else ""
    extra = f'[redis]\nurl = "{url}"' if url else ""
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix, extra, device=device))
    away = clients.connected(broker, "away", level=5, clean=False, props=PERSISTENT)
    assert away.subscribe(("q/#", 2)).reason_codes == (2,)
    away.disconnect()
    live = clients.connected(broker, "live", level=5)
    assert live.subscribe(("q/#", 2)).reason_codes == (2,)

    publisher = clients.connected(broker, "pub", level=5)
    for qos in (0, 1, 2):
        done = publisher.publish(f"q/{qos}", b"m%d" % qos, qos=qos)
        assert done is None or done.reason_code == 0, done
    got = live.receive_messages(3)
    assert sorted((m.topic, m.payload, m.qos) for m in got) == [
        ("q/0", b"m0", 0),
        ("q/1", b"m1", 1),
        ("q/2", b"m2", 2),
    ]

    if device == "redis":
        store = redis.Redis.from_url(url)
        try:
            wait_for(lambda: store.zcard("{away}_messages") == 2, timeout=DEADLINE, what="queue")
        finally:
            store.close()
    back = clients.raw(broker)
    assert back.connect("away", level=5, clean=False, props=PERSISTENT).session_present
    queued = back.receive_messages(2)
    assert [(m.topic, m.payload, m.qos) for m in queued] == [("q/1", b"m1", 1), ("q/2", b"m2", 2)]


def test_each_publishers_messages_stay_in_order(
    kafka: KafkaServer, kafka_prefix: str, broker_factory: BrokerFactory, clients: Clients
) -> None:
    """Two publishers, 100 QoS 1 messages each with 20 in flight: the subscriber gets all
    of them, each publisher's in the order sent (msg.all has 3 partitions)."""
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix))
    subscriber = clients.connected(broker, "order-sub", level=5)
    subscriber.subscribe(("o/#", 1))
    publishers = [clients.connected(broker, f"order-{n}", level=5) for n in range(2)]
    for seq in range(0, 100, 20):
        for n, publisher in enumerate(publishers):
            ids = []
            for i in range(seq, seq + 20):
                ids.append(publisher.next_packet_id())
                publisher.send(_publish(f"o/{n}", b"%03d" % i, ids[-1]))
            for packet_id in ids:
                assert publisher.wait_packet(PUBACK, packet_id=packet_id).reason_code == 0
    got = subscriber.receive_messages(200)
    for n in range(2):
        mine = [int(m.payload) for m in got if m.topic == f"o/{n}"]
        assert mine == list(range(100))


def test_a_will_goes_through_the_log(
    kafka: KafkaServer, kafka_prefix: str, broker_factory: BrokerFactory, clients: Clients
) -> None:
    broker = broker_factory(log_config(kafka.bootstrap, kafka_prefix))
    watcher = clients.connected(broker, "watcher", level=5)
    watcher.subscribe(("will/#", 1))
    dying = clients.connected(broker, "dying", level=5, will=Will("will/dying", b"bye", qos=1))
    dying.close()  # no DISCONNECT: the will is due
    (message,) = watcher.receive_messages(1)
    assert (message.type, message.topic, message.payload) == (PUBLISH, "will/dying", b"bye")
    ((key, value, headers),) = read_topic(kafka.bootstrap, f"{kafka_prefix}msg.all", 1)
    assert (key, value) == (b"dying", b"bye")
    assert decode_message(key, value, list(headers.items()))[1].topic == "will/dying"


def _publish(topic: str, payload: bytes, packet_id: int) -> bytes:
    return publish_packet(topic, payload, v5=True, qos=1, packet_id=packet_id)
