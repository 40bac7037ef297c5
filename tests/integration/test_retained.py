"""Retained messages: set, replace, clear, wildcard delivery, retain flags and expiry."""

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
    wait_for,
)
from .wire import (
    Packet,
    Prop,
)

MARKER = "zz/marker"


def retained_on_subscribe(
    clients: Clients, broker: BrokerUnderTest, topic_filter: str, level: int = 5
) -> list[Packet]:
    """Subscribe with a fresh client and return the retained messages it is sent, i.e. what
    arrives before a live marker published after the SUBACK."""
    client: RawClient = clients.connected(broker, "", level=level)
    client.subscribe((topic_filter, 1), (MARKER, 1))
    publisher = clients.connected(broker, "", level=level)
    publisher.publish(MARKER, b"end", qos=1)
    messages: list[Packet] = []
    while not messages or messages[-1].topic != MARKER:
        messages += client.receive_messages(1)
    client.disconnect()
    publisher.disconnect()
    return messages[:-1]


@pytest.mark.parametrize("level", [4, 5])
def test_set_replace_clear(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """A retained message is sent to new subscribers with RETAIN 1 [MQTT-3.3.1-6]
    [MQTT-3.3.1-8]; a new one replaces it [MQTT-3.3.1-5]; an empty payload clears it
    [MQTT-3.3.1-10]."""
    publisher = clients.connected(broker, "pub", level=level)
    publisher.publish("ret/a", b"one", qos=1, retain=True)
    [message] = retained_on_subscribe(clients, broker, "ret/a", level)
    assert (message.topic, message.payload, message.retain) == ("ret/a", b"one", True)

    publisher.publish("ret/a", b"two", qos=1, retain=True)
    [message] = retained_on_subscribe(clients, broker, "ret/a", level)
    assert (message.payload, message.retain) == (b"two", True)

    publisher.publish("ret/a", b"", qos=1, retain=True)
    assert retained_on_subscribe(clients, broker, "ret/a", level) == []


@pytest.mark.parametrize("level", [4, 5])
def test_live_delivery_of_retained_publish(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """To an established subscription a retained PUBLISH is delivered with RETAIN 0
    [MQTT-3.3.1-9] (3.1.1) / [MQTT-3.3.1-13] (5.0, Retain As Published 0), and the empty
    payload that clears it is still delivered as a normal message [MQTT-3.3.1-11]."""
    subscriber = clients.connected(broker, "sub", level=level)
    subscriber.subscribe(("live/t", 1))
    publisher = clients.connected(broker, "pub", level=level)
    publisher.publish("live/t", b"kept", qos=1, retain=True)
    publisher.publish("live/t", b"", qos=1, retain=True)
    messages = subscriber.receive_messages(2)
    assert [(m.payload, m.retain) for m in messages] == [(b"kept", False), (b"", False)]


def test_wildcard_subscription_gets_every_retained(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """A wildcard subscription receives every matching retained message, each with its topic."""
    publisher = clients.connected(broker, "pub", level=5)
    for topic in ("w/a", "w/b", "w/c/d", "other/x"):
        publisher.publish(topic, topic.encode(), qos=1, retain=True)
    got = retained_on_subscribe(clients, broker, "w/#")
    assert sorted((m.topic, m.payload, m.retain) for m in got) == [
        ("w/a", b"w/a", True),
        ("w/b", b"w/b", True),
        ("w/c/d", b"w/c/d", True),
    ]


def test_retained_qos_is_min_of_message_and_subscription(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Retained messages are delivered at min(stored QoS, granted QoS)."""
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("rq/t", b"q2", qos=2, retain=True)
    client = clients.connected(broker, "sub", level=5)
    client.subscribe(("rq/t", 1))
    [message] = client.receive_messages(1)
    assert (message.payload, message.qos, message.retain) == (b"q2", 1, True)


@pytest.mark.manual_clock
def test_retained_message_expiry(broker: BrokerUnderTest, clients: Clients) -> None:
    """A retained message with Message Expiry Interval 1 s is no longer sent once it expired
    [MQTT-3.3.2-5]; one without expiry still is; a 60 s one is sent with its remaining
    lifetime (> 0, <= 60) [MQTT-3.3.2-6]."""
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish(
        "exp/short", b"short", qos=1, retain=True, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 1)]
    )
    publisher.publish(
        "exp/long", b"long", qos=1, retain=True, props=[(Prop.MESSAGE_EXPIRY_INTERVAL, 60)]
    )
    publisher.publish("exp/never", b"never", qos=1, retain=True)
    let_time_pass(broker, 1.2)  # past the 1 s expiry; then poll, allowing for a lazy check

    def short_gone() -> list[Packet] | None:
        got = retained_on_subscribe(clients, broker, "exp/#")
        return None if any(m.topic == "exp/short" for m in got) else got

    got = wait_for(short_gone, interval=0.3, what="the expired retained message to go")
    assert got is not None
    by_topic = {m.topic: m for m in got}
    assert sorted(by_topic) == ["exp/long", "exp/never"]
    remaining = by_topic["exp/long"].props.get(Prop.MESSAGE_EXPIRY_INTERVAL)
    assert remaining is not None and 0 < remaining <= 60
    assert Prop.MESSAGE_EXPIRY_INTERVAL not in by_topic["exp/never"].props
