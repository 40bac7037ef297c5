"""Will messages: when they are published, when not, and the 5.0 Will Delay Interval."""

from __future__ import annotations

import pytest

from tests.harness import let_time_pass

from .helpers import (
    Clients,
)
from .raw_client import (
    RawClient,
)
from .waiting import (
    BrokerUnderTest,
)
from .wire import (
    RC,
    Prop,
    Will,
)

SENTINEL = "zz/sentinel"


def observer(clients: Clients, broker: BrokerUnderTest) -> RawClient:
    client = clients.connected(broker, "observer", level=5)
    client.subscribe(("will/#", 1), (SENTINEL, 1))
    return client


def assert_no_will(
    clients: Clients, broker: BrokerUnderTest, watcher: RawClient, quiet: float = 0.5
) -> None:
    """Nothing but a sentinel published now reaches the watcher, and then silence."""
    publisher = clients.connected(broker, "sentinel-pub", level=5)
    publisher.publish(SENTINEL, b"end", qos=1)
    [message] = watcher.receive_messages(1)
    assert message.topic == SENTINEL, f"unexpected will: {message}"
    watcher.expect_silence(quiet)


@pytest.mark.parametrize("level", [3, 4, 5])
def test_will_on_abnormal_close(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """Closing the socket without DISCONNECT publishes the Will [MQTT-3.1.2-8] with its QoS and
    payload; a retained Will is retained [MQTT-3.1.2-17]."""
    watcher = observer(clients, broker)
    dying = clients.connected(
        broker, "dying", level=level, will=Will("will/dying", b"bye", qos=1, retain=True)
    )
    dying.close()
    [will] = watcher.receive_messages(1)
    assert (will.topic, will.payload, will.qos) == ("will/dying", b"bye", 1)
    late = clients.connected(broker, "late", level=5)
    late.subscribe(("will/dying", 1))
    [kept] = late.receive_messages(1)
    assert (kept.payload, kept.retain) == (b"bye", True)


def test_will_on_disconnect_with_will_message(broker: BrokerUnderTest, clients: Clients) -> None:
    """5.0 DISCONNECT 0x04 (Disconnect with Will Message) publishes the Will [MQTT-3.14.4-3]."""
    watcher = observer(clients, broker)
    leaving = clients.connected(broker, "leaving", level=5, will=Will("will/leaving", b"asked"))
    leaving.disconnect(RC.DISCONNECT_WITH_WILL)
    [will] = watcher.receive_messages(1)
    assert (will.topic, will.payload) == ("will/leaving", b"asked")


@pytest.mark.parametrize("level", [4, 5])
def test_no_will_on_normal_disconnect(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """A normal DISCONNECT (0x00) discards the Will [MQTT-3.1.2-10] [MQTT-3.14.4-3]."""
    watcher = observer(clients, broker)
    leaving = clients.connected(broker, "polite", level=level, will=Will("will/polite", b"no"))
    leaving.disconnect()
    # Reconnecting with the same id proves the old connection is fully handled.
    clients.connected(broker, "polite", level=level).disconnect()
    assert_no_will(clients, broker, watcher)


def test_will_delay_cancelled_by_reconnect(broker: BrokerUnderTest, clients: Clients) -> None:
    """A new connection to the session within the Will Delay Interval means the Will is not
    sent [MQTT-3.1.3-9], not even when that session ends later."""
    watcher = observer(clients, broker)
    will = Will("will/delayed", b"late", qos=1, props=[(Prop.WILL_DELAY_INTERVAL, 60)])
    keep = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    first = clients.connected(broker, "delayed", level=5, clean=True, props=keep, will=will)
    first.close()
    watcher.expect_silence(0.5)  # delayed, so not yet
    again = clients.connected(broker, "delayed", level=5, clean=False, props=keep)
    # End the session now; a Will still pending would be published at session end.
    again.disconnect(props=[(Prop.SESSION_EXPIRY_INTERVAL, 0)])
    assert_no_will(clients, broker, watcher)


@pytest.mark.manual_clock
def test_will_delay_elapses(broker: BrokerUnderTest, clients: Clients) -> None:
    """With a 1 s Will Delay and a longer session, the Will is published once the delay has
    passed and the client has not come back."""
    watcher = observer(clients, broker)
    will = Will("will/delay1", b"after delay", props=[(Prop.WILL_DELAY_INTERVAL, 1)])
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    clients.connected(broker, "d1", level=5, props=props, will=will).close()
    let_time_pass(broker, 1.5, offline=["d1"])  # past the delay
    [message] = watcher.receive_messages(1)
    assert message.payload == b"after delay"


@pytest.mark.manual_clock
def test_will_delay_reconnect_within_delay_time_based(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Reconnecting within a 2 s Will Delay: nothing is published, also after it elapsed."""
    watcher = observer(clients, broker)
    will = Will("will/short", b"late", props=[(Prop.WILL_DELAY_INTERVAL, 2)])
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    clients.connected(broker, "short", level=5, props=props, will=will).close()
    clients.connected(broker, "short", level=5, clean=False, props=props)
    let_time_pass(broker, 2.5)  # past the delay
    assert_no_will(clients, broker, watcher, quiet=0.3)


@pytest.mark.manual_clock
def test_session_end_before_will_delay_publishes_will(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Will Delay 60 s but Session Expiry 1 s: the Will is published when the session ends,
    whichever comes first [MQTT-3.1.3-9] (MQTT 5.0 section 3.1.3.2.2)."""
    watcher = observer(clients, broker)
    will = Will("will/session", b"session over", props=[(Prop.WILL_DELAY_INTERVAL, 60)])
    props = [(Prop.SESSION_EXPIRY_INTERVAL, 1)]
    clients.connected(broker, "brief", level=5, props=props, will=will).close()
    let_time_pass(broker, 1.5, offline=["brief"])  # past the session's expiry
    [message] = watcher.receive_messages(1)
    assert message.payload == b"session over"


def test_will_properties_forwarded(broker: BrokerUnderTest, clients: Clients) -> None:
    """Will properties (content type, user properties, ...) travel with the Will message."""
    watcher = observer(clients, broker)
    will = Will(
        "will/props",
        b"{}",
        props=[
            (Prop.CONTENT_TYPE, "application/json"),
            (Prop.USER_PROPERTY, ("origin", "will")),
        ],
    )
    clients.connected(broker, "props", level=5, will=will).close()
    [message] = watcher.receive_messages(1)
    assert message.props.get(Prop.CONTENT_TYPE) == "application/json"
    assert message.props.all(Prop.USER_PROPERTY) == [("origin", "will")]
