"""How an integration's log (`IntegrationLog`) frames its records on disk.

One record is one message of one tenant:

    length    4 bytes, big-endian: the body's length
    crc       4 bytes, big-endian: CRC-32 of the body
    body      fields length (4 bytes), publisher length (2 bytes), then the fields as the
              Kafka log's `mqttq` header packs them (`pack_fields_raw`: qos, retain, times,
              tenant, topic, MQTT 5 properties), the publisher (UTF-8), the payload

A write cut short by `kill -9` or a power loss leaves a torn record at the end of a segment:
`scan` stops at the last whole record (a length past the data, or a CRC that does not match),
and the log cuts the file there when it opens it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Final

from zlib_ng import zlib_ng

from mqttq.codec.enums import PacketType
from mqttq.codec.properties import encode_properties
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import VERSION, unpack_fields

__all__ = [
    "HEADER_SIZE",
    "PIECES",
    "RecordWriter",
    "decode_body",
    "encode_record",
    "record_size",
    "scan",
]

_HEAD: Final = struct.Struct(">II")
_BODY: Final = struct.Struct(">IH")
HEADER_SIZE: Final = _HEAD.size
MAX_BODY: Final = 1 << 30
"""A length above this is not a record (a torn or damaged header)."""
_LEAD: Final = struct.Struct(">IHBBBd")
"""A body's fixed fields up to the expiry: fields length, publisher length, then
`pack_fields_raw`'s version, qos, retain, created."""
_DOUBLE: Final = struct.Struct(">d")
"""An expiry or a creation time (big-endian IEEE double)."""
_unpack_double: Final = _DOUBLE.unpack_from
_crc32: Final = zlib_ng.crc32
"""Held here, compiled, these are one static each (`zlib_ng.crc32` and `_DOUBLE.unpack_from`
written out look the attribute up at every call: twice per record read).

CRC-32 is zlib's (the same values), computed by zlib-ng: 47 ns for a 130-byte record where
the system's zlib 1.2 takes 159 (it reads a short input a byte at a time), once per record
written and once per record read back."""
_LEAD_FIELDS: Final = _LEAD.size - _BODY.size
"""`_LEAD`'s share of the fields length (version, qos, retain, created)."""
_TENANT_LENGTH: Final = struct.Struct(">H")
_TOPIC_LENGTH: Final = struct.Struct(">H")
_NONE_EXPIRES: Final = _DOUBLE.pack(math.nan)
"""The expiry of a record without one (the NaN `pack_fields_raw` writes)."""
PIECES: Final = 2
"""The pieces `RecordWriter.append` adds to its list for a record."""
MEMO_ENTRIES: Final = 4096
"""Topics and publishers each `RecordWriter` remembers encoded, at most (emptied when full)."""


class RecordWriter:
    """Frames the messages of one tenant as records (the layout in the module docstring,
    byte for byte what `pack_fields_raw` and the framing above make), each as two pieces
    (header, body) added to a caller's list that one join makes a write of, with as
    little per record as the layout allows: the fields up to `created` in one pack, what
    follows it up to the properties remembered per topic (an expiry of none, the tenant,
    the topic: the `tail`), the publisher remembered encoded (`MEMO_ENTRIES` of each), one
    join for the body and one CRC of it."""

    __slots__ = ("_crc", "_head", "_lead", "_publishers", "_tails", "tenant", "tenant_raw")

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.tenant_raw = tenant.encode()
        # Bound once: a call through an attribute skips the method's (or the module's)
        # lookup that `_LEAD.pack(...)` and `zlib_ng.crc32(...)` make each time compiled.
        self._lead: Callable[..., bytes] = _LEAD.pack
        self._head: Callable[..., bytes] = _HEAD.pack
        self._crc: Callable[[bytes], int] = _crc32
        self._tails: dict[str, bytes] = {}
        """topic -> expires (none), tenant length, tenant, topic length, topic."""
        self._publishers: dict[str, bytes] = {}
        """publisher's client id -> its UTF-8."""

    def append(self, out: list[bytes], message: Message) -> int:
        """Frame `message` as one record: its two pieces (`PIECES`) added to `out`; returns
        the record's size."""
        topic = message.topic
        tail = self._tails.get(topic)
        if tail is None:
            tail = self._tail(topic)
        publisher_id = message.publisher_id
        publisher = self._publishers.get(publisher_id)
        if publisher is None:
            publisher = self._publisher(publisher_id)
        props = message.properties
        expires = message.expires_at
        if expires is not None:  # the expiry in place of the remembered none
            tail = _DOUBLE.pack(expires) + tail[_DOUBLE.size :]
        if props.empty_for_publish():  # the common case skips the encoder entirely
            lead = self._lead(
                _LEAD_FIELDS + len(tail),
                len(publisher),
                VERSION,
                message.qos,
                message.retain,
                message.created_at,
            )
            body = b"".join((lead, tail, publisher, message.payload))
        else:
            extra = encode_properties(props, PacketType.PUBLISH)
            lead = self._lead(
                _LEAD_FIELDS + len(tail) + len(extra),
                len(publisher),
                VERSION,
                message.qos,
                message.retain,
                message.created_at,
            )
            body = b"".join((lead, tail, extra, publisher, message.payload))
        out.append(self._head(len(body), self._crc(body)))
        out.append(body)
        return HEADER_SIZE + len(body)

    def _tail(self, topic: str) -> bytes:
        tails = self._tails
        if len(tails) >= MEMO_ENTRIES:
            tails.clear()
        tenant_raw = self.tenant_raw
        raw = topic.encode()
        tail = tails[topic] = b"".join(
            (
                _NONE_EXPIRES,
                _TENANT_LENGTH.pack(len(tenant_raw)),
                tenant_raw,
                _TOPIC_LENGTH.pack(len(raw)),
                raw,
            )
        )
        return tail

    def _publisher(self, publisher_id: str) -> bytes:
        publishers = self._publishers
        if len(publishers) >= MEMO_ENTRIES:
            publishers.clear()
        raw = publishers[publisher_id] = publisher_id.encode()
        return raw


def encode_record(tenant: str, message: Message) -> bytes:
    """`message` of `tenant` as one framed record."""
    out: list[bytes] = []
    RecordWriter(tenant).append(out, message)
    return b"".join(out)


def decode_body(body: bytes | memoryview) -> tuple[str, Message]:
    """`(tenant, message)` from a record's body; StorageError when it is not one."""
    raw = bytes(body)
    try:
        fields_length, publisher_length = _BODY.unpack_from(raw)
    except struct.error:
        raise StorageError("integration log record too short") from None
    start = _BODY.size
    publisher_at = start + fields_length
    payload_at = publisher_at + publisher_length
    if payload_at > len(raw):
        raise StorageError("integration log record truncated")
    try:
        publisher = raw[publisher_at:payload_at].decode()
    except UnicodeDecodeError:
        raise StorageError("integration log record with a bad publisher") from None
    return unpack_fields(raw[start:publisher_at], raw[payload_at:], publisher)


def scan(
    data: bytes | memoryview, base: int = 0, most: int = -1
) -> tuple[list[tuple[int, int, bytes]], int]:
    """The whole records at the start of `data` (at most `most` of them when it is not
    negative) as `(start, end, body)` with positions offset by `base`, and where they end
    (`base` + the bytes they cover): a record cut short, or whose CRC does not match, ends
    the scan. Each body is its own `bytes` (the one copy its CRC and its decoding read)."""
    raw = data if isinstance(data, bytes) else bytes(data)
    size = len(raw)
    records: list[tuple[int, int, bytes]] = []
    at = 0
    while at + HEADER_SIZE <= size and len(records) != most:
        # `_HEAD`, read byte by byte: native arithmetic once compiled, not a struct call.
        length = raw[at] << 24 | raw[at + 1] << 16 | raw[at + 2] << 8 | raw[at + 3]
        crc = raw[at + 4] << 24 | raw[at + 5] << 16 | raw[at + 6] << 8 | raw[at + 7]
        end = at + HEADER_SIZE + length
        if length > MAX_BODY or end > size:
            break
        body = raw[at + HEADER_SIZE : end]
        if _crc32(body) != crc:
            break
        records.append((base + at, base + end, body))
        at = end
    return records, base + at


def record_size(data: bytes | memoryview) -> int | None:
    """The whole size of the record `data` starts with, from its header (None: no whole
    header, or a length no record has)."""
    if len(data) < HEADER_SIZE:
        return None
    length, _ = _HEAD.unpack_from(data)
    return None if length > MAX_BODY else HEADER_SIZE + length


_PLAIN: Final = struct.Struct(">IHBBBddH")
"""A body's lead: fields length, publisher length, then the fields' version, qos, retain,
created, expires (NaN: none) and tenant length."""

_PLAIN_SIZE: Final = 27
"""`_PLAIN.size` as a literal: compiled, a native constant (`_PLAIN.size` is an attribute
lookup at each use; a test holds the two equal)."""
_BODY_SIZE: Final = 6
"""`_BODY.size` as a literal (as `_PLAIN_SIZE`)."""
_CREATED_AT: Final = 9
"""Where `created` starts in a body (after the lengths, version, qos and retain)."""
_EXPIRES_AT: Final = 17

PlainRecord = tuple[str, bytes, int, bool, float, float | None, str]
"""(topic, payload, qos, retain, created, expires, publisher) of a record."""


def decode_plain(body: bytes | memoryview) -> PlainRecord | None:
    """The fields of a record without MQTT 5 properties (most records), read straight from
    its bytes: no `Message`, no `Properties`. None for a record with properties, or one
    that is not whole: `decode_body` reads the first and says what is wrong with the other."""
    raw = body if isinstance(body, bytes) else bytes(body)
    size = len(raw)
    if size < _PLAIN_SIZE:
        return None
    # `_PLAIN`, read byte by byte but for `created`: native arithmetic once compiled.
    fields_length = raw[0] << 24 | raw[1] << 16 | raw[2] << 8 | raw[3]
    publisher_length = raw[4] << 8 | raw[5]
    qos = raw[7]
    retain = raw[8]
    if raw[6] != VERSION or qos > 2 or retain > 1:
        return None
    created = _unpack_double(raw, _CREATED_AT)[0]
    expires: float | None = None
    if raw[_EXPIRES_AT : _EXPIRES_AT + 8] != _NONE_EXPIRES:
        expires = _unpack_double(raw, _EXPIRES_AT)[0]
        if math.isnan(expires):
            expires = None
    tenant_length = raw[_PLAIN_SIZE - 2] << 8 | raw[_PLAIN_SIZE - 1]
    topic_at = _PLAIN_SIZE + tenant_length + 2
    publisher_at = _BODY_SIZE + fields_length
    payload_at = publisher_at + publisher_length
    if topic_at > size or payload_at > size:
        return None
    if topic_at + (raw[topic_at - 2] << 8 | raw[topic_at - 1]) != publisher_at:
        return None  # properties after the topic (or a length that does not add up)
    try:
        topic = raw[topic_at:publisher_at].decode()
        publisher = raw[publisher_at:payload_at].decode()
    except UnicodeDecodeError:
        return None
    return (topic, raw[payload_at:], qos, retain == 1, created, expires, publisher)
