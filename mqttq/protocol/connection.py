"""MqttConnection: one client connection as seen by the broker, with no I/O.

Bytes go in with `receive_data(data, now)`; validated packets come out of `next_packet()`
one at a time (it raises ProtocolError carrying the reason code to send); packets the
broker sends go through `send` / `send_publish` into one buffer taken with
`data_to_send()`. Time is passed in: `get_timer()` names the next deadline (connect
timeout, then keep alive) and `handle_timer(now)` checks it.

What this layer enforces on its own: the state table (protocol/state.py), the broker's
Maximum Packet Size (codec), Receive Maximum, Maximum QoS and Retain Available, topic
aliases in both directions, QoS 2 duplicates [MQTT-4.3.3-10], PUBREL -> PUBCOMP,
PINGREQ -> PINGRESP, keep alive [MQTT-3.1.2-24] and the client's Maximum Packet Size on
the way out. Everything about sessions and routing is the broker's.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from mqttq.codec.enums import PacketType, ProtocolLevel
from mqttq.codec.packets import (
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PingreqPacket,
    PingrespPacket,
    PubackPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
)
from mqttq.codec.properties import Properties
from mqttq.codec.reader import PacketReader
from mqttq.codec.writer import encode_packet, encode_publish, encode_short_ack
from mqttq.errors import ProtocolError
from mqttq.protocol.aliases import InboundAliases, OutboundAliases
from mqttq.protocol.inflight import InboundWindow
from mqttq.protocol.state import STAYS_CONNECTED, ConnState, next_state
from mqttq.reasons import ReasonCode

__all__ = ["ConnectionLimits", "MqttConnection"]

DEFAULT_RECEIVE_MAXIMUM = 65535
"""A client's Receive Maximum when it sends none (5.0) or cannot (3.x) [MQTT-3.1.2.11.3]."""

_CLOSED: Final = ConnState.CLOSED
_CONNECTED: Final = ConnState.CONNECTED

_NO_OUTBOUND_ALIASES = OutboundAliases(0)
"""Shared by every client that takes no topic aliases: with maximum 0 nothing is bound."""

_CONNECT_HEAD: Final = 16
"""CONNECT bytes kept to find the protocol level when the CONNECT does not decode."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What the broker enforces on every connection and announces in CONNACK."""

    max_packet_size: int = 1_048_576
    receive_maximum: int = 1024
    topic_alias_maximum: int = 64
    maximum_qos: int = 2
    retain_available: bool = True
    connect_timeout: float = 10.0


class MqttConnection:
    """The sans-I/O broker side of one network connection (see the module docstring)."""

    __slots__ = (
        "_connack_sent",
        "_deadline_base",
        "_finished",
        "_head",
        "_in_aliases",
        "_inbound",
        "_out",
        "_out_aliases",
        "_reader",
        "_started",
        "client_max_packet_size",
        "client_receive_maximum",
        "keep_alive",
        "limits",
        "request_problem_information",
        "state",
    )

    def __init__(self, limits: ConnectionLimits, now: float) -> None:
        self.limits = limits
        self.state = ConnState.AWAIT_CONNECT
        self.keep_alive = 0
        """Seconds in force (the client's, or the Server Keep Alive we sent); 0 = none."""
        self.client_receive_maximum = DEFAULT_RECEIVE_MAXIMUM
        self.client_max_packet_size: int | None = None
        self.request_problem_information = True
        self._inbound: InboundWindow | None = None
        self._reader = PacketReader(limits.max_packet_size)
        self._in_aliases: InboundAliases | None = None
        """Created by the first PUBLISH that uses a topic alias or an empty topic."""
        self._out_aliases = _NO_OUTBOUND_ALIASES
        self._out: bytes | bytearray = b""
        """What is encoded and not yet taken: b"" when nothing is (an idle connection holds
        no buffer), the encoder's own bytes for a single packet, a bytearray for more."""
        self._head = b""
        self._connack_sent = False
        self._finished = False
        """True once the broker's last packet (error CONNACK / DISCONNECT) is queued."""
        self._started = now
        self._deadline_base = now
        """Time of the last bytes received (or of the connection's start)."""

    # ------------------------------------------------------------------ inbound

    @property
    def inbound(self) -> InboundWindow:
        """The client's QoS 1/2 PUBLISHes not yet acknowledged (Receive Maximum) and the
        QoS 2 ids awaiting PUBREL; made on first use, so an idle connection holds none."""
        inbound = self._inbound
        if inbound is None:
            inbound = self._inbound = InboundWindow(self.limits.receive_maximum)
        return inbound

    @property
    def protocol_level(self) -> int:
        """The CONNECT's protocol level (4 until a CONNECT was decoded)."""
        return self._reader.protocol_level or ProtocolLevel.MQTT_3_1_1

    @property
    def is_v5(self) -> bool:
        return self._reader.protocol_level == ProtocolLevel.MQTT_5

    def receive_data(self, data: bytes, now: float) -> None:
        """Buffer bytes from the network; `now` restarts the keep-alive clock."""
        if self.state is ConnState.CLOSED:
            return
        if self.state is ConnState.AWAIT_CONNECT and len(self._head) < _CONNECT_HEAD:
            self._head += data[: _CONNECT_HEAD - len(self._head)]
        self._deadline_base = now
        self._reader.feed(data)

    def next_packet(self) -> Packet | None:
        """The next complete, valid packet, or None until more bytes arrive.

        Raises ProtocolError (the connection is then unusable: call `fail`). PINGREQ and
        PUBREL are answered here and still returned; a duplicate QoS 2 PUBLISH is answered
        here and not returned [MQTT-4.3.3-10].
        """
        reader = self._reader
        while self.state is not _CLOSED:
            packet = reader.next_packet()
            if packet is None:
                return None
            kind = type(packet)
            # PUBLISH and PUBACK keep a connection CONNECTED (STAYS_CONNECTED): checked by
            # class first, without reading `packet_type` from one of fifteen packet classes.
            if self.state is not _CONNECTED or (
                kind is not PublishPacket
                and kind is not PubackPacket
                and packet.packet_type not in STAYS_CONNECTED
            ):
                self.state = next_state(self.state, packet.packet_type)
            if type(packet) is PublishPacket:
                if self._check_publish(packet):
                    return packet
                continue
            if type(packet) is ConnectPacket:
                self._take_connect(packet)
            elif type(packet) is PubrelPacket:
                packet_id = packet.packet_id
                known = self.inbound.pubrel_received(packet_id)
                reason = ReasonCode.SUCCESS if known else ReasonCode.PACKET_IDENTIFIER_NOT_FOUND
                self._send_short_ack(PacketType.PUBCOMP, packet_id, reason)
            elif type(packet) is PingreqPacket:  # [MQTT-3.12.4-1]
                self.send(PingrespPacket())
            return packet
        return None

    def _take_connect(self, packet: ConnectPacket) -> None:
        props = packet.properties
        self.keep_alive = packet.keep_alive
        self._head = b""
        self._started = 0.0  # only the connect timeout needed it: no float kept per client
        if packet.protocol_level == ProtocolLevel.MQTT_5:
            maximum = props.receive_maximum
            if maximum is not None and maximum != DEFAULT_RECEIVE_MAXIMUM:
                # The common 65535 keeps the shared constant, not an int object per client.
                self.client_receive_maximum = maximum
            self.client_max_packet_size = props.maximum_packet_size
            if props.topic_alias_maximum:
                self._out_aliases = OutboundAliases(props.topic_alias_maximum)
            self.request_problem_information = props.request_problem_information != 0

    def _check_publish(self, packet: PublishPacket) -> bool:
        """Validate an inbound PUBLISH; False when it is a duplicate already answered."""
        limits = self.limits
        qos = packet.qos
        if qos > limits.maximum_qos:
            raise ProtocolError(
                ReasonCode.QOS_NOT_SUPPORTED, f"PUBLISH QoS {qos} above Maximum QoS"
            )
        if packet.retain and not limits.retain_available:
            raise ProtocolError(ReasonCode.RETAIN_NOT_SUPPORTED, "retain is not available")
        props = packet.properties
        if props.subscription_identifiers:
            raise ProtocolError(
                ReasonCode.PROTOCOL_ERROR, "PUBLISH from a client with a subscription id"
            )
        alias = props.topic_alias
        if alias is not None or not packet.topic:
            aliases = self._in_aliases
            if aliases is None:
                aliases = self._in_aliases = InboundAliases(limits.topic_alias_maximum)
            packet.topic = aliases.resolve(packet.topic, alias)
            props.topic_alias = None
        if qos:
            assert packet.packet_id is not None
            fresh = self.inbound.publish_received(qos, packet.packet_id)
            if not fresh:
                if fresh is False:
                    self.send(PubrecPacket(packet.packet_id))
                return False
        return True

    # ------------------------------------------------------------------ outbound

    def send(self, packet: Packet) -> None:
        """Encode a packet into the send buffer (not for PUBLISH: use `send_publish`)."""
        if self._finished:
            return
        if isinstance(packet, PubackPacket):
            self.inbound.puback_sent()
        elif isinstance(packet, PubrecPacket):
            self.inbound.pubrec_sent(packet.packet_id, packet.reason_code)
        props: Properties | None = getattr(packet, "properties", None)
        if props is not None and (props.reason_string or props.user_properties):
            self._trim_problem_information(packet, props)
        data = encode_packet(packet, self.protocol_level)
        limit = self.client_max_packet_size
        if limit is not None and len(data) > limit and props is not None:
            # Reason String and User Properties are the first to go [MQTT-3.1.2-25].
            props.reason_string = None
            props.user_properties = []
            data = encode_packet(packet, self.protocol_level)
        self._append(data)

    def send_publish_ack(self, qos: int, packet_id: int, reason_code: ReasonCode) -> None:
        """Answer a QoS 1 PUBLISH with PUBACK or a QoS 2 one with PUBREC, carrying
        `reason_code` and no properties (no Reason String: use `send` for one)."""
        if self._finished:
            return
        if qos == 1:
            self.inbound.puback_sent()
            packet_type = PacketType.PUBACK
        else:
            self.inbound.pubrec_sent(packet_id, reason_code)
            packet_type = PacketType.PUBREC
        self._append(encode_short_ack(packet_type, packet_id, reason_code, self.protocol_level))

    def _send_short_ack(self, packet_type: PacketType, packet_id: int, reason: ReasonCode) -> None:
        if not self._finished:
            self._append(encode_short_ack(packet_type, packet_id, reason, self.protocol_level))

    def _trim_problem_information(self, packet: Packet, props: Properties) -> None:
        """Request Problem Information = 0 allows these only on PUBLISH, CONNACK and
        DISCONNECT [MQTT-3.1.2-29]."""
        if self.request_problem_information or isinstance(
            packet, ConnackPacket | DisconnectPacket | PublishPacket
        ):
            return
        props.reason_string = None
        props.user_properties = []

    def send_publish(self, packet: PublishPacket) -> bool:
        """Encode a PUBLISH, with a topic alias when the client accepts them.

        False (nothing sent) when the packet exceeds the client's Maximum Packet Size: the
        caller then treats it as delivered [MQTT-3.1.2-25].
        """
        if self._finished:
            return False
        aliases = self._out_aliases
        level = self.protocol_level
        limit = self.client_max_packet_size
        if not aliases.maximum:
            data = encode_packet(packet, level)
            if limit is not None and len(data) > limit:
                return False
            self._append(data)
            return True
        topic = packet.topic
        alias = aliases.lookup(topic)
        if alias is not None:
            packet.topic = ""
            packet.properties = dataclasses.replace(packet.properties, topic_alias=alias)
            data = encode_packet(packet, level)
            if limit is not None and len(data) > limit:
                return False
        else:
            alias = aliases.next_alias()
            if alias is not None:
                packet.properties = dataclasses.replace(packet.properties, topic_alias=alias)
            data = encode_packet(packet, level)
            if limit is not None and len(data) > limit:
                return False
            if alias is not None:
                aliases.bind(topic, alias)
        self._append(data)
        return True

    def send_message(  # noqa: PLR0917 (the fields of the PublishPacket it avoids building)
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        dup: bool,
        packet_id: int | None,
        properties: Properties,
    ) -> bool:
        """`send_publish` for a PUBLISH given by its fields (no packet object unless the
        client takes topic aliases). False when it exceeds the client's Maximum Packet
        Size [MQTT-3.1.2-25]."""
        if self._out_aliases.maximum:
            packet = PublishPacket(topic, payload, qos, retain, dup, packet_id, properties)
            return self.send_publish(packet)
        if self._finished:
            return False
        data = encode_publish(
            topic, payload, qos, retain, dup, packet_id, properties, self.protocol_level
        )
        limit = self.client_max_packet_size
        if limit is not None and len(data) > limit:
            return False
        self._append(data)
        return True

    @property
    def takes_shared_encoding(self) -> bool:
        """True when a PUBLISH encoded once can be sent as is (no outbound aliases)."""
        return not self._out_aliases.maximum

    def send_encoded_publish(self, data: bytes) -> bool:
        """Send a QoS 0 PUBLISH already encoded at this protocol level (the same bytes
        for every subscriber of a fan-out); only when `takes_shared_encoding`. False
        when it exceeds the client's Maximum Packet Size [MQTT-3.1.2-25]."""
        limit = self.client_max_packet_size
        if self._finished or (limit is not None and len(data) > limit):
            return False
        self._append(data)
        return True

    def _append(self, data: bytes) -> None:
        out = self._out
        if not out:
            # The encoders return bytes, which nobody mutates: kept without a copy.
            self._out = data if type(data) is bytes else bytearray(data)
        elif type(out) is bytes:
            grown = bytearray(out)
            grown += data
            self._out = grown
        else:
            out += data

    def data_to_send(self) -> bytes | bytearray:
        """Take everything encoded so far (the caller owns the returned buffer)."""
        out = self._out
        self._out = b""
        return out

    @property
    def pending_bytes(self) -> int:
        return len(self._out)

    # ------------------------------------------------------------------ lifecycle

    def accept(self, connack: ConnackPacket, keep_alive: int) -> None:
        """Send the successful CONNACK; `keep_alive` is the value now enforced."""
        self.keep_alive = keep_alive
        self._connack_sent = True
        self.send(connack)

    def refuse(self, reason_code: ReasonCode, reason_string: str | None = None) -> None:
        """Answer the CONNECT with an error CONNACK and close [MQTT-3.2.2-7]."""
        if not self._connack_sent:
            self.send(ConnackPacket(False, reason_code, Properties(reason_string=reason_string)))
        self.close()

    def disconnect(self, reason_code: ReasonCode, reason_string: str | None = None) -> None:
        """Server-initiated close: DISCONNECT with the reason on 5.0 (only after a
        successful CONNACK [MQTT-3.14.0-1]), nothing on 3.x."""
        if self.is_v5 and self._connack_sent:
            self.send(DisconnectPacket(reason_code, Properties(reason_string=reason_string)))
        self.close()

    def fail(self, error: ProtocolError) -> None:
        """Queue what the spec says to send for `error`, then close [MQTT-4.13].

        After an accepted CONNECT on 5.0: DISCONNECT with the reason code. While CONNECT is
        unanswered: CONNACK with it (5.0) or, for an unsupported protocol level, the 3.1.1
        return code 1; otherwise nothing (3.x has no way to say why).
        """
        if self._finished:
            return
        if self._connack_sent:
            self.disconnect(error.reason_code, error.message)
            return
        level = self._reader.protocol_level or _peek_protocol_level(self._head)
        self._head = b""
        if level == ProtocolLevel.MQTT_5:
            self._reader.protocol_level = level
            self.refuse(error.reason_code, error.message)
        elif error.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION and level is not None:
            self._reader.protocol_level = ProtocolLevel.MQTT_3_1_1
            self.refuse(error.reason_code)
        self.close()

    def close(self) -> None:
        """Stop reading and sending: nothing is queued after this."""
        self.state = ConnState.CLOSED
        self._finished = True

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> float | None:
        """When `handle_timer` next needs to run, or None."""
        if self.state is ConnState.AWAIT_CONNECT:
            # From the start, not the last byte: a trickled CONNECT gets no extension.
            return self._started + self.limits.connect_timeout
        if self.state is ConnState.CONNECTED and self._connack_sent and self.keep_alive:
            return self._deadline_base + self.keep_alive * 1.5
        return None

    def handle_timer(self, now: float) -> None:
        """Raise ProtocolError(KEEP_ALIVE_TIMEOUT) when a deadline passed [MQTT-3.1.2-24].

        Before CONNECT the same error stands for the connect timeout; `fail` then sends
        nothing, as no protocol level is known.
        """
        deadline = self.get_timer()
        if deadline is not None and now >= deadline:
            if self.state is ConnState.AWAIT_CONNECT:
                self.close()
                raise ProtocolError(ReasonCode.MAXIMUM_CONNECT_TIME, "no CONNECT in time")
            raise ProtocolError(
                ReasonCode.KEEP_ALIVE_TIMEOUT,
                f"nothing received for 1.5 x {self.keep_alive} s [MQTT-3.1.2-24]",
            )


def _peek_protocol_level(head: bytes) -> int | None:
    """The protocol level byte of a CONNECT that did not decode, if the bytes have it."""
    if len(head) < 2 or head[0] >> 4 != 1:
        return None
    index = 1
    while index < len(head) and head[index] & 0x80:
        index += 1
    index += 1
    if index + 2 > len(head):
        return None
    name_length = int.from_bytes(head[index : index + 2], "big")
    index += 2 + name_length
    return head[index] if index < len(head) else None
