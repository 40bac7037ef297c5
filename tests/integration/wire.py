"""MQTT bytes written by hand from the 3.1.1 / 5.0 specifications: constants, an encoder and
a decoder. It does not import mqttq: an acceptance test must not judge the broker with the
broker's own codec."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from tests.integration.waiting import MOSQUITTO_MODE

# --- wire constants, from the specification ([MQTT-2.1.2], [MQTT-2.2.2.2], [MQTT-2.4]) ---


class PacketType(IntEnum):
    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15


CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP, SUBSCRIBE = list(PacketType)[:8]
SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT, AUTH = list(PacketType)[8:]


class Prop:
    """MQTT 5.0 property identifiers."""

    PAYLOAD_FORMAT_INDICATOR = 0x01
    MESSAGE_EXPIRY_INTERVAL = 0x02
    CONTENT_TYPE = 0x03
    RESPONSE_TOPIC = 0x08
    CORRELATION_DATA = 0x09
    SUBSCRIPTION_IDENTIFIER = 0x0B
    SESSION_EXPIRY_INTERVAL = 0x11
    ASSIGNED_CLIENT_IDENTIFIER = 0x12
    SERVER_KEEP_ALIVE = 0x13
    AUTHENTICATION_METHOD = 0x15
    AUTHENTICATION_DATA = 0x16
    WILL_DELAY_INTERVAL = 0x18
    REASON_STRING = 0x1F
    RECEIVE_MAXIMUM = 0x21
    TOPIC_ALIAS_MAXIMUM = 0x22
    TOPIC_ALIAS = 0x23
    MAXIMUM_QOS = 0x24
    RETAIN_AVAILABLE = 0x25
    USER_PROPERTY = 0x26
    MAXIMUM_PACKET_SIZE = 0x27
    WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
    SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
    SHARED_SUBSCRIPTION_AVAILABLE = 0x2A


class RC:
    """MQTT 5.0 reason codes used by the tests."""

    SUCCESS = 0x00
    DISCONNECT_WITH_WILL = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    REAUTHENTICATE = 0x19
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    CONNECTION_RATE_EXCEEDED = 0x9F
    CLIENT_IDENTIFIER_NOT_VALID = 0x85


_BYTE, _U16, _U32, _VARINT, _STR, _BIN, _PAIR = range(7)
_PROP_KIND = {
    **dict.fromkeys((0x01, 0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A), _BYTE),
    **dict.fromkeys((0x13, 0x21, 0x22, 0x23), _U16),
    **dict.fromkeys((0x02, 0x11, 0x18, 0x27), _U32),
    0x0B: _VARINT,
    **dict.fromkeys((0x03, 0x08, 0x12, 0x15, 0x1A, 0x1C, 0x1F), _STR),
    **dict.fromkeys((0x09, 0x16), _BIN),
    0x26: _PAIR,
}

PropList = Sequence[tuple[int, Any]]
"""Properties to encode, in wire order: (identifier, value); a pair value for user properties."""


# --- encoding ---


def varint(value: int) -> bytes:
    """Variable Byte Integer [MQTT-1.5.5]."""
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def utf8(text: str | bytes) -> bytes:
    """Length-prefixed string; bytes are sent as given (for deliberately bad UTF-8)."""
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("!H", len(raw)) + raw


def encode_props(props: PropList) -> bytes:
    """A property block: length then properties [MQTT-2.2.2]."""
    body = bytearray()
    for pid, value in props:
        body += varint(pid)
        kind = _PROP_KIND[pid]
        if kind == _BYTE:
            body.append(value)
        elif kind == _U16:
            body += struct.pack("!H", value)
        elif kind == _U32:
            body += struct.pack("!I", value)
        elif kind == _VARINT:
            body += varint(value)
        elif kind in (_STR, _BIN):
            body += utf8(value)
        else:
            body += utf8(value[0]) + utf8(value[1])
    return varint(len(body)) + bytes(body)


def packet(ptype: int, flags: int, body: bytes) -> bytes:
    """Fixed header + body [MQTT-2.1]."""
    return bytes([ptype << 4 | flags]) + varint(len(body)) + body


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    props: PropList = ()


def connect_packet(
    client_id: str | bytes = "",
    *,
    level: int = 5,
    clean: bool = True,
    keepalive: int = 60,
    props: PropList = (),
    will: Will | None = None,
    protocol_name: str | None = None,
    reserved_flag: bool = False,
    username: str | None = None,
    password: bytes | None = None,
) -> bytes:
    """CONNECT [MQTT-3.1]; level 3 uses protocol name "MQIsdp", 4 and 5 "MQTT"."""
    name = protocol_name if protocol_name is not None else ("MQIsdp" if level == 3 else "MQTT")
    flags = (0x02 if clean else 0) | (0x01 if reserved_flag else 0)
    if username is not None:
        flags |= 0x80
    if password is not None:
        flags |= 0x40
    if will is not None:
        flags |= 0x04 | will.qos << 3 | (0x20 if will.retain else 0)
    body = utf8(name) + bytes([level, flags]) + struct.pack("!H", keepalive)
    if level == 5:
        body += encode_props(props)
    body += utf8(client_id)
    if will is not None:
        if level == 5:
            body += encode_props(will.props)
        body += utf8(will.topic) + utf8(will.payload)
    if username is not None:
        body += utf8(username)
    if password is not None:
        body += utf8(password)
    return packet(CONNECT, 0, body)


def publish_packet(
    topic: str | bytes,
    payload: bytes = b"",
    *,
    v5: bool,
    qos: int = 0,
    retain: bool = False,
    dup: bool = False,
    packet_id: int = 0,
    props: PropList = (),
) -> bytes:
    """PUBLISH [MQTT-3.3]; the packet id is written only for QoS > 0 (0 is sent if asked)."""
    flags = (0x08 if dup else 0) | qos << 1 | (0x01 if retain else 0)
    body = utf8(topic)
    if qos:
        body += struct.pack("!H", packet_id)
    if v5:
        body += encode_props(props)
    return packet(PUBLISH, flags, body + payload)


def ack_packet(ptype: int, packet_id: int, *, v5: bool, reason: int = 0) -> bytes:
    """PUBACK / PUBREC / PUBREL / PUBCOMP [MQTT-3.4 .. 3.7] (PUBREL has flags 0b0010)."""
    body = struct.pack("!H", packet_id)
    if v5 and reason:
        body += bytes([reason])
    return packet(ptype, 0x02 if ptype == PUBREL else 0, body)


def sub_options(
    qos: int,
    *,
    no_local: bool = False,
    retain_as_published: bool = False,
    retain_handling: int = 0,
) -> int:
    """Subscription options byte [MQTT-3.8.3.1]."""
    return (
        qos
        | (0x04 if no_local else 0)
        | (0x08 if retain_as_published else 0)
        | (retain_handling << 4)
    )


def subscribe_packet(
    packet_id: int,
    filters: Sequence[tuple[str | bytes, int]],
    *,
    v5: bool,
    props: PropList = (),
    flags: int = 0x02,
) -> bytes:
    """SUBSCRIBE [MQTT-3.8]: (filter, options byte) pairs."""
    body = struct.pack("!H", packet_id) + (encode_props(props) if v5 else b"")
    for topic_filter, options in filters:
        body += utf8(topic_filter) + bytes([options])
    return packet(SUBSCRIBE, flags, body)


def unsubscribe_packet(packet_id: int, filters: Sequence[str], *, v5: bool) -> bytes:
    """UNSUBSCRIBE [MQTT-3.10]."""
    body = struct.pack("!H", packet_id) + (encode_props(()) if v5 else b"")
    return packet(UNSUBSCRIBE, 0x02, body + b"".join(utf8(f) for f in filters))


PINGREQ_PACKET = b"\xc0\x00"


def disconnect_packet(*, v5: bool, reason: int = 0, props: PropList = ()) -> bytes:
    """DISCONNECT [MQTT-3.14]; the short form when there is nothing to say."""
    if not v5 or (reason == 0 and not props):
        return b"\xe0\x00"
    return packet(DISCONNECT, 0, bytes([reason]) + encode_props(props))


# --- decoding ---


class ConnectionClosed(Exception):
    """The server closed the network connection (EOF or reset)."""


class Props:
    """Decoded properties, in wire order."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[int, Any]] | None = None) -> None:
        self.items = items if items is not None else []

    def get(self, pid: int, default: Any = None) -> Any:
        return next((value for key, value in self.items if key == pid), default)

    def all(self, pid: int) -> list[Any]:
        return [value for key, value in self.items if key == pid]

    def __contains__(self, pid: object) -> bool:
        return any(key == pid for key, _ in self.items)

    def __repr__(self) -> str:
        return f"Props({self.items!r})"


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _read_str(data: bytes, pos: int) -> tuple[bytes, int]:
    (length,) = struct.unpack_from("!H", data, pos)
    return data[pos + 2 : pos + 2 + length], pos + 2 + length


def decode_props(data: bytes, pos: int) -> tuple[Props, int]:
    length, pos = _read_varint(data, pos)
    end = pos + length
    items: list[tuple[int, Any]] = []
    while pos < end:
        pid, pos = _read_varint(data, pos)
        kind = _PROP_KIND[pid]
        value: Any
        if kind == _BYTE:
            value, pos = data[pos], pos + 1
        elif kind == _U16:
            (value,), pos = struct.unpack_from("!H", data, pos), pos + 2
        elif kind == _U32:
            (value,), pos = struct.unpack_from("!I", data, pos), pos + 4
        elif kind == _VARINT:
            value, pos = _read_varint(data, pos)
        elif kind == _STR:
            raw, pos = _read_str(data, pos)
            value = raw.decode()
        elif kind == _BIN:
            value, pos = _read_str(data, pos)
        else:
            key, pos = _read_str(data, pos)
            val, pos = _read_str(data, pos)
            value = (key.decode(), val.decode())
        items.append((pid, value))
    return Props(items), end


@dataclass(slots=True)
class Packet:
    """A decoded server-to-client packet; fields not carried by its type keep defaults."""

    type: int
    flags: int
    body: bytes
    packet_id: int | None = None
    reason_code: int | None = None
    """v5 reason code, or the v3 CONNACK return code."""
    reason_codes: tuple[int, ...] = ()
    props: Props = field(default_factory=Props)
    session_present: bool = False
    topic: str = ""
    payload: bytes = b""
    qos: int = 0
    dup: bool = False
    retain: bool = False

    def __repr__(self) -> str:
        name = PacketType(self.type).name if 1 <= self.type <= 15 else str(self.type)
        if self.type == PUBLISH:
            return (
                f"PUBLISH(topic={self.topic!r}, payload={self.payload[:40]!r}, qos={self.qos}, "
                f"dup={self.dup}, retain={self.retain}, id={self.packet_id}, {self.props})"
            )
        return f"{name}(flags={self.flags}, body={self.body.hex()}, rc={self.reason_code})"


def parse_packet(header: int, body: bytes, *, v5: bool) -> Packet:
    """Decode one packet the server sent."""
    ptype, flags = header >> 4, header & 0x0F
    pkt = Packet(ptype, flags, body)
    if ptype == CONNACK:
        pkt.session_present = bool(body[0] & 0x01)
        pkt.reason_code = body[1]
        if v5 and len(body) > 2:
            pkt.props, _ = decode_props(body, 2)
    elif ptype == PUBLISH:
        pkt.dup, pkt.qos, pkt.retain = bool(flags & 0x08), (flags >> 1) & 0x03, bool(flags & 1)
        raw_topic, pos = _read_str(body, 0)
        pkt.topic = raw_topic.decode()
        if pkt.qos:
            (pkt.packet_id,) = struct.unpack_from("!H", body, pos)
            pos += 2
        if v5:
            pkt.props, pos = decode_props(body, pos)
        pkt.payload = body[pos:]
    elif ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP):
        (pkt.packet_id,) = struct.unpack_from("!H", body, 0)
        pkt.reason_code = body[2] if len(body) > 2 else 0
        if len(body) > 3:
            pkt.props, _ = decode_props(body, 3)
    elif ptype in (SUBACK, UNSUBACK):
        (pkt.packet_id,) = struct.unpack_from("!H", body, 0)
        pos = 2
        if v5:
            pkt.props, pos = decode_props(body, pos)
        pkt.reason_codes = tuple(body[pos:])
    elif ptype in (DISCONNECT, AUTH):
        pkt.reason_code = body[0] if body else 0
        if len(body) > 1:
            pkt.props, _ = decode_props(body, 1)
    return pkt


def assert_disconnected_with(packets: list[Packet], reason: int | set[int]) -> None:
    """The server sent exactly one DISCONNECT with `reason` (or one of a set) before closing.

    MQTT 5.0 section 4.13 makes that DISCONNECT a SHOULD. mosquitto 2.0.11 often closes without
    it, so the reference mode also accepts a bare close; mqttq must send it.
    """
    reasons = reason if isinstance(reason, set) else {reason}
    if MOSQUITTO_MODE and packets == []:
        return
    assert len(packets) == 1, packets
    assert (packets[0].type, packets[0].reason_code in reasons) == (DISCONNECT, True), packets
