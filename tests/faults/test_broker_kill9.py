"""kill -9 of the broker mid-stream: every message the broker acknowledged to its publisher is
delivered to the persistent subscriber after the restart, in order.

mqttq promises that a QoS 1/2 message for a persistent session is stored before the publisher
gets its PUBACK/PUBREC (ARCHITECTURE.md section 1); mosquitto does not, hence mqttq_only.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.helpers import (
    Clients,
)
from tests.integration.raw_client import (
    RawClient,
)
from tests.integration.waiting import (
    BrokerUnderTest,
)
from tests.integration.wire import (
    PUBACK,
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    Packet,
    Prop,
    ack_packet,
    publish_packet,
)

TOTAL = 200
WINDOW = 10
KILL_AFTER = 60
TOPIC = "k9/stream"


class Acks:
    """What the publisher was told: PUBACK (QoS 1), PUBREC and PUBCOMP (QoS 2), by sequence."""

    def __init__(self, publisher: RawClient) -> None:
        self.publisher = publisher
        self.seq_of_id: dict[int, int] = {}
        self.owned: list[int] = []  # PUBACK or PUBREC: the broker took ownership
        self.completed: list[int] = []  # PUBACK or PUBCOMP

    def handle(self, pkt: Packet) -> None:
        assert pkt.packet_id is not None, pkt
        seq = self.seq_of_id[pkt.packet_id]
        assert pkt.reason_code == 0, pkt
        if pkt.type == PUBACK:
            self.owned.append(seq)
            self.completed.append(seq)
            del self.seq_of_id[pkt.packet_id]
        elif pkt.type == PUBREC:
            self.owned.append(seq)
            self.publisher.send_quietly(ack_packet(PUBREL, pkt.packet_id, v5=self.publisher.v5))
        elif pkt.type == PUBCOMP:
            self.completed.append(seq)
            del self.seq_of_id[pkt.packet_id]
        else:
            raise AssertionError(f"unexpected packet for the publisher: {pkt}")


def publish_until_killed(
    broker: BrokerUnderTest,
    publisher: RawClient,
    qos: int,
    between: Callable[[], None] = lambda: None,
) -> Acks:
    """Keep WINDOW messages in flight; SIGKILL the broker once KILL_AFTER are acknowledged;
    then collect the acks the broker had already sent (they count too). `between` runs after
    each acknowledgement."""
    acks = Acks(publisher)
    sent = 0
    while len(acks.completed) < KILL_AFTER:
        while sent < TOTAL and len(acks.seq_of_id) < WINDOW:
            packet_id = sent % 65535 + 1
            acks.seq_of_id[packet_id] = sent
            publisher.send(
                publish_packet(TOPIC, b"%04d" % sent, v5=publisher.v5, qos=qos, packet_id=packet_id)
            )
            sent += 1
        acks.handle(publisher.recv())
        between()
    broker.kill9()
    for pkt in publisher.wait_closed():
        acks.handle(pkt)
    return acks


def receive_all(subscriber: RawClient, must_have: set[int]) -> list[int]:
    """Receive (and acknowledge) until every sequence in `must_have` arrived and the stream
    goes quiet; return the sequences in arrival order."""
    got: list[int] = []

    def take(pkt: Packet) -> None:
        if pkt.type == PUBLISH:
            assert pkt.topic == TOPIC
            got.append(int(pkt.payload))
        else:
            assert pkt.type == PUBREL, pkt
        subscriber.ack(pkt)

    while not must_have <= set(got):
        take(subscriber.recv())
    while (pkt := subscriber.try_recv(0.5)) is not None:
        take(pkt)
    return got


@pytest.mark.mqttq_only
@pytest.mark.parametrize(("qos", "level"), [(1, 4), (1, 5), (2, 5)])
def test_acknowledged_messages_survive_kill9(
    broker: BrokerUnderTest, clients: Clients, qos: int, level: int
) -> None:
    """A persistent, offline subscriber gets every message whose PUBACK (QoS 1) or PUBREC /
    PUBCOMP (QoS 2) reached the publisher before the broker was SIGKILLed; in publish order,
    without duplicates. Unacknowledged ones may or may not be there."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)] if level == 5 else []
    subscriber = clients.connected(broker, "k9-sub", level=level, clean=False, props=props)
    assert subscriber.subscribe((TOPIC, qos)).reason_codes == (qos,)
    subscriber.disconnect()
    publisher = clients.connected(broker, "k9-pub", level=level)

    acks = publish_until_killed(broker, publisher, qos)
    assert set(acks.completed) <= set(acks.owned)

    subscriber = clients.raw(broker)
    connack = subscriber.connect("k9-sub", level=level, clean=False, props=props)
    assert connack.session_present is True
    got = receive_all(subscriber, set(acks.owned))
    assert got == sorted(set(got)), "out of order or duplicated after the restart"
    missing = sorted(set(acks.owned) - set(got))
    assert not missing, f"acknowledged but lost: {missing}"


@pytest.mark.mqttq_only
def test_acknowledged_messages_survive_kill9_online_subscriber(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """The subscriber is online and acknowledges as it goes; what it had received but not yet
    acknowledged when the broker was SIGKILLed is re-sent after the restart. Every message
    acknowledged to the publisher reaches the subscriber: acknowledged by it before the kill or
    delivered after, in order."""
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]
    subscriber = clients.connected(broker, "k9-online", level=5, clean=True, props=props)
    subscriber.subscribe((TOPIC, 1))
    publisher = clients.connected(broker, "k9-pub", level=5)
    consumed: list[int] = []

    def consume_some() -> None:
        # Acknowledge what has arrived, except every third message: those stay in flight.
        while (pkt := subscriber.try_recv(0)) is not None:
            assert pkt.type == PUBLISH, pkt
            if int(pkt.payload) % 3:
                consumed.append(int(pkt.payload))
                subscriber.ack(pkt)

    acks = publish_until_killed(broker, publisher, 1, consume_some)
    subscriber.wait_closed()

    subscriber = clients.raw(broker)
    assert subscriber.connect("k9-online", level=5, clean=False, props=props).session_present
    must_have = set(acks.owned) - set(consumed)
    got = receive_all(subscriber, must_have)
    assert got == sorted(set(got)), "out of order or duplicated after the restart"
    assert must_have <= set(got)
