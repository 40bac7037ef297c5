"""Hypothesis strategies for every MQTT packet type, per protocol level.

Each strategy generates only values the level can carry on the wire, so that
`decode(encode(packet, level), level) == packet` holds for everything generated:
3.x packets have empty properties, default 5.0-only subscription options and reason codes
that have a 3.x form; 5.0 packets carry only the properties their type may hold.

Entry points: `packets(level)`, `packet_strategies(level)` (PacketType -> strategy),
`properties(context)`, `mqtt_strings`, `packet_ids`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from mqttq.codec import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PacketType,
    PingreqPacket,
    PingrespPacket,
    Properties,
    ProtocolLevel,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    ReasonCode,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
    UnsubackPacket,
    UnsubscribePacket,
    Will,
)
from mqttq.codec.enums import MAX_VARINT
from mqttq.codec.properties import (
    BINARY,
    BYTE,
    PROPERTIES_BY_CONTEXT,
    STRING,
    STRING_PAIR,
    U16,
    U32,
    VARINT,
    WILL_PROPERTIES,
)
from mqttq.codec.reader import CONNACK_RETURN_CODE_TO_REASON, REASON_CODES

LEVELS = (3, 4, 5)

mqtt_strings = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12
)
"""Well-formed MQTT UTF-8 strings: no surrogates, no U+0000 [MQTT-1.5.4-1/2]."""

small_binary = st.binary(max_size=16)
packet_ids = st.integers(1, 0xFFFF)
subscription_ids = st.integers(1, MAX_VARINT)

_NON_ZERO = {"receive_maximum", "maximum_packet_size"}


def _value_strategy(name: str, wire: int, context: int) -> st.SearchStrategy[Any]:
    if name == "subscription_identifiers":
        return st.lists(subscription_ids, max_size=3 if context == PacketType.PUBLISH else 1)
    if wire == STRING_PAIR:
        return st.lists(st.tuples(mqtt_strings, mqtt_strings), max_size=3)
    if wire == BYTE:
        return st.none() | st.integers(0, 1)
    if wire == U16:
        return st.none() | st.integers(1 if name in _NON_ZERO else 0, 0xFFFF)
    if wire == U32:
        return st.none() | st.integers(1 if name in _NON_ZERO else 0, 0xFFFFFFFF)
    if wire == STRING:
        return st.none() | mqtt_strings
    if wire == BINARY:
        return st.none() | small_binary
    assert wire == VARINT
    raise AssertionError(name)


def _fix_authentication(props: Properties) -> Properties:
    # Authentication Data without Authentication Method is a Protocol Error [MQTT-3.1.2.11.10].
    if props.authentication_method is None:
        props.authentication_data = None
    return props


def properties(context: int) -> st.SearchStrategy[Properties]:
    """Valid 5.0 properties for `context` (a PacketType or WILL_PROPERTIES)."""
    fields = {
        spec.name: _value_strategy(spec.name, spec.wire, context)
        for spec in PROPERTIES_BY_CONTEXT[context]
    }
    if not fields:
        return st.just(Properties())
    return st.fixed_dictionaries(fields).map(lambda kw: _fix_authentication(Properties(**kw)))


def _properties_at(level: int, context: int) -> st.SearchStrategy[Properties]:
    return properties(context) if level == 5 else st.builds(Properties)


def _reasons(ptype: PacketType) -> st.SearchStrategy[ReasonCode]:
    return st.sampled_from(sorted(ReasonCode(code) for code in REASON_CODES[ptype]))


@st.composite
def connect_packets(draw: st.DrawFn, level: int) -> ConnectPacket:
    username = draw(st.none() | mqtt_strings)
    password = draw(st.none() | small_binary)
    if level < 5 and username is None:
        password = None  # 3.x: password only with a user name [MQTT-3.1.2-22]
    will = None
    if draw(st.booleans()):
        will = Will(
            draw(mqtt_strings),
            draw(small_binary),
            draw(st.integers(0, 2)),
            draw(st.booleans()),
            draw(_properties_at(level, WILL_PROPERTIES)),
        )
    return ConnectPacket(
        client_id=draw(mqtt_strings),
        protocol_level=ProtocolLevel(level),
        clean_start=draw(st.booleans()),
        keep_alive=draw(st.integers(0, 0xFFFF)),
        username=username,
        password=password,
        will=will,
        properties=draw(_properties_at(level, PacketType.CONNECT)),
    )


@st.composite
def connack_packets(draw: st.DrawFn, level: int) -> ConnackPacket:
    if level == 5:
        reason = draw(_reasons(PacketType.CONNACK))
    else:
        reason = draw(st.sampled_from(CONNACK_RETURN_CODE_TO_REASON))
    # Session present only with success [MQTT-3.2.2-4]; 3.1 has no such flag.
    session_present = level > 3 and reason == ReasonCode.SUCCESS and draw(st.booleans())
    return ConnackPacket(session_present, reason, draw(_properties_at(level, PacketType.CONNACK)))


@st.composite
def publish_packets(draw: st.DrawFn, level: int) -> PublishPacket:
    qos = draw(st.integers(0, 2))
    return PublishPacket(
        topic=draw(mqtt_strings),
        payload=draw(st.binary(max_size=40)),
        qos=qos,
        retain=draw(st.booleans()),
        dup=qos > 0 and draw(st.booleans()),
        packet_id=draw(packet_ids) if qos else None,
        properties=draw(_properties_at(level, PacketType.PUBLISH)),
    )


def _ack_packets(
    cls: type[PubackPacket | PubrecPacket | PubrelPacket | PubcompPacket], level: int
) -> st.SearchStrategy[Packet]:
    ptype = cls.packet_type
    if level != 5:
        return st.builds(cls, packet_ids)
    return st.builds(cls, packet_ids, _reasons(ptype), properties(ptype))


def subscribe_packets(level: int) -> st.SearchStrategy[SubscribePacket]:
    if level == 5:
        request = st.builds(
            SubscriptionRequest,
            mqtt_strings,
            st.integers(0, 2),
            st.booleans(),
            st.booleans(),
            st.integers(0, 2),
        )
    else:
        request = st.builds(SubscriptionRequest, mqtt_strings, st.integers(0, 2))
    return st.builds(
        SubscribePacket,
        packet_ids,
        st.lists(request, min_size=1, max_size=4),
        _properties_at(level, PacketType.SUBSCRIBE),
    )


def suback_packets(level: int) -> st.SearchStrategy[SubackPacket]:
    if level == 5:
        codes = _reasons(PacketType.SUBACK)
    else:
        codes = st.sampled_from(
            [
                ReasonCode.GRANTED_QOS_0,
                ReasonCode.GRANTED_QOS_1,
                ReasonCode.GRANTED_QOS_2,
                ReasonCode.UNSPECIFIED_ERROR,
            ]
        )
    return st.builds(
        SubackPacket,
        packet_ids,
        st.lists(codes, min_size=1, max_size=4),
        _properties_at(level, PacketType.SUBACK),
    )


def unsubscribe_packets(level: int) -> st.SearchStrategy[UnsubscribePacket]:
    return st.builds(
        UnsubscribePacket,
        packet_ids,
        st.lists(mqtt_strings, min_size=1, max_size=4),
        _properties_at(level, PacketType.UNSUBSCRIBE),
    )


def unsuback_packets(level: int) -> st.SearchStrategy[UnsubackPacket]:
    if level != 5:
        return st.builds(UnsubackPacket, packet_ids)
    return st.builds(
        UnsubackPacket,
        packet_ids,
        st.lists(_reasons(PacketType.UNSUBACK), min_size=1, max_size=4),
        properties(PacketType.UNSUBACK),
    )


def disconnect_packets(level: int) -> st.SearchStrategy[DisconnectPacket]:
    if level != 5:
        return st.builds(DisconnectPacket)
    return st.builds(
        DisconnectPacket, _reasons(PacketType.DISCONNECT), properties(PacketType.DISCONNECT)
    )


def auth_packets() -> st.SearchStrategy[AuthPacket]:
    return st.builds(AuthPacket, _reasons(PacketType.AUTH), properties(PacketType.AUTH))


def packet_strategies(level: int) -> dict[PacketType, st.SearchStrategy[Packet]]:
    """PacketType -> strategy, for every packet type that exists at `level`."""
    strategies: dict[PacketType, st.SearchStrategy[Packet]] = {
        PacketType.CONNECT: connect_packets(level),
        PacketType.CONNACK: connack_packets(level),
        PacketType.PUBLISH: publish_packets(level),
        PacketType.PUBACK: _ack_packets(PubackPacket, level),
        PacketType.PUBREC: _ack_packets(PubrecPacket, level),
        PacketType.PUBREL: _ack_packets(PubrelPacket, level),
        PacketType.PUBCOMP: _ack_packets(PubcompPacket, level),
        PacketType.SUBSCRIBE: subscribe_packets(level),
        PacketType.SUBACK: suback_packets(level),
        PacketType.UNSUBSCRIBE: unsubscribe_packets(level),
        PacketType.UNSUBACK: unsuback_packets(level),
        PacketType.PINGREQ: st.just(PingreqPacket()),
        PacketType.PINGRESP: st.just(PingrespPacket()),
        PacketType.DISCONNECT: disconnect_packets(level),
    }
    if level == 5:
        strategies[PacketType.AUTH] = auth_packets()
    return strategies


def packets(level: int) -> st.SearchStrategy[Packet]:
    """Any packet that exists at `level`, with values that level can carry."""
    return st.one_of(*packet_strategies(level).values())
