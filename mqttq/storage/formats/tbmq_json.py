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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from mqttq.codec.enums import MAX_PACKET_ID
from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message

PUBLISH: Final = "PUBLISH"
"""packetType of an entry whose PUBLISH is still to be delivered (or acknowledged)."""
PUBREL: Final = "PUBREL"
"""packetType of an entry whose PUBREC arrived: only PUBREL remains [MQTT-4.3.3]."""

_PACKET_TYPES: Final = frozenset((PUBLISH, PUBREL))


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


compact_json: Final = json.JSONEncoder(separators=(",", ":")).encode
"""Compact JSON with one encoder for every call: `json.dumps` with `separators` builds a new
encoder each time (a queued message's body, a session record, a rewritten run)."""


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
    if not 0 <= packet_id <= MAX_PACKET_ID:
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
    return compact_json(obj)


_HEAD: Final = '{"clientId":""'
_PACKET_ID_ZERO: Final = '"packetId":0,'


class MessageJson:
    """`message_to_json` of one message for many (client id, packet id) pairs, encoded
    once: a message queued for N subscribers differs only in those two fields.

    `for_entry(client_id, packet_id)` returns exactly what `message_to_json` returns. The
    split is safe: JSON escapes every quote inside a string, so `"packetId":0,` occurs in
    the encoded object only as that key (the first after `clientId`).
    """

    __slots__ = ("_middle", "_tail")

    def __init__(self, message: Message, packet_type: str = PUBLISH) -> None:
        text = message_to_json(message, client_id="", packet_id=0, packet_type=packet_type)
        self._middle, self._tail = text[len(_HEAD) :].split(_PACKET_ID_ZERO, 1)

    def for_entry(self, client_id: str, packet_id: int) -> str:
        """The entry's JSON (`packet_id` 0..65535, as `message_to_json` checks)."""
        if not 0 <= packet_id <= MAX_PACKET_ID:
            raise ValueError(f"packet_id must be 0..65535, not {packet_id}")
        return (
            f'{{"clientId":{json.dumps(client_id)}{self._middle}"packetId":{packet_id},{self._tail}'
        )


def json_per_message() -> Callable[[Message], MessageJson]:
    """A memo for one batch: the `MessageJson` of each message object, made once (a batch
    holds the same message object once per subscriber)."""
    made: dict[int, tuple[Message, MessageJson]] = {}

    def encoded(message: Message) -> MessageJson:
        known = made.get(id(message))
        if known is None:
            # The message is kept with its encoding, so its id cannot be reused meanwhile.
            known = made[id(message)] = (message, MessageJson(message))
        return known[1]

    return encoded


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
    packet_id = fields.int_("packetId", 0, MAX_PACKET_ID)
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


class DecodedMessages:
    """`message_from_json(text)`'s message and packet type, remembered across entries that
    differ only in `clientId` and `packetId` (the same message queued for many sessions:
    a backlog drain decodes it once, not once per session). Bounded: at most
    `max_entries` messages of at most `max_text` characters each; the memo is emptied
    when full. Not thread-safe: one per thread (or event loop). Messages are frozen, so
    sharing one between sessions is safe (live deliveries share theirs too)."""

    __slots__ = ("_known", "_max_entries", "_max_text")

    def __init__(self, max_entries: int = 2048, max_text: int = 8192) -> None:
        self._known: dict[str, tuple[Message, str]] = {}
        self._max_entries = max_entries
        self._max_text = max_text

    def decode(self, text: str | bytes) -> tuple[Message, str]:
        """The entry's message and packet type (PUBLISH or PUBREL); raises StorageError
        as `message_from_json` does."""
        if len(text) > self._max_text:
            return _message_and_type(text)
        if isinstance(text, bytes):
            try:
                text = text.decode()
            except UnicodeDecodeError:
                return _message_and_type(text)  # raises the StorageError
        key = _shared_part(text)
        if key is None:
            return _message_and_type(text)
        known = self._known.get(key)
        if known is None:
            known = _message_and_type(text)
            if len(self._known) >= self._max_entries:
                self._known.clear()
            self._known[key] = known
        return known


def _message_and_type(text: str | bytes) -> tuple[Message, str]:
    stored = message_from_json(text)
    return stored.message, stored.packet_type


def _shared_part(text: str) -> str | None:
    """`text` without its `clientId` value and `packetId` field, when it has the layout
    `message_to_json` writes (clientId first, then topicName); else None."""
    if not text.startswith('{"clientId":"'):
        return None
    start = text.find(',"topicName":')
    packet_id = text.find(',"packetId":', start)
    if start < 0 or packet_id < 0 or text[start - 1] != '"':
        return None
    # Nothing but the client id's string may stand between the two (a writer with other
    # fields there would have them left out of the key): no unescaped quote inside it.
    if '"' in text[13 : start - 1].replace("\\\\", "").replace('\\"', ""):
        return None
    end = text.find(",", packet_id + 12)
    if end < 0:
        return None
    return text[start:packet_id] + text[end:]


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
