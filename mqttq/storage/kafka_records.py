"""A Message as one Kafka record: the payload as the value, the rest in headers.

The record key is the publisher's client id (UTF-8), so one publisher's records share a
partition and keep their order. Headers, each readable with Kafka's own tools:

- `tenant`: the publisher's tenant (UTF-8)
- `topic`: the topic name (UTF-8)
- `qos`: b"0" | b"1" | b"2";  `retain`: b"0" | b"1"
- `created_at`: when the broker accepted the message, unix seconds as a decimal float
- `expires_at`: likewise, only when the message has a Message Expiry Interval
- `props`: only when there are any: the PUBLISH properties in their MQTT 5 wire form
  (property length + properties [MQTT-2.2.2]), so every property round-trips exactly

This module imports nothing of confluent_kafka: it maps plain bytes.
"""

from __future__ import annotations

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

__all__ = ["decode_message", "encode_message"]

_QOS: Final = (b"0", b"1", b"2")
_RETAIN: Final = (b"0", b"1")


def encode_message(tenant: str, message: Message) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """`(key, value, headers)` of the record carrying `message` of `tenant`."""
    headers = [
        ("tenant", tenant.encode()),
        ("topic", message.topic.encode()),
        ("qos", _QOS[message.qos]),
        ("retain", _RETAIN[message.retain]),
        ("created_at", repr(message.created_at).encode()),
    ]
    if message.expires_at is not None:
        headers.append(("expires_at", repr(message.expires_at).encode()))
    props = encode_properties(message.properties, PacketType.PUBLISH)
    if props != EMPTY_PROPERTIES:
        headers.append(("props", props))
    return message.publisher_id.encode(), message.payload, headers


def decode_message(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | str | None]]
) -> tuple[str, Message]:
    """`(tenant, message)` from a record `encode_message` wrote. Raises StorageError naming
    what is wrong for a record it cannot read (a record of another writer, damaged)."""
    fields: dict[str, bytes] = {}
    for name, raw in headers:
        fields[name] = raw.encode() if isinstance(raw, str) else (raw or b"")
    try:
        qos = _QOS.index(fields["qos"])
        retain = fields.get("retain", b"0") == b"1"
        expires = fields.get("expires_at")
        props_raw = fields.get("props")
        message = Message(
            fields["topic"].decode(),
            value or b"",
            qos,
            retain,
            decode_properties(memoryview(props_raw), 0, PacketType.PUBLISH)[0]
            if props_raw
            else Properties(),
            float(fields["created_at"]),
            None if expires is None else float(expires),
            (key or b"").decode(),
        )
        return fields["tenant"].decode(), message
    except KeyError as exc:
        raise StorageError(f"Kafka record without the {exc.args[0]!r} header") from None
    except (ValueError, UnicodeDecodeError, MqttqError) as exc:
        raise StorageError(f"Kafka record not readable as a message: {exc}") from None
