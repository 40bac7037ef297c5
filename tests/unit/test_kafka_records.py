"""The Kafka record form of a Message: every field round-trips; damage is a StorageError."""

from __future__ import annotations

import struct

import pytest

from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.kafka_record import HEADER, decode_message, encode_message


def test_plain_message_round_trips_in_one_header() -> None:
    message = Message("a/b", b"\x00hi", 1, False, Properties(), 1795553050.7913, None, "pub-1")
    key, value, headers = encode_message("default", message)
    assert (key, value) == (b"pub-1", b"\x00hi")
    ((name, packed),) = headers
    assert name == HEADER
    # version, qos, retain, created, expires (NaN), tenant, topic, no properties
    assert packed[:3] == b"\x01\x01\x00"
    assert struct.unpack(">d", packed[3:11]) == (1795553050.7913,)
    assert packed[19:] == b"\x00\x07default\x00\x03a/b"
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
    assert decode_message(key, value, headers) == ("acme", message)


def test_other_headers_are_ignored() -> None:
    message = Message("x", b"p", 0, False, Properties(), 1.5, None, "c")
    key, value, headers = encode_message("t", message)
    assert decode_message(key, value, [("trace", b"1"), *headers]) == ("t", message)


def _packed() -> bytes:
    message = Message("x/y", b"p", 1, False, Properties(), 1.5, None, "c")
    return encode_message("t", message)[2][0][1]


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ([], "without the 'mqttq' header"),
        ([("mqttq", b"")], "without the 'mqttq' header"),
        ([("mqttq", b"\x02" + _packed()[1:])], "version 2"),
        ([("mqttq", _packed()[:1] + b"\x07" + _packed()[2:])], "qos 7"),
        ([("mqttq", _packed()[:-1])], "truncated"),
        ([("mqttq", _packed()[:20])], "not readable"),
        ([("mqttq", _packed() + b"\x05")], "not readable"),
    ],
)
def test_damaged_record_is_a_storage_error(headers: list[tuple[str, bytes]], words: str) -> None:
    with pytest.raises(StorageError, match=words):
        decode_message(b"k", b"v", headers)
