"""What the cluster's records hold, as bytes (pure: no Kafka, no asyncio).

- `<prefix>client.session`: key = client id, value = `SessionInfo` as JSON: the node the
  client is connected to (null while disconnected), the node it was last connected to,
  protocol level, session expiry interval, client type, tenant, disconnect time, and the
  request id of the connect event of the connection it describes (its epoch).
- `<prefix>client.subscriptions`: key = client id, value = `{"tenant": ..., "subscriptions":
  [...]}` (the subscription JSON of the SQLite session table).
- `<prefix>msg.retained`: key = `["tenant", "topic"]` as JSON, value = the message in
  TBMQ's DevicePublishMsg JSON (storage.codec_json).
- downlink records: key = the subscriber's client id (one subscriber's deliveries stay in
  order), value = the payload, header `mqttq` = tenant, topic, QoS, ... as in msg.all
  (storage.kafka_records), header `pub` = the publisher's client id, and on persisted
  downlinks header `entry` = "<serial>:<packet id>" of the entry queued in Redis.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.codec_json import message_from_json, message_to_json
from mqttq.storage.kafka_records import decode_message, encode_message
from mqttq.storage.ports import QueuedMessage
from mqttq.storage.session_json import subscriptions_from_json, subscriptions_to_json

__all__ = [
    "Downlinked",
    "SessionInfo",
    "decode_downlink",
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

PUBLISHER_HEADER: Final = "pub"
ENTRY_HEADER: Final = "entry"

Headers = Sequence[tuple[str, bytes | str | None]]


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
    client_type: str
    tenant: str
    disconnected_at: float | None = None
    epoch: str = ""
    """Request id of the connect event of the connection this record describes ("":
    unknown, e.g. a session restored at start): a node that has read a later connect
    event of the client knows the record's location is out of date."""

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


def decode_session(raw: bytes) -> SessionInfo:
    """Raises StorageError for a record `encode_session` did not write."""
    obj = _object(raw, "session")
    try:
        node = obj["node"]
        disconnected_at = obj.get("disconnectedAt")
        info = SessionInfo(
            None if node is None else str(node),
            str(obj["lastNode"]),
            int(obj["protocolLevel"]),
            int(obj["expiry"]),
            str(obj["clientType"]),
            str(obj["tenant"]),
            None if disconnected_at is None else float(disconnected_at),
            str(obj.get("epoch") or ""),
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


@dataclass(frozen=True, slots=True)
class Downlinked:
    """A delivery read from a downlink topic."""

    client_id: str
    tenant: str
    message: Message
    entry: QueuedMessage | None
    """The queued entry (persisted downlink), else None."""


def encode_downlink(
    client_id: str, tenant: str, message: Message, entry: QueuedMessage | None = None
) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of a downlink record for `client_id`."""
    sids = message.subscription_identifiers
    if sids:  # they travel in the record's PUBLISH properties [MQTT-3.3.4-3]
        props = dataclasses.replace(message.properties, subscription_identifiers=list(sids))
        message = dataclasses.replace(message, properties=props)
    _, value, headers = encode_message(tenant, message)
    headers.append((PUBLISHER_HEADER, message.publisher_id.encode()))
    if entry is not None:
        headers.append((ENTRY_HEADER, f"{entry.serial}:{entry.packet_id}".encode()))
    return client_id.encode(), value, headers


def decode_downlink(key: bytes | None, value: bytes | None, headers: Headers) -> Downlinked:
    """Raises StorageError for a record `encode_downlink` did not write."""
    publisher = b""
    entry_raw = None
    for name, raw in headers:
        data = raw.encode() if isinstance(raw, str) else (raw or b"")
        if name == PUBLISHER_HEADER:
            publisher = data
        elif name == ENTRY_HEADER:
            entry_raw = data
    tenant, message = decode_message(publisher, value, headers)
    props = message.properties
    if props.subscription_identifiers:
        message.subscription_identifiers = tuple(props.subscription_identifiers)
        message.properties = dataclasses.replace(props, subscription_identifiers=[])
    entry = None
    if entry_raw is not None:
        try:
            serial, packet_id = (int(part) for part in entry_raw.split(b":"))
        except ValueError as exc:
            raise StorageError(f"downlink entry header {entry_raw!r} unreadable") from exc
        entry = QueuedMessage(serial, packet_id, message)
    return Downlinked((key or b"").decode(errors="replace"), tenant, message, entry)
