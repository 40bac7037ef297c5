"""What the cluster's records hold, as bytes (pure: no Kafka, no asyncio).

- `<prefix>client.session`: key = client id, value = `SessionInfo` as JSON: the node the
  client is connected to (null while disconnected), the node it was last connected to,
  protocol level, session expiry interval, client type, tenant, disconnect time, the
  request id of the connect event of the connection it describes (its epoch), and the
  session's will (of the connection while connected, or still due after an abnormal
  disconnect; the SQLite session table's will JSON), so that the node cleaning up after
  a dead node publishes it.
- `<prefix>client.subscriptions`: key = client id, value = `{"tenant": ..., "subscriptions":
  [...]}` (the subscription JSON of the SQLite session table).
- `<prefix>msg.retained`: key = `["tenant", "topic"]` as JSON, value = the message in
  TBMQ's DevicePublishMsg JSON (storage.codec_json).
- downlink records: key = the id of the node that routed the deliveries (one partition
  per routing node: its deliveries to a node stay in the order it routed them), no
  headers, value = one version byte (2), then the deliveries, each:

      flags        1 byte: 1 when a queued entry follows the payload (persisted downlink)
      lengths      2 bytes client id, 2 bytes publisher id, 4 bytes fields, 4 bytes payload
      client id    UTF-8, the subscriber
      publisher    UTF-8
      fields       tenant, topic, QoS, ... as the `mqttq` header of msg.all holds them
                   (storage.kafka_records.pack_fields)
      payload
      entry        8 bytes serial, 2 bytes packet id of the entry queued in Redis

  A node sends the deliveries it routes to one node in the same moment as one record:
  librdkafka's cost is per record and per header far more than per byte.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from mqttq.auth.model import ClientType
from mqttq.codec.packets import Will
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.formats.kafka_record import pack_fields, unpack_fields
from mqttq.storage.formats.session_json import (
    subscriptions_from_json,
    subscriptions_to_json,
    will_from_json,
    will_to_json,
)
from mqttq.storage.formats.tbmq_json import message_from_json, message_to_json
from mqttq.storage.ports import QueuedMessage

__all__ = [
    "DOWNLINK_START",
    "Downlinked",
    "SessionInfo",
    "decode_downlinks",
    "decode_retained",
    "decode_session",
    "decode_subscriptions",
    "encode_downlink",
    "encode_retained",
    "encode_session",
    "encode_subscriptions",
    "retained_key",
    "split_retained_key",
]

DOWNLINK_START: Final = b"\x02"
"""The first byte of a downlink record's value (its version)."""
_DELIVERY: Final = struct.Struct(">BHHII")
_ENTRY: Final = struct.Struct(">QH")
_QUEUED: Final = 1


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """Where and how one client's session lives, as every node knows it."""

    node: str | None
    """The node the client is connected to; None while it is disconnected."""
    last_node: str
    """The node it was last connected to (whose restart restores the session)."""
    protocol_level: int
    expiry: int
    """Session Expiry Interval in seconds; 0: the session ends with its connection."""
    client_type: ClientType
    tenant: str
    disconnected_at: float | None = None
    epoch: str = ""
    """Request id of the connect event of the connection this record describes ("":
    unknown, e.g. a session restored at start): a node that has read a later connect
    event of the client knows the record's location is out of date."""
    will: Will | None = None
    """The will of the connection while connected, or the one still due after an
    abnormal disconnect (`Session.will`)."""

    @property
    def persistent(self) -> bool:
        return self.expiry > 0


def encode_session(info: SessionInfo) -> bytes:
    return json.dumps(
        {
            "node": info.node,
            "lastNode": info.last_node,
            "protocolLevel": info.protocol_level,
            "expiry": info.expiry,
            "clientType": info.client_type,
            "tenant": info.tenant,
            "disconnectedAt": info.disconnected_at,
            "epoch": info.epoch,
            "will": None if info.will is None else will_to_json(info.will, ""),
        },
        separators=(",", ":"),
    ).encode()


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise StorageError(f"{what} record is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise StorageError(f"{what} record is not a JSON object")
    return obj


_CLIENT_TYPES: Final = {client_type.value: client_type for client_type in ClientType}


def _client_type(value: object) -> ClientType:
    """The `clientType` of a session record; a value this version does not know (a newer
    writer's) acts as DEVICE, the kind that needs nothing beyond the session itself."""
    return _CLIENT_TYPES.get(str(value), ClientType.DEVICE)


def decode_session(raw: bytes) -> SessionInfo:
    """Raises StorageError for a record `encode_session` did not write."""
    obj = _object(raw, "session")
    try:
        node = obj["node"]
        disconnected_at = obj.get("disconnectedAt")
        will = obj.get("will")
        info = SessionInfo(
            None if node is None else str(node),
            str(obj["lastNode"]),
            int(obj["protocolLevel"]),
            int(obj["expiry"]),
            _client_type(obj["clientType"]),
            str(obj["tenant"]),
            None if disconnected_at is None else float(disconnected_at),
            str(obj.get("epoch") or ""),
            None if will is None else will_from_json(str(will)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StorageError(f"session record lacks a field: {exc}") from None
    return info


def encode_subscriptions(tenant: str, subscriptions: list[Subscription]) -> bytes:
    return (
        f'{{"tenant":{json.dumps(tenant)},"subscriptions":{subscriptions_to_json(subscriptions)}}}'
    ).encode()


def decode_subscriptions(raw: bytes) -> tuple[str, list[Subscription]]:
    """(tenant, subscriptions); StorageError for a record of another writer."""
    obj = _object(raw, "subscriptions")
    tenant = obj.get("tenant")
    subscriptions = obj.get("subscriptions")
    if not isinstance(tenant, str) or not isinstance(subscriptions, list):
        raise StorageError("subscriptions record lacks tenant or subscriptions")
    return tenant, subscriptions_from_json(json.dumps(subscriptions))


def retained_key(tenant: str, topic: str) -> str:
    return json.dumps([tenant, topic], separators=(",", ":"))


def split_retained_key(key: str) -> tuple[str, str]:
    """(tenant, topic) of a `retained_key`; StorageError otherwise."""
    try:
        tenant, topic = json.loads(key)
    except (ValueError, TypeError) as exc:
        raise StorageError(f"retained record key {key!r} is not [tenant, topic]") from exc
    if not isinstance(tenant, str) or not isinstance(topic, str):
        raise StorageError(f"retained record key {key!r} is not [tenant, topic]")
    return tenant, topic


def encode_retained(message: Message) -> bytes:
    return message_to_json(message, client_id="", packet_id=0).encode()


def decode_retained(raw: bytes) -> Message:
    return message_from_json(raw).message


class Downlinked(NamedTuple):
    """A delivery read from a downlink topic (a tuple: one is built per delivery)."""

    client_id: str
    tenant: str
    message: Message
    entry: QueuedMessage | None
    """The queued entry (persisted downlink), else None."""


def encode_downlink(
    client_id: str, tenant: str, message: Message, entry: QueuedMessage | None = None
) -> bytes:
    """One delivery for `client_id` as a downlink record holds it (after DOWNLINK_START)."""
    sids = message.subscription_identifiers
    if sids:  # they travel in the record's PUBLISH properties [MQTT-3.3.4-3]
        props = dataclasses.replace(message.properties, subscription_identifiers=list(sids))
        message = dataclasses.replace(message, properties=props)
    client = client_id.encode()
    publisher = message.publisher_id.encode()
    fields = pack_fields(tenant, message)
    payload = message.payload
    head = _DELIVERY.pack(
        0 if entry is None else _QUEUED, len(client), len(publisher), len(fields), len(payload)
    )
    if entry is None:
        return b"".join((head, client, publisher, fields, payload))
    queued = _ENTRY.pack(entry.serial, entry.packet_id)
    return b"".join((head, client, publisher, fields, payload, queued))


def decode_downlinks(value: bytes) -> list[Downlinked]:
    """The deliveries of a downlink record; StorageError for a record `encode_downlink`
    did not write (none of its deliveries is returned)."""
    if value[:1] != DOWNLINK_START:
        raise StorageError("downlink record of an unknown version")
    deliveries: list[Downlinked] = []
    offset = 1
    size = len(value)
    head = _DELIVERY.size
    try:
        while offset < size:
            flags, client_n, publisher_n, fields_n, payload_n = _DELIVERY.unpack_from(value, offset)
            offset += head
            client = value[offset : offset + client_n].decode()
            offset += client_n
            publisher = value[offset : offset + publisher_n].decode(errors="replace")
            offset += publisher_n
            fields = value[offset : offset + fields_n]
            offset += fields_n
            payload = value[offset : offset + payload_n]
            offset += payload_n
            if offset > size:
                raise ValueError("truncated")
            tenant, message = unpack_fields(fields, payload, publisher)
            props = message.properties
            if props.subscription_identifiers:
                message.subscription_identifiers = tuple(props.subscription_identifiers)
                message.properties = dataclasses.replace(props, subscription_identifiers=[])
            entry = None
            if flags & _QUEUED:
                serial, packet_id = _ENTRY.unpack_from(value, offset)
                offset += _ENTRY.size
                entry = QueuedMessage(serial, packet_id, message)
            deliveries.append(Downlinked(client, tenant, message, entry))
    except (ValueError, struct.error) as exc:  # UnicodeDecodeError is a ValueError
        raise StorageError(f"downlink record unreadable: {exc}") from None
    return deliveries
