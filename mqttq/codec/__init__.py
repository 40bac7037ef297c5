"""Sans-I/O MQTT codec for 3.1, 3.1.1 and 5.0 (stdlib only).

Public surface (implemented in reader.py / writer.py):
- `decode_packet(data, protocol_level, max_packet_size) -> (packet, consumed)`, of bytes or a
  memoryview; raises `Incomplete` when more bytes are needed, `ProtocolError` (with a
  ReasonCode) when invalid.
- `PacketReader(max_packet_size, protocol_level=None)`: `feed(data)`,
  `next_packet() -> Packet | None`, attribute `protocol_level` (set from the CONNECT it
  decodes, or by the caller).
- `encode_packet(packet, protocol_level) -> bytes`.

The reason codes come from `mqttq.reasons`, the ground floor that `mqttq.errors` also
imports; the codec sits above both.
"""

from __future__ import annotations

from mqttq.codec.enums import (
    MAX_PACKET_ID,
    MAX_VARINT,
    SESSION_EXPIRY_NEVER,
    PacketType,
    PropertyId,
    ProtocolLevel,
    QoS,
    RetainHandling,
)
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
from mqttq.codec.properties import Properties
from mqttq.codec.reader import PacketReader, decode_packet
from mqttq.codec.writer import encode_packet
from mqttq.reasons import ConnackReturnCode, ReasonCode

__all__ = [
    "MAX_PACKET_ID",
    "MAX_VARINT",
    "SESSION_EXPIRY_NEVER",
    "AuthPacket",
    "ConnackPacket",
    "ConnackReturnCode",
    "ConnectPacket",
    "DisconnectPacket",
    "Packet",
    "PacketReader",
    "PacketType",
    "PingreqPacket",
    "PingrespPacket",
    "Properties",
    "PropertyId",
    "ProtocolLevel",
    "PubackPacket",
    "PubcompPacket",
    "PublishPacket",
    "PubrecPacket",
    "PubrelPacket",
    "QoS",
    "ReasonCode",
    "RetainHandling",
    "SubackPacket",
    "SubscribePacket",
    "SubscriptionRequest",
    "UnsubackPacket",
    "UnsubscribePacket",
    "Will",
    "decode_packet",
    "encode_packet",
]
