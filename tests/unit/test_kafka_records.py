"""The Kafka record form of a Message: every field round-trips; damage is a StorageError."""

from __future__ import annotations

import pytest

from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.kafka_records import decode_message, encode_message


def test_plain_message_round_trips_with_readable_headers() -> None:
    message = Message("a/b", b"\x00hi", 1, False, Properties(), 1795553050.7913, None, "pub-1")
    key, value, headers = encode_message("default", message)
    assert (key, value) == (b"pub-1", b"\x00hi")
    assert dict(headers) == {
        "tenant": b"default",
        "topic": b"a/b",
        "qos": b"1",
        "retain": b"0",
        "created_at": b"1795553050.7913",
    }
    assert decode_message(key, value, headers) == ("default", message)


def test_every_publish_property_round_trips() -> None:
    props = Properties(
        payload_format_indicator=1,
        message_expiry_interval=30,
        content_type="text/plain",
        response_topic="r/é",
        correlation_data=b"\x01\x02",
        user_properties=[("k", "v"), ("k", "w")],
    )
    message = Message("t/ü", b"", 2, True, props, 100.25, 130.25, "")
    key, value, headers = encode_message("acme", message)
    assert dict(headers)["expires_at"] == b"130.25"
    assert decode_message(key, value, headers) == ("acme", message)


def test_str_headers_are_accepted() -> None:
    message = Message("x", b"p", 0, False, Properties(), 1.5, None, "c")
    key, value, headers = encode_message("t", message)
    as_text = [(name, raw.decode()) for name, raw in headers]
    assert decode_message(key, value, as_text) == ("t", message)


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ([("topic", b"x"), ("qos", b"1"), ("created_at", b"1")], "'tenant'"),
        ([("tenant", b"t"), ("topic", b"x"), ("qos", b"7"), ("created_at", b"1")], "not readable"),
        ([("tenant", b"t"), ("topic", b"x"), ("qos", b"1"), ("created_at", b"z")], "not readable"),
        (
            [
                ("tenant", b"t"),
                ("topic", b"x"),
                ("qos", b"1"),
                ("created_at", b"1"),
                ("props", b"\x05"),
            ],
            "not readable",
        ),
    ],
)
def test_damaged_record_is_a_storage_error(headers: list[tuple[str, bytes]], words: str) -> None:
    with pytest.raises(StorageError, match=words):
        decode_message(b"k", b"v", headers)
