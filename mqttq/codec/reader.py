"""Decoding MQTT control packets from bytes (sans-I/O).

`decode_packet` decodes one packet from the start of a memoryview; `PacketReader` buffers a
byte stream and hands out whole packets. Both raise `Incomplete` (decode_packet) or return
None (PacketReader) while a packet is still arriving, and `ProtocolError` (with the reason
code to send) when the bytes break the rules. Once a whole packet is buffered the answer is
never `Incomplete`: fields that overrun or underrun the remaining length are malformed.
"""

from __future__ import annotations

from typing import Final

from mqttq.codec.enums import PacketType, ProtocolLevel
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
    SubscriptionRequest,
    UnsubackPacket,
    UnsubscribePacket,
    Will,
)
from mqttq.codec.primitives import (
    decode_binary,
    decode_string,
    decode_varint,
)
from mqttq.codec.properties import WILL_PROPERTIES, Properties, decode_properties
from mqttq.errors import Incomplete, MalformedPacket, PacketTooLarge, ProtocolError
from mqttq.reasons import ReasonCode

__all__ = [
    "CONNACK_RETURN_CODE_TO_REASON",
    "NO_PROPERTIES",
    "REASON_CODES",
    "PacketReader",
    "decode_packet",
]

_T = PacketType

REASON_CODES: dict[PacketType, frozenset[int]] = {
    _T.CONNACK: frozenset(
        (0x00, *range(0x80, 0x8B), 0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)
    ),
    _T.PUBACK: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),
    _T.PUBREC: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),
    _T.PUBREL: frozenset((0x00, 0x92)),
    _T.PUBCOMP: frozenset((0x00, 0x92)),
    _T.SUBACK: frozenset((0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)),
    _T.UNSUBACK: frozenset((0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)),
    _T.DISCONNECT: frozenset(
        (0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, *range(0x8B, 0x91), *range(0x93, 0xA3))
    ),
    _T.AUTH: frozenset((0x00, 0x18, 0x19)),
}
"""MQTT 5.0: the reason codes each packet type may carry (the per-packet tables of chapter 3;
DISCONNECT also takes 0x8C Bad authentication method, which the table of [MQTT-2.4] lists)."""

V3_SUBACK_CODES = frozenset((0x00, 0x01, 0x02, 0x80))
"""3.1.1 SUBACK return codes: granted QoS or failure [MQTT-3.9.3]."""

CONNACK_RETURN_CODE_TO_REASON = (
    ReasonCode.SUCCESS,
    ReasonCode.UNSUPPORTED_PROTOCOL_VERSION,
    ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
    ReasonCode.SERVER_UNAVAILABLE,
    ReasonCode.BAD_USER_NAME_OR_PASSWORD,
    ReasonCode.NOT_AUTHORIZED,
)
"""3.x CONNACK return code (the index) -> ReasonCode [MQTT-3.2.2.3]."""

# Literal ints, inlined by the compiled module: the fixed-header checks run for every
# packet (tests/unit/test_codec_reader.py checks them against PacketType).
_CONNECT: Final = 1
_PUBLISH: Final = 3
_PUBACK: Final = 4
_AUTH: Final = 15

# Fixed header flags every packet type except PUBLISH must carry [MQTT-2.1.3-1].
_REQUIRED_FLAGS: Final = (-1, 0, 0, -1, 0, 0, 0b0010, 0, 0b0010, 0, 0b0010, 0, 0, 0, 0, 0)

_PROTOCOL_NAMES = {3: b"MQIsdp", 4: b"MQTT", 5: b"MQTT"}
"""Protocol level -> the protocol name it must come with [MQTT-3.1.2-1, MQTT-3.1.2-2]."""

# Per packet type: wire byte -> ReasonCode, only for the codes that packet may carry.
_REASONS: dict[int, dict[int, ReasonCode]] = {
    ptype: {code: ReasonCode(code) for code in codes} for ptype, codes in REASON_CODES.items()
}
_V3_SUBACK = {code: ReasonCode(code) for code in V3_SUBACK_CODES}

NO_PROPERTIES: Final = Properties()
"""Shared by every decoded PUBLISH and PUBACK/PUBREC/PUBREL/PUBCOMP whose property section is
empty or absent (3.x): one allocation fewer per packet on the hot path. Decoded properties
are therefore read-only; copy them (`dataclasses.replace`) to change one."""


def _expect_end(offset: int, body: memoryview, what: str) -> None:
    if offset != len(body):
        raise MalformedPacket(f"{what}: {len(body) - offset} bytes after the last field")


def _packet_id(body: memoryview, offset: int) -> int:
    """A non-zero Packet Identifier [MQTT-2.2.1-3]."""
    if offset + 2 > len(body):
        raise Incomplete
    packet_id = (body[offset] << 8) | body[offset + 1]
    if not packet_id:
        raise MalformedPacket("packet identifier 0")
    return packet_id


def _reason(ptype: int, byte: int) -> ReasonCode:
    reason = _REASONS[ptype].get(byte)
    if reason is None:
        raise MalformedPacket(f"reason code 0x{byte:02X} not valid in {PacketType(ptype).name}")
    return reason


def _decode_connect(flags: int, body: memoryview, level: int) -> ConnectPacket:
    """CONNECT [MQTT-3.1]; the packet's own protocol level decides its layout."""
    if len(body) < 2:
        raise Incomplete
    name_end = 2 + ((body[0] << 8) | body[1])
    if name_end >= len(body):
        raise Incomplete
    level = body[name_end]
    name = bytes(body[2:name_end])
    if _PROTOCOL_NAMES.get(level) != name:
        raise ProtocolError(
            ReasonCode.UNSUPPORTED_PROTOCOL_VERSION,
            f"unsupported protocol name/level {name!r}/{level} [MQTT-3.1.2-2]",
        )
    offset = name_end + 1
    if offset + 3 > len(body):
        raise Incomplete
    connect_flags = body[offset]
    keep_alive = (body[offset + 1] << 8) | body[offset + 2]
    offset += 3
    if connect_flags & 0x01:
        raise MalformedPacket("CONNECT reserved flag set [MQTT-3.1.2-3]")
    will_flag = connect_flags & 0x04
    will_qos = (connect_flags >> 3) & 0x03
    will_retain = bool(connect_flags & 0x20)
    has_password = connect_flags & 0x40
    has_username = connect_flags & 0x80
    if not will_flag and (will_qos or will_retain):
        raise MalformedPacket("will QoS/retain set without the will flag [MQTT-3.1.2-11/13]")
    if will_qos == 3:
        raise MalformedPacket("will QoS 3 [MQTT-3.1.2-12]")
    if level < 5 and has_password and not has_username:
        raise MalformedPacket("password without user name [MQTT-3.1.2-22]")
    if level == 5:
        properties, offset = decode_properties(body, offset, PacketType.CONNECT)
    else:
        properties = Properties()
    client_id, offset = decode_string(body, offset)
    will = None
    if will_flag:
        if level == 5:
            will_properties, offset = decode_properties(body, offset, WILL_PROPERTIES)
        else:
            will_properties = Properties()
        will_topic, offset = decode_string(body, offset)
        will_payload, offset = decode_binary(body, offset)
        will = Will(will_topic, will_payload, will_qos, will_retain, will_properties)
    username = password = None
    if has_username:
        username, offset = decode_string(body, offset)
    if has_password:
        password, offset = decode_binary(body, offset)
    _expect_end(offset, body, "CONNECT")
    return ConnectPacket(
        client_id,
        ProtocolLevel(level),
        bool(connect_flags & 0x02),
        keep_alive,
        username,
        password,
        will,
        properties,
    )


def _decode_connack(flags: int, body: memoryview, level: int) -> ConnackPacket:
    """CONNACK [MQTT-3.2]; 3.x return codes become ReasonCodes."""
    if len(body) < 2:
        raise Incomplete
    ack_flags = body[0]
    code = body[1]
    if level == 5:
        if ack_flags & 0xFE:
            raise MalformedPacket("CONNACK reserved flags set [MQTT-3.2.2-1]")
        properties, offset = decode_properties(body, 2, PacketType.CONNACK)
        _expect_end(offset, body, "CONNACK")
        return ConnackPacket(bool(ack_flags), _reason(PacketType.CONNACK, code), properties)
    _expect_end(2, body, "CONNACK")
    if code >= len(CONNACK_RETURN_CODE_TO_REASON):
        raise MalformedPacket(f"unknown CONNACK return code {code}")
    if level == 4:
        if ack_flags & 0xFE:
            raise MalformedPacket("CONNACK reserved flags set [MQTT-3.2.2.1]")
        return ConnackPacket(bool(ack_flags), CONNACK_RETURN_CODE_TO_REASON[code])
    # MQTT 3.1 has no session present flag: the byte is reserved and ignored.
    return ConnackPacket(False, CONNACK_RETURN_CODE_TO_REASON[code])


def _decode_publish(flags: int, data: bytes, start: int, end: int, level: int) -> PublishPacket:
    """PUBLISH [MQTT-3.3], its body `data[start:end]`: the hot path, so fields are read
    inline from the bytes (native indexing, no memoryview objects)."""
    if end - start < 2:
        raise Incomplete
    offset = start + 2 + ((data[start] << 8) | data[start + 1])
    if offset > end:
        raise Incomplete
    try:
        topic = str(data[start + 2 : offset], "utf-8")
    except UnicodeDecodeError:
        raise MalformedPacket("topic name is not well-formed UTF-8 [MQTT-1.5.4-1]") from None
    if "\x00" in topic:
        raise MalformedPacket("topic name contains U+0000 [MQTT-1.5.4-2]")
    qos = (flags >> 1) & 0x03
    packet_id = None
    if qos:
        if offset + 2 > end:
            raise Incomplete
        packet_id = (data[offset] << 8) | data[offset + 1]
        if not packet_id:
            raise MalformedPacket("packet identifier 0 [MQTT-2.2.1-3]")
        offset += 2
    properties = NO_PROPERTIES
    if level == 5:
        if offset < end and not data[offset]:
            offset += 1
        else:
            body = memoryview(data)[start:end]
            properties, offset = decode_properties(body, offset - start, _PUBLISH)
            offset += start
    return PublishPacket(
        topic, data[offset:end], qos, (flags & 1) == 1, (flags & 8) == 8, packet_id, properties
    )


def _decode_puback(flags: int, data: bytes, start: int, end: int, level: int) -> PubackPacket:
    """PUBACK [MQTT-3.4], its body `data[start:end]`."""
    if end - start == 2:  # the common short form
        packet_id = (data[start] << 8) | data[start + 1]
        if not packet_id:
            raise MalformedPacket("packet identifier 0")
        return PubackPacket(packet_id, ReasonCode.SUCCESS, NO_PROPERTIES)
    body = memoryview(data)[start:end]
    packet_id, reason, properties = _ack_fields(PacketType.PUBACK, body, level)
    return PubackPacket(packet_id, reason, properties)


def _decode_pubrec(flags: int, body: memoryview, level: int) -> PubrecPacket:
    """PUBREC [MQTT-3.5]."""
    packet_id, reason, properties = _ack_fields(PacketType.PUBREC, body, level)
    return PubrecPacket(packet_id, reason, properties)


def _decode_pubrel(flags: int, body: memoryview, level: int) -> PubrelPacket:
    """PUBREL [MQTT-3.6]."""
    packet_id, reason, properties = _ack_fields(PacketType.PUBREL, body, level)
    return PubrelPacket(packet_id, reason, properties)


def _decode_pubcomp(flags: int, body: memoryview, level: int) -> PubcompPacket:
    """PUBCOMP [MQTT-3.7]."""
    packet_id, reason, properties = _ack_fields(PacketType.PUBCOMP, body, level)
    return PubcompPacket(packet_id, reason, properties)


def _ack_fields(
    ptype: PacketType, body: memoryview, level: int
) -> tuple[int, ReasonCode, Properties]:
    """Packet id, then (5.0) an optional reason code and optional properties [MQTT-3.4.2.1]."""
    n = len(body)
    packet_id = _packet_id(body, 0)
    if n == 2:
        return packet_id, ReasonCode.SUCCESS, NO_PROPERTIES
    if level != 5:
        raise MalformedPacket(f"{ptype.name} remaining length {n}, expected 2")
    reason = _reason(ptype, body[2])
    if n == 3:
        return packet_id, reason, NO_PROPERTIES
    properties, offset = decode_properties(body, 3, ptype)
    _expect_end(offset, body, ptype.name)
    return packet_id, reason, properties


def _decode_subscribe(flags: int, body: memoryview, level: int) -> SubscribePacket:
    """SUBSCRIBE [MQTT-3.8]; at least one topic filter [MQTT-3.8.3-3]."""
    packet_id = _packet_id(body, 0)
    offset = 2
    if level == 5:
        properties, offset = decode_properties(body, offset, PacketType.SUBSCRIBE)
    else:
        properties = Properties()
    subscriptions = []
    n = len(body)
    while offset < n:
        topic_filter, offset = decode_string(body, offset)
        if offset >= n:
            raise Incomplete
        options = body[offset]
        offset += 1
        qos = options & 0x03
        if qos == 3:
            raise MalformedPacket("subscription QoS 3 [MQTT-3.8.3-4]")
        if level == 5:
            retain_handling = (options >> 4) & 0x03
            if options & 0xC0:
                raise MalformedPacket("subscription options reserved bits set [MQTT-3.8.3-5]")
            if retain_handling == 3:
                raise MalformedPacket("retain handling 3 [MQTT-3.8.3.1]")
            subscriptions.append(
                SubscriptionRequest(
                    topic_filter, qos, bool(options & 0x04), bool(options & 0x08), retain_handling
                )
            )
        else:
            if options & 0xFC:
                raise MalformedPacket("requested QoS upper bits set [MQTT-3.8.3-4]")
            subscriptions.append(SubscriptionRequest(topic_filter, qos))
    if not subscriptions:
        raise ProtocolError(ReasonCode.PROTOCOL_ERROR, "SUBSCRIBE without topic filters")
    return SubscribePacket(packet_id, subscriptions, properties)


def _decode_suback(flags: int, body: memoryview, level: int) -> SubackPacket:
    """SUBACK [MQTT-3.9]; a 3.1.1 failure 0x80 becomes UNSPECIFIED_ERROR."""
    packet_id = _packet_id(body, 0)
    if level == 5:
        properties, offset = decode_properties(body, 2, PacketType.SUBACK)
        table = _REASONS[PacketType.SUBACK]
    else:
        properties, offset, table = Properties(), 2, _V3_SUBACK
    reason_codes = []
    for byte in body[offset:]:
        reason = table.get(byte)
        if reason is None:
            raise MalformedPacket(f"SUBACK return code 0x{byte:02X}")
        reason_codes.append(reason)
    return SubackPacket(packet_id, reason_codes, properties)


def _decode_unsubscribe(flags: int, body: memoryview, level: int) -> UnsubscribePacket:
    """UNSUBSCRIBE [MQTT-3.10]; at least one topic filter [MQTT-3.10.3-2]."""
    packet_id = _packet_id(body, 0)
    offset = 2
    if level == 5:
        properties, offset = decode_properties(body, offset, PacketType.UNSUBSCRIBE)
    else:
        properties = Properties()
    topic_filters = []
    while offset < len(body):
        topic_filter, offset = decode_string(body, offset)
        topic_filters.append(topic_filter)
    if not topic_filters:
        raise ProtocolError(ReasonCode.PROTOCOL_ERROR, "UNSUBSCRIBE without topic filters")
    return UnsubscribePacket(packet_id, topic_filters, properties)


def _decode_unsuback(flags: int, body: memoryview, level: int) -> UnsubackPacket:
    """UNSUBACK [MQTT-3.11]; 3.x carries only the packet id."""
    packet_id = _packet_id(body, 0)
    if level != 5:
        _expect_end(2, body, "UNSUBACK")
        return UnsubackPacket(packet_id)
    properties, offset = decode_properties(body, 2, PacketType.UNSUBACK)
    table = _REASONS[PacketType.UNSUBACK]
    reason_codes = []
    for byte in body[offset:]:
        reason = table.get(byte)
        if reason is None:
            raise MalformedPacket(f"UNSUBACK reason code 0x{byte:02X}")
        reason_codes.append(reason)
    return UnsubackPacket(packet_id, reason_codes, properties)


def _decode_pingreq(flags: int, body: memoryview, level: int) -> PingreqPacket:
    """PINGREQ [MQTT-3.12]: empty."""
    _expect_end(0, body, "PINGREQ")
    return PingreqPacket()


def _decode_pingresp(flags: int, body: memoryview, level: int) -> PingrespPacket:
    """PINGRESP [MQTT-3.13]: empty."""
    _expect_end(0, body, "PINGRESP")
    return PingrespPacket()


def _reason_and_properties(ptype: PacketType, body: memoryview) -> tuple[ReasonCode, Properties]:
    """5.0 DISCONNECT/AUTH: both fields may be omitted, properties alone too [MQTT-3.14.2.1]."""
    if not body:
        return ReasonCode.SUCCESS, Properties()
    reason = _reason(ptype, body[0])
    if len(body) == 1:
        return reason, Properties()
    properties, offset = decode_properties(body, 1, ptype)
    _expect_end(offset, body, ptype.name)
    return reason, properties


def _decode_disconnect(flags: int, body: memoryview, level: int) -> DisconnectPacket:
    """DISCONNECT [MQTT-3.14]; empty in 3.x, empty means normal disconnection in 5.0."""
    if level != 5:
        _expect_end(0, body, "DISCONNECT")
        return DisconnectPacket()
    reason, properties = _reason_and_properties(PacketType.DISCONNECT, body)
    return DisconnectPacket(reason, properties)


def _decode_auth(flags: int, body: memoryview, level: int) -> AuthPacket:
    """AUTH [MQTT-3.15] (5.0 only); empty means SUCCESS."""
    reason, properties = _reason_and_properties(PacketType.AUTH, body)
    return AuthPacket(reason, properties)


_DECODERS: Final = (
    None,
    _decode_connect,
    _decode_connack,
    None,  # PUBLISH and PUBACK: `_decode_at` calls their decoders on the bytes
    None,
    _decode_pubrec,
    _decode_pubrel,
    _decode_pubcomp,
    _decode_subscribe,
    _decode_suback,
    _decode_unsubscribe,
    _decode_unsuback,
    _decode_pingreq,
    _decode_pingresp,
    _decode_disconnect,
    _decode_auth,
)


def _decode_at(
    data: bytes, start: int, protocol_level: int | None, max_packet_size: int
) -> tuple[Packet, int]:
    """Decode the packet that starts at `start`; return it and the offset after it.

    `data` is bytes, not a memoryview: the compiled module indexes and slices bytes
    natively, where each memoryview item or slice is a Python object operation."""
    n = len(data)
    if start >= n:
        raise Incomplete
    first = data[start]
    ptype = first >> 4
    if ptype == _PUBLISH:
        if first & 0x06 == 0x06:
            raise MalformedPacket("PUBLISH QoS 3 [MQTT-3.3.1-4]")
        if first & 0x0E == 0x08:
            raise MalformedPacket("PUBLISH QoS 0 with DUP set [MQTT-3.3.1-2]")
    elif first & 0x0F != _REQUIRED_FLAGS[ptype]:
        if not ptype:
            raise MalformedPacket("packet type 0 is reserved [MQTT-2.1.2]")
        raise MalformedPacket(f"reserved flags {first & 0x0F:04b} in {PacketType(ptype).name}")
    if protocol_level is None:
        if ptype != _CONNECT:
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, "first packet is not CONNECT")
        level = 0  # a CONNECT is decoded at the level it announces
    else:
        level = protocol_level
        if ptype == _AUTH and level != 5:
            raise MalformedPacket("AUTH exists only in MQTT 5.0")
    pos = start + 1
    if pos >= n:
        raise Incomplete
    length = data[pos]
    if length < 0x80:
        pos += 1
    elif pos + 1 < n and data[pos + 1] < 0x80:  # two bytes: a packet of up to 16 KiB
        length = (length & 0x7F) | data[pos + 1] << 7
        pos += 2
    else:
        length, pos = decode_varint(memoryview(data), pos)
    end = pos + length
    if end - start > max_packet_size:
        raise PacketTooLarge(f"packet of {end - start} bytes exceeds {max_packet_size}")
    if end > n:
        raise Incomplete
    try:
        # The two packets of every QoS 1 message are decoded from the bytes by a direct
        # (native) call; a call through the table is a Python call, with its arguments
        # parsed, and its decoder reads a memoryview of the body.
        packet: Packet
        if ptype == _PUBLISH:
            packet = _decode_publish(first & 0x0F, data, pos, end, level)
        elif ptype == _PUBACK:
            packet = _decode_puback(first & 0x0F, data, pos, end, level)
        else:
            decoder = _DECODERS[ptype]
            assert decoder is not None  # type 0 was refused above
            packet = decoder(first & 0x0F, memoryview(data)[pos:end], level)
    except Incomplete:
        raise MalformedPacket(
            f"{PacketType(ptype).name} fields overrun the remaining length"
        ) from None
    return packet, end


def decode_packet(
    view: bytes | memoryview, protocol_level: int | None, max_packet_size: int
) -> tuple[Packet, int]:
    """Decode the packet at the start of `view`; return it and the number of bytes it used.
    `bytes` are read as they are; a memoryview is copied into bytes first.

    `protocol_level` is the connection's level (3, 4, 5), or None before CONNECT, when only a
    CONNECT may be decoded (anything else: ProtocolError PROTOCOL_ERROR). A CONNECT is always
    decoded at its own level; a name/level pair other than MQIsdp/3, MQTT/4, MQTT/5 raises
    ProtocolError(UNSUPPORTED_PROTOCOL_VERSION) [MQTT-3.1.2-2].

    Raises Incomplete while the packet is not all in `view`, PacketTooLarge as soon as the
    fixed header shows more than `max_packet_size` bytes, MalformedPacket or ProtocolError
    for invalid packets (reserved flags [MQTT-2.1.3-1], packet id 0 [MQTT-2.2.1-3], ...).
    """
    data = view if type(view) is bytes else bytes(view)
    return _decode_at(data, 0, protocol_level, max_packet_size)


_COMPACT_AT: Final = 64 * 1024
"""Consumed bytes kept at the buffer's front before they are dropped in one move."""
_FIXED_HEADER_MAX: Final = 5
"""The first byte and a Remaining Length of at most 4 bytes [MQTT-2.1.4]."""


def _whole_packet(buffer: bytearray, start: int) -> bool:
    """True when the packet at `start` is all in `buffer`, by its Remaining Length. An
    incomplete or malformed one gives False: `_decode_at` says what is wrong, in its order
    of checks."""
    with memoryview(buffer) as view:
        try:
            length, end = decode_varint(view, start + 1)
        except (Incomplete, MalformedPacket):
            return False
    return end + length <= len(buffer)


class PacketReader:
    """Buffers a byte stream and hands out whole packets, one per `next_packet()` call.

    `protocol_level` starts as given (None on a server before CONNECT) and is set from the
    first CONNECT decoded. Consumed bytes are skipped by an offset and dropped when the buffer
    drains or the offset passes 64 KiB, so a stream of small packets costs no quadratic copying.
    An empty reader holds no buffer of its own (an idle connection costs no bytearray), and
    bytes fed to an empty reader are kept as they are, without a copy, until more arrive
    while some are still unread.
    """

    __slots__ = ("_buffer", "_offset", "max_packet_size", "protocol_level")

    def __init__(self, max_packet_size: int, protocol_level: int | None = None) -> None:
        self.max_packet_size = max_packet_size
        self.protocol_level = protocol_level
        self._buffer: bytes | bytearray = b""
        self._offset = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes received from the peer."""
        buffer = self._buffer
        if not buffer:  # nothing unread (the offset is 0): keep the bytes themselves
            self._buffer = data if type(data) is bytes else bytes(data)
            return
        if type(buffer) is bytes:
            # Unread bytes are left of a read kept as is: continue in a buffer of our own.
            grown = bytearray(memoryview(buffer)[self._offset :])
            grown += data
            self._buffer = grown
            self._offset = 0
            return
        try:
            buffer += data
        except BufferError:
            # A view from an earlier failed decode is still alive (held by a traceback):
            # the buffer cannot resize, so continue in a fresh copy.
            self._buffer = buffer + data

    def next_packet(self) -> Packet | None:
        """The next whole packet, or None until more bytes are fed; raises ProtocolError."""
        buffer = self._buffer
        start = self._offset
        if start >= len(buffer):
            return None
        if isinstance(buffer, bytearray):
            # A packet arrived over several reads. Once it is whole, it and what follows
            # it are copied into bytes once, which the decoders read.
            if not _whole_packet(buffer, start):
                # Not yet: what its fixed header shows is still checked at once (reserved
                # flags, a packet too large, a malformed length).
                head = bytes(memoryview(buffer)[start : start + _FIXED_HEADER_MAX])
                try:
                    _decode_at(head, 0, self.protocol_level, self.max_packet_size)
                except Incomplete:
                    return None
            self._buffer = buffer = bytes(memoryview(buffer)[start:])
            self._offset = start = 0
        try:
            packet, end = _decode_at(buffer, start, self.protocol_level, self.max_packet_size)
        except Incomplete:
            return None
        if end == len(buffer):
            self._offset = 0
            self._buffer = b""
        elif end >= _COMPACT_AT:
            self._offset = 0
            self._compact(end)
        else:
            self._offset = end
        if self.protocol_level is None and type(packet) is ConnectPacket:
            self.protocol_level = packet.protocol_level
        return packet

    def _compact(self, end: int) -> None:
        buffer = self._buffer
        if not isinstance(buffer, bytearray):
            self._buffer = buffer[end:]
            return
        try:
            del buffer[:end]
        except BufferError:
            self._buffer = buffer[end:]

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as packets."""
        return len(self._buffer) - self._offset
