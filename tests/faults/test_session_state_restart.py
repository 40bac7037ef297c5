"""Session state that must survive a broker restart: a will still due, and inbound QoS 2
packet ids whose PUBREL has not arrived (exactly once across the restart)."""

from __future__ import annotations

import pytest

from tests.integration.helpers import Clients
from tests.integration.waiting import BrokerUnderTest
from tests.integration.wire import (
    PUBCOMP,
    PUBLISH,
    PUBREC,
    PUBREL,
    Prop,
    Will,
    ack_packet,
    publish_packet,
)

pytestmark = pytest.mark.mqttq_only

PERSISTENT = [(Prop.SESSION_EXPIRY_INTERVAL, 600)]


def test_a_delayed_will_is_published_after_a_restart_and_only_once(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    watcher = clients.raw(broker)
    watcher.connect("watcher", clean=False, props=PERSISTENT)
    watcher.subscribe(("will/#", 1))
    watcher.disconnect()
    will = Will("will/dev", b"gone", qos=1, props=[(Prop.WILL_DELAY_INTERVAL, 2)])
    dying = clients.raw(broker)
    dying.connect("dev", clean=False, props=PERSISTENT, will=will)
    dying.close()  # no DISCONNECT: the will is due in 2 s
    broker.restart()  # before it is due
    back = clients.raw(broker)
    back.connect("watcher", clean=False, props=PERSISTENT)
    [message] = back.receive_messages(1)
    assert (message.topic, message.payload) == ("will/dev", b"gone")
    back.disconnect()
    broker.restart()
    again = clients.raw(broker)
    assert again.connect("watcher", clean=False, props=PERSISTENT).session_present
    again.expect_silence(2.5)  # published once: not again after this restart


def test_a_will_of_a_client_connected_at_a_crash_is_published(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    watcher = clients.raw(broker)
    watcher.connect("watcher", clean=False, props=PERSISTENT)
    watcher.subscribe(("will/#", 1))
    watcher.disconnect()
    online = clients.raw(broker)
    online.connect("dev", clean=False, props=PERSISTENT, will=Will("will/dev", b"crash", qos=1))
    # SUBACK waits until the session record (the will with it) is committed; CONNACK
    # does not, so a crash a moment after CONNECT may lose a new session's will.
    online.subscribe(("x", 0))
    broker.kill9()
    back = clients.raw(broker)
    back.connect("watcher", clean=False, props=PERSISTENT)
    [message] = back.receive_messages(1)
    assert (message.topic, message.payload) == ("will/dev", b"crash")


@pytest.mark.parametrize("level", [4, 5])
@pytest.mark.parametrize("down", ["disconnect_then_restart", "kill9_while_connected"])
def test_qos2_publish_resent_after_the_broker_went_down_is_not_routed_twice(
    broker: BrokerUnderTest, clients: Clients, level: int, down: str
) -> None:
    """PUBREC received, PUBREL not yet, then a graceful restart after the publisher's
    disconnect, or a kill -9 while it is connected (nothing flushed at shutdown: the id
    was stored before the PUBREC went out). Either way the re-sent PUBLISH is a duplicate
    [MQTT-4.3.3-10] and the subscriber gets one copy; once the flow ended the id is free
    again and a new message with it is routed."""
    v5 = level == 5
    props = PERSISTENT if v5 else []
    subscriber = clients.raw(broker)
    subscriber.connect("sub", clean=False, props=PERSISTENT)
    subscriber.subscribe(("exactly/once", 2))
    subscriber.disconnect()
    publisher = clients.raw(broker)
    publisher.connect("pub", level=level, clean=False, props=props)
    publisher.send(publish_packet("exactly/once", b"one", v5=v5, qos=2, packet_id=9))
    assert publisher.wait_packet(PUBREC, packet_id=9).packet_id == 9
    if down == "kill9_while_connected":
        broker.kill9()
    else:
        publisher.disconnect()
        broker.restart()
    again = clients.raw(broker)
    assert again.connect("pub", level=level, clean=False, props=props).session_present
    again.send(publish_packet("exactly/once", b"one", v5=v5, qos=2, packet_id=9, dup=True))
    again.wait_packet(PUBREC, packet_id=9)
    again.send(ack_packet(PUBREL, 9, v5=v5))
    again.wait_packet(PUBCOMP, packet_id=9)
    again.send(publish_packet("exactly/once", b"two", v5=v5, qos=2, packet_id=9))
    again.wait_packet(PUBREC, packet_id=9)
    again.send(ack_packet(PUBREL, 9, v5=v5))
    again.wait_packet(PUBCOMP, packet_id=9)
    reader = clients.raw(broker)
    reader.connect("sub", clean=False, props=PERSISTENT)
    messages = reader.receive_messages(2)
    assert [(m.type, m.payload) for m in messages] == [(PUBLISH, b"one"), (PUBLISH, b"two")]
    reader.expect_silence(0.5)


def test_a_delayed_will_survives_a_kill9_right_after_the_disconnect(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    watcher = clients.raw(broker)
    watcher.connect("watcher", clean=False, props=PERSISTENT)
    watcher.subscribe(("will/#", 1))
    watcher.disconnect()
    will = Will("will/dev", b"gone", qos=1, props=[(Prop.WILL_DELAY_INTERVAL, 2)])
    dying = clients.raw(broker)
    dying.connect("dev", clean=False, props=PERSISTENT, will=will)
    dying.subscribe(("x", 0))  # the session record (its will with it) is committed
    dying.close()  # no DISCONNECT: the will is due in 2 s
    broker.kill9()  # before it is due, maybe before the disconnect was stored
    back = clients.raw(broker)
    back.connect("watcher", clean=False, props=PERSISTENT)
    [message] = back.receive_messages(1)
    assert (message.topic, message.payload) == ("will/dev", b"gone")
