"""Subscriptions: wildcard matching, $-topics, overlapping subscriptions, subscription options
(No Local, Retain As Published, Retain Handling), invalid filters and UNSUBSCRIBE."""

from __future__ import annotations

import pytest

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
    Packet,
    Prop,
    sub_options,
)

TOPICS = [
    "sport/tennis/player1",
    "sport/tennis/player1/ranking",
    "sport/tennis",
    "sport",
    "sport/",
    "/finance",
    "finance",
    "a/b/c/d",
]
MATCHES = {
    "sport/tennis/player1": {"sport/tennis/player1"},
    "sport/tennis/+": {"sport/tennis/player1"},
    "sport/#": {
        "sport/tennis/player1",
        "sport/tennis/player1/ranking",
        "sport/tennis",
        "sport",
        "sport/",
    },
    "sport/+": {"sport/tennis", "sport/"},
    "+/+": {"sport/tennis", "sport/", "/finance"},
    "/+": {"/finance"},
    "+": {"sport", "finance"},
    "+/tennis/#": {"sport/tennis/player1", "sport/tennis/player1/ranking", "sport/tennis"},
    "a/+/+/d": {"a/b/c/d"},
    "#": set(TOPICS),
}
SENTINEL = "zz/sentinel"


def received_until_sentinel(client: RawClient) -> list[Packet]:
    """Every PUBLISH before the sentinel (all acknowledged, the sentinel included)."""
    messages: list[Packet] = []
    while not messages or messages[-1].topic != SENTINEL:
        messages += client.receive_messages(1)
    return messages[:-1]


@pytest.mark.parametrize("level", [4, 5])
def test_wildcard_matching(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """+ matches exactly one level (also an empty one), # any number including the parent
    level [MQTT-4.7.1-2] [MQTT-4.7.1-3]."""
    subscribers = {}
    for index, topic_filter in enumerate(MATCHES):
        client = clients.connected(broker, f"wild{index}", level=level)
        assert client.subscribe((topic_filter, 1), (SENTINEL, 1)).reason_codes == (1, 1)
        subscribers[topic_filter] = client
    publisher = clients.paho(broker, "pub", protocol=level)
    for topic in TOPICS:
        publisher.publish(topic, topic.encode(), 1)
    publisher.publish(SENTINEL, b"end", 1)
    for topic_filter, client in subscribers.items():
        got = [m.topic for m in received_until_sentinel(client)]
        assert sorted(got) == sorted(MATCHES[topic_filter]), topic_filter


def test_dollar_topics_not_matched_by_leading_wildcards(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Filters starting with # or + do not match topics starting with $ [MQTT-4.7.2-1];
    an explicit $ filter does."""
    filters = ["#", "+/mqttq-test/x", "+/x", "+/#"]
    subscribers = []
    for index, topic_filter in enumerate(filters):
        client = clients.connected(broker, f"dollar{index}", level=5)
        client.subscribe((topic_filter, 1), (SENTINEL, 1))
        subscribers.append(client)
    explicit = clients.connected(broker, "explicit", level=5)
    explicit.subscribe(("$test/#", 1), (SENTINEL, 1))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("$SYS/mqttq-test/x", b"sys", qos=1)
    publisher.publish("$test/x", b"dollar", qos=1)
    publisher.publish(SENTINEL, b"end", qos=1)
    for client in subscribers:
        assert received_until_sentinel(client) == []
    assert [m.topic for m in received_until_sentinel(explicit)] == ["$test/x"]


def test_overlapping_subscriptions_max_qos_and_identifiers(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Overlapping subscriptions: the message is delivered at the maximum granted QoS, and the
    copies together carry every matching Subscription Identifier [MQTT-3.3.4-2]
    [MQTT-3.3.4-4] [MQTT-3.3.4-5]."""
    client = clients.connected(broker, "overlap", level=5)
    client.subscribe(("ov/+", 0), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 1)])
    client.subscribe(("ov/#", 2), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 2)])
    client.subscribe((SENTINEL, 1), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 3)])
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("ov/t", b"both", qos=2)
    publisher.publish(SENTINEL, b"end", qos=1)
    copies = received_until_sentinel(client)
    assert copies and all(m.topic == "ov/t" for m in copies), copies
    assert max(m.qos for m in copies) == 2
    ids = [sorted(m.props.all(Prop.SUBSCRIPTION_IDENTIFIER)) for m in copies]
    assert all(ids), ids
    assert sorted(i for group in ids for i in group) == [1, 2]


@pytest.mark.mqttq_only
def test_overlapping_subscriptions_single_copy(broker: BrokerUnderTest, clients: Clients) -> None:
    """mqttq sends one copy at the highest QoS carrying every Subscription Identifier
    [MQTT-3.3.4-4]. (mosquitto sends one copy per subscription, which the spec also allows.)"""
    client = clients.connected(broker, "overlap", level=5)
    client.subscribe(("ov/+", 0), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 1)])
    client.subscribe(("ov/#", 2), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 2)])
    client.subscribe(("+/t", 1), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 300)])
    client.subscribe((SENTINEL, 1))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("ov/t", b"once", qos=2)
    publisher.publish(SENTINEL, b"end", qos=1)
    [copy] = received_until_sentinel(client)
    assert (copy.payload, copy.qos) == (b"once", 2)
    assert sorted(copy.props.all(Prop.SUBSCRIPTION_IDENTIFIER)) == [1, 2, 300]


@pytest.mark.mqttq_only
def test_overlapping_subscriptions_single_copy_v311(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """The same at 3.1.1: one copy, at the maximum QoS."""
    client = clients.connected(broker, "overlap", level=4)
    client.subscribe(("ov/+", 0), ("ov/#", 2), (SENTINEL, 1))
    publisher = clients.connected(broker, "pub", level=4)
    publisher.publish("ov/t", b"once", qos=2)
    publisher.publish(SENTINEL, b"end", qos=1)
    [copy] = received_until_sentinel(client)
    assert (copy.payload, copy.qos) == (b"once", 2)


@pytest.mark.parametrize("level", [4, 5])
def test_resubscribe_replaces_subscription(
    broker: BrokerUnderTest, clients: Clients, level: int
) -> None:
    """Subscribing again to the same filter replaces the subscription (new QoS, one copy)
    [MQTT-3.8.4-3]."""
    client = clients.connected(broker, "resub", level=level)
    assert client.subscribe(("rep/t", 0)).reason_codes == (0,)
    assert client.subscribe(("rep/t", 2)).reason_codes == (2,)
    client.subscribe((SENTINEL, 1))
    publisher = clients.connected(broker, "pub", level=level)
    publisher.publish("rep/t", b"x", qos=2)
    publisher.publish(SENTINEL, b"end", qos=1)
    [copy] = received_until_sentinel(client)
    assert copy.qos == 2


def test_no_local(broker: BrokerUnderTest, clients: Clients) -> None:
    """No Local: a client's own messages are not sent back to it [MQTT-3.8.3-3]; others get
    them."""
    own = clients.paho(broker, "own")
    own.subscribe("nl/t", 1, no_local=True)
    other = clients.paho(broker, "other")
    other.subscribe("nl/t", 1)
    own.publish("nl/t", b"from-own", 1)
    other.publish("nl/t", b"from-other", 1)
    assert other.wait_messages(2) and other.payloads() == [b"from-own", b"from-other"]
    own.wait_messages(1)
    assert own.payloads() == [b"from-other"]


def test_retain_as_published(broker: BrokerUnderTest, clients: Clients) -> None:
    """Retain As Published 1 keeps the RETAIN flag of a live message; 0 clears it
    [MQTT-3.3.1-12] [MQTT-3.3.1-13]."""
    keep = clients.paho(broker, "keep")
    keep.subscribe("rap/t", 1, retain_as_published=True)
    clear = clients.paho(broker, "clear")
    clear.subscribe("rap/t", 1)
    publisher = clients.paho(broker, "pub")
    publisher.publish("rap/t", b"live", 1, retain=True)
    publisher.publish("rap/t", b"plain", 1)
    assert [(m.payload, m.retain) for m in keep.wait_messages(2)] == [
        (b"live", True),
        (b"plain", False),
    ]
    assert [(m.payload, m.retain) for m in clear.wait_messages(2)] == [
        (b"live", False),
        (b"plain", False),
    ]


def _first_after_subscribe(
    client: RawClient, publisher: RawClient, options: int
) -> list[tuple[bytes, bool]]:
    """Subscribe to rh/t, then publish a live marker: what came before the marker."""
    client.subscribe(("rh/t", options))
    publisher.publish("rh/t", b"marker", qos=1)
    messages: list[Packet] = []
    while not messages or messages[-1].payload != b"marker":
        messages += client.receive_messages(1)
    return [(m.payload, m.retain) for m in messages[:-1]]


@pytest.mark.parametrize(
    ("handling", "first", "again"),
    [
        (0, [(b"kept", True)], [(b"kept", True)]),
        (1, [(b"kept", True)], []),
        (2, [], []),
    ],
)
def test_retain_handling(
    broker: BrokerUnderTest,
    clients: Clients,
    handling: int,
    first: list[tuple[bytes, bool]],
    again: list[tuple[bytes, bool]],
) -> None:
    """Retain Handling 0: retained sent on every subscribe; 1: only for a new subscription;
    2: never [MQTT-3.3.1-9] [MQTT-3.3.1-10] [MQTT-3.3.1-11]."""
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("rh/t", b"kept", qos=1, retain=True)
    client = clients.connected(broker, "rh", level=5)
    options = sub_options(1, retain_handling=handling)
    assert _first_after_subscribe(client, publisher, options) == first
    assert _first_after_subscribe(client, publisher, options) == again


@pytest.mark.mqttq_only
@pytest.mark.parametrize(("level", "failure"), [(4, 0x80), (5, RC.TOPIC_FILTER_INVALID)])
def test_invalid_filter_refused_others_granted(
    broker: BrokerUnderTest, clients: Clients, level: int, failure: int
) -> None:
    """An invalid filter gets a failure code in its SUBACK slot while the others in the same
    SUBSCRIBE are granted [MQTT-3.9.3-1]. (mosquitto disconnects instead, which 4.13 allows.)"""
    client = clients.connected(broker, "mixed", level=level)
    suback = client.subscribe(("ok/t", 1), ("bad/#/x", 1), ("x+/y", 0), ("also/ok", 2))
    assert suback.reason_codes == (1, failure, failure, 2)
    publisher = clients.connected(broker, "pub", level=level)
    publisher.publish("ok/t", b"granted", qos=1)
    [message] = client.receive_messages(1)
    assert message.payload == b"granted"


def test_unsubscribe_v5_reason_codes(broker: BrokerUnderTest, clients: Clients) -> None:
    """UNSUBACK: 0x00 for a removed subscription, 0x11 No subscription existed [MQTT-3.11.3];
    afterwards the topic is no longer delivered [MQTT-3.10.4-2]."""
    client = clients.connected(broker, "unsub", level=5)
    client.subscribe(("us/t", 1), (SENTINEL, 1))
    unsuback = client.unsubscribe("us/t", "never/t")
    assert unsuback.reason_codes == (RC.SUCCESS, RC.NO_SUBSCRIPTION_EXISTED)
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("us/t", b"gone", qos=1)
    publisher.publish(SENTINEL, b"end", qos=1)
    assert received_until_sentinel(client) == []


def test_unsubscribe_v311(broker: BrokerUnderTest, clients: Clients) -> None:
    """3.1.1 UNSUBACK carries only the packet id [MQTT-3.11.2]; delivery stops."""
    client = clients.connected(broker, "unsub", level=4)
    client.subscribe(("us/t", 1), (SENTINEL, 1))
    unsuback = client.unsubscribe("us/t")
    assert len(unsuback.body) == 2
    publisher = clients.connected(broker, "pub", level=4)
    publisher.publish("us/t", b"gone", qos=1)
    publisher.publish(SENTINEL, b"end", qos=1)
    assert received_until_sentinel(client) == []


def test_subscription_identifier_on_delivery(broker: BrokerUnderTest, clients: Clients) -> None:
    """The Subscription Identifier of the matching subscription comes with each delivery
    [MQTT-3.3.4-3]; a subscription without one adds none."""
    client = clients.connected(broker, "sid", level=5)
    client.subscribe(("sid/a", 1), props=[(Prop.SUBSCRIPTION_IDENTIFIER, 268435455)])
    client.subscribe(("sid/b", 1))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish("sid/a", b"a", qos=1)
    publisher.publish("sid/b", b"b", qos=1)
    first, second = client.receive_messages(2)
    assert first.props.all(Prop.SUBSCRIPTION_IDENTIFIER) == [268435455]
    assert second.props.all(Prop.SUBSCRIPTION_IDENTIFIER) == []
