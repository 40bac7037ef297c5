"""QoS 0/1/2 flows in both directions, ordering, exactly-once, and Receive Maximum both ways."""

from __future__ import annotations

import pytest

from .helpers import (
    Clients,
)
from .waiting import (
    BrokerFactory,
    BrokerUnderTest,
)
from .wire import (
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    RC,
    Prop,
    ack_packet,
    assert_disconnected_with,
    publish_packet,
)

COUNT = 30


@pytest.mark.parametrize("protocol", [4, 5])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_paho_roundtrip_in_order(
    broker: BrokerUnderTest, clients: Clients, protocol: int, qos: int
) -> None:
    """Messages from one publisher arrive in publish order [MQTT-4.6.0-5]; QoS 1/2 all of them,
    QoS 2 exactly once [MQTT-4.3.3]."""
    subscriber = clients.paho(broker, "sub", protocol=protocol)
    assert subscriber.subscribe("qos/t", qos) == [qos]
    publisher = clients.paho(broker, "pub", protocol=protocol)
    expected = [f"m{i:03d}".encode() for i in range(COUNT)]
    for payload in expected:
        assert publisher.publish("qos/t", payload, qos) in (0, RC.NO_MATCHING_SUBSCRIBERS)
    messages = subscriber.wait_messages(COUNT)
    assert [m.payload for m in messages] == expected
    assert {(m.topic, m.qos, m.retain) for m in messages} == {("qos/t", qos, False)}


QOS_PAIRS = [(0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0)]


@pytest.mark.parametrize("level", [4, 5])
def test_raw_flows_and_granted_qos(
    broker: BrokerUnderTest, clients: Clients, subtests: pytest.Subtests, level: int
) -> None:
    """Delivery QoS is min(publish QoS, granted QoS) [MQTT-3.8.4-8]; QoS > 0 deliveries carry a
    non-zero packet id unique among those in flight [MQTT-2.2.1-3]; QoS 0 none, DUP 0."""
    for pub_qos, sub_qos in QOS_PAIRS:
        with subtests.test(pub_qos=pub_qos, sub_qos=sub_qos):
            _flow(broker, clients, level, pub_qos, sub_qos)


def _flow(
    broker: BrokerUnderTest, clients: Clients, level: int, pub_qos: int, sub_qos: int
) -> None:
    topic = f"flow/{pub_qos}{sub_qos}"
    subscriber = clients.connected(broker, f"sub{pub_qos}{sub_qos}", level=level)
    assert subscriber.subscribe((topic, sub_qos)).reason_codes == (sub_qos,)
    publisher = clients.connected(broker, f"pub{pub_qos}{sub_qos}", level=level)
    for i in range(5):
        ack = publisher.publish(topic, b"p%d" % i, qos=pub_qos)
        if pub_qos:
            assert ack is not None
            assert ack.type == (PUBACK if pub_qos == 1 else PUBCOMP)
            assert ack.reason_code == 0
    # Receive without acking so that every delivery is in flight at the same time.
    messages = subscriber.receive_messages(5, ack=False)
    delivered_qos = min(pub_qos, sub_qos)
    assert [m.payload for m in messages] == [b"p%d" % i for i in range(5)]
    assert {(m.qos, m.dup, m.retain) for m in messages} == {(delivered_qos, False, False)}
    ids = [m.packet_id for m in messages]
    if delivered_qos == 0:
        assert ids == [None] * 5
    else:
        assert all(isinstance(i, int) and 0 < i <= 65535 for i in ids), ids
        assert len(set(ids)) == 5, f"packet ids reused while in flight: {ids}"
        for message in messages:
            subscriber.ack(message)
        if delivered_qos == 2:
            for message in messages:
                pubrel = subscriber.wait_packet(PUBREL, packet_id=message.packet_id)
                assert pubrel.flags == 0x02, "PUBREL fixed header flags are 0b0010 [MQTT-3.6.1-1]"
                subscriber.ack(pubrel)
    subscriber.ping()
    subscriber.expect_silence(0.3)
    subscriber.disconnect()
    publisher.disconnect()


def test_qos2_inbound_duplicate_delivered_once(broker: BrokerUnderTest, clients: Clients) -> None:
    """A QoS 2 PUBLISH re-sent with DUP before PUBREL is not delivered twice [MQTT-4.3.3-10]."""
    subscriber = clients.connected(broker, "sub", level=5)
    subscriber.subscribe(("eo/t", 2))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.send(publish_packet("eo/t", b"once", v5=True, qos=2, packet_id=7))
    assert publisher.wait_packet(PUBREC, packet_id=7).reason_code == 0
    publisher.send(publish_packet("eo/t", b"once", v5=True, qos=2, packet_id=7, dup=True))
    assert publisher.wait_packet(PUBREC, packet_id=7).reason_code == 0
    publisher.send(ack_packet(PUBREL, 7, v5=True))
    assert publisher.wait_packet(PUBCOMP, packet_id=7).reason_code == 0
    # The id is free again: a new message with id 7 is a new message.
    publisher.send(publish_packet("eo/t", b"twice", v5=True, qos=2, packet_id=7))
    publisher.wait_packet(PUBREC, packet_id=7)
    publisher.send(ack_packet(PUBREL, 7, v5=True))
    publisher.wait_packet(PUBCOMP, packet_id=7)
    messages = subscriber.receive_messages(2)
    assert [m.payload for m in messages] == [b"once", b"twice"]
    subscriber.ping()
    subscriber.expect_silence(0.3)


def test_qos2_pubrel_for_unknown_id_completes(broker: BrokerUnderTest, clients: Clients) -> None:
    """PUBREL for an id the server does not hold is answered with PUBCOMP (v5: 0x92 allowed)."""
    client = clients.connected(broker, "rel", level=5)
    client.send(ack_packet(PUBREL, 321, v5=True))
    pubcomp = client.wait_packet(PUBCOMP, packet_id=321)
    assert pubcomp.reason_code in (0x00, 0x92)


@pytest.mark.mqttq_only
def test_server_receive_maximum_enforced_qos2(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """[mqtt] receive_maximum = 2: a third unacknowledged QoS 2 PUBLISH (no PUBREL sent) exceeds
    the server's Receive Maximum -> DISCONNECT 0x93 [MQTT-3.3.4-9]. (mosquitto answers PUBREC
    0x97 instead and keeps the connection; it also has no receive_maximum setting.)"""
    broker = broker_factory(config="[mqtt]\nreceive_maximum = 2\n")
    client = clients.raw(broker)
    assert client.connect("greedy", level=5).props.get(Prop.RECEIVE_MAXIMUM) == 2
    for packet_id in (1, 2):
        client.send(publish_packet("rm/t", b"x", v5=True, qos=2, packet_id=packet_id))
        pubrec = client.wait_packet(PUBREC, packet_id=packet_id)
        assert pubrec.reason_code in (RC.SUCCESS, RC.NO_MATCHING_SUBSCRIBERS)
    client.send(publish_packet("rm/t", b"x", v5=True, qos=2, packet_id=3))
    assert_disconnected_with(client.wait_closed(), RC.RECEIVE_MAXIMUM_EXCEEDED)


@pytest.mark.mqttq_only
def test_server_receive_maximum_enforced_qos1(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """receive_maximum = 2: three QoS 1 PUBLISHes in one write, acks not read -> 0x93.

    This relies on mqttq counting a QoS 1 PUBLISH as in flight until its PUBACK is written
    (after the message is stored), so three in one segment are all in flight at once.
    """
    broker = broker_factory(config="[mqtt]\nreceive_maximum = 2\n")
    offline = clients.connected(
        broker, "offline", level=5, clean=True, props=[(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    )
    offline.subscribe(("rm/t", 1))
    offline.disconnect()
    client = clients.connected(broker, "greedy", level=5)
    client.send(
        b"".join(publish_packet("rm/t", b"x" * 100, v5=True, qos=1, packet_id=i) for i in (1, 2, 3))
    )
    packets = client.wait_closed()
    assert_disconnected_with([p for p in packets if p.type != PUBACK], RC.RECEIVE_MAXIMUM_EXCEEDED)


@pytest.mark.parametrize("qos", [1, 2])
def test_client_receive_maximum_honoured(
    broker: BrokerUnderTest, clients: Clients, qos: int
) -> None:
    """A 5.0 subscriber with Receive Maximum 1 never has more than one unacknowledged PUBLISH
    [MQTT-3.3.4-7]; as it acks, the rest arrive in order and none is dropped."""
    subscriber = clients.connected(broker, "slow", level=5, props=[(Prop.RECEIVE_MAXIMUM, 1)])
    subscriber.subscribe(("crm/t", qos))
    publisher = clients.paho(broker, "pub")
    for i in range(5):
        publisher.publish("crm/t", b"c%d" % i, qos)
    received = []
    for i in range(5):
        message = subscriber.wait_packet(PUBLISH)
        assert message.payload == b"c%d" % i
        received.append(message.payload)
        # While this one is unacknowledged, no other PUBLISH may arrive.
        subscriber.expect_silence(0.3)
        subscriber.ack(message)
        if qos == 2:
            pubrel = subscriber.wait_packet(PUBREL, packet_id=message.packet_id)
            # Still in flight until PUBCOMP [MQTT-4.9.0-2].
            subscriber.expect_silence(0.2)
            subscriber.ack(pubrel)
    assert received == [b"c%d" % i for i in range(5)]
    subscriber.expect_silence(0.3)


def test_qos1_puback_reason_no_matching_subscribers(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """5.0 PUBACK carries success (0x00) or 0x10 No matching subscribers, never an error."""
    publisher = clients.connected(broker, "lonely", level=5)
    ack = publisher.publish("nobody/listens", b"x", qos=1)
    assert ack is not None and ack.reason_code in (0x00, RC.NO_MATCHING_SUBSCRIBERS)


@pytest.mark.parametrize("level", [4, 5])
def test_large_payload_roundtrip(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """A 512 KiB payload (many TCP segments, well under the default maximum) arrives intact."""
    subscriber = clients.connected(broker, "sub", level=level)
    subscriber.subscribe(("big/t", 1))
    publisher = clients.connected(broker, "pub", level=level)
    payload = bytes(range(256)) * 2048
    publisher.publish("big/t", payload, qos=1)
    [message] = subscriber.receive_messages(1)
    assert message.payload == payload


def test_fan_out_to_many_subscribers(broker: BrokerUnderTest, clients: Clients) -> None:
    """Every one of 25 subscribers (3.1.1 and 5.0 mixed) gets every message, in order."""
    subscribers = []
    for i in range(25):
        client = clients.connected(broker, f"fan{i}", level=4 + i % 2)
        client.subscribe(("fan/+", 1 + i % 2))
        subscribers.append(client)
    publisher = clients.paho(broker, "pub")
    expected = [b"f%02d" % i for i in range(20)]
    for payload in expected:
        publisher.publish("fan/t", payload, 1)
    for client in subscribers:
        assert [m.payload for m in client.receive_messages(20)] == expected


def test_client_maximum_packet_size_respected(broker: BrokerUnderTest, clients: Clients) -> None:
    """A message larger than the subscriber's Maximum Packet Size is not sent to it (it is
    discarded for that client) [MQTT-3.1.2-25]; smaller ones still are."""
    small = clients.connected(broker, "small", level=5, props=[(Prop.MAXIMUM_PACKET_SIZE, 128)])
    small.subscribe(("mps/t", 1))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("mps/t", b"x" * 500, qos=1)
    publisher.publish("mps/t", b"fits", qos=1)
    [message] = small.receive_messages(1)
    assert message.payload == b"fits"
    small.ping()
    small.expect_silence(0.3)
