"""The envelope's JSON text (`envelope_text`, `envelopes_json`) is exactly what `json`
writes for `envelope()`: the template for messages without MQTT 5 properties and the
general path give the same bytes, whatever the payload, topic or ids hold."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.integrations.record import (
    Delivery,
    _is_utf8,
    _utf8_text,
    envelope,
    envelope_json,
    envelope_text,
    envelopes_json,
    payload_from_envelope,
)


def reference(delivery: Delivery, encoding: str = "auto") -> str:
    body = envelope(delivery, payload_encoding=encoding)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


CASES = [
    Delivery("t/1", b"21.5"),
    Delivery("t/\u00e9/\u2028", bytes(range(62)), 0, True, 'c"l\\i', "ten\nant", 17),
    Delivery("t", '{"a": "\u00fc\u0000\x1f"}'.encode(), 2, False, "", "default", 1764277200123),
    Delivery("t", b"\xff\xfe"),
    Delivery("t", "a \ufffd kept".encode()),  # U+FFFD of the payload's own: text
    Delivery("t", "\ufffd".encode() + b"\xff"),  # and one beside bytes that are not UTF-8
    Delivery("t", b"\xed\xa0\x80"),  # an encoded surrogate: not UTF-8
    Delivery("t", b"mq\x00\x00\x00\x00\x03\x18\xec\x22\x1d.xX\xee\x00"),  # a bench header
    Delivery("t", b""),
    Delivery("t", b"x", user_properties=(("k", "v"),), content_type="text/plain"),
    Delivery("t", b"x", correlation_data=b"\x00\x01", message_expiry_interval=30),
    Delivery("t", b"x", response_topic="r/1", extra={"event": "connected"}),
]


@pytest.mark.parametrize("delivery", CASES)
@pytest.mark.parametrize("encoding", ["auto", "base64"])
def test_the_envelope_text_is_what_json_writes_for_the_envelope(
    delivery: Delivery, encoding: str
) -> None:
    text = envelope_text(delivery, payload_encoding=encoding)
    assert text == reference(delivery, encoding)
    assert envelope_json(envelope(delivery, payload_encoding=encoding)) == text.encode()
    assert payload_from_envelope(json.loads(text)) == delivery.payload


def test_a_batch_is_one_json_array_of_the_envelopes() -> None:
    body = envelopes_json(CASES)
    assert body == ("[" + ",".join(reference(d) for d in CASES) + "]").encode()
    assert [payload_from_envelope(item) for item in json.loads(body)] == [d.payload for d in CASES]


@given(
    topic=st.text(min_size=1),
    payload=st.binary() | st.text().map(str.encode),
    client_id=st.text(),
    tenant=st.text(),
    retain=st.booleans(),
    qos=st.integers(0, 2),
    timestamp=st.integers(0, 2**53),
)
def test_any_message_without_properties_is_written_as_json_would(  # noqa: PLR0917 (fields)
    topic: str,
    payload: bytes,
    client_id: str,
    tenant: str,
    retain: bool,
    qos: int,
    timestamp: int,
) -> None:
    delivery = Delivery(topic, payload, qos, retain, client_id, tenant, timestamp)
    assert envelope_text(delivery) == reference(delivery)


@given(
    st.lists(
        st.builds(
            Delivery,
            topic=st.text(min_size=1, max_size=8),
            payload=st.binary(max_size=8) | st.text(max_size=8).map(str.encode),
            client_id=st.sampled_from(["a", "b", 'c"\\']),
            content_type=st.none() | st.just("text/plain"),
            timestamp_ms=st.integers(0, 2**53),
        ),
        max_size=6,
    ),
    st.sampled_from(["auto", "base64"]),
)
def test_any_batch_is_the_array_of_its_envelopes(batch: list[Delivery], encoding: str) -> None:
    expected = "[" + ",".join(reference(d, encoding) for d in batch) + "]"
    assert envelopes_json(batch, payload_encoding=encoding) == expected.encode()


def test_remembered_topics_and_publishers_never_mix_up_messages() -> None:
    """The quoted topic and the publisher's fields are remembered between messages: more
    topics and publishers than the memory holds, seen twice, each message exactly as `json`
    writes it (the same publisher at another QoS, retain flag or tenant is another)."""
    deliveries = [
        Delivery(f"t/{n % 5000}", b"p", n % 3, n % 2 == 0, f"dev-{n % 4500}", f"ten-{n % 3}", n)
        for n in range(10_000)
    ]
    for delivery in deliveries:
        assert envelope_text(delivery) == reference(delivery)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# Bytes around every boundary of UTF-8's table (leads, continuation ranges, what is never
# valid), so that short random strings of them hit each rule often.
_EDGES = st.sampled_from(
    bytes.fromhex("00 7f 80 8f 90 9f a0 bf c0 c1 c2 df e0 e1 ec ed ee ef f0 f1 f3 f4 f5 ff")
)


@given(
    st.one_of(
        st.binary(max_size=12),
        st.lists(_EDGES, max_size=8).map(bytes),
        st.text(max_size=8).map(lambda text: text.encode("utf-8", "surrogatepass")),
    )
)
def test_utf8_is_judged_as_the_strict_decoder_judges_it(data: bytes) -> None:
    assert _is_utf8(data) == _decodes(data)
    assert _utf8_text(data) == (data.decode("utf-8") if _decodes(data) else None)


def test_utf8_every_lead_and_second_byte_and_every_later_byte_is_judged_right() -> None:
    # Every rule of the table is on a sequence's first two bytes (leads, the ranges after
    # E0, ED, F0 and F4) or on a later byte being a continuation byte: all of them, once.
    cases = [
        bytes((lead, second)) + tail
        for lead in range(256)
        for second in range(256)
        for tail in (b"", b"\x80", b"\x80\x80")
    ]
    cases += [bytes((0xE1, 0x80, third)) for third in range(256)]
    cases += [bytes((0xF1, 0x80, third, 0x80)) for third in range(256)]
    cases += [bytes((0xF1, 0x80, 0x80, fourth)) for fourth in range(256)]
    assert [data for data in cases if _is_utf8(data) != _decodes(data)] == []
