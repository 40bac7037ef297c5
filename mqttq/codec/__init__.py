"""Sans-I/O MQTT codec for 3.1, 3.1.1 and 5.0 (stdlib only).

Public surface (implemented in reader.py / writer.py):
- `decode_packet(data, protocol_level, max_packet_size) -> (packet, consumed)`, of bytes or a
  memoryview; raises `Incomplete` when more bytes are needed, `ProtocolError` (with a
  ReasonCode) when invalid.
- `PacketReader(max_packet_size, protocol_level=None)`: `feed(data)`,
  `next_packet() -> Packet | None`, attribute `protocol_level` (set from the CONNECT it
  decodes, or by the caller).
- `encode_packet(packet, protocol_level) -> bytes`.

Names are loaded on first use (PEP 562): `mqttq.errors` imports `mqttq.codec.enums`, which
runs this file first, so importing the reader here eagerly would be a circular import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mqttq.codec.enums import (
    MAX_PACKET_ID,
    MAX_VARINT,
    SESSION_EXPIRY_NEVER,
    ConnackReturnCode,
    PacketType,
    PropertyId,
    ProtocolLevel,
    QoS,
    ReasonCode,
    RetainHandling,
)

if TYPE_CHECKING:
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

_LAZY = {
    **dict.fromkeys(
        (
            "AuthPacket",
            "ConnackPacket",
            "ConnectPacket",
            "DisconnectPacket",
            "Packet",
            "PingreqPacket",
            "PingrespPacket",
            "PubackPacket",
            "PubcompPacket",
            "PublishPacket",
            "PubrecPacket",
            "PubrelPacket",
            "SubackPacket",
            "SubscribePacket",
            "SubscriptionRequest",
            "UnsubackPacket",
            "UnsubscribePacket",
            "Will",
        ),
        "mqttq.codec.packets",
    ),
    "Properties": "mqttq.codec.properties",
    "PacketReader": "mqttq.codec.reader",
    "decode_packet": "mqttq.codec.reader",
    "encode_packet": "mqttq.codec.writer",
}

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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
