"""kill -9 of the broker while acknowledged messages are fanned out from the publish inbox
(broker/inbox.py) to many offline persistent sessions: after the restart every session has
every acknowledged message exactly once, in publish order.

Wherever the kill lands (rows committed and acknowledged, entries of some messages
committed, rows deleted with them), each message is in the inbox or in the queues, never
both: the assertions hold for any timing. mqttq_only: mosquitto does not store before it
acknowledges.
"""

from __future__ import annotations

import pytest

from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerUnderTest
from tests.integration.wire import PUBACK, PUBLISH, Prop, publish_packet

SESSIONS = 12
TOTAL = 400
WINDOW = 100
KILL_AFTER = 150
TOPIC = "k9inbox/fan"
KEEP = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]


@pytest.mark.mqttq_only
def test_each_session_gets_each_acknowledged_message_once_after_kill9(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    ids = [f"k9inbox-{n:02d}" for n in range(SESSIONS)]
    for client_id in ids:
        subscriber = clients.connected(broker, client_id, level=5, clean=False, props=KEEP)
        assert subscriber.subscribe((TOPIC, 1)).reason_codes == (1,)
        subscriber.disconnect()
    publisher = clients.connected(broker, "k9inbox-pub", level=5)

    seq_of_id: dict[int, int] = {}
    acked: list[int] = []

    def take(pkt_type: int, packet_id: int | None, reason: int | None) -> None:
        assert pkt_type == PUBACK and packet_id is not None and reason == 0
        acked.append(seq_of_id.pop(packet_id))

    sent = 0
    while len(acked) < KILL_AFTER:
        while sent < TOTAL and len(seq_of_id) < WINDOW:
            packet_id = sent + 1
            seq_of_id[packet_id] = sent
            publisher.send(
                publish_packet(TOPIC, b"%04d" % sent, v5=True, qos=1, packet_id=packet_id)
            )
            sent += 1
        pkt = publisher.recv()
        take(pkt.type, pkt.packet_id, pkt.reason_code)
    broker.kill9()
    for pkt in publisher.wait_closed():
        take(pkt.type, pkt.packet_id, pkt.reason_code)
    assert acked == sorted(acked)

    for client_id in ids:
        subscriber = clients.raw(broker)
        assert subscriber.connect(client_id, level=5, clean=False, props=KEEP).session_present
        got: list[int] = []
        while not set(acked) <= set(got):
            pkt = subscriber.recv()
            assert pkt.type == PUBLISH, pkt
            got.append(int(pkt.payload))
            subscriber.ack(pkt)
        while (late := subscriber.try_recv(0.3)) is not None:
            assert late.type == PUBLISH, late
            got.append(int(late.payload))
            subscriber.ack(late)
        assert got == sorted(set(got)), f"{client_id}: out of order or duplicated"
        subscriber.disconnect()
