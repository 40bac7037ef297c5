"""A queued message as JSON text, in the form TBMQ 2.x stores in Redis.

Every adapter that keeps messages as text (SQLite here, Redis later) writes this one form,
so a Redis instance filled by TBMQ 2.x can be read by mqttq and the other way round.

What was followed (thingsboard/tbmq, `common/data/.../DevicePublishMsg.java`, the Jackson
form written by `cjson.encode` / `JacksonUtil` into `{clientId}_messages_<packetId>`):

- `clientId`, `topicName` (older entries say `topic`: accepted when reading), `time` (ms since
  the epoch), `qos`, `packetId`, `packetType` (`"PUBLISH"` | `"PUBREL"`), `payload` (base64,
  Jackson's `byte[]` form), `retained` (Jackson's name for Lombok's `isRetained`).
- The MQTT 5 getters of the same class: `msgExpiryInterval` (seconds, as sent),
  `payloadFormatIndicator`, `contentType`, `responseTopic`, `correlationData` (base64),
  `subscriptionIds` (list of ints) and `userProperties` as TBMQ's `UserProperties` object:
  `{"props": [{"k": key, "v": value}, ...]}`. When reading, a plain list of
  `{"key": .., "value": ..}` objects is accepted too.
- Absent values are left out, as TBMQ's `@JsonInclude(NON_NULL)` does.
- `clientId` holds what the caller passes as `client_id`. TBMQ writes there the client whose
  queue holds the entry (the key of `tbmq.msg.persisted`); the queue adapters do the same.

Fields of mqttq's own, which TBMQ ignores: `expiresAt` (absolute expiry, ms since the epoch;
when missing, e.g. in an entry written by TBMQ, it is `time + msgExpiryInterval`) and
`publisherId` (the publishing client, for No Local [MQTT-3.8.3-3]).

Times are kept to the millisecond: `created_at` and `expires_at` come back rounded to 1 ms.
A message with a Message Expiry Interval but no `expires_at` comes back with
`expires_at = created_at + interval`, as the broker would have set it [MQTT-3.3.2-5].
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, Final

from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message

PUBLISH: Final = "PUBLISH"
"""packetType of an entry whose PUBLISH is still to be delivered (or acknowledged)."""
PUBREL: Final = "PUBREL"
"""packetType of an entry whose PUBREC arrived: only PUBREL remains [MQTT-4.3.3]."""

_PACKET_TYPES: Final = frozenset((PUBLISH, PUBREL))
_MAX_PACKET_ID: Final = 65535


@dataclass(slots=True)
class StoredMessage:
    """What `message_from_json` gives back: the message and the entry's queue fields."""

    message: Message
    client_id: str
    """The `clientId` field: the client whose queue holds the entry."""
    packet_id: int
    """0 when no packet id was assigned yet, else 1..65535."""
    packet_type: str
    """`PUBLISH` or `PUBREL`."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def message_to_json(
    message: Message, *, client_id: str, packet_id: int, packet_type: str = PUBLISH
) -> str:
    """Encode `message` as one TBMQ 2.x `DevicePublishMsg` JSON object (compact, UTF-8 safe).

    `packet_id` is 0..65535 (0: to be assigned by whoever stores it, as TBMQ's Lua does);
    `packet_type` is `PUBLISH` or `PUBREL`. Raises ValueError for anything else.
    """
    if packet_type not in _PACKET_TYPES:
        raise ValueError(f"packet_type must be PUBLISH or PUBREL, not {packet_type!r}")
    if not 0 <= packet_id <= _MAX_PACKET_ID:
        raise ValueError(f"packet_id must be 0..65535, not {packet_id}")
    props = message.properties
    obj: dict[str, Any] = {
        "clientId": client_id,
        "topicName": message.topic,
        "time": _ms(message.created_at),
        "qos": message.qos,
        "packetId": packet_id,
        "packetType": packet_type,
        "payload": base64.b64encode(message.payload).decode("ascii"),
        "retained": message.retain,
    }
    if props.message_expiry_interval is not None:
        obj["msgExpiryInterval"] = props.message_expiry_interval
    if props.payload_format_indicator is not None:
        obj["payloadFormatIndicator"] = props.payload_format_indicator
    if props.content_type is not None:
        obj["contentType"] = props.content_type
    if props.response_topic is not None:
        obj["responseTopic"] = props.response_topic
    if props.correlation_data is not None:
        obj["correlationData"] = base64.b64encode(props.correlation_data).decode("ascii")
    if props.user_properties:
        obj["userProperties"] = {"props": [{"k": k, "v": v} for k, v in props.user_properties]}
    if message.subscription_identifiers:
        obj["subscriptionIds"] = list(message.subscription_identifiers)
    if message.expires_at is not None:
        obj["expiresAt"] = _ms(message.expires_at)
    if message.publisher_id:
        obj["publisherId"] = message.publisher_id
    return json.dumps(obj, separators=(",", ":"))


def message_from_json(text: str | bytes) -> StoredMessage:
    """Decode one entry written by `message_to_json` (or by TBMQ 2.x).

    Raises StorageError naming the problem when the text is not JSON, not an object, or a
    field is missing or of the wrong type; callers skip such an entry and log it.
    """
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StorageError(f"stored message is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise StorageError(f"stored message is not a JSON object but {type(obj).__name__}")
    fields = _Fields(obj)
    topic = fields.str_("topicName", None) if "topicName" in obj else fields.str_("topic", None)
    if topic is None:
        raise StorageError("stored message has no topicName")
    qos = fields.int_("qos", 0, 2)
    packet_id = fields.int_("packetId", 0, _MAX_PACKET_ID)
    packet_type = fields.str_("packetType", PUBLISH)
    if packet_type not in _PACKET_TYPES:
        raise StorageError(f"stored message has packetType {packet_type!r}")
    time_ms = fields.opt_int("time") or 0
    expiry_interval = fields.opt_int("msgExpiryInterval")
    expires_ms = fields.opt_int("expiresAt")
    if expires_ms is None and expiry_interval is not None:
        expires_ms = time_ms + expiry_interval * 1000
    properties = Properties(
        payload_format_indicator=fields.opt_int("payloadFormatIndicator"),
        message_expiry_interval=expiry_interval,
        content_type=fields.str_("contentType", None),
        response_topic=fields.str_("responseTopic", None),
        correlation_data=fields.opt_bytes("correlationData"),
        user_properties=fields.user_properties(),
    )
    message = Message(
        topic=topic,
        payload=fields.opt_bytes("payload") or b"",
        qos=qos,
        retain=fields.bool_("retained"),
        properties=properties,
        created_at=time_ms / 1000,
        expires_at=None if expires_ms is None else expires_ms / 1000,
        publisher_id=fields.str_("publisherId", "") or "",
        subscription_identifiers=fields.subscription_ids(),
    )
    client_id = fields.str_("clientId", "") or ""
    return StoredMessage(message, client_id, packet_id, packet_type)


class _Fields:
    """Typed access to the decoded object; every mismatch is a StorageError."""

    __slots__ = ("_obj",)

    def __init__(self, obj: dict[str, Any]) -> None:
        self._obj = obj

    def _bad(self, name: str, expected: str) -> StorageError:
        return StorageError(
            f"stored message field {name!r} should be {expected}, got {self._obj[name]!r}"
        )

    def str_(self, name: str, default: str | None) -> str | None:
        value = self._obj.get(name)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self._bad(name, "a string")
        return value

    def opt_int(self, name: str) -> int | None:
        value = self._obj.get(name)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._bad(name, "an integer")
        return value

    def int_(self, name: str, low: int, high: int) -> int:
        if name not in self._obj:
            raise StorageError(f"stored message has no {name!r}")
        value = self.opt_int(name)
        if value is None or not low <= value <= high:
            raise self._bad(name, f"an integer in {low}..{high}")
        return value

    def bool_(self, name: str) -> bool:
        value = self._obj.get(name, False)
        if not isinstance(value, bool):
            raise self._bad(name, "true or false")
        return value

    def opt_bytes(self, name: str) -> bytes | None:
        value = self.str_(name, None)
        if value is None:
            return None
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise self._bad(name, "base64") from exc

    def user_properties(self) -> list[tuple[str, str]]:
        value = self._obj.get("userProperties")
        if value is None:
            return []
        # TBMQ's form is {"props": [{"k", "v"}]}; a bare list of {"key", "value"} is accepted.
        if isinstance(value, dict):
            pairs, key_name, value_name = value.get("props"), "k", "v"
        else:
            pairs, key_name, value_name = value, "key", "value"
        if not isinstance(pairs, list):
            raise self._bad("userProperties", '{"props": [{"k": .., "v": ..}]}')
        result: list[tuple[str, str]] = []
        for pair in pairs:
            if not isinstance(pair, dict):
                raise self._bad("userProperties", "a list of key/value objects")
            key, val = pair.get(key_name), pair.get(value_name)
            if not isinstance(key, str) or not isinstance(val, str):
                raise self._bad("userProperties", "string keys and values")
            result.append((key, val))
        return result

    def subscription_ids(self) -> tuple[int, ...]:
        value = self._obj.get("subscriptionIds")
        if value is None:
            return ()
        if not isinstance(value, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in value
        ):
            raise self._bad("subscriptionIds", "a list of integers")
        return tuple(value)
