"""The TBMQ-form JSON of a queued message: round trip, TBMQ's own entries, bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message
from mqttq.storage.formats.tbmq_json import (
    PUBLISH,
    PUBREL,
    DecodedMessages,
    message_from_json,
    message_to_json,
)

_ms_times = st.integers(min_value=0, max_value=2**42).map(lambda ms: ms / 1000)
_text = st.text(max_size=20)
_u32 = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Messages as the broker builds them: an expiry interval always comes with expires_at."""
    interval = draw(st.none() | _u32)
    return Message(
        topic=draw(st.text(min_size=1, max_size=40)),
        payload=draw(st.binary(max_size=300)),
        qos=draw(st.integers(min_value=0, max_value=2)),
        retain=draw(st.booleans()),
        properties=Properties(
            payload_format_indicator=draw(st.none() | st.integers(min_value=0, max_value=1)),
            message_expiry_interval=interval,
            content_type=draw(st.none() | _text),
            response_topic=draw(st.none() | _text),
            correlation_data=draw(st.none() | st.binary(max_size=40)),
            user_properties=draw(st.lists(st.tuples(_text, _text), max_size=4)),
        ),
        created_at=draw(_ms_times),
        expires_at=None if interval is None else draw(_ms_times),
        publisher_id=draw(_text),
        subscription_identifiers=tuple(
            draw(st.lists(st.integers(min_value=1, max_value=268_435_455), max_size=3))
        ),
    )


@given(
    message=messages(),
    client_id=_text,
    packet_id=st.integers(min_value=0, max_value=65535),
    packet_type=st.sampled_from([PUBLISH, PUBREL]),
)
def test_round_trip(message: Message, client_id: str, packet_id: int, packet_type: str) -> None:
    text = message_to_json(
        message, client_id=client_id, packet_id=packet_id, packet_type=packet_type
    )
    stored = message_from_json(text)
    assert stored.message == message
    assert (stored.client_id, stored.packet_id, stored.packet_type) == (
        client_id,
        packet_id,
        packet_type,
    )
    assert message_from_json(text.encode()).message == message


def test_field_names_follow_tbmq() -> None:
    message = Message(
        topic="dev/1",
        payload=b"hi",
        qos=1,
        retain=True,
        properties=Properties(
            message_expiry_interval=60,
            payload_format_indicator=1,
            content_type="text/plain",
            response_topic="resp",
            correlation_data=b"\x01",
            user_properties=[("a", "b")],
        ),
        created_at=1_700_000_000.0,
        expires_at=1_700_000_060.0,
        publisher_id="pub",
        subscription_identifiers=(3,),
    )
    obj = json.loads(message_to_json(message, client_id="sub", packet_id=7))
    assert obj == {
        "clientId": "sub",
        "topicName": "dev/1",
        "time": 1_700_000_000_000,
        "qos": 1,
        "packetId": 7,
        "packetType": "PUBLISH",
        "payload": "aGk=",
        "retained": True,
        "msgExpiryInterval": 60,
        "payloadFormatIndicator": 1,
        "contentType": "text/plain",
        "responseTopic": "resp",
        "correlationData": "AQ==",
        "userProperties": {"props": [{"k": "a", "v": "b"}]},
        "subscriptionIds": [3],
        "expiresAt": 1_700_000_060_000,
        "publisherId": "pub",
    }


def test_absent_values_are_left_out() -> None:
    obj = json.loads(message_to_json(Message(topic="t", payload=b""), client_id="", packet_id=1))
    assert set(obj) == {"clientId", "topicName", "time", "qos", "packetId", "packetType"} | {
        "payload",
        "retained",
    }


def test_reads_an_entry_written_by_tbmq() -> None:
    # The older `topic` name, no expiresAt: expiry comes from time + msgExpiryInterval.
    text = json.dumps(
        {
            "clientId": "sub",
            "topic": "a/b",
            "time": 1_000_500,
            "qos": 2,
            "packetId": 65535,
            "packetType": "PUBREL",
            "payload": "AAE=",
            "retained": False,
            "msgExpiryInterval": 30,
            "userProperties": {"props": [{"k": "x", "v": "y"}]},
            "subscriptionIds": [1, 2],
        }
    )
    stored = message_from_json(text)
    assert (stored.client_id, stored.packet_id, stored.packet_type) == ("sub", 65535, PUBREL)
    m = stored.message
    assert (m.topic, m.payload, m.qos, m.retain) == ("a/b", b"\x00\x01", 2, False)
    assert (m.created_at, m.expires_at) == (1000.5, 1030.5)
    assert m.properties.message_expiry_interval == 30
    assert m.properties.user_properties == [("x", "y")]
    assert m.subscription_identifiers == (1, 2)


def test_accepts_user_properties_as_key_value_list() -> None:
    obj = json.loads(message_to_json(Message(topic="t", payload=b""), client_id="", packet_id=1))
    obj["userProperties"] = [{"key": "k", "value": "v"}]
    assert message_from_json(json.dumps(obj)).message.properties.user_properties == [("k", "v")]


def test_encode_refuses_bad_packet_fields() -> None:
    m = Message(topic="t", payload=b"")
    with pytest.raises(ValueError, match="packet_type"):
        message_to_json(m, client_id="c", packet_id=1, packet_type="PUBACK")
    with pytest.raises(ValueError, match="packet_id"):
        message_to_json(m, client_id="c", packet_id=65536)


_VALID = {"topicName": "t", "qos": 0, "packetId": 1, "packetType": "PUBLISH", "payload": ""}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (b"\xff\xfe", "not valid JSON"),
        (json.dumps({**_VALID, "topicName": None}), "no topicName"),
        (json.dumps({k: v for k, v in _VALID.items() if k != "qos"}), "'qos'"),
        (json.dumps({**_VALID, "qos": 3}), "'qos'"),
        (json.dumps({**_VALID, "qos": True}), "'qos'"),
        (json.dumps({**_VALID, "packetId": 70000}), "'packetId'"),
        (json.dumps({**_VALID, "packetType": "PUBACK"}), "packetType"),
        (json.dumps({**_VALID, "payload": "***"}), "'payload'"),
        (json.dumps({**_VALID, "payload": 5}), "'payload'"),
        (json.dumps({**_VALID, "retained": "yes"}), "'retained'"),
        (json.dumps({**_VALID, "time": "now"}), "'time'"),
        (json.dumps({**_VALID, "userProperties": {"props": [["a", "b"]]}}), "userProperties"),
        (json.dumps({**_VALID, "userProperties": {"props": [{"k": 1}]}}), "userProperties"),
        (json.dumps({**_VALID, "userProperties": 5}), "userProperties"),
        (json.dumps({**_VALID, "subscriptionIds": ["1"]}), "subscriptionIds"),
    ],
)
def test_malformed_entries_raise_storage_error(text: str | bytes, problem: str) -> None:
    with pytest.raises(StorageError, match=problem):
        message_from_json(text)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    obj=st.fixed_dictionaries(
        {},
        optional={
            **{k: _json_values | st.just(v) for k, v in _VALID.items()},
            "userProperties": _json_values,
            "subscriptionIds": _json_values,
            "expiresAt": _json_values,
            "time": _json_values,
            "correlationData": _json_values,
        },
    )
)
def test_foreign_json_only_ever_raises_storage_error(obj: dict[str, object]) -> None:
    try:
        stored = message_from_json(json.dumps(obj))
    except StorageError:
        return
    assert isinstance(stored.message, Message)


@given(text=st.text(max_size=60) | st.binary(max_size=60))
def test_garbage_only_ever_raises_storage_error(text: str | bytes) -> None:
    try:
        message_from_json(text)
    except StorageError:
        return


def test_decode_memo_shares_only_what_differs_in_client_and_packet_id() -> None:
    """Entries of another writer's layout (a field between clientId and topicName) are
    decoded each on their own: two that differ only in that field get their own values."""
    decoded = DecodedMessages()
    first = '{"clientId":"a","time":1000,"topicName":"t","qos":1,"packetId":1,"payload":""}'
    second = '{"clientId":"b","time":2000,"topicName":"t","qos":1,"packetId":2,"payload":""}'
    assert decoded.decode(first)[0].created_at == 1.0
    assert decoded.decode(second)[0].created_at == 2.0
    ours = message_to_json(Message(topic="t", payload=b"x"), client_id='q"1', packet_id=3)
    again = message_to_json(Message(topic="t", payload=b"x"), client_id="q2", packet_id=4)
    assert decoded.decode(ours)[0] is decoded.decode(again.encode())[0]
