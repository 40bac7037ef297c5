"""Acknowledgements of the broker's outbound QoS 1/2 deliveries, as protocol/outbound.py's
table has them: the one a delivery awaits moves it on; any other (an id not in flight, a
PUBCOMP before PUBREC, a PUBACK for QoS 2, a PUBREC for QoS 1) changes nothing and leaves
the connection open. A PUBREC the broker holds no QoS 2 delivery for is answered with
PUBREL 0x92 [MQTT-4.3.3]; a repeated PUBREC gets its PUBREL again."""

from __future__ import annotations

import pytest

from .helpers import Clients
from .waiting import BrokerUnderTest
from .wire import PUBACK, PUBCOMP, PUBLISH, PUBREC, PUBREL, Prop, ack_packet

pytestmark = pytest.mark.mqttq_only


def test_qos1_delivery_moves_only_on_its_puback(broker: BrokerUnderTest, clients: Clients) -> None:
    subscriber = clients.connected(broker, "oa1", level=5, props=[(Prop.RECEIVE_MAXIMUM, 1)])
    subscriber.subscribe(("oa1/t", 1))
    publisher = clients.connected(broker, "oa1-pub", level=5)
    publisher.publish("oa1/t", b"first", qos=1)
    publisher.publish("oa1/t", b"second", qos=1)
    first = subscriber.wait_packet(PUBLISH)
    assert first.payload == b"first"
    assert first.packet_id is not None
    subscriber.send(ack_packet(PUBCOMP, first.packet_id, v5=True))
    subscriber.send(ack_packet(PUBACK, first.packet_id % 65535 + 1, v5=True))  # not in flight
    subscriber.send(ack_packet(PUBREC, first.packet_id, v5=True))
    assert subscriber.wait_packet(PUBREL, packet_id=first.packet_id).reason_code == 0x92
    subscriber.ping()
    # Still in flight: Receive Maximum 1 holds the second message back.
    subscriber.expect_silence(0.3)
    subscriber.ack(first)
    second = subscriber.wait_packet(PUBLISH)
    assert (second.payload, second.dup) == (b"second", False)
    subscriber.ack(second)
    subscriber.ping()
    subscriber.expect_silence(0.3)


def test_qos2_delivery_follows_publish_pubrec_pubrel_pubcomp(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    subscriber = clients.connected(broker, "oa2", level=5, props=[(Prop.RECEIVE_MAXIMUM, 1)])
    subscriber.subscribe(("oa2/t", 2))
    publisher = clients.connected(broker, "oa2-pub", level=5)
    publisher.publish("oa2/t", b"first", qos=2)
    publisher.publish("oa2/t", b"second", qos=2)
    first = subscriber.wait_packet(PUBLISH)
    packet_id = first.packet_id
    assert packet_id is not None
    # Neither is what a QoS 2 PUBLISH awaits: no PUBREL, nothing completes.
    subscriber.send(ack_packet(PUBACK, packet_id, v5=True))
    subscriber.send(ack_packet(PUBCOMP, packet_id, v5=True))
    subscriber.ping()
    subscriber.expect_silence(0.3)
    subscriber.ack(first)  # PUBREC
    assert subscriber.wait_packet(PUBREL, packet_id=packet_id).reason_code == 0
    subscriber.send(ack_packet(PUBREC, packet_id, v5=True))  # repeated: PUBREL again
    assert subscriber.wait_packet(PUBREL, packet_id=packet_id).reason_code == 0
    subscriber.ping()
    subscriber.expect_silence(0.3)  # awaiting PUBCOMP: the second is still held back
    subscriber.send(ack_packet(PUBCOMP, packet_id, v5=True))
    second = subscriber.wait_packet(PUBLISH)
    assert second.payload == b"second"
    subscriber.send(ack_packet(PUBCOMP, packet_id, v5=True))  # the first is over: ignored
    subscriber.ack(second)
    assert second.packet_id is not None
    subscriber.ack(subscriber.wait_packet(PUBREL, packet_id=second.packet_id))
    subscriber.ping()
    subscriber.expect_silence(0.3)


def test_error_pubrec_ends_the_qos2_delivery(broker: BrokerUnderTest, clients: Clients) -> None:
    """No PUBREL after a PUBREC with a reason code >= 0x80 [MQTT-4.4.0-2]; the id is free."""
    subscriber = clients.connected(broker, "oa3", level=5, props=[(Prop.RECEIVE_MAXIMUM, 1)])
    subscriber.subscribe(("oa3/t", 2))
    publisher = clients.connected(broker, "oa3-pub", level=5)
    publisher.publish("oa3/t", b"refused", qos=2)
    publisher.publish("oa3/t", b"next", qos=2)
    first = subscriber.wait_packet(PUBLISH)
    assert first.packet_id is not None
    subscriber.send(ack_packet(PUBREC, first.packet_id, v5=True, reason=0x80))
    second = subscriber.wait_packet(PUBLISH)
    assert second.payload == b"next"
    subscriber.ping()
    subscriber.expect_silence(0.3)  # no PUBREL for the refused one
