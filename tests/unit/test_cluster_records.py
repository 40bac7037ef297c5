"""mqttq/cluster/records.py and replica.py: the cluster's records as bytes, and which
records a process applies to its copy of a compacted topic."""

from __future__ import annotations

import pytest

from mqttq.cluster.records import (
    DOWNLINK_START,
    SessionInfo,
    decode_downlinks,
    decode_retained,
    decode_session,
    decode_subscriptions,
    encode_downlink,
    encode_retained,
    encode_session,
    encode_subscriptions,
    retained_key,
    split_retained_key,
)
from mqttq.cluster.replica import ReplicaReader, new_marker, record_headers
from mqttq.codec.packets import Will
from mqttq.codec.properties import Properties
from mqttq.errors import StorageError
from mqttq.model import Message, Subscription
from mqttq.storage.ports import QueuedMessage


def test_session_info_round_trips() -> None:
    info = SessionInfo("node-2", "node-2", 5, 3600, "DEVICE", "acme", None, "r-1")
    assert decode_session(encode_session(info)) == info
    offline = SessionInfo(None, "node-1", 4, 0, "APPLICATION", "default", 1700000000.5)
    assert decode_session(encode_session(offline)) == offline
    props = Properties(will_delay_interval=30, content_type="text/plain")
    will = Will("w/gone", b"\x00bye\xff", 1, True, props)
    willing = SessionInfo("node-3", "node-3", 5, 60, "DEVICE", "acme", None, "r-2", will)
    assert decode_session(encode_session(willing)) == willing


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"node": null}', b"not json"])
def test_unreadable_session_records_are_storage_errors(raw: bytes) -> None:
    with pytest.raises(StorageError):
        decode_session(raw)


def test_subscriptions_round_trip_with_their_tenant() -> None:
    subs = [
        Subscription("a/+", 1),
        Subscription("$share/g/b/#", 2, False, True, 1, 7),
    ]
    assert decode_subscriptions(encode_subscriptions("acme", subs)) == ("acme", subs)


def test_retained_key_and_value_round_trip() -> None:
    key = retained_key("ten/ant", 'a/"b"')
    assert split_retained_key(key) == ("ten/ant", 'a/"b"')
    message = Message("a/b", b"\x00\xff", 1, True, Properties(content_type="x"), 10.0, None, "p")
    back = decode_retained(encode_retained(message))
    assert (back.topic, back.payload, back.qos, back.retain) == ("a/b", b"\x00\xff", 1, True)
    assert back.properties.content_type == "x"
    with pytest.raises(StorageError):
        split_retained_key("plain")


def test_downlink_records_carry_subscriber_publisher_entry_and_ids() -> None:
    message = Message("t/1", b"hi", 2, False, Properties(), 5.0, 99.0, "pub-1", (3, 9))
    entry = QueuedMessage(65537, 2, message)
    plain = Message("t/2", b"", 1, True, Properties(content_type="x"), 6.0, None, "p\u00e9")
    value = DOWNLINK_START + b"".join(
        (
            encode_downlink("sub-1", "acme", message, entry),
            encode_downlink("sub-2", "default", plain),
        )
    )
    got, basic = decode_downlinks(value)
    assert (got.client_id, got.tenant) == ("sub-1", "acme")
    assert (got.message.topic, got.message.payload, got.message.qos) == ("t/1", b"hi", 2)
    assert got.message.publisher_id == "pub-1"
    assert got.message.subscription_identifiers == (3, 9)
    assert got.message.properties.subscription_identifiers == []
    assert got.message.expires_at == 99.0
    assert got.entry is not None
    assert (got.entry.serial, got.entry.packet_id) == (65537, 2)
    assert (basic.client_id, basic.tenant, basic.entry) == ("sub-2", "default", None)
    assert (basic.message.topic, basic.message.payload, basic.message.retain) == ("t/2", b"", True)
    assert (basic.message.publisher_id, basic.message.properties.content_type) == ("p\u00e9", "x")
    assert basic.message.expires_at is None
    for damaged in (value[:-1], b"\x01" + value[1:], value[:20]):
        with pytest.raises(StorageError):
            decode_downlinks(damaged)


def test_a_process_skips_its_own_writes_and_markers_but_not_its_past_lives() -> None:
    reader = ReplicaReader("me")
    marker = new_marker()
    reader.marker, reader.caught_up = marker, False
    mine = record_headers("node-1", "me")
    earlier_life = record_headers("node-1", "before")
    other = record_headers("node-2", "them")
    assert reader.read(b"c1", b"v", earlier_life) is not None
    assert reader.read(b"c1", b"v", mine) is None
    assert reader.read(new_marker().encode(), b"1", other) is None
    assert not reader.caught_up
    assert reader.read(marker.encode(), b"1", mine) is None
    assert reader.caught_up
    change = reader.read(b"c2", b"", other)
    assert change is not None and (change.key, change.value) == ("c2", None)  # a delete
    assert reader.read(None, b"v", other) is None
