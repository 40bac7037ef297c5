"""An integration's log records as `RecordWriter` frames them: byte for byte the layout the
logs already on disk were written in (golden records, and the layout's reference framing
below for any message), several records into one buffer, and the memos of topics and
publishers bounded."""

from __future__ import annotations

import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.codec.properties import Properties
from mqttq.integrations import log_records
from mqttq.integrations.log_records import (
    MEMO_ENTRIES,
    PIECES,
    RecordWriter,
    decode_body,
    scan,
)
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import pack_fields_raw


def append_record(out: bytearray, tenant_raw: bytes, message: Message) -> int:
    """The layout in log_records' docstring, written plainly from `pack_fields_raw` (the
    framing the logs on disk were written with): length, CRC-32, then the body (fields
    length, publisher length, fields, publisher, payload). Returns the record's size."""
    fields = pack_fields_raw(tenant_raw, message)
    publisher = message.publisher_id.encode()
    body = struct.pack(">IH", len(fields), len(publisher)) + fields + publisher + message.payload
    out += struct.pack(">II", len(body), zlib.crc32(body)) + body
    return 8 + len(body)


GOLDEN = [
    (
        "default",
        Message("t/1", b"x" * 62, 1, False, created_at=1_700_000_000.25, publisher_id="p1"),
        "000000679c4fe08b00000021000201010041d954fc401000007ff8000000000000000764656661756c74"
        "0003742f317031" + "78" * 62,
    ),
    (
        "t\u00e9nant",
        Message(
            "sensors/\u00e9t\u00e9/1",
            b"",
            2,
            True,
            Properties(
                content_type="text/plain", user_properties=[("k", "v")], message_expiry_interval=60
            ),
            1_700_000_001.5,
            1_700_000_061.5,
            "dev-\u00fc",
        ),
        "000000531e73379c00000047000601020141d954fc4060000041d954fc4f600000000774c3a96e616e74"
        "000f73656e736f72732fc3a974c3a92f3119020000003c03000a746578742f706c61696e2600016b0001"
        "766465762dc3bc",
    ),
    (
        "default",
        Message("a", b"\x00\xff", 0, False, created_at=0.0, publisher_id=""),
        "00000027779acc150000001f000001000000000000000000007ff8000000000000000764656661756c74"
        "00016100ff",
    ),
]
"""Records as the log wrote them before `RecordWriter` (f6a7091): a file of that time reads."""


def test_records_are_framed_byte_for_byte_as_before() -> None:
    for tenant, message, expected in GOLDEN:
        out: list[bytes] = []
        size = RecordWriter(tenant).append(out, message)
        assert len(out) == PIECES
        assert b"".join(out).hex() == expected
        assert size == len(b"".join(out))


def test_golden_records_read_back() -> None:
    data = bytes.fromhex("".join(expected for _, _, expected in GOLDEN))
    records, end = scan(data)
    assert end == len(data)
    got = [decode_body(body) for _, _, body in records]
    assert [(t, m.topic, m.payload, m.publisher_id) for t, m in got] == [
        (t, m.topic, m.payload, m.publisher_id) for t, m, _ in GOLDEN
    ]
    assert got[1][1].expires_at == 1_700_000_061.5
    assert got[1][1].properties.content_type == "text/plain"


texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=30)
messages = st.builds(
    lambda topic, payload, qos, retain, publisher, content_type, expires: Message(
        topic or "t",
        payload,
        qos,
        retain,
        Properties(content_type=content_type),
        1_700_000_000.5,
        expires,
        publisher,
    ),
    texts,
    st.binary(max_size=200),
    st.integers(0, 2),
    st.booleans(),
    texts,
    st.none() | texts,
    st.none() | st.floats(0, 2e9),
)


@settings(max_examples=100)
@given(st.lists(messages, min_size=1, max_size=6), st.text(min_size=1, max_size=10))
def test_a_write_of_records_is_what_the_reference_framing_makes(
    items: list[Message], tenant: str
) -> None:
    writer = RecordWriter(tenant)
    out = [b"before"]  # records go after what the list holds
    reference = bytearray(b"before")
    for item in items:
        assert writer.append(out, item) == append_record(reference, tenant.encode(), item)
    assert b"".join(out) == reference


def test_the_memos_are_bounded_and_stay_right_past_their_bound() -> None:
    writer = RecordWriter("default")
    count = MEMO_ENTRIES + 10
    out: list[bytes] = []
    reference = bytearray()
    for index in range(count):
        message = Message(f"t/{index}", b"p", 1, False, created_at=1.0, publisher_id=f"c{index}")
        writer.append(out, message)
        append_record(reference, b"default", message)
    assert b"".join(out) == reference
    assert len(writer._tails) <= MEMO_ENTRIES
    assert len(writer._publishers) <= MEMO_ENTRIES


def test_the_layout_sizes_written_as_literals_are_the_structs_sizes() -> None:
    assert log_records._PLAIN.size == log_records._PLAIN_SIZE
    assert log_records._BODY.size == log_records._BODY_SIZE
