"""Session Expiry Interval and Message Expiry Interval (MQTT 5.0)."""

from __future__ import annotations

import pytest

from tests.harness import let_time_pass

from .helpers import (
    Clients,
)
from .waiting import (
    BrokerUnderTest,
)
from .wire import (
    Prop,
)


@pytest.mark.manual_clock
def test_session_expires_after_interval(broker: BrokerUnderTest, clients: Clients) -> None:
    """A session with expiry 1 s is gone after it: reconnecting gets session present 0 and no
    queued messages; a session with expiry 300 s, idle as long, is resumed
    [MQTT-3.1.2-23] (MQTT 5.0 section 3.1.2.11.2)."""
    short = clients.connected(broker, "short", level=5, props=[(Prop.SESSION_EXPIRY_INTERVAL, 1)])
    short.subscribe(("se/t", 1))
    short.disconnect()
    long = clients.connected(broker, "long", level=5, props=[(Prop.SESSION_EXPIRY_INTERVAL, 300)])
    long.subscribe(("se/t", 1))
    long.disconnect()
    let_time_pass(broker, 2.5, offline=["short", "long"])  # well past the 1 s expiry
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("se/t", b"after", qos=1)

    short = clients.raw(broker)
    connack = short.connect("short", level=5, clean=False)
    assert connack.session_present is False
    short.ping()
    short.expect_silence(0.3)

    long = clients.raw(broker)
    assert long.connect("long", level=5, clean=False).session_present is True
    [message] = long.receive_messages(1)
    assert message.payload == b"after"


def test_session_expiry_zero_ends_at_disconnect(broker: BrokerUnderTest, clients: Clients) -> None:
    """Session Expiry 0 (or absent): the session ends when the connection closes
    [MQTT-3.1.2-23]; messages published afterwards are not kept for it."""
    client = clients.connected(broker, "zero", level=5, clean=False)
    client.subscribe(("z/t", 1))
    client.disconnect()
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("z/t", b"lost", qos=1)
    client = clients.raw(broker)
    assert client.connect("zero", level=5, clean=False).session_present is False
    client.ping()
    client.expect_silence(0.3)


def test_disconnect_can_shorten_session_expiry(broker: BrokerUnderTest, clients: Clients) -> None:
    """DISCONNECT may set Session Expiry 0 when CONNECT had a non-zero one: the session ends."""
    client = clients.connected(
        broker, "shorten", level=5, props=[(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    )
    client.subscribe(("sh/t", 1))
    client.disconnect(props=[(Prop.SESSION_EXPIRY_INTERVAL, 0)])
    client = clients.raw(broker)
    assert client.connect("shorten", level=5, clean=False).session_present is False


@pytest.mark.manual_clock
def test_expired_message_not_delivered_to_offline_subscriber(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """A queued message whose Message Expiry Interval (1 s) passed is not delivered
    [MQTT-3.3.2-5]; one without expiry, published after it, is."""
    keep = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    subscriber = clients.connected(broker, "offline", level=5, props=keep)
    subscriber.subscribe(("me/t", 1))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("me/t", b"short", qos=1, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 1)])
    publisher.publish("me/t", b"forever", qos=1)
    let_time_pass(broker, 2.5, offline=["offline"])  # well past the 1 s expiry
    subscriber = clients.connected(broker, "offline", level=5, clean=False, props=keep)
    [message] = subscriber.receive_messages(1)
    assert message.payload == b"forever"
    assert Prop.MESSAGE_EXPIRY_INTERVAL not in message.props
    subscriber.expect_silence(0.3)


@pytest.mark.manual_clock
def test_message_expiry_counts_down(broker: BrokerUnderTest, clients: Clients) -> None:
    """A message with expiry 60 s that waited in the queue arrives with the remaining lifetime:
    smaller than 60 and not zero [MQTT-3.3.2-6]; delivered live it keeps at most 60."""
    keep = [(Prop.SESSION_EXPIRY_INTERVAL, 300)]
    live = clients.connected(broker, "live", level=5)
    live.subscribe(("mc/t", 1))
    subscriber = clients.connected(broker, "waiting", level=5, props=keep)
    subscriber.subscribe(("mc/t", 1))
    subscriber.disconnect()
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("mc/t", b"x", qos=1, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 60)])
    [now] = live.receive_messages(1)
    assert 0 < now.props.get(Prop.MESSAGE_EXPIRY_INTERVAL, 0) <= 60
    let_time_pass(broker, 1.5, offline=["waiting"])  # at least one second spent queued
    subscriber = clients.connected(broker, "waiting", level=5, clean=False, props=keep)
    [message] = subscriber.receive_messages(1)
    remaining = message.props.get(Prop.MESSAGE_EXPIRY_INTERVAL)
    assert remaining is not None and 0 < remaining < 60, message.props
