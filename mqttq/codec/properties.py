"""MQTT 5.0 properties as one typed value object.

Each field is one property of [MQTT-2.2.2.2]; None (or an empty list) means absent.
The wire table (identifier -> type, packet types it may appear in) and the encode/decode
functions live below the dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True, init=False)
class Properties:
    """All MQTT 5.0 properties; the codec checks which ones a packet type may carry."""

    payload_format_indicator: int | None = None
    message_expiry_interval: int | None = None
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    subscription_identifiers: list[int] = field(default_factory=list)
    session_expiry_interval: int | None = None
    assigned_client_identifier: str | None = None
    server_keep_alive: int | None = None
    authentication_method: str | None = None
    authentication_data: bytes | None = None
    request_problem_information: int | None = None
    will_delay_interval: int | None = None
    request_response_information: int | None = None
    response_information: str | None = None
    server_reference: str | None = None
    reason_string: str | None = None
    receive_maximum: int | None = None
    topic_alias_maximum: int | None = None
    topic_alias: int | None = None
    maximum_qos: int | None = None
    retain_available: int | None = None
    user_properties: list[tuple[str, str]] = field(default_factory=list)
    maximum_packet_size: int | None = None
    wildcard_subscription_available: int | None = None
    subscription_identifier_available: int | None = None
    shared_subscription_available: int | None = None

    def __init__(  # noqa: PLR0917 (one parameter per property, as generated)
        self,
        payload_format_indicator: int | None = None,
        message_expiry_interval: int | None = None,
        content_type: str | None = None,
        response_topic: str | None = None,
        correlation_data: bytes | None = None,
        subscription_identifiers: list[int] | None = None,
        session_expiry_interval: int | None = None,
        assigned_client_identifier: str | None = None,
        server_keep_alive: int | None = None,
        authentication_method: str | None = None,
        authentication_data: bytes | None = None,
        request_problem_information: int | None = None,
        will_delay_interval: int | None = None,
        request_response_information: int | None = None,
        response_information: str | None = None,
        server_reference: str | None = None,
        reason_string: str | None = None,
        receive_maximum: int | None = None,
        topic_alias_maximum: int | None = None,
        topic_alias: int | None = None,
        maximum_qos: int | None = None,
        retain_available: int | None = None,
        user_properties: list[tuple[str, str]] | None = None,
        maximum_packet_size: int | None = None,
        wildcard_subscription_available: int | None = None,
        subscription_identifier_available: int | None = None,
        shared_subscription_available: int | None = None,
    ) -> None:
        # Written out: mypyc compiles this one, not the one `dataclasses` generates
        # (interpreted; one empty Properties is built for every PUBACK read).
        self.payload_format_indicator = payload_format_indicator
        self.message_expiry_interval = message_expiry_interval
        self.content_type = content_type
        self.response_topic = response_topic
        self.correlation_data = correlation_data
        self.subscription_identifiers = (
            [] if subscription_identifiers is None else subscription_identifiers
        )
        self.session_expiry_interval = session_expiry_interval
        self.assigned_client_identifier = assigned_client_identifier
        self.server_keep_alive = server_keep_alive
        self.authentication_method = authentication_method
        self.authentication_data = authentication_data
        self.request_problem_information = request_problem_information
        self.will_delay_interval = will_delay_interval
        self.request_response_information = request_response_information
        self.response_information = response_information
        self.server_reference = server_reference
        self.reason_string = reason_string
        self.receive_maximum = receive_maximum
        self.topic_alias_maximum = topic_alias_maximum
        self.topic_alias = topic_alias
        self.maximum_qos = maximum_qos
        self.retain_available = retain_available
        self.user_properties = [] if user_properties is None else user_properties
        self.maximum_packet_size = maximum_packet_size
        self.wildcard_subscription_available = wildcard_subscription_available
        self.subscription_identifier_available = subscription_identifier_available
        self.shared_subscription_available = shared_subscription_available

    def empty_for_publish(self) -> bool:
        """True when none of the properties a PUBLISH may carry is set, so that a PUBLISH
        encodes them as an empty property list: the fields are those of
        `PROPERTIES_BY_CONTEXT[PacketType.PUBLISH]` in the table below (a test holds the two
        together). Written out rather than read from the table: it runs for every PUBLISH."""
        return (
            self.payload_format_indicator is None
            and self.message_expiry_interval is None
            and self.content_type is None
            and self.response_topic is None
            and self.correlation_data is None
            and not self.subscription_identifiers
            and self.topic_alias is None
            and not self.user_properties
        )


# --- Wire table [MQTT-2.2.2.2] -------------------------------------------------------------
# Every code below the dataclass is codec-internal detail; callers use encode_properties and
# decode_properties with a context: the packet type, or WILL_PROPERTIES for a CONNECT's will.

from collections.abc import Callable  # noqa: E402
from typing import Any, Final, NamedTuple  # noqa: E402

from mqttq.codec.enums import MAX_VARINT, PacketType, PropertyId  # noqa: E402
from mqttq.codec.primitives import (  # noqa: E402
    decode_binary,
    decode_string,
    decode_string_pair,
    decode_u8,
    decode_u16,
    decode_u32,
    decode_varint,
    encode_binary,
    encode_string,
    encode_string_pair,
    encode_u8,
    encode_u16,
    encode_u32,
    encode_varint,
)
from mqttq.errors import Incomplete, MalformedPacket, ProtocolError  # noqa: E402
from mqttq.reasons import ReasonCode  # noqa: E402

WILL_PROPERTIES = 0
"""Context for the will properties of a CONNECT (no packet type has the value 0)."""

BYTE, U16, U32, VARINT, STRING, BINARY, STRING_PAIR = range(7)


class PropertySpec(NamedTuple):
    """One row of the property table: how it is written and where it may appear."""

    identifier: int
    name: str
    """Field of `Properties`."""
    wire: int
    contexts: int
    """Bit mask of `1 << context` for every context the property may appear in."""


def _mask(*contexts: int) -> int:
    mask = 0
    for context in contexts:
        mask |= 1 << context
    return mask


_T = PacketType
_ALL_ACKS = (_T.PUBACK, _T.PUBREC, _T.PUBREL, _T.PUBCOMP)

PROPERTY_TABLE: dict[int, PropertySpec] = {
    spec.identifier: spec
    for spec in (
        PropertySpec(
            PropertyId.PAYLOAD_FORMAT_INDICATOR,
            "payload_format_indicator",
            BYTE,
            _mask(_T.PUBLISH, WILL_PROPERTIES),
        ),
        PropertySpec(
            PropertyId.MESSAGE_EXPIRY_INTERVAL,
            "message_expiry_interval",
            U32,
            _mask(_T.PUBLISH, WILL_PROPERTIES),
        ),
        PropertySpec(
            PropertyId.CONTENT_TYPE, "content_type", STRING, _mask(_T.PUBLISH, WILL_PROPERTIES)
        ),
        PropertySpec(
            PropertyId.RESPONSE_TOPIC, "response_topic", STRING, _mask(_T.PUBLISH, WILL_PROPERTIES)
        ),
        PropertySpec(
            PropertyId.CORRELATION_DATA,
            "correlation_data",
            BINARY,
            _mask(_T.PUBLISH, WILL_PROPERTIES),
        ),
        PropertySpec(
            PropertyId.SUBSCRIPTION_IDENTIFIER,
            "subscription_identifiers",
            VARINT,
            _mask(_T.PUBLISH, _T.SUBSCRIBE),
        ),
        PropertySpec(
            PropertyId.SESSION_EXPIRY_INTERVAL,
            "session_expiry_interval",
            U32,
            _mask(_T.CONNECT, _T.CONNACK, _T.DISCONNECT),
        ),
        PropertySpec(
            PropertyId.ASSIGNED_CLIENT_IDENTIFIER,
            "assigned_client_identifier",
            STRING,
            _mask(_T.CONNACK),
        ),
        PropertySpec(PropertyId.SERVER_KEEP_ALIVE, "server_keep_alive", U16, _mask(_T.CONNACK)),
        PropertySpec(
            PropertyId.AUTHENTICATION_METHOD,
            "authentication_method",
            STRING,
            _mask(_T.CONNECT, _T.CONNACK, _T.AUTH),
        ),
        PropertySpec(
            PropertyId.AUTHENTICATION_DATA,
            "authentication_data",
            BINARY,
            _mask(_T.CONNECT, _T.CONNACK, _T.AUTH),
        ),
        PropertySpec(
            PropertyId.REQUEST_PROBLEM_INFORMATION,
            "request_problem_information",
            BYTE,
            _mask(_T.CONNECT),
        ),
        PropertySpec(
            PropertyId.WILL_DELAY_INTERVAL, "will_delay_interval", U32, _mask(WILL_PROPERTIES)
        ),
        PropertySpec(
            PropertyId.REQUEST_RESPONSE_INFORMATION,
            "request_response_information",
            BYTE,
            _mask(_T.CONNECT),
        ),
        PropertySpec(
            PropertyId.RESPONSE_INFORMATION, "response_information", STRING, _mask(_T.CONNACK)
        ),
        PropertySpec(
            PropertyId.SERVER_REFERENCE,
            "server_reference",
            STRING,
            _mask(_T.CONNACK, _T.DISCONNECT),
        ),
        PropertySpec(
            PropertyId.REASON_STRING,
            "reason_string",
            STRING,
            _mask(
                _T.CONNACK,
                *_ALL_ACKS,
                _T.SUBACK,
                _T.UNSUBACK,
                _T.DISCONNECT,
                _T.AUTH,
            ),
        ),
        PropertySpec(
            PropertyId.RECEIVE_MAXIMUM, "receive_maximum", U16, _mask(_T.CONNECT, _T.CONNACK)
        ),
        PropertySpec(
            PropertyId.TOPIC_ALIAS_MAXIMUM,
            "topic_alias_maximum",
            U16,
            _mask(_T.CONNECT, _T.CONNACK),
        ),
        PropertySpec(PropertyId.TOPIC_ALIAS, "topic_alias", U16, _mask(_T.PUBLISH)),
        PropertySpec(PropertyId.MAXIMUM_QOS, "maximum_qos", BYTE, _mask(_T.CONNACK)),
        PropertySpec(PropertyId.RETAIN_AVAILABLE, "retain_available", BYTE, _mask(_T.CONNACK)),
        PropertySpec(
            PropertyId.USER_PROPERTY,
            "user_properties",
            STRING_PAIR,
            _mask(*(t for t in PacketType if t not in (_T.PINGREQ, _T.PINGRESP)), WILL_PROPERTIES),
        ),
        PropertySpec(
            PropertyId.MAXIMUM_PACKET_SIZE,
            "maximum_packet_size",
            U32,
            _mask(_T.CONNECT, _T.CONNACK),
        ),
        PropertySpec(
            PropertyId.WILDCARD_SUBSCRIPTION_AVAILABLE,
            "wildcard_subscription_available",
            BYTE,
            _mask(_T.CONNACK),
        ),
        PropertySpec(
            PropertyId.SUBSCRIPTION_IDENTIFIER_AVAILABLE,
            "subscription_identifier_available",
            BYTE,
            _mask(_T.CONNACK),
        ),
        PropertySpec(
            PropertyId.SHARED_SUBSCRIPTION_AVAILABLE,
            "shared_subscription_available",
            BYTE,
            _mask(_T.CONNACK),
        ),
    )
}
"""Identifier -> wire type and the contexts it may appear in [MQTT-2.2.2.2]."""

PROPERTIES_BY_CONTEXT: dict[int, tuple[PropertySpec, ...]] = {
    context: tuple(spec for spec in PROPERTY_TABLE.values() if spec.contexts >> context & 1)
    for context in (WILL_PROPERTIES, *PacketType)
}
"""Context -> the properties it may carry, in identifier order."""

_BOOLEAN_BYTES = frozenset(
    {
        PropertyId.PAYLOAD_FORMAT_INDICATOR,
        PropertyId.REQUEST_PROBLEM_INFORMATION,
        PropertyId.REQUEST_RESPONSE_INFORMATION,
        PropertyId.MAXIMUM_QOS,
        PropertyId.RETAIN_AVAILABLE,
        PropertyId.WILDCARD_SUBSCRIPTION_AVAILABLE,
        PropertyId.SUBSCRIPTION_IDENTIFIER_AVAILABLE,
        PropertyId.SHARED_SUBSCRIPTION_AVAILABLE,
    }
)
_NON_ZERO = frozenset(
    {
        PropertyId.SUBSCRIPTION_IDENTIFIER,
        PropertyId.RECEIVE_MAXIMUM,
        PropertyId.MAXIMUM_PACKET_SIZE,
    }
)
_LIST_FIELDS = frozenset({PropertyId.SUBSCRIPTION_IDENTIFIER, PropertyId.USER_PROPERTY})


_DECODERS: dict[int, Callable[[memoryview, int], tuple[Any, int]]] = {
    BYTE: decode_u8,
    U16: decode_u16,
    U32: decode_u32,
    VARINT: decode_varint,
    STRING: decode_string,
    BINARY: decode_binary,
    STRING_PAIR: decode_string_pair,
}


def decode_properties(view: memoryview, offset: int, context: int) -> tuple[Properties, int]:
    """Decode a property length and the properties after it [MQTT-2.2.2].

    `context` is the packet type (or WILL_PROPERTIES). A property the context may not carry,
    or an unknown identifier, is MalformedPacket. A repeated property (except User Property,
    and Subscription Identifier in PUBLISH) is ProtocolError(PROTOCOL_ERROR), and so are
    Subscription Identifier, Receive Maximum or Maximum Packet Size 0, a yes/no byte or
    Maximum QoS other than 0 or 1, and Authentication Data without Authentication Method.
    """
    length, offset = decode_varint(view, offset)
    props = Properties()
    if not length:
        return props, offset
    end = offset + length
    if end > len(view):
        raise Incomplete
    view = view[:end]
    context_bit = 1 << context
    seen = 0
    while offset < end:
        # The identifier is a variable byte integer, but every defined one is below 0x80:
        # a first byte >= 0x80 can only start an unknown identifier.
        identifier = view[offset]
        offset += 1
        spec = PROPERTY_TABLE.get(identifier)
        if spec is None:
            raise MalformedPacket(f"unknown property identifier 0x{identifier:02X}")
        if not spec.contexts & context_bit:
            raise MalformedPacket(f"property {spec.name} not allowed here")
        value, offset = _DECODERS[spec.wire](view, offset)
        bit = 1 << identifier
        if seen & bit and not (
            identifier == PropertyId.USER_PROPERTY
            or (identifier == PropertyId.SUBSCRIPTION_IDENTIFIER and context == PacketType.PUBLISH)
        ):
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"property {spec.name} repeated")
        seen |= bit
        if identifier in _BOOLEAN_BYTES:
            if value not in (0, 1):
                raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"{spec.name} must be 0 or 1")
        elif identifier in _NON_ZERO and value == 0:
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"{spec.name} must not be 0")
        if identifier in _LIST_FIELDS:
            getattr(props, spec.name).append(value)
        else:
            setattr(props, spec.name, value)
    if props.authentication_data is not None and props.authentication_method is None:
        raise ProtocolError(
            ReasonCode.PROTOCOL_ERROR, "authentication data without authentication method"
        )
    return props, offset


def _encode_subscription_identifier(value: int) -> bytes:
    if not 1 <= value <= MAX_VARINT:
        raise ValueError(f"subscription identifier out of range: {value}")
    return encode_varint(value)


_ENCODERS: dict[int, Callable[[Any], bytes]] = {
    BYTE: encode_u8,
    U16: encode_u16,
    U32: encode_u32,
    VARINT: _encode_subscription_identifier,
    STRING: encode_string,
    BINARY: encode_binary,
    STRING_PAIR: encode_string_pair,
}

EMPTY_PROPERTIES: Final = b"\x00"
"""A property length of 0."""


def encode_properties(props: Properties, context: int) -> bytes:
    """Property length and properties [MQTT-2.2.2], for `context` (packet type or WILL).

    Only the properties the context may carry are written; the others are ignored. Raises
    ValueError for a value its wire type cannot hold, and for more than one Subscription
    Identifier outside PUBLISH.
    """
    parts: list[bytes] = []
    for spec in PROPERTIES_BY_CONTEXT[context]:
        value = getattr(props, spec.name)
        if value is None:
            continue
        prefix = encode_u8(spec.identifier)
        encoder = _ENCODERS[spec.wire]
        if spec.identifier in _LIST_FIELDS:
            if (
                spec.identifier == PropertyId.SUBSCRIPTION_IDENTIFIER
                and context != PacketType.PUBLISH
                and len(value) > 1
            ):
                raise ValueError("only PUBLISH may carry several subscription identifiers")
            for item in value:
                parts.append(prefix)
                parts.append(encoder(item))
        else:
            parts.append(prefix)
            parts.append(encoder(value))
    if not parts:
        return EMPTY_PROPERTIES
    body = b"".join(parts)
    return encode_varint(len(body)) + body
