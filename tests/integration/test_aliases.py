"""Topic aliases (MQTT 5.0 section 3.3.2.3.4), inbound and outbound."""

from __future__ import annotations

import pytest

from .helpers import (
    Clients,
)
from .waiting import (
    BrokerFactory,
    BrokerUnderTest,
)
from .wire import (
    PUBLISH,
    RC,
    Packet,
    Prop,
    assert_disconnected_with,
    publish_packet,
)

ALIAS_MAX = 3
CONFIG = f"[mqtt]\ntopic_alias_maximum = {ALIAS_MAX}\n"


def test_inbound_alias_set_use_and_remap(broker_factory: BrokerFactory, clients: Clients) -> None:
    """A publisher sets alias 1 with a topic, reuses it with an empty topic, then maps it to a
    new topic; subscribers see the full topic names [MQTT-3.3.2-12]."""
    broker = broker_factory(config=CONFIG)
    subscriber = clients.connected(broker, "sub", level=5)
    subscriber.subscribe(("al/#", 1))
    publisher = clients.raw(broker)
    assert publisher.connect("pub", level=5).props.get(Prop.TOPIC_ALIAS_MAXIMUM) == ALIAS_MAX
    alias = [(Prop.TOPIC_ALIAS, 1)]
    publisher.publish("al/first", b"1", qos=1, props=alias)
    publisher.publish("", b"2", qos=1, props=alias)
    publisher.publish("al/second", b"3", qos=1, props=alias)
    publisher.publish("", b"4", qos=1, props=alias)
    publisher.publish("al/plain", b"5", qos=1)
    messages = subscriber.receive_messages(5)
    assert [(m.topic, m.payload) for m in messages] == [
        ("al/first", b"1"),
        ("al/first", b"2"),
        ("al/second", b"3"),
        ("al/second", b"4"),
        ("al/plain", b"5"),
    ]
    assert all(Prop.TOPIC_ALIAS not in m.props for m in messages)


@pytest.mark.parametrize(
    ("alias", "reasons"),
    [(ALIAS_MAX + 1, {RC.TOPIC_ALIAS_INVALID}), (0, {RC.TOPIC_ALIAS_INVALID, RC.MALFORMED_PACKET})],
)
def test_alias_out_of_range_disconnects(
    broker_factory: BrokerFactory, clients: Clients, alias: int, reasons: set[int]
) -> None:
    """An alias above the server's Topic Alias Maximum -> DISCONNECT 0x94 Topic Alias invalid
    [MQTT-3.3.2-9]. Alias 0 is forbidden [MQTT-3.3.2-8] without a named reason code: 0x94 or
    0x81 (mosquitto's choice)."""
    broker = broker_factory(config=CONFIG)
    publisher = clients.connected(broker, "pub", level=5)
    publisher.send(
        publish_packet("al/t", b"x", v5=True, qos=1, packet_id=1, props=[(Prop.TOPIC_ALIAS, alias)])
    )
    assert_disconnected_with(publisher.wait_closed(), reasons)


def test_unknown_alias_with_empty_topic_is_protocol_error(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """An empty topic with an alias that was never set is a Protocol Error (0x82)."""
    broker = broker_factory(config=CONFIG)
    publisher = clients.connected(broker, "pub", level=5)
    publisher.send(
        publish_packet("", b"x", v5=True, qos=1, packet_id=1, props=[(Prop.TOPIC_ALIAS, 2)])
    )
    assert_disconnected_with(publisher.wait_closed(), RC.PROTOCOL_ERROR)


def resolve_topics(messages: list[Packet], maximum: int) -> list[str]:
    """The topic names a client reconstructs from the server's aliases, checking the rules on
    the way: aliases within 1..maximum [MQTT-3.3.2-10] and only known aliases used empty."""
    aliases: dict[int, str] = {}
    topics = []
    for message in messages:
        alias = message.props.get(Prop.TOPIC_ALIAS)
        if alias is None:
            assert message.topic, "empty topic without an alias"
            topics.append(message.topic)
            continue
        assert 1 <= alias <= maximum, f"alias {alias} outside 1..{maximum}"
        if message.topic:
            aliases[alias] = message.topic
        assert alias in aliases, f"alias {alias} used before it was set"
        topics.append(aliases[alias])
    return topics


def _outbound(broker: BrokerUnderTest, clients: Clients, maximum: int) -> list[Packet]:
    props = [(Prop.TOPIC_ALIAS_MAXIMUM, maximum)] if maximum else []
    subscriber = clients.connected(broker, "aliased", level=5, props=props)
    subscriber.subscribe(("out/#", 1))
    publisher = clients.paho(broker, "pub")
    topics = [f"out/topic/{i % 5}" for i in range(20)]
    for i, topic in enumerate(topics):
        publisher.publish(topic, b"%d" % i, 1)
    messages = subscriber.receive_messages(20)
    assert resolve_topics(messages, maximum) == topics
    assert [m.payload for m in messages] == [b"%d" % i for i in range(20)]
    return messages


def test_outbound_aliases_respect_client_maximum(broker: BrokerUnderTest, clients: Clients) -> None:
    """If the server uses aliases towards a client, they stay within the client's Topic Alias
    Maximum and every topic is reconstructable."""
    _outbound(broker, clients, 2)


def test_no_outbound_aliases_without_client_maximum(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """A client that sets no Topic Alias Maximum gets no aliases [MQTT-3.3.2-11]."""
    messages = _outbound(broker, clients, 0)
    assert all(Prop.TOPIC_ALIAS not in m.props and m.topic for m in messages)


@pytest.mark.mqttq_only
def test_outbound_aliases_used(broker: BrokerUnderTest, clients: Clients) -> None:
    """mqttq uses aliases towards clients that allow them: repeated topics are sent as an
    empty topic name plus alias. (mosquitto 2.0 never sends outbound aliases.)"""
    messages = _outbound(broker, clients, 10)
    assert any(m.type == PUBLISH and m.topic == "" for m in messages)
