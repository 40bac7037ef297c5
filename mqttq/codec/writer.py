"""Encoding MQTT control packets to bytes (sans-I/O).

`encode_packet(packet, protocol_level)` writes any packet at level 3 (3.1), 4 (3.1.1) or 5.
For 3.x it drops what the level cannot carry (properties, 5.0-only subscription options and
reason codes) and maps CONNACK and SUBACK codes to their 3.x forms. For 5.0 it writes the
shortest form the spec allows. Values the wire cannot hold raise ValueError.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from struct import error as StructError
from typing import Any, Final

from mqttq.codec.enums import PacketType
from mqttq.codec.packets import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PingreqPacket,
    PingrespPacket,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    SubackPacket,
    SubscribePacket,
    UnsubackPacket,
    UnsubscribePacket,
)
from mqttq.codec.primitives import (
    MAX_U16,
    encode_binary,
    encode_string,
    encode_u16,
    encode_varint,
)
from mqttq.codec.properties import (
    EMPTY_PROPERTIES,
    WILL_PROPERTIES,
    Properties,
    encode_properties,
)
from mqttq.codec.reader import NO_PROPERTIES, REASON_CODES
from mqttq.reasons import ReasonCode

__all__ = ["encode_packet", "encode_publish", "encode_short_ack", "publish_template"]

_pack_u16: Final = Struct("!H").pack
_pack_ack: Final = Struct("!BBH").pack
_pack_ack_reason: Final = Struct("!BBHB").pack
_pack_publish_head: Final = Struct("!BBH").pack

_PROTOCOL_HEADERS = {3: b"\x00\x06MQIsdp\x03", 4: b"\x00\x04MQTT\x04", 5: b"\x00\x04MQTT\x05"}

_CONNACK_RETURN_CODES = {
    ReasonCode.SUCCESS: 0,
    ReasonCode.UNSUPPORTED_PROTOCOL_VERSION: 1,
    ReasonCode.CLIENT_IDENTIFIER_NOT_VALID: 2,
    ReasonCode.SERVER_UNAVAILABLE: 3,
    ReasonCode.BAD_USER_NAME_OR_PASSWORD: 4,
    ReasonCode.NOT_AUTHORIZED: 5,
}
"""ReasonCode -> 3.x CONNACK return code; any other error code becomes 3 [MQTT-3.2.2.3]."""


def _fixed_header(first: int, remaining_length: int) -> bytes:
    if remaining_length < 0x80:
        return bytes((first, remaining_length))
    return bytes((first,)) + encode_varint(remaining_length)


def _packet(first: int, parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    return _fixed_header(first, len(body)) + body


def _check_packet_id(packet_id: int | None) -> int:
    if packet_id is None or not 0 < packet_id <= MAX_U16:
        raise ValueError(f"packet identifier must be 1..65535, not {packet_id} [MQTT-2.2.1-3]")
    return packet_id


def _check_reason(ptype: PacketType, reason: int) -> int:
    if reason not in REASON_CODES[ptype]:
        raise ValueError(f"reason code 0x{reason:02X} not valid in {ptype.name}")
    return reason


def _encode_connect(packet: ConnectPacket, level: int) -> bytes:
    """CONNECT [MQTT-3.1] at `level`, which must be the packet's own protocol level."""
    if packet.protocol_level != level:
        raise ValueError(f"CONNECT of level {packet.protocol_level} written at level {level}")
    will = packet.will
    flags = 0x02 if packet.clean_start else 0
    if will is not None:
        if not 0 <= will.qos <= 2:
            raise ValueError(f"will QoS {will.qos}")
        flags |= 0x04 | will.qos << 3 | (0x20 if will.retain else 0)
    if packet.username is not None:
        flags |= 0x80
    if packet.password is not None:
        if level < 5 and packet.username is None:
            raise ValueError("3.x CONNECT cannot carry a password without a user name")
        flags |= 0x40
    parts = [_PROTOCOL_HEADERS[level], bytes((flags,)), encode_u16(packet.keep_alive)]
    if level == 5:
        parts.append(encode_properties(packet.properties, PacketType.CONNECT))
    parts.append(encode_string(packet.client_id))
    if will is not None:
        if level == 5:
            parts.append(encode_properties(will.properties, WILL_PROPERTIES))
        parts.append(encode_string(will.topic))
        parts.append(encode_binary(will.payload))
    if packet.username is not None:
        parts.append(encode_string(packet.username))
    if packet.password is not None:
        parts.append(encode_binary(packet.password))
    return _packet(0x10, parts)


def _encode_connack(packet: ConnackPacket, level: int) -> bytes:
    """CONNACK [MQTT-3.2]. Session present is written only with success [MQTT-3.2.2-4/6];
    3.1 has no session present flag, so that byte is always 0."""
    reason = packet.reason_code
    session_present = 1 if packet.session_present and reason == ReasonCode.SUCCESS else 0
    if level == 5:
        _check_reason(PacketType.CONNACK, reason)
        properties = encode_properties(packet.properties, PacketType.CONNACK)
        return _packet(0x20, [bytes((session_present, reason)), properties])
    code = _CONNACK_RETURN_CODES.get(reason)
    if code is None:
        if reason < 0x80:
            raise ValueError(f"{reason!r} has no 3.x CONNACK return code")
        code = 3
    return bytes((0x20, 2, session_present if level == 4 else 0, code))


def _encode_publish(packet: PublishPacket, level: int) -> bytes:
    """PUBLISH [MQTT-3.3]."""
    return encode_publish(
        packet.topic,
        packet.payload,
        packet.qos,
        packet.retain,
        packet.dup,
        packet.packet_id,
        packet.properties,
        level,
    )


def encode_publish(  # noqa: PLR0917 (the fields of the packet object it avoids building)
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    dup: bool,
    packet_id: int | None,
    properties: Properties,
    protocol_level: int,
) -> bytes:
    """The PUBLISH `encode_packet` writes for these fields, without a packet object: the
    hot path of every delivery, one join and no per-byte work on the payload [MQTT-3.3].
    Raises ValueError as `encode_packet` does."""
    if protocol_level not in (3, 4, 5):
        raise ValueError(f"unsupported protocol level {protocol_level}")
    encoded_topic = topic.encode("utf-8")
    topic_length = len(encoded_topic)
    # `0 in`, not `b"\x00" in`: for a bytes operand, bytes.__contains__ first tries it as
    # an integer and raises (then clears) a formatted TypeError, every delivery.
    if topic_length > MAX_U16 or 0 in encoded_topic:
        raise ValueError("topic longer than 65535 bytes or containing U+0000")
    first = 0x30 | qos << 1
    if retain:
        first |= 0x01
    if qos:
        if qos > 2:
            raise ValueError(f"PUBLISH QoS {qos}")
        if dup:
            first |= 0x08
        if packet_id is None or not 0 < packet_id <= MAX_U16:
            _check_packet_id(packet_id)
        tail = _pack_u16(packet_id)
    else:
        if dup or packet_id is not None:
            raise ValueError("QoS 0 PUBLISH with DUP or a packet id [MQTT-3.3.1-2, MQTT-2.2.1-2]")
        tail = b""
    if protocol_level == 5:
        if properties is NO_PROPERTIES or properties.empty_for_publish():
            tail += EMPTY_PROPERTIES
        else:
            tail += encode_properties(properties, PacketType.PUBLISH)
    remaining_length = 2 + topic_length + len(tail) + len(payload)
    if remaining_length < 0x80:
        return b"".join(
            (
                _pack_publish_head(first, remaining_length, topic_length),
                encoded_topic,
                tail,
                payload,
            )
        )
    return b"".join(
        (
            bytes((first,)),
            encode_varint(remaining_length),
            _pack_u16(topic_length),
            encoded_topic,
            tail,
            payload,
        )
    )


def publish_template(  # noqa: PLR0917 (the fields of the packet, as encode_publish takes them)
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    properties: Properties,
    protocol_level: int,
) -> tuple[bytes, bytes]:
    """A PUBLISH with DUP 0 cut where its packet id goes: `head + packet id + tail` is
    what `encode_publish` writes for that id (QoS 0: `head + tail`, no id), so a message
    sent to many sessions is encoded once, whatever ids they give it. Raises ValueError
    as `encode_publish` does."""
    data = encode_publish(
        topic, payload, qos, retain, False, 1 if qos else None, properties, protocol_level
    )
    size = 2  # the first byte and the remaining length's first byte
    while data[size - 1] & 0x80:
        size += 1
    cut = size + 2 + len(topic.encode("utf-8"))
    if not qos:
        return data, b""
    return data[:cut], data[cut + 2 :]


def _ack_encoder(ptype: PacketType) -> Callable[[Any, int], bytes]:
    first = ptype << 4 | (0b0010 if ptype == PacketType.PUBREL else 0)

    def encode(
        packet: PubackPacket | PubrecPacket | PubrelPacket | PubcompPacket, level: int
    ) -> bytes:
        packet_id = packet.packet_id
        if not 0 < packet_id <= MAX_U16:
            _check_packet_id(packet_id)
        if level != 5:
            return _pack_ack(first, 2, packet_id)
        reason = packet.reason_code
        properties = packet.properties
        if properties.reason_string is None and not properties.user_properties:
            # Shortest forms [MQTT-3.4.2.1]: no reason code for success, no property length.
            if not reason:
                return _pack_ack(first, 2, packet_id)
            return _pack_ack_reason(first, 3, packet_id, _check_reason(ptype, reason))
        body = encode_properties(properties, ptype)
        return _packet(first, [_pack_u16(packet_id), bytes((_check_reason(ptype, reason),)), body])

    encode.__doc__ = f"{ptype.name} [MQTT-3.{ptype}]; 3.x drops reason code and properties."
    return encode


_ACK_FIRST_BYTES: Final = {
    PacketType.PUBACK: 0x40,
    PacketType.PUBREC: 0x50,
    PacketType.PUBREL: 0x62,
    PacketType.PUBCOMP: 0x70,
}


def encode_short_ack(
    packet_type: PacketType, packet_id: int, reason_code: int, protocol_level: int
) -> bytes:
    """PUBACK, PUBREC, PUBREL or PUBCOMP without properties, in its shortest form: the same
    bytes `encode_packet` writes for such a packet with empty properties, without building
    one (the broker acknowledges every QoS 1/2 PUBLISH). 3.x drops the reason code; 5.0
    omits it for success [MQTT-3.4.2.1]. ValueError for an id outside 1..65535 or a reason
    code the packet type may not carry."""
    first = _ACK_FIRST_BYTES[packet_type]
    if not 0 < packet_id <= MAX_U16:
        _check_packet_id(packet_id)
    if protocol_level != 5 or not reason_code:
        return _pack_ack(first, 2, packet_id)
    return _pack_ack_reason(first, 3, packet_id, _check_reason(packet_type, reason_code))


def _encode_subscribe(packet: SubscribePacket, level: int) -> bytes:
    """SUBSCRIBE [MQTT-3.8]; 3.x writes only the requested QoS of each filter."""
    if not packet.subscriptions:
        raise ValueError("SUBSCRIBE needs at least one topic filter [MQTT-3.8.3-3]")
    parts = [_pack_u16(_check_packet_id(packet.packet_id))]
    if level == 5:
        parts.append(encode_properties(packet.properties, PacketType.SUBSCRIBE))
    for sub in packet.subscriptions:
        if not 0 <= sub.qos <= 2 or not 0 <= sub.retain_handling <= 2:
            raise ValueError(f"subscription QoS {sub.qos} / retain handling {sub.retain_handling}")
        options = sub.qos
        if level == 5:
            options |= sub.retain_handling << 4
            if sub.no_local:
                options |= 0x04
            if sub.retain_as_published:
                options |= 0x08
        parts.append(encode_string(sub.topic_filter))
        parts.append(bytes((options,)))
    return _packet(0x82, parts)


def _encode_suback(packet: SubackPacket, level: int) -> bytes:
    """SUBACK [MQTT-3.9]; for 3.x any error code is written as the failure code 0x80."""
    parts = [_pack_u16(_check_packet_id(packet.packet_id))]
    if level == 5:
        parts.append(encode_properties(packet.properties, PacketType.SUBACK))
        codes = [_check_reason(PacketType.SUBACK, code) for code in packet.reason_codes]
    else:
        codes = []
        for code in packet.reason_codes:
            if code >= 0x80:
                codes.append(ReasonCode.UNSPECIFIED_ERROR)
            elif code <= 2:
                codes.append(code)
            else:
                raise ValueError(f"{code!r} has no 3.x SUBACK return code")
    parts.append(bytes(codes))
    return _packet(0x90, parts)


def _encode_unsubscribe(packet: UnsubscribePacket, level: int) -> bytes:
    """UNSUBSCRIBE [MQTT-3.10]."""
    if not packet.topic_filters:
        raise ValueError("UNSUBSCRIBE needs at least one topic filter [MQTT-3.10.3-2]")
    parts = [_pack_u16(_check_packet_id(packet.packet_id))]
    if level == 5:
        parts.append(encode_properties(packet.properties, PacketType.UNSUBSCRIBE))
    parts.extend(encode_string(topic_filter) for topic_filter in packet.topic_filters)
    return _packet(0xA2, parts)


def _encode_unsuback(packet: UnsubackPacket, level: int) -> bytes:
    """UNSUBACK [MQTT-3.11]; 3.x carries only the packet id."""
    packet_id = _check_packet_id(packet.packet_id)
    if level != 5:
        return _pack_ack(0xB0, 2, packet_id)
    codes = bytes(_check_reason(PacketType.UNSUBACK, code) for code in packet.reason_codes)
    properties = encode_properties(packet.properties, PacketType.UNSUBACK)
    return _packet(0xB0, [_pack_u16(packet_id), properties, codes])


def _encode_pingreq(packet: PingreqPacket, level: int) -> bytes:
    """PINGREQ [MQTT-3.12]."""
    return b"\xc0\x00"


def _encode_pingresp(packet: PingrespPacket, level: int) -> bytes:
    """PINGRESP [MQTT-3.13]."""
    return b"\xd0\x00"


def _reason_and_properties(
    first: int, ptype: PacketType, reason: ReasonCode, properties: Properties
) -> bytes:
    """5.0 DISCONNECT/AUTH, shortest form: nothing for success without properties."""
    encoded = encode_properties(properties, ptype)
    _check_reason(ptype, reason)
    if encoded == EMPTY_PROPERTIES:
        if not reason:
            return bytes((first, 0))
        return bytes((first, 1, reason))
    return _packet(first, [bytes((reason,)), encoded])


def _encode_disconnect(packet: DisconnectPacket, level: int) -> bytes:
    """DISCONNECT [MQTT-3.14]; empty in 3.x."""
    if level != 5:
        return b"\xe0\x00"
    return _reason_and_properties(
        0xE0, PacketType.DISCONNECT, packet.reason_code, packet.properties
    )


def _encode_auth(packet: AuthPacket, level: int) -> bytes:
    """AUTH [MQTT-3.15]; exists only in 5.0."""
    if level != 5:
        raise ValueError("AUTH exists only in MQTT 5.0")
    return _reason_and_properties(0xF0, PacketType.AUTH, packet.reason_code, packet.properties)


_ENCODERS: dict[type, Callable[[Any, int], bytes]] = {
    ConnectPacket: _encode_connect,
    ConnackPacket: _encode_connack,
    PublishPacket: _encode_publish,
    PubackPacket: _ack_encoder(PacketType.PUBACK),
    PubrecPacket: _ack_encoder(PacketType.PUBREC),
    PubrelPacket: _ack_encoder(PacketType.PUBREL),
    PubcompPacket: _ack_encoder(PacketType.PUBCOMP),
    SubscribePacket: _encode_subscribe,
    SubackPacket: _encode_suback,
    UnsubscribePacket: _encode_unsubscribe,
    UnsubackPacket: _encode_unsuback,
    PingreqPacket: _encode_pingreq,
    PingrespPacket: _encode_pingresp,
    DisconnectPacket: _encode_disconnect,
    AuthPacket: _encode_auth,
}


def encode_packet(packet: Packet, protocol_level: int) -> bytes:
    """The wire bytes of `packet` at `protocol_level` (3, 4 or 5).

    Raises ValueError for what the level cannot express: a value out of its wire range, a
    packet id outside 1..65535 [MQTT-2.2.1-3], a reason code the packet type may not carry,
    a QoS 0 PUBLISH with DUP [MQTT-3.3.1-2], AUTH below 5.0, a CONNECT whose own level differs.
    """
    if protocol_level not in (3, 4, 5):
        raise ValueError(f"unsupported protocol level {protocol_level}")
    encoder = _ENCODERS.get(type(packet))
    if encoder is None:
        raise TypeError(f"not an MQTT packet: {packet!r}")
    try:
        return encoder(packet, protocol_level)
    except StructError as exc:
        raise ValueError(str(exc)) from None
