"""`Delivery`: one message as an integration hands it to a sink, and its JSON envelope."""

from __future__ import annotations

import base64
import binascii
import json
import json.encoder
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from mqttq.model import Message

ENVELOPE_FIELDS: Final = (
    "topic",
    "payload",
    "payload_encoding",
    "qos",
    "retain",
    "client_id",
    "tenant",
    "timestamp",
    "user_properties",
    "content_type",
    "response_topic",
    "correlation_data",
    "message_expiry_interval",
)
"""The keys of `envelope()`, in the order they are written (templates may name them)."""


@dataclass(slots=True, init=False)
class Delivery:
    """One message for a sink: what a publisher sent, who sent it, where and when.

    Treated as immutable once made (not `frozen`: a frozen dataclass's `__init__` sets each
    of its 15 fields through `object.__setattr__`, and one is made per delivered message).

    `seq` identifies a delivery within its integration and is the same when the delivery
    is made again, so a sink that must deduplicate after a redelivery can key on it with
    the integration's name. It grows with each publisher's messages (embedded: with the
    backlog's order; distributed: per Kafka partition, which holds whole publishers).
    """

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = False
    client_id: str = ""
    tenant: str = "default"
    timestamp_ms: int = 0
    """When the broker accepted the message (unix milliseconds)."""
    user_properties: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None
    response_topic: str | None = None
    correlation_data: bytes | None = None
    message_expiry_interval: int | None = None
    seq: int = 0
    extra: Mapping[str, str] = field(default_factory=dict)
    """Sink-independent annotations (an event's kind for client events)."""

    def __init__(  # noqa: PLR0917 (the fields, as the generated one takes them)
        self,
        topic: str,
        payload: bytes,
        qos: int = 1,
        retain: bool = False,
        client_id: str = "",
        tenant: str = "default",
        timestamp_ms: int = 0,
        user_properties: tuple[tuple[str, str], ...] = (),
        content_type: str | None = None,
        response_topic: str | None = None,
        correlation_data: bytes | None = None,
        message_expiry_interval: int | None = None,
        seq: int = 0,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        # Written out: mypyc compiles this one, not the one `dataclasses` generates (which
        # a compiled caller reaches through `type.__call__` and an interpreted frame: 0.3 us
        # of the 0.4 a delivery cost, and one is made per delivered message).
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.client_id = client_id
        self.tenant = tenant
        self.timestamp_ms = timestamp_ms
        self.user_properties = user_properties
        self.content_type = content_type
        self.response_topic = response_topic
        self.correlation_data = correlation_data
        self.message_expiry_interval = message_expiry_interval
        self.seq = seq
        self.extra = NO_EXTRA if extra is None else extra

    def payload_text(self) -> str | None:
        """The payload as text when it is valid UTF-8, else None."""
        try:
            return self.payload.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def topic_level(self, index: int) -> str:
        """Level `index` of the topic (1-based, as templates count), "" past the end."""
        levels = self.topic.split("/")
        return levels[index - 1] if 0 < index <= len(levels) else ""


def envelope(delivery: Delivery, *, payload_encoding: str = "auto") -> dict[str, Any]:
    """The JSON object a sink writes for one delivery.

    `payload` is UTF-8 text when the payload is valid UTF-8 (`payload_encoding` "auto", the
    default) and base64 otherwise, with `"payload_encoding": "base64"`; "base64" always
    encodes. `timestamp` is unix milliseconds. Absent MQTT 5 properties are left out.
    """
    # Made once per delivered message: written out, without helper calls.
    payload = delivery.payload
    text: str | None = None
    if payload_encoding == "auto":
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    if text is not None:
        body: dict[str, Any] = {"topic": delivery.topic, "payload": text}
    else:
        body = {
            "topic": delivery.topic,
            "payload": base64.b64encode(payload).decode("ascii"),
            "payload_encoding": "base64",
        }
    body["qos"] = delivery.qos
    body["retain"] = delivery.retain
    body["client_id"] = delivery.client_id
    body["tenant"] = delivery.tenant
    body["timestamp"] = delivery.timestamp_ms
    if delivery.user_properties:
        body["user_properties"] = [[k, v] for k, v in delivery.user_properties]
    if delivery.content_type is not None:
        body["content_type"] = delivery.content_type
    if delivery.response_topic is not None:
        body["response_topic"] = delivery.response_topic
    if delivery.correlation_data is not None:
        body["correlation_data"] = base64.b64encode(delivery.correlation_data).decode("ascii")
    if delivery.message_expiry_interval is not None:
        body["message_expiry_interval"] = delivery.message_expiry_interval
    if delivery.extra:
        body.update(delivery.extra)
    return body


def _compact_encoder() -> Callable[[object], str]:
    """`json.dumps(value, ensure_ascii=False, separators=(",", ":"))` for envelopes, as
    one C encoder made once: `json.dumps` with arguments builds a `JSONEncoder` and its C
    encoder at every call, which for one envelope costs several times the encoding. Without
    the C accelerator (another Python), `json.dumps` itself."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return lambda value: json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
    # skipkeys, allow_nan): no circular-reference markers (an envelope is a tree).
    encode = make(
        None,
        json.JSONEncoder().default,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        False,
        False,
        True,
    )
    return lambda value: "".join(encode(value, 0))


_COMPACT: Final = _compact_encoder()


def envelope_json(value: object) -> bytes:
    """`value` (an envelope, a list of them) as compact UTF-8 JSON, non-ASCII kept."""
    return _COMPACT(value).encode("utf-8")


_quote: Final[Callable[[str], str]] = json.encoder.encode_basestring
"""A str as a JSON string literal, non-ASCII kept (the C function `json` itself uses)."""


def envelope_text(delivery: Delivery, *, payload_encoding: str = "auto") -> str:
    """`envelope(delivery)` as compact JSON text, the same characters `envelope_json` writes
    for it. A message without MQTT 5 properties (most of them) is written from a template
    without building its dict: a third of the cost, once per delivered message; the quoted
    topic and the publisher's fields are remembered (a few thousand of each) rather than
    quoted again for every message."""
    if _has_properties(delivery):
        return _COMPACT(envelope(delivery, payload_encoding=payload_encoding))
    payload = delivery.payload
    text = _utf8_text(payload) if payload_encoding == "auto" else None
    topic = _TOPICS.get(delivery.topic)
    if topic is None:
        topic = _topic_head(delivery.topic)
    if text is not None:
        head = topic + ',"payload":' + _quote(text)
    else:
        encoded = binascii.b2a_base64(payload, newline=False).decode("ascii")
        head = topic + ',"payload":"' + encoded + '","payload_encoding":"base64"'
    tail = _tail(delivery)
    return head + tail + str(delivery.timestamp_ms) + "}"


def _utf8_text(payload: bytes) -> str | None:
    """`payload` as text when it is valid UTF-8, else None, without raising: a payload that
    is not text (a sensor's binary frame) is common, and for it a `UnicodeDecodeError`
    raised and caught, or a decode with "replace", costs ten times `_is_utf8`'s walk, which
    stops a few bytes past the first high one."""
    if payload.isascii():
        return payload.decode("ascii")
    return payload.decode("utf-8") if _is_utf8(payload) else None


def _is_utf8(data: bytes) -> bool:
    """Whether `data` is valid UTF-8, as Python's strict decoder judges it (the Unicode
    Standard's table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF)."""
    size = len(data)
    at = 0
    while at < size:
        lead = data[at]
        if lead < 0x80:
            at += 1
            continue
        if 0xC2 <= lead <= 0xDF:
            need = 1
            low, high = 0x80, 0xBF
        elif 0xE0 <= lead <= 0xEF:
            need = 2
            low = 0xA0 if lead == 0xE0 else 0x80
            high = 0x9F if lead == 0xED else 0xBF
        elif 0xF0 <= lead <= 0xF4:
            need = 3
            low = 0x90 if lead == 0xF0 else 0x80
            high = 0x8F if lead == 0xF4 else 0xBF
        else:
            return False
        if at + need >= size:
            return False  # cut short
        second = data[at + 1]
        if second < low or second > high:
            return False
        for index in range(at + 2, at + need + 1):
            if data[index] & 0xC0 != 0x80:
                return False
        at += need + 1
    return True


def _has_properties(delivery: Delivery) -> bool:
    """Whether `delivery`'s envelope has more than the template's fields."""
    return bool(
        delivery.user_properties
        or delivery.content_type is not None
        or delivery.response_topic is not None
        or delivery.correlation_data is not None
        or delivery.message_expiry_interval is not None
        or delivery.extra
    )


def _topic_head(topic: str) -> str:
    """The envelope's start up to its quoted topic, remembered in `_TOPICS`."""
    if len(_TOPICS) >= _CACHED:
        _TOPICS.clear()
    head = _TOPICS[topic] = '{"topic":' + _quote(topic)
    return head


def _tail(delivery: Delivery) -> str:
    """The envelope's fields after the payload up to the timestamp's value, remembered in
    `_TAILS` by publisher (one string key: no tuple made and hashed per message)."""
    flags = delivery.qos * 2 + (1 if delivery.retain else 0)
    known = _TAILS.get(delivery.client_id)
    if known is not None and known[1] == flags and known[0] == delivery.tenant:
        return known[2]
    if len(_TAILS) >= _CACHED:
        _TAILS.clear()
    retain = "true" if delivery.retain else "false"
    tail = (
        f',"qos":{delivery.qos},"retain":{retain},'
        f'"client_id":{_quote(delivery.client_id)},"tenant":{_quote(delivery.tenant)},'
        '"timestamp":'
    )
    _TAILS[delivery.client_id] = (delivery.tenant, flags, tail)
    return tail


_CACHED: Final = 4096
"""Entries each of `envelope_text`'s caches holds at most (emptied when full)."""
_TOPICS: dict[str, str] = {}
"""A topic -> the envelope's start up to its quoted topic."""
_TAILS: dict[str, tuple[str, int, str]] = {}
"""client id -> (tenant, qos * 2 + retain, the envelope's fields after the payload up to the
timestamp's value): the same for every message of a publisher at one QoS (one entry per
publisher: made again when its QoS or retain changes)."""


def envelopes_json(batch: Sequence[Delivery], *, payload_encoding: str = "auto") -> bytes:
    """The envelopes of `batch` as one JSON array, UTF-8 (an HTTP body of `body = "array"`):
    the characters `envelope_text` writes for each, joined once (its template written out
    in the loop, into one list: no string per envelope; a run of equal timestamps is made
    text once)."""
    parts: list[str] = []
    auto = payload_encoding == "auto"
    topics = _TOPICS
    stamp = -1
    stamp_text = ""
    for delivery in batch:
        if _has_properties(delivery):
            parts.append(_COMPACT(envelope(delivery, payload_encoding=payload_encoding)))
            parts.append(",")
            continue
        topic = topics.get(delivery.topic)
        if topic is None:
            topic = _topic_head(delivery.topic)
        parts.append(topic)
        payload = delivery.payload
        text = _utf8_text(payload) if auto else None
        if text is not None:
            parts.append(',"payload":')
            parts.append(_quote(text))
        else:
            parts.append(',"payload":"')
            parts.append(binascii.b2a_base64(payload, newline=False).decode("ascii"))
            parts.append('","payload_encoding":"base64"')
        parts.append(_tail(delivery))
        if delivery.timestamp_ms != stamp:  # a batch's messages share milliseconds
            stamp = delivery.timestamp_ms
            stamp_text = str(stamp)
        parts.append(stamp_text)
        parts.append("},")
    if not parts:
        return b"[]"
    parts[-1] = parts[-1][:-1]  # the last envelope's comma
    return ("[" + "".join(parts) + "]").encode("utf-8")


def payload_from_envelope(body: Mapping[str, Any]) -> bytes:
    """The payload bytes of an envelope made by `envelope` (the inverse, for tests and the
    dead-letter reader). Raises ValueError on a body that is not such an envelope."""
    payload = body.get("payload")
    if not isinstance(payload, str):
        raise ValueError("envelope without a string 'payload'")
    if body.get("payload_encoding") == "base64":
        try:
            return base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"payload is not base64: {exc}") from exc
    return payload.encode("utf-8")


def plain_delivery(  # noqa: PLR0917 (the fields of the Delivery, as its constructor takes them)
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    publisher: str,
    tenant: str,
    created_at: float,
    seq: int,
) -> Delivery:
    """The delivery of a message without MQTT 5 properties nor expiry (most), as
    `delivery_of` makes it, from its fields (a record read from the file needs no
    `Message` for it)."""
    return Delivery(
        topic,
        payload,
        qos,
        retain,
        publisher,
        tenant,
        int(created_at * 1000),
        (),
        None,
        None,
        None,
        None,
        seq,
        NO_EXTRA,
    )


def delivery_of(message: Message, tenant: str, seq: int, now: float) -> Delivery:
    """`message` of `tenant` as a sink receives it at `now`: its publisher as `client_id`,
    the time the broker accepted it, and its Message Expiry Interval as time remaining
    (at least 1 s: an expired message is never handed over [MQTT-3.3.2-5])."""
    props = message.properties
    expiry = None if message.expires_at is None else message.remaining_expiry(now)
    users = props.user_properties
    # Positional, in field order: one is made per delivered message.
    return Delivery(
        message.topic,
        message.payload,
        message.qos,
        message.retain,
        message.publisher_id,
        tenant,
        int(message.created_at * 1000),
        tuple(users) if users else (),
        props.content_type,
        props.response_topic,
        props.correlation_data,
        None if expiry is None else max(1, expiry),
        seq,
        NO_EXTRA,
    )


NO_EXTRA: Final[Mapping[str, str]] = MappingProxyType({})
"""The `extra` of a message's delivery: none, shared."""
