"""Graceful shutdown (SIGTERM): clients are told, the process exits 0, and persistent state
(sessions, queued and in-flight messages, retained messages) survives the restart."""

from __future__ import annotations

import pytest

from tests.integration.helpers import (
    Clients,
)
from tests.integration.waiting import (
    BrokerUnderTest,
)
from tests.integration.wire import (
    RC,
    Prop,
    assert_disconnected_with,
)

KEEP = [(Prop.SESSION_EXPIRY_INTERVAL, 3600)]


def test_sigterm_disconnects_clients_and_exits_zero(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """On SIGTERM, 5.0 clients get DISCONNECT 0x8B Server shutting down, 3.1.1 clients are
    closed, and the process exits with 0."""
    v5 = clients.connected(broker, "v5", level=5)
    v311 = clients.connected(broker, "v311", level=4)
    assert broker.terminate() == 0
    assert_disconnected_with(v5.wait_closed(), RC.SERVER_SHUTTING_DOWN)
    assert v311.wait_closed() == []


@pytest.mark.parametrize("level", [4, 5])
def test_queued_messages_survive_restart(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """Messages queued for an offline persistent subscriber, its subscription and retained
    messages survive a SIGTERM restart; delivery is complete and in order."""
    props = KEEP if level == 5 else []
    subscriber = clients.connected(broker, "queued", level=level, clean=False, props=props)
    subscriber.subscribe(("sd/+", 2))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=level)
    expected = []
    for i in range(10):
        qos = 1 + i % 2
        publisher.publish("sd/q", b"q%d" % i, qos=qos)
        expected.append((b"q%d" % i, qos))
    publisher.publish("sd/retained", b"kept", qos=1, retain=True)
    publisher.disconnect()

    broker.restart()

    subscriber = clients.raw(broker)
    assert subscriber.connect("queued", level=level, clean=False, props=props).session_present
    messages = subscriber.receive_messages(11)
    assert [(m.payload, m.qos) for m in messages[:10]] == expected
    assert (messages[10].topic, messages[10].payload) == ("sd/retained", b"kept")
    publisher = clients.connected(broker, "pub2", level=level)
    publisher.publish("sd/after", b"live", qos=1)
    [live] = subscriber.receive_messages(1)
    assert live.payload == b"live", "the subscription survived too"
    late = clients.connected(broker, "late", level=level)
    late.subscribe(("sd/retained", 1))
    [retained] = late.receive_messages(1)
    assert (retained.payload, retained.retain) == (b"kept", True)


@pytest.mark.parametrize("level", [4, 5])
def test_inflight_messages_survive_restart(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """QoS 1 messages sent to a subscriber but not acknowledged before the restart are re-sent
    afterwards with DUP=1 and their packet ids [MQTT-4.4.0-1]."""
    props = KEEP if level == 5 else []
    subscriber = clients.connected(broker, "inflight", level=level, clean=False, props=props)
    subscriber.subscribe(("if/t", 1))
    publisher = clients.connected(broker, "pub", level=level)
    for i in range(3):
        publisher.publish("if/t", b"i%d" % i, qos=1)
    first = subscriber.receive_messages(3, ack=False)

    broker.restart()

    subscriber = clients.raw(broker)
    assert subscriber.connect("inflight", level=level, clean=False, props=props).session_present
    again = subscriber.receive_messages(3)
    assert [(m.payload, m.packet_id, m.dup) for m in again] == [
        (m.payload, m.packet_id, True) for m in first
    ]


@pytest.mark.mqttq_only
def test_clean_start_session_with_expiry_survives_restart(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """A 5.0 session begun with Clean Start 1 and a Session Expiry Interval is as persistent as
    any other (MQTT 5.0 section 3.1.2.4): it survives a restart while the client is connected.
    (mosquitto 2.0.11 drops such sessions at restart.)"""
    subscriber = clients.connected(broker, "fresh", level=5, clean=True, props=KEEP)
    subscriber.subscribe(("fresh/t", 1))
    broker.restart()
    subscriber.wait_closed()
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("fresh/t", b"kept", qos=1)
    subscriber = clients.raw(broker)
    assert subscriber.connect("fresh", level=5, clean=False, props=KEEP).session_present
    [message] = subscriber.receive_messages(1)
    assert message.payload == b"kept"
