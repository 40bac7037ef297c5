"""A Message as one Kafka record: the payload as the value, the rest in one header.

The record key is the publisher's client id (UTF-8), so one publisher's records share a
partition and keep their order. The value is the payload, untouched. Everything else is
packed into a single header `mqttq` (one header, not one per field: librdkafka's cost per
header is several microseconds, more than the whole encoding):

    version   1 byte (1)
    qos       1 byte (0..2)
    retain    1 byte (0 | 1)
    created   8 bytes, big-endian IEEE double: unix seconds the broker accepted it
    expires   8 bytes, double; NaN when the message has no Message Expiry Interval
    tenant    2-byte length + UTF-8
    topic     2-byte length + UTF-8
    props     the rest: the PUBLISH properties in MQTT 5 wire form (property length +
              properties [MQTT-2.2.2]), so every property round-trips exactly

This module imports nothing of confluent_kafka: it maps plain bytes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Final

from mqttq.codec.enums import PacketType
from mqttq.codec.properties import (
    EMPTY_PROPERTIES,
    Properties,
    decode_properties,
    encode_properties,
)
from mqttq.errors import MqttqError, StorageError
from mqttq.model import Message

__all__ = [
    "HEADER",
    "decode_message",
    "encode_message",
    "pack_fields",
    "pack_fields_raw",
    "unpack_fields",
]

HEADER: Final = "mqttq"
"""The name of the header holding everything but the payload and the publisher."""
VERSION: Final = 1

_FIXED: Final = struct.Struct(">BBBddH")
_LENGTH: Final = struct.Struct(">H")
_NO_EXPIRY: Final = math.nan


def encode_message(tenant: str, message: Message) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """`(key, value, headers)` of the record carrying `message` of `tenant`."""
    return message.publisher_id.encode(), message.payload, [(HEADER, pack_fields(tenant, message))]


def pack_fields(tenant: str, message: Message) -> bytes:
    """Everything of `message` of `tenant` but the payload and the publisher, as the
    `mqttq` header holds it (the module docstring)."""
    return pack_fields_raw(tenant.encode(), message)


def pack_fields_raw(tenant_raw: bytes, message: Message) -> bytes:
    """`pack_fields` with the tenant already UTF-8 (a writer of many records of one
    tenant encodes it once)."""
    topic_raw = message.topic.encode()
    expires = message.expires_at
    props = message.properties
    return b"".join(
        (
            _FIXED.pack(
                VERSION,
                message.qos,
                message.retain,
                message.created_at,
                _NO_EXPIRY if expires is None else expires,
                len(tenant_raw),
            ),
            tenant_raw,
            _LENGTH.pack(len(topic_raw)),
            topic_raw,
            # The common case, a PUBLISH without properties, skips the encoder entirely.
            b"" if props.empty_for_publish() else encode_properties(props, PacketType.PUBLISH),
        )
    )


def decode_message(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | str | None]]
) -> tuple[str, Message]:
    """`(tenant, message)` from a record `encode_message` wrote. Raises StorageError naming
    what is wrong for a record it cannot read (a record of another writer, damaged)."""
    packed = None
    for name, raw in headers:
        if name == HEADER:
            packed = raw.encode() if isinstance(raw, str) else raw
    if not packed:
        raise StorageError(f"Kafka record without the {HEADER!r} header")
    return unpack_fields(packed, value or b"", (key or b"").decode(errors="replace"))


def unpack_fields(packed: bytes, payload: bytes, publisher: str) -> tuple[str, Message]:
    """`(tenant, message)` from what `pack_fields` wrote, the payload and the publisher;
    StorageError naming what is wrong otherwise."""
    try:
        version, qos, retain, created, expires, tenant_length = _FIXED.unpack_from(packed)
        if version != VERSION or qos > 2 or retain > 1:
            raise ValueError(f"version {version}, qos {qos}, retain {retain}")
        offset = _FIXED.size + tenant_length
        tenant = packed[_FIXED.size : offset].decode()
        (topic_length,) = _LENGTH.unpack_from(packed, offset)  # struct.error when short
        offset += _LENGTH.size + topic_length
        if offset > len(packed):
            raise ValueError("truncated")
        topic = packed[offset - topic_length : offset].decode()
        if offset < len(packed) and packed[offset:] != EMPTY_PROPERTIES:
            props, end = decode_properties(memoryview(packed), offset, PacketType.PUBLISH)
            if end != len(packed):
                raise ValueError("bytes after the properties")
        else:
            props = Properties()
    except (ValueError, struct.error, UnicodeDecodeError, MqttqError) as exc:
        raise StorageError(f"Kafka record not readable as a message: {exc}") from None
    message = Message(
        topic,
        payload,
        qos,
        bool(retain),
        props,
        created,
        None if math.isnan(expires) else expires,
        publisher,
    )
    return tenant, message
