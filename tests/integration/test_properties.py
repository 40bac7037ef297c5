"""PUBLISH properties pass through the broker unchanged (MQTT 5.0 section 3.3.2.3)."""

from __future__ import annotations

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes

from .helpers import (
    Clients,
)
from .paho_client import (
    paho_props,
)
from .waiting import (
    BrokerUnderTest,
)
from .wire import (
    Prop,
)

USER_PROPERTIES = [("a", "1"), ("a", "2"), ("b", "x"), ("ünï", "cödé")]


def test_properties_forwarded_unchanged(broker: BrokerUnderTest, clients: Clients) -> None:
    """User properties (order and duplicates kept [MQTT-3.3.2-18]), content type, payload format
    indicator, response topic and correlation data reach the subscriber unchanged
    [MQTT-3.3.2-4] [MQTT-3.3.2-17] [MQTT-3.3.2-20]."""
    subscriber = clients.connected(broker, "sub", level=5)
    subscriber.subscribe(("props/t", 1))
    publisher = clients.paho(broker, "pub")
    props = paho_props(
        PacketTypes.PUBLISH,
        UserProperty=USER_PROPERTIES,
        ContentType="application/json; charset=utf-8",
        PayloadFormatIndicator=1,
        ResponseTopic="resp/client-1",
        CorrelationData=b"\x00\x01corr\xff",
    )
    publisher.publish("props/t", b'{"k": 1}', 1, props=props)
    [message] = subscriber.receive_messages(1)
    assert message.payload == b'{"k": 1}'
    assert message.props.all(Prop.USER_PROPERTY) == USER_PROPERTIES
    assert message.props.get(Prop.CONTENT_TYPE) == "application/json; charset=utf-8"
    assert message.props.get(Prop.PAYLOAD_FORMAT_INDICATOR) == 1
    assert message.props.get(Prop.RESPONSE_TOPIC) == "resp/client-1"
    assert message.props.get(Prop.CORRELATION_DATA) == b"\x00\x01corr\xff"


def test_request_response_round_trip(broker: BrokerUnderTest, clients: Clients) -> None:
    """A responder answers on the request's Response Topic with its Correlation Data; the
    requester matches the answer to its request."""
    responder = clients.paho(broker, "responder")

    def answer(_client: object, _userdata: object, message: paho.MQTTMessage) -> None:
        assert message.properties is not None
        reply = paho_props(PacketTypes.PUBLISH, CorrelationData=message.properties.CorrelationData)
        responder.client.publish(
            message.properties.ResponseTopic, b"re: " + message.payload, 1, properties=reply
        )

    responder.client.message_callback_add("req/#", answer)
    responder.subscribe("req/#", 1)
    requester = clients.paho(broker, "requester")
    requester.subscribe("resp/requester", 1)
    for n in range(3):
        request = paho_props(
            PacketTypes.PUBLISH, ResponseTopic="resp/requester", CorrelationData=b"id-%d" % n
        )
        requester.publish("req/time", b"q%d" % n, 1, props=request)
    replies = requester.wait_messages(3)
    assert sorted((m.properties.CorrelationData, m.payload) for m in replies) == [
        (b"id-%d" % n, b"re: q%d" % n) for n in range(3)
    ]


def test_properties_dropped_for_v311_subscriber(broker: BrokerUnderTest, clients: Clients) -> None:
    """A 3.1.1 subscriber gets the message itself (its PUBLISH has no properties field)."""
    subscriber = clients.connected(broker, "old", level=4)
    subscriber.subscribe(("props/t", 1))
    publisher = clients.connected(broker, "pub", level=5)
    publisher.publish(
        "props/t",
        b"payload",
        qos=1,
        props=[(Prop.USER_PROPERTY, ("k", "v")), (Prop.CONTENT_TYPE, "text/plain")],
    )
    [message] = subscriber.receive_messages(1)
    assert (message.topic, message.payload) == ("props/t", b"payload")
