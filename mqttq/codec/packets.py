"""The 15 MQTT control packets as version-neutral value objects.

A packet holds what any protocol level can say; the writer drops what a 3.x peer cannot
receive (properties, reason codes other than the CONNACK return code) and the reader fills
defaults for what a 3.x peer cannot send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from mqttq.codec.enums import PacketType, ProtocolLevel, ReasonCode
from mqttq.codec.properties import Properties


@dataclass(slots=True)
class Will:
    """The will message of a CONNECT [MQTT-3.1.3.2]."""

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class ConnectPacket:
    packet_type: ClassVar[PacketType] = PacketType.CONNECT
    client_id: str
    protocol_level: ProtocolLevel = ProtocolLevel.MQTT_5
    clean_start: bool = True
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class ConnackPacket:
    """For 3.x the writer maps `reason_code` to the matching ConnackReturnCode."""

    packet_type: ClassVar[PacketType] = PacketType.CONNACK
    session_present: bool = False
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PublishPacket:
    """`packet_id` is None exactly when qos == 0 [MQTT-2.2.1-2]."""

    packet_type: ClassVar[PacketType] = PacketType.PUBLISH
    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PubackPacket:
    packet_type: ClassVar[PacketType] = PacketType.PUBACK
    packet_id: int
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PubrecPacket:
    packet_type: ClassVar[PacketType] = PacketType.PUBREC
    packet_id: int
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PubrelPacket:
    packet_type: ClassVar[PacketType] = PacketType.PUBREL
    packet_id: int
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PubcompPacket:
    packet_type: ClassVar[PacketType] = PacketType.PUBCOMP
    packet_id: int
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class SubscriptionRequest:
    """One topic filter of a SUBSCRIBE with its options [MQTT-3.8.3.1]."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0


@dataclass(slots=True)
class SubscribePacket:
    packet_type: ClassVar[PacketType] = PacketType.SUBSCRIBE
    packet_id: int
    subscriptions: list[SubscriptionRequest]
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class SubackPacket:
    """For 3.x, granted QoS 0-2 pass through and any error code is written as 0x80."""

    packet_type: ClassVar[PacketType] = PacketType.SUBACK
    packet_id: int
    reason_codes: list[ReasonCode]
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class UnsubscribePacket:
    packet_type: ClassVar[PacketType] = PacketType.UNSUBSCRIBE
    packet_id: int
    topic_filters: list[str]
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class UnsubackPacket:
    """3.x UNSUBACK has no payload; the writer drops `reason_codes` there."""

    packet_type: ClassVar[PacketType] = PacketType.UNSUBACK
    packet_id: int
    reason_codes: list[ReasonCode] = field(default_factory=list)
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class PingreqPacket:
    packet_type: ClassVar[PacketType] = PacketType.PINGREQ


@dataclass(slots=True)
class PingrespPacket:
    packet_type: ClassVar[PacketType] = PacketType.PINGRESP


@dataclass(slots=True)
class DisconnectPacket:
    """3.x DISCONNECT is empty; the writer drops reason code and properties there."""

    packet_type: ClassVar[PacketType] = PacketType.DISCONNECT
    reason_code: ReasonCode = ReasonCode.NORMAL_DISCONNECTION
    properties: Properties = field(default_factory=Properties)


@dataclass(slots=True)
class AuthPacket:
    """MQTT 5.0 only."""

    packet_type: ClassVar[PacketType] = PacketType.AUTH
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


Packet = (
    ConnectPacket
    | ConnackPacket
    | PublishPacket
    | PubackPacket
    | PubrecPacket
    | PubrelPacket
    | PubcompPacket
    | SubscribePacket
    | SubackPacket
    | UnsubscribePacket
    | UnsubackPacket
    | PingreqPacket
    | PingrespPacket
    | DisconnectPacket
    | AuthPacket
)
