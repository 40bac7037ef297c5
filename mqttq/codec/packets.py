"""The 15 MQTT control packets as version-neutral value objects.

A packet holds what any protocol level can say; the writer drops what a 3.x peer cannot
receive (properties, reason codes other than the CONNACK return code) and the reader fills
defaults for what a 3.x peer cannot send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from mqttq.codec.enums import PacketType, ProtocolLevel
from mqttq.codec.properties import Properties
from mqttq.reasons import ReasonCode


@dataclass(slots=True)
class Will:
    """The will message of a CONNECT [MQTT-3.1.3.2]."""

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False
    properties: Properties = field(default_factory=Properties)


class _Packet:
    """What every packet class has: its `packet_type`, a class attribute.

    Each is set after its class rather than in the class body: mypyc would take a
    `ClassVar` with a value in a dataclass body for a field (mypyc/mypyc#1122).
    """

    __slots__ = ()
    packet_type: ClassVar[PacketType]


@dataclass(slots=True)
class ConnectPacket(_Packet):
    client_id: str
    protocol_level: ProtocolLevel = ProtocolLevel.MQTT_5
    clean_start: bool = True
    keep_alive: int = 60
    username: str | None = None
    password: bytes | None = None
    will: Will | None = None
    properties: Properties = field(default_factory=Properties)


ConnectPacket.packet_type = PacketType.CONNECT


@dataclass(slots=True)
class ConnackPacket(_Packet):
    """For 3.x the writer maps `reason_code` to the matching ConnackReturnCode."""

    session_present: bool = False
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


ConnackPacket.packet_type = PacketType.CONNACK


@dataclass(slots=True, init=False)
class PublishPacket(_Packet):
    """`packet_id` is None exactly when qos == 0 [MQTT-2.2.1-2]."""

    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int | None = None
    properties: Properties = field(default_factory=Properties)

    def __init__(  # noqa: PLR0917 (the fields, as the generated one takes them)
        self,
        topic: str,
        payload: bytes = b"",
        qos: int = 0,
        retain: bool = False,
        dup: bool = False,
        packet_id: int | None = None,
        properties: Properties | None = None,
    ) -> None:
        # Written out, as for the PUBACK below: mypyc compiles it (one per PUBLISH read).
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.dup = dup
        self.packet_id = packet_id
        self.properties = Properties() if properties is None else properties


PublishPacket.packet_type = PacketType.PUBLISH


@dataclass(slots=True, init=False)
class _PublishAck(_Packet):
    """The fields PUBACK, PUBREC, PUBREL and PUBCOMP share [MQTT-3.4-3.7]."""

    packet_id: int
    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)

    def __init__(
        self,
        packet_id: int,
        reason_code: ReasonCode = ReasonCode.SUCCESS,
        properties: Properties | None = None,
    ) -> None:
        # Written out: mypyc compiles this one, not the one `dataclasses` generates
        # (720 -> 156 ns with its empty Properties; one per PUBACK read).
        self.packet_id = packet_id
        self.reason_code = reason_code
        self.properties = Properties() if properties is None else properties


@dataclass(slots=True, init=False)
class PubackPacket(_PublishAck):
    """PUBACK: the end of a QoS 1 flow [MQTT-3.4]."""


PubackPacket.packet_type = PacketType.PUBACK


@dataclass(slots=True, init=False)
class PubrecPacket(_PublishAck):
    """PUBREC: a QoS 2 PUBLISH received [MQTT-3.5]."""


PubrecPacket.packet_type = PacketType.PUBREC


@dataclass(slots=True, init=False)
class PubrelPacket(_PublishAck):
    """PUBREL: the QoS 2 message released [MQTT-3.6]."""


PubrelPacket.packet_type = PacketType.PUBREL


@dataclass(slots=True, init=False)
class PubcompPacket(_PublishAck):
    """PUBCOMP: the end of a QoS 2 flow [MQTT-3.7]."""


PubcompPacket.packet_type = PacketType.PUBCOMP


@dataclass(slots=True)
class SubscriptionRequest:
    """One topic filter of a SUBSCRIBE with its options [MQTT-3.8.3.1]."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0


@dataclass(slots=True)
class SubscribePacket(_Packet):
    packet_id: int
    subscriptions: list[SubscriptionRequest]
    properties: Properties = field(default_factory=Properties)


SubscribePacket.packet_type = PacketType.SUBSCRIBE


@dataclass(slots=True)
class SubackPacket(_Packet):
    """For 3.x, granted QoS 0-2 pass through and any error code is written as 0x80."""

    packet_id: int
    reason_codes: list[ReasonCode]
    properties: Properties = field(default_factory=Properties)


SubackPacket.packet_type = PacketType.SUBACK


@dataclass(slots=True)
class UnsubscribePacket(_Packet):
    packet_id: int
    topic_filters: list[str]
    properties: Properties = field(default_factory=Properties)


UnsubscribePacket.packet_type = PacketType.UNSUBSCRIBE


@dataclass(slots=True)
class UnsubackPacket(_Packet):
    """3.x UNSUBACK has no payload; the writer drops `reason_codes` there."""

    packet_id: int
    reason_codes: list[ReasonCode] = field(default_factory=list)
    properties: Properties = field(default_factory=Properties)


UnsubackPacket.packet_type = PacketType.UNSUBACK


@dataclass(slots=True)
class PingreqPacket(_Packet):
    """PINGREQ [MQTT-3.12]: no fields."""


PingreqPacket.packet_type = PacketType.PINGREQ


@dataclass(slots=True)
class PingrespPacket(_Packet):
    """PINGRESP [MQTT-3.13]: no fields."""


PingrespPacket.packet_type = PacketType.PINGRESP


@dataclass(slots=True)
class DisconnectPacket(_Packet):
    """3.x DISCONNECT is empty; the writer drops reason code and properties there."""

    reason_code: ReasonCode = ReasonCode.NORMAL_DISCONNECTION
    properties: Properties = field(default_factory=Properties)


DisconnectPacket.packet_type = PacketType.DISCONNECT


@dataclass(slots=True)
class AuthPacket(_Packet):
    """MQTT 5.0 only."""

    reason_code: ReasonCode = ReasonCode.SUCCESS
    properties: Properties = field(default_factory=Properties)


AuthPacket.packet_type = PacketType.AUTH


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


AuthPacket.packet_type = PacketType.AUTH
