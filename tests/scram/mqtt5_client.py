"""An MQTT 5 client that speaks AUTH (enhanced authentication with SCRAM), for the tests.

paho's Python client does not do SCRAM; this one is a blocking socket with mqttq.codec
for the packet bytes and tests/scram/scram_client.py for the SCRAM messages. Every read is
bounded by a deadline; a closed connection reads as None.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PubackPacket,
    PublishPacket,
)
from mqttq.codec.properties import Properties
from mqttq.codec.reader import PacketReader
from mqttq.codec.writer import encode_packet
from mqttq.reasons import ReasonCode
from tests.scram.scram_client import ScramClient

DEADLINE = 10.0
"""Seconds any one read may wait."""


@dataclass
class ScramOutcome:
    """How a SCRAM CONNECT ended: the CONNACK (None when the connection closed before
    one), the packets seen before it, and whether the server's final message verified."""

    connack: ConnackPacket | None
    before: list[Packet]
    server_verified: bool


class Mqtt5Client:
    """One connection to `port` on 127.0.0.1 (see the module docstring)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.reader = PacketReader(1 << 20, ProtocolLevel.MQTT_5)
        self.next_id = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, packet: Packet) -> None:
        self.sock.sendall(encode_packet(packet, ProtocolLevel.MQTT_5))

    def read(self) -> Packet | None:
        """The next packet from the broker; None when it closed the connection."""
        while True:
            packet = self.reader.next_packet()
            if packet is not None:
                return packet
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.reader.feed(data)

    def read_until(self, kind: type) -> tuple[Packet | None, list[Packet]]:
        """Read until a packet of `kind` (or the close): it, and what came before it."""
        seen: list[Packet] = []
        while True:
            packet = self.read()
            if packet is None or isinstance(packet, kind):
                return packet, seen
            seen.append(packet)

    def wait_closed(self) -> list[Packet]:
        """Read until the broker closes the connection: the packets it sent meanwhile."""
        seen = []
        while (packet := self.read()) is not None:
            seen.append(packet)
        return seen

    # ------------------------------------------------------------------ SCRAM

    def connect_scram(
        self,
        client_id: str,
        scram: ScramClient,
        *,
        wrong_password: str | None = None,
        connect_properties: Properties | None = None,
    ) -> ScramOutcome:
        """CONNECT with `scram`'s method and first message, answer the AUTH challenge,
        read the CONNACK and verify the server's final message on it."""
        props = connect_properties or Properties()
        props.authentication_method = scram.mechanism
        props.authentication_data = scram.first()
        self.send(ConnectPacket(client_id, ProtocolLevel.MQTT_5, properties=props))
        challenge = self.read()
        if not isinstance(challenge, AuthPacket):
            connack = challenge if isinstance(challenge, ConnackPacket) else None
            return ScramOutcome(connack, [], False)
        assert challenge.reason_code == ReasonCode.CONTINUE_AUTHENTICATION
        assert challenge.properties.authentication_method == scram.mechanism
        server_first = challenge.properties.authentication_data or b""
        self.send(
            AuthPacket(
                ReasonCode.CONTINUE_AUTHENTICATION,
                Properties(
                    authentication_method=scram.mechanism,
                    authentication_data=scram.final(server_first, wrong_password=wrong_password),
                ),
            )
        )
        connack, before = self.read_until(ConnackPacket)
        assert connack is None or isinstance(connack, ConnackPacket)
        verified = connack is not None and scram.verify(
            connack.properties.authentication_data or b""
        )
        return ScramOutcome(connack, [challenge, *before], verified)

    def reauthenticate(
        self, scram: ScramClient, *, wrong_password: str | None = None
    ) -> tuple[Packet | None, list[Packet], bool]:
        """AUTH 0x19 with a first message, answer the challenge: the broker's last answer
        (AUTH 0x00, a DISCONNECT, or None when it closed), the other packets read
        meanwhile, and whether the server's final message verified."""
        self.send(
            AuthPacket(
                ReasonCode.RE_AUTHENTICATE,
                Properties(
                    authentication_method=scram.mechanism, authentication_data=scram.first()
                ),
            )
        )
        other: list[Packet] = []
        challenge = self.read()
        while isinstance(challenge, PublishPacket | PubackPacket):
            other.append(challenge)
            challenge = self.read()
        if not isinstance(challenge, AuthPacket):
            return challenge, other, False
        server_first = challenge.properties.authentication_data or b""
        self.send(
            AuthPacket(
                ReasonCode.CONTINUE_AUTHENTICATION,
                Properties(
                    authentication_method=scram.mechanism,
                    authentication_data=scram.final(server_first, wrong_password=wrong_password),
                ),
            )
        )
        answer = self.read()
        while isinstance(answer, PublishPacket | PubackPacket):
            other.append(answer)
            answer = self.read()
        verified = (
            isinstance(answer, AuthPacket)
            and answer.reason_code == ReasonCode.SUCCESS
            and scram.verify(answer.properties.authentication_data or b"")
        )
        return answer, other, verified

    # ------------------------------------------------------------------ plain MQTT

    def connect_plain(self, client_id: str, level: ProtocolLevel) -> Packet | None:
        self.reader.protocol_level = level
        self.send_at(ConnectPacket(client_id, level), level)
        return self.read()

    def send_at(self, packet: Packet, level: ProtocolLevel) -> None:
        self.sock.sendall(encode_packet(packet, level))

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        packet_id = None
        if qos:
            self.next_id += 1
            packet_id = self.next_id
        self.send(PublishPacket(topic, payload, qos, False, False, packet_id))

    def disconnect(self) -> None:
        self.send(DisconnectPacket())
        self.close()
