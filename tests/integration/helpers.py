"""End-to-end test helpers: a raw-socket MQTT client made of hand-built bytes, a paho wrapper
and deadline-based waiting.

The raw encoder/decoder here is written from the MQTT 3.1.1 / 5.0 specifications and does not
import mqttq: an acceptance test must not judge the broker with the broker's own codec.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties as PahoProperties
from paho.mqtt.reasoncodes import ReasonCode as PahoReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

HOST = "127.0.0.1"
DEADLINE = 10.0
"""Generous deadline for anything that should happen 'soon'; never a performance bound."""
MOSQUITTO_MODE = os.environ.get("MQTTQ_TEST_BROKER", "") == "mosquitto"
"""Reference mode: the same tests run against Debian's mosquitto 2.0 to validate them."""

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    *,
    timeout: float = DEADLINE,
    interval: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll `predicate` until it returns a truthy value (returned) or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class BrokerUnderTest(Protocol):
    """What a test sees of the broker process (implemented by tests/conftest.py)."""

    host: str
    port: int
    data_dir: Path

    def start(self) -> None: ...
    def restart(self) -> None: ...
    def kill9(self) -> None: ...
    def terminate(self) -> int: ...
    def stderr_text(self) -> str: ...


BrokerFactory = Callable[..., BrokerUnderTest]
"""The `broker_factory` fixture: `broker_factory(config="[mqtt]\\n...")` starts a broker."""


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
    QUOTA_EXCEEDED = 0x97


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
) -> bytes:
    """CONNECT [MQTT-3.1]; level 3 uses protocol name "MQIsdp", 4 and 5 "MQTT"."""
    name = protocol_name if protocol_name is not None else ("MQIsdp" if level == 3 else "MQTT")
    flags = (0x02 if clean else 0) | (0x01 if reserved_flag else 0)
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


class RawClient:
    """A blocking MQTT client over a plain socket that sends exactly the bytes it is told to.

    Reads are bounded by deadlines. Packets skipped by `wait_packet` are kept and returned by
    later reads in arrival order.
    """

    def __init__(self, port: int, host: str = HOST, *, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(DEADLINE)
        try:
            self.sock.connect((host, port))
        except OSError:
            self.sock.close()
            raise
        self.v5 = True
        self._buf = bytearray()
        self._stash: deque[Packet] = deque()
        self._next_id = 0
        self._closed_by_peer = False

    # --- bytes ---

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_quietly(self, data: bytes) -> bool:
        """Send, tolerating a server that already closed (hostile tests); True if all sent."""
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Close the socket without DISCONNECT (an abnormal disconnect for the server)."""
        self.sock.close()

    def _fill(self, deadline: float) -> bool:
        if self._closed_by_peer:
            raise ConnectionClosed
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, BrokenPipeError) as exc:
            self._closed_by_peer = True
            raise ConnectionClosed from exc
        if not chunk:
            self._closed_by_peer = True
            raise ConnectionClosed
        self._buf += chunk
        return True

    def _read_packet(self, deadline: float) -> Packet | None:
        while True:
            if len(self._buf) >= 2:
                length, shift, pos = 0, 0, 1
                complete = False
                while pos < len(self._buf) and pos <= 4:
                    byte = self._buf[pos]
                    length |= (byte & 0x7F) << shift
                    shift += 7
                    pos += 1
                    if not byte & 0x80:
                        complete = True
                        break
                if complete and len(self._buf) >= pos + length:
                    header, body = self._buf[0], bytes(self._buf[pos : pos + length])
                    del self._buf[: pos + length]
                    return parse_packet(header, body, v5=self.v5)
            if not self._fill(deadline):
                return None

    # --- packets ---

    def try_recv(self, timeout: float) -> Packet | None:
        """The next packet, or None if none arrives within `timeout`."""
        if self._stash:
            return self._stash.popleft()
        return self._read_packet(time.monotonic() + timeout)

    def recv(self, timeout: float = DEADLINE) -> Packet:
        """The next packet; fails the test if none arrives in time."""
        pkt = self.try_recv(timeout)
        if pkt is None:
            raise AssertionError(f"no packet from the server within {timeout:.0f} s")
        return pkt

    def wait_packet(
        self, ptype: int, *, packet_id: int | None = None, timeout: float = DEADLINE
    ) -> Packet:
        """The first packet of `ptype` (and `packet_id`); others are kept for later reads."""
        for kept in list(self._stash):
            if kept.type == ptype and (packet_id is None or kept.packet_id == packet_id):
                self._stash.remove(kept)
                return kept
        deadline = time.monotonic() + timeout
        skipped: list[Packet] = []
        try:
            while True:
                pkt = self._read_packet(deadline)
                if pkt is None:
                    raise AssertionError(
                        f"no {PacketType(ptype).name} (id {packet_id}) within {timeout:.0f} s; "
                        f"got {skipped}"
                    )
                if pkt.type == ptype and (packet_id is None or pkt.packet_id == packet_id):
                    return pkt
                skipped.append(pkt)
        finally:
            self._stash.extend(skipped)

    def expect_silence(self, duration: float = 0.5) -> None:
        """Assert that the server sends nothing (and stays connected) for `duration` seconds."""
        assert not self._stash, f"unexpected packets: {list(self._stash)}"
        pkt = self._read_packet(time.monotonic() + duration)
        assert pkt is None, f"unexpected packet: {pkt}"

    def wait_closed(self, timeout: float = DEADLINE) -> list[Packet]:
        """Wait until the server closes the connection; return the packets sent before that."""
        packets = list(self._stash)
        self._stash.clear()
        deadline = time.monotonic() + timeout
        try:
            while True:
                pkt = self._read_packet(deadline)
                if pkt is None:
                    raise AssertionError(
                        f"server did not close the connection within {timeout:.0f} s "
                        f"(received {packets})"
                    )
                packets.append(pkt)
        except ConnectionClosed:
            return packets

    def next_packet_id(self) -> int:
        self._next_id = self._next_id % 65535 + 1
        return self._next_id

    def connect(
        self,
        client_id: str | bytes = "",
        *,
        level: int = 5,
        clean: bool = True,
        keepalive: int = 60,
        props: PropList = (),
        will: Will | None = None,
        expect_success: bool = True,
    ) -> Packet:
        """Send CONNECT and return the CONNACK (asserting success unless told otherwise)."""
        self.v5 = level == 5
        self.send(
            connect_packet(
                client_id, level=level, clean=clean, keepalive=keepalive, props=props, will=will
            )
        )
        connack = self.recv()
        assert connack.type == CONNACK, f"expected CONNACK, got {connack}"
        if expect_success:
            assert connack.reason_code == 0, f"connection refused: {connack} {connack.props}"
        return connack

    def subscribe(
        self, *filters: tuple[str | bytes, int], props: PropList = (), packet_id: int = 0
    ) -> Packet:
        """SUBSCRIBE (filter, options) pairs and return the SUBACK."""
        packet_id = packet_id or self.next_packet_id()
        self.send(subscribe_packet(packet_id, filters, v5=self.v5, props=props))
        return self.wait_packet(SUBACK, packet_id=packet_id)

    def unsubscribe(self, *filters: str) -> Packet:
        packet_id = self.next_packet_id()
        self.send(unsubscribe_packet(packet_id, filters, v5=self.v5))
        return self.wait_packet(UNSUBACK, packet_id=packet_id)

    def publish(
        self,
        topic: str | bytes,
        payload: bytes = b"",
        *,
        qos: int = 0,
        retain: bool = False,
        props: PropList = (),
    ) -> Packet | None:
        """Publish and complete the QoS flow; return the PUBACK, the failing PUBREC or PUBCOMP."""
        packet_id = self.next_packet_id() if qos else 0
        self.send(
            publish_packet(
                topic, payload, v5=self.v5, qos=qos, retain=retain, packet_id=packet_id, props=props
            )
        )
        if qos == 0:
            return None
        if qos == 1:
            return self.wait_packet(PUBACK, packet_id=packet_id)
        pubrec = self.wait_packet(PUBREC, packet_id=packet_id)
        if pubrec.reason_code is not None and pubrec.reason_code >= 0x80:
            return pubrec
        self.send(ack_packet(PUBREL, packet_id, v5=self.v5))
        return self.wait_packet(PUBCOMP, packet_id=packet_id)

    def ack(self, pkt: Packet) -> None:
        """Acknowledge a received PUBLISH (PUBACK or PUBREC; nothing for QoS 0) or PUBREL
        (PUBCOMP)."""
        if pkt.packet_id is None:
            return
        if pkt.type == PUBREL:
            self.send(ack_packet(PUBCOMP, pkt.packet_id, v5=self.v5))
        elif pkt.qos == 1:
            self.send(ack_packet(PUBACK, pkt.packet_id, v5=self.v5))
        elif pkt.qos == 2:
            self.send(ack_packet(PUBREC, pkt.packet_id, v5=self.v5))

    def receive_messages(
        self, count: int, *, ack: bool = True, timeout: float = DEADLINE
    ) -> list[Packet]:
        """Receive `count` PUBLISH packets, completing their QoS flows when `ack` is true."""
        deadline = time.monotonic() + timeout
        messages: list[Packet] = []
        awaiting_pubrel: set[int] = set()
        while len(messages) < count or awaiting_pubrel:
            pkt = self.try_recv(max(deadline - time.monotonic(), 0))
            if pkt is None:
                raise AssertionError(
                    f"received {len(messages)} of {count} messages within {timeout:.0f} s: "
                    f"{messages}"
                )
            if pkt.type == PUBLISH:
                messages.append(pkt)
                if ack:
                    self.ack(pkt)
                    if pkt.qos == 2:
                        awaiting_pubrel.add(pkt.packet_id or 0)
            elif pkt.type == PUBREL and ack:
                self.ack(pkt)
                awaiting_pubrel.discard(pkt.packet_id or 0)
            else:
                raise AssertionError(f"unexpected packet while receiving messages: {pkt}")
        return messages

    def ping(self) -> None:
        """PINGREQ and wait for PINGRESP: proves the connection is alive and processed."""
        self.send(PINGREQ_PACKET)
        self.wait_packet(PINGRESP)

    def disconnect(self, reason: int = 0, props: PropList = ()) -> None:
        """A normal DISCONNECT (or with `reason`), then close."""
        self.send_quietly(disconnect_packet(v5=self.v5, reason=reason, props=props))
        self.sock.close()


# --- paho ---

_PAHO_PROTOCOL = {3: paho.MQTTv31, 4: paho.MQTTv311, 5: paho.MQTTv5}


def _code(reason: PahoReasonCode | int) -> int:
    return reason if isinstance(reason, int) else reason.value


def paho_props(packet_type: int, **values: Any) -> PahoProperties:
    """paho Properties for a packet type, e.g. paho_props(PacketTypes.PUBLISH, ContentType=..)."""
    props = PahoProperties(packet_type)
    for name, value in values.items():
        setattr(props, name, value)
    return props


class PahoClient:
    """paho-mqtt 2.x (callback API v2, clean session) driven synchronously: each call waits
    for its acknowledgement. Automatic reconnection is off so that a broken connection stays
    visible to the test."""

    def __init__(self, port: int, client_id: str = "", *, protocol: int = 5, host: str = HOST):
        self.host, self.port, self.protocol = host, port, protocol
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=_PAHO_PROTOCOL[protocol],
            clean_session=None if protocol == 5 else True,
            reconnect_on_failure=False,
        )
        self._lock = threading.Lock()
        self._connack: int | None = None
        self._subacks: dict[int, list[int]] = {}
        self._pubacks: dict[int, int] = {}
        self.messages: list[paho.MQTTMessage] = []
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_publish = self._on_publish
        self.client.on_message = self._on_message
        self._started = False

    def _on_connect(self, _c: Any, _u: Any, _flags: Any, reason: Any, _p: Any) -> None:
        self._connack = _code(reason)

    def _on_subscribe(self, _c: Any, _u: Any, mid: int, codes: Any, _p: Any) -> None:
        with self._lock:
            self._subacks[mid] = [_code(code) for code in codes]

    def _on_publish(self, _c: Any, _u: Any, mid: int, reason: Any, _p: Any) -> None:
        with self._lock:
            self._pubacks[mid] = _code(reason)

    def _on_message(self, _c: Any, _u: Any, message: paho.MQTTMessage) -> None:
        with self._lock:
            self.messages.append(message)

    def connect(self) -> None:
        """Connect (clean) and wait for a successful CONNACK."""
        if self.protocol == 5:
            self.client.connect(self.host, self.port, 60, clean_start=True)
        else:
            self.client.connect(self.host, self.port, 60)
        self.client.loop_start()
        self._started = True
        wait_for(lambda: self._connack is not None, what="CONNACK")
        assert self._connack == 0, f"connection refused: {self._connack}"

    def subscribe(
        self,
        topic: str,
        qos: int = 1,
        *,
        no_local: bool = False,
        retain_as_published: bool = False,
    ) -> list[int]:
        """Subscribe and return the SUBACK reason codes."""
        if self.protocol == 5:
            options = SubscribeOptions(
                qos=qos, noLocal=no_local, retainAsPublished=retain_as_published
            )
            result, mid = self.client.subscribe(topic, options=options)
        else:
            result, mid = self.client.subscribe(topic, qos)
        assert result == paho.MQTT_ERR_SUCCESS, result
        wait_for(lambda: mid in self._subacks, what=f"SUBACK for {topic}")
        return self._subacks[mid]

    def publish(
        self,
        topic: str,
        payload: bytes = b"",
        qos: int = 0,
        *,
        retain: bool = False,
        props: PahoProperties | None = None,
    ) -> int:
        """Publish; for QoS > 0 wait for the PUBACK / PUBCOMP and return its reason code."""
        info = self.client.publish(topic, payload, qos, retain, props)
        assert info.rc == paho.MQTT_ERR_SUCCESS, info.rc
        if qos == 0:
            return 0
        wait_for(lambda: info.mid in self._pubacks, what=f"ack of publish to {topic}")
        return self._pubacks[info.mid]

    def wait_messages(self, count: int, *, timeout: float = DEADLINE) -> list[paho.MQTTMessage]:
        """Wait until at least `count` messages arrived; return all received so far."""
        wait_for(
            lambda: len(self.messages) >= count,
            timeout=timeout,
            what=f"{count} messages (have {len(self.messages)}: {self.payloads()})",
        )
        with self._lock:
            return list(self.messages)

    def payloads(self) -> list[bytes]:
        with self._lock:
            return [message.payload for message in self.messages]

    def close(self) -> None:
        """DISCONNECT if still connected (which also wakes the network thread at once), stop
        the network thread, close the socket."""
        if self.client.is_connected():
            self.client.disconnect()
        if self._started:
            self.client.loop_stop()
            self._started = False
        sock = self.client.socket()
        if sock is not None:
            sock.close()


class Clients:
    """Creates test clients and closes every one at teardown (before the broker stops)."""

    def __init__(self) -> None:
        self._raw: list[RawClient] = []
        self._paho: list[PahoClient] = []

    def raw(self, broker: BrokerUnderTest, *, rcvbuf: int | None = None) -> RawClient:
        client = RawClient(broker.port, broker.host, rcvbuf=rcvbuf)
        self._raw.append(client)
        return client

    def connected(self, broker: BrokerUnderTest, client_id: str = "", **connect: Any) -> RawClient:
        """A raw client that has connected (CONNECT accepted); see RawClient.connect."""
        client = self.raw(broker)
        client.connect(client_id, **connect)
        return client

    def paho(self, broker: BrokerUnderTest, client_id: str = "", **options: Any) -> PahoClient:
        """A connected paho client; see PahoClient for options (protocol=3|4|5, clean, ...)."""
        client = PahoClient(broker.port, client_id, host=broker.host, **options)
        self._paho.append(client)
        client.connect()
        return client

    def close_all(self) -> None:
        for paho_client in self._paho:
            paho_client.close()
        for raw_client in self._raw:
            raw_client.close()


class Bystander:
    """A well-behaved client connected before an attack; `check()` proves it still publishes
    and receives (a QoS 1 round trip through the broker)."""

    def __init__(self, clients: Clients, broker: BrokerUnderTest) -> None:
        self.client = clients.paho(broker, "bystander")
        assert self.client.subscribe("bystander/echo", 1) == [1]
        self._sent = 0
        self.check()

    def check(self) -> None:
        self._sent += 1
        payload = b"echo-%d" % self._sent
        assert self.client.publish("bystander/echo", payload, 1) == 0
        self.client.wait_messages(self._sent)
        assert self.client.payloads()[-1] == payload
        assert self.client.client.is_connected()


MakeBystander = Callable[[BrokerUnderTest], Bystander]
"""The `bystander` fixture: `bystander(broker)` connects a Bystander to that broker."""
