"""Persistent sessions: stored subscriptions, redelivery of unacknowledged messages on
reconnect, the offline queue and its limit."""

from __future__ import annotations

import pytest

from .admin_api import AdminApi, metric_value
from .helpers import (
    Clients,
)
from .raw_client import (
    RawClient,
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
    publish_packet,
)

KEEP = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]


def persistent(
    clients: Clients, broker: BrokerUnderTest, client_id: str, level: int, *, first: bool = False
) -> RawClient:
    """Connect with a session that survives disconnection (3.1.1 clean 0; 5.0 expiry 300).

    `first` starts from a fresh session (5.0 clean start 1 with expiry; 3.1.1 cannot do both,
    a new id has no session anyway)."""
    client = clients.raw(broker)
    connack = client.connect(
        client_id,
        level=level,
        clean=first and level == 5,
        props=KEEP if level == 5 else (),
    )
    if first:
        assert connack.session_present is False
    return client


@pytest.mark.parametrize("level", [4, 5])
def test_subscriptions_survive_reconnect(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """A resumed session keeps its subscriptions [MQTT-3.1.2-4]; a clean one has none."""
    client = persistent(clients, broker, "keeper", level, first=True)
    client.subscribe(("keep/t", 1))
    client.disconnect()
    client = persistent(clients, broker, "keeper", level)
    publisher = clients.paho(broker, "pub", protocol=level)
    publisher.publish("keep/t", b"still subscribed", 1)
    [message] = client.receive_messages(1)
    assert message.payload == b"still subscribed"
    client.disconnect()

    clean = clients.connected(broker, "keeper", level=level, clean=True)
    publisher.publish("keep/t", b"nobody", 1)
    clean.ping()
    clean.expect_silence(0.3)


@pytest.mark.parametrize("level", [4, 5])
def test_qos1_redelivered_with_dup_and_same_ids(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """Unacknowledged QoS 1 messages are re-sent on reconnect with DUP=1, their original packet
    ids and in their original order [MQTT-4.4.0-1] [MQTT-3.3.1-1] [MQTT-4.6.0-1]."""
    subscriber = persistent(clients, broker, "redeliver", level, first=True)
    subscriber.subscribe(("re/t", 1))
    publisher = clients.paho(broker, "pub", protocol=level)
    for i in range(3):
        publisher.publish("re/t", b"r%d" % i, 1)
    first = subscriber.receive_messages(3, ack=False)
    assert [m.dup for m in first] == [False] * 3
    subscriber.close()

    subscriber = persistent(clients, broker, "redeliver", level)
    again = subscriber.receive_messages(3)
    assert [(m.payload, m.packet_id, m.dup, m.qos) for m in again] == [
        (m.payload, m.packet_id, True, 1) for m in first
    ]
    subscriber.ping()
    subscriber.expect_silence(0.3)
    subscriber.disconnect()

    # Acknowledged now: nothing is left to redeliver.
    subscriber = persistent(clients, broker, "redeliver", level)
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.parametrize("level", [4, 5])
def test_qos2_redelivery_resends_pubrel_and_publish(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """QoS 2 on reconnect: a message whose PUBREC was sent gets its PUBREL again, one without
    PUBREC gets the PUBLISH again with DUP=1 and the same id [MQTT-4.4.0-1]; once completed,
    neither comes back."""
    subscriber = persistent(clients, broker, "redeliver2", level, first=True)
    subscriber.subscribe(("re2/t", 2))
    publisher = clients.paho(broker, "pub", protocol=level)
    publisher.publish("re2/t", b"first", 2)
    publisher.publish("re2/t", b"second", 2)
    one, two = subscriber.receive_messages(2, ack=False)
    assert (one.payload, two.payload) == (b"first", b"second")
    subscriber.ack(one)  # PUBREC for the first only
    subscriber.wait_packet(PUBREL, packet_id=one.packet_id)
    subscriber.close()  # without PUBCOMP

    subscriber = persistent(clients, broker, "redeliver2", level)
    pubrel = subscriber.wait_packet(PUBREL, packet_id=one.packet_id)
    publish = subscriber.wait_packet(PUBLISH)
    assert (publish.payload, publish.packet_id, publish.dup, publish.qos) == (
        b"second",
        two.packet_id,
        True,
        2,
    )
    subscriber.ack(pubrel)
    subscriber.ack(publish)
    subscriber.ack(subscriber.wait_packet(PUBREL, packet_id=two.packet_id))
    subscriber.ping()
    subscriber.expect_silence(0.3)
    subscriber.disconnect()

    subscriber = persistent(clients, broker, "redeliver2", level)
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.parametrize("level", [4, 5])
@pytest.mark.parametrize("qos", [1, 2])
def test_offline_messages_queued_in_order(
    broker: BrokerUnderTest, clients: Clients, level: int, qos: int
) -> None:
    """Messages published while a persistent subscriber is offline are delivered on reconnect,
    all of them, in order, DUP=0 (first delivery) [MQTT-3.1.2-5] [MQTT-3.3.1-2]."""
    subscriber = persistent(clients, broker, "away", level, first=True)
    subscriber.subscribe(("away/t", qos))
    subscriber.disconnect()
    publisher = clients.paho(broker, "pub", protocol=level)
    expected = [b"q%02d" % i for i in range(10)]
    for payload in expected:
        assert publisher.publish("away/t", payload, qos) == 0
    subscriber = persistent(clients, broker, "away", level)
    messages = subscriber.receive_messages(10)
    assert [m.payload for m in messages] == expected
    assert {(m.qos, m.dup) for m in messages} == {(qos, False)}
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.mqttq_only
def test_queue_limit_drop_oldest(broker_factory: BrokerFactory, clients: Clients) -> None:
    """max_queued_messages = 5, drop_oldest: the newest 5 survive, in order. (mosquitto drops
    the new messages instead.)"""
    broker = broker_factory(
        config='[mqtt]\nmax_queued_messages = 5\nqueue_full_policy = "drop_oldest"\n'
    )
    subscriber = persistent(clients, broker, "full", 5, first=True)
    subscriber.subscribe(("full/t", 1))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=5)
    for i in range(8):
        ack = publisher.publish("full/t", b"d%d" % i, qos=1)
        assert ack is not None and ack.reason_code == 0
    subscriber = persistent(clients, broker, "full", 5)
    messages = subscriber.receive_messages(5)
    assert [m.payload for m in messages] == [b"d%d" % i for i in range(3, 8)]
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.mqttq_only
def test_queue_limit_reject_new(broker_factory: BrokerFactory, clients: Clients) -> None:
    """max_queued_messages = 5, reject_new: the 6th QoS 1 PUBLISH gets PUBACK 0x97 Quota
    exceeded; the first 5 are delivered."""
    broker = broker_factory(
        config='[mqtt]\nmax_queued_messages = 5\nqueue_full_policy = "reject_new"\n'
    )
    subscriber = persistent(clients, broker, "full", 5, first=True)
    subscriber.subscribe(("full/t", 1))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=5)
    codes = []
    for i in range(6):
        ack = publisher.publish("full/t", b"r%d" % i, qos=1)
        assert ack is not None
        codes.append(ack.reason_code)
    assert codes == [0, 0, 0, 0, 0, RC.QUOTA_EXCEEDED]
    publisher.ping()  # the publisher stays connected
    text = AdminApi(broker.data_dir).metrics()
    assert metric_value(text, "mqttq_refusals_total", tenant="default", reason="queue_full") == 1
    subscriber = persistent(clients, broker, "full", 5)
    messages = subscriber.receive_messages(5)
    assert [m.payload for m in messages] == [b"r%d" % i for i in range(5)]
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.mqttq_only
def test_queue_limit_reject_new_closes_a_v311_publisher_unacknowledged(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """3.1.1 has no error PUBACK: the refused 6th message is not acknowledged, the
    connection is closed, and the publisher's session re-sends it after it reconnects,
    once the subscriber has drained its queue: nothing is lost."""
    broker = broker_factory(
        config='[mqtt]\nmax_queued_messages = 5\nqueue_full_policy = "reject_new"\n'
    )
    subscriber = persistent(clients, broker, "full", 5, first=True)
    subscriber.subscribe(("full/t", 1))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=4, clean=False)
    for i in range(5):
        ack = publisher.publish("full/t", b"r%d" % i, qos=1)
        assert ack is not None and ack.type == PUBACK
    publisher.send_quietly(publish_packet("full/t", b"r5", v5=False, qos=1, packet_id=6))
    assert [p.type for p in publisher.wait_closed()] == []

    subscriber = persistent(clients, broker, "full", 5)
    assert [m.payload for m in subscriber.receive_messages(5)] == [b"r%d" % i for i in range(5)]
    publisher = clients.connected(broker, "pub", level=4, clean=False)
    publisher.send(publish_packet("full/t", b"r5", v5=False, qos=1, packet_id=6, dup=True))
    assert publisher.wait_packet(PUBACK).packet_id == 6
    assert [m.payload for m in subscriber.receive_messages(1)] == [b"r5"]


def test_offline_queue_flush_honours_receive_maximum(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Delivering the offline queue on reconnect still respects the client's Receive Maximum
    (1): one unacknowledged PUBLISH at a time [MQTT-3.3.4-7], all delivered in order."""
    subscriber = persistent(clients, broker, "trickle", 5, first=True)
    subscriber.subscribe(("trickle/t", 1))
    subscriber.disconnect()
    publisher = clients.paho(broker, "pub")
    for i in range(4):
        publisher.publish("trickle/t", b"t%d" % i, 1)
    subscriber = clients.raw(broker)
    subscriber.connect("trickle", level=5, clean=False, props=[*KEEP, (Prop.RECEIVE_MAXIMUM, 1)])
    for i in range(4):
        message = subscriber.wait_packet(PUBLISH)
        assert message.payload == b"t%d" % i
        subscriber.expect_silence(0.3)
        subscriber.ack(message)


@pytest.mark.parametrize("level", [4, 5])
def test_inbound_qos2_state_survives_reconnect(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """A publisher with a persistent session that lost its connection after PUBREC re-sends
    PUBREL on reconnect; the server completes with PUBCOMP (not 'packet id not found') and the
    message is delivered exactly once [MQTT-4.4.0-1] [MQTT-4.3.3]."""
    subscriber = clients.connected(broker, "sub", level=level)
    subscriber.subscribe(("in2/t", 2))
    publisher = persistent(clients, broker, "pub2", level, first=True)
    publisher.send(publish_packet("in2/t", b"exactly once", v5=level == 5, qos=2, packet_id=9))
    assert publisher.wait_packet(PUBREC, packet_id=9).reason_code in (0, RC.NO_MATCHING_SUBSCRIBERS)
    publisher.close()
    publisher = persistent(clients, broker, "pub2", level)
    publisher.send(ack_packet(PUBREL, 9, v5=level == 5))
    assert publisher.wait_packet(PUBCOMP, packet_id=9).reason_code == 0
    [message] = subscriber.receive_messages(1)
    assert message.payload == b"exactly once"
    subscriber.ping()
    subscriber.expect_silence(0.3)


@pytest.mark.parametrize("level", [4, 5])
def test_takeover_resumes_persistent_session(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """Taking over a connected persistent session with clean start 0 resumes it: session
    present 1 and the subscriptions keep working [MQTT-3.1.4-3]."""
    first = persistent(clients, broker, "taken", level, first=True)
    first.subscribe(("taken/t", 1))
    second = clients.raw(broker)
    connack = second.connect("taken", level=level, clean=False, props=KEEP if level == 5 else ())
    assert connack.session_present is True
    first.wait_closed()
    publisher = clients.connected(broker, "pub", level=level)
    publisher.publish("taken/t", b"resumed", qos=1)
    [message] = second.receive_messages(1)
    assert message.payload == b"resumed"
