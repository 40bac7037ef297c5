"""Hypothesis: the broker's hot-path shortcuts give exactly what the general paths give.

- `encode_publish` / `encode_short_ack` write the bytes `encode_packet` writes for the
  same packet, and so does a `publish_template` once given its packet id, and the
  broker's cache of templates (`EncodedPublishes`) for any mix of messages and levels;
- the router's per-topic match cache never outlives a subscription change: after any
  sequence of subscribe / unsubscribe / route calls, a router answers like a fresh one
  that was given only the subscriptions still in force;
- a stored message's JSON encoded once for many entries (`MessageJson`) is the JSON
  `message_to_json` writes per entry, and the decode memo gives what `message_from_json`
  gives.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.broker.delivery.encoded import EncodedPublishes
from mqttq.codec import encode_packet
from mqttq.codec.enums import PacketType
from mqttq.codec.packets import (
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
)
from mqttq.codec.properties import Properties
from mqttq.codec.reader import NO_PROPERTIES, REASON_CODES
from mqttq.codec.writer import encode_publish, encode_short_ack, publish_template
from mqttq.model import Message, Subscription
from mqttq.reasons import ReasonCode
from mqttq.routing.router import Delivery, Router
from mqttq.storage.formats.tbmq_json import (
    PUBLISH,
    PUBREL,
    DecodedMessages,
    MessageJson,
    message_from_json,
    message_to_json,
)

from .strategies import LEVELS, publish_packets

_FAST = settings(max_examples=150, deadline=None)

_ACKS: dict[
    PacketType, type[PubackPacket] | type[PubrecPacket] | type[PubrelPacket] | type[PubcompPacket]
] = {
    PacketType.PUBACK: PubackPacket,
    PacketType.PUBREC: PubrecPacket,
    PacketType.PUBREL: PubrelPacket,
    PacketType.PUBCOMP: PubcompPacket,
}


@_FAST
@given(data=st.data(), level=st.sampled_from(LEVELS))
def test_encode_publish_equals_encode_packet(data: st.DataObject, level: int) -> None:
    packet = data.draw(publish_packets(level))
    fields = (packet.topic, packet.payload, packet.qos, packet.retain, packet.dup)
    encoded = encode_publish(*fields, packet.packet_id, packet.properties, level)
    assert encoded == encode_packet(packet, level)


def _with_id(head: bytes, tail: bytes, packet_id: int | None) -> bytes:
    return head + (b"" if packet_id is None else packet_id.to_bytes(2, "big")) + tail


@_FAST
@given(data=st.data(), level=st.sampled_from(LEVELS))
def test_a_publish_template_with_its_packet_id_is_the_packet(
    data: st.DataObject, level: int
) -> None:
    packet = replace(data.draw(publish_packets(level)), dup=False)
    fields = (packet.topic, packet.payload, packet.qos, packet.retain)
    head, tail = publish_template(*fields, packet.properties, level)
    assert _with_id(head, tail, packet.packet_id) == encode_packet(packet, level)


@_FAST
@given(
    data=st.data(),
    sends=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(LEVELS)), max_size=40),
    max_messages=st.integers(1, 3),
)
def test_templates_kept_for_several_messages_stay_each_ones_own(
    data: st.DataObject, sends: list[tuple[int, int]], max_messages: int
) -> None:
    packets = [replace(data.draw(publish_packets(5)), dup=False) for _ in range(4)]
    messages = [
        Message(p.topic, p.payload, p.qos, p.retain, properties=p.properties) for p in packets
    ]
    cache = EncodedPublishes(max_messages=max_messages, max_bytes=1 << 30)
    for index, level in sends:
        packet = packets[index]
        head, tail = cache.template(messages[index], level)
        assert _with_id(head, tail, packet.packet_id) == encode_packet(packet, level)


def test_a_large_publish_is_encoded_each_time_not_kept() -> None:
    cache = EncodedPublishes(max_bytes=16 * 1024)
    large = Message("t", bytes(2048), 1, False)
    head, tail = cache.template(large, 5)
    assert cache.template(large, 5) == (head, tail)
    assert cache.template(large, 5)[1] is not tail  # encoded again: not kept
    small = Message("t", b"x", 1, False)
    assert cache.template(small, 5)[1] is cache.template(small, 5)[1]  # kept


@given(level=st.sampled_from(LEVELS), topic=st.text(min_size=1, max_size=8))
def test_shared_empty_properties_encode_as_empty(level: int, topic: str) -> None:
    topic = topic.replace("\x00", "")
    packet = PublishPacket(topic or "t", b"x", 1, False, False, 7, Properties())
    expected = encode_packet(packet, level)
    assert encode_publish(topic or "t", b"x", 1, False, False, 7, NO_PROPERTIES, level) == expected


@_FAST
@given(
    packet_type=st.sampled_from(sorted(_ACKS)),
    packet_id=st.integers(1, 65535),
    level=st.sampled_from(LEVELS),
    data=st.data(),
)
def test_encode_short_ack_equals_encode_packet(
    packet_type: PacketType, packet_id: int, level: int, data: st.DataObject
) -> None:
    reason = data.draw(st.sampled_from(sorted(REASON_CODES[packet_type])))
    packet = _ACKS[packet_type](packet_id, ReasonCode(reason))
    assert encode_short_ack(packet_type, packet_id, reason, level) == encode_packet(packet, level)


_CLIENTS = ["c1", "c2", "c3"]
_FILTERS = ["a/b", "a/+", "a/#", "#", "+/b", "$share/g/a/b", "$share/h/a/+", "b"]
_TOPICS = ["a/b", "a/c", "b", "a"]

_operations = st.lists(
    st.tuples(
        st.sampled_from(["sub", "sub", "unsub", "drop", "route"]),
        st.sampled_from(_CLIENTS),
        st.sampled_from(_FILTERS),
        st.sampled_from(_TOPICS),
        st.integers(0, 2),
        st.one_of(st.none(), st.integers(1, 3)),
    ),
    max_size=25,
)
"""(what, client id, filter, topic, QoS, subscription id): each operation uses its part."""


def _plain(deliveries: list[Delivery]) -> list[tuple[str, int, tuple[int, ...]]]:
    return sorted(
        (d.client_id, d.qos, d.subscription_identifiers) for d in deliveries if not d.shared
    )


@_FAST
@given(_operations, st.sampled_from(_TOPICS), st.integers(0, 2))
def test_cached_routes_follow_subscription_changes(
    operations: list[tuple[str, str, str, str, int, int | None]], topic: str, qos: int
) -> None:
    router = Router()
    kept: dict[tuple[str, str], Subscription] = {}
    for what, client_id, topic_filter, routed, op_qos, sid in operations:
        if what == "sub":
            sub = Subscription(topic_filter, qos=op_qos, subscription_identifier=sid)
            router.subscribe(client_id, sub)
            kept[client_id, topic_filter] = sub
        elif what == "unsub":
            router.unsubscribe(client_id, topic_filter)
            kept.pop((client_id, topic_filter), None)
        elif what == "drop":
            router.remove_client(client_id)
            kept = {key: sub for key, sub in kept.items() if key[0] != client_id}
        else:
            router.route(Message(routed, b"", op_qos), lambda _c: True)
    fresh = Router()
    for (client_id, _topic_filter), sub in kept.items():
        fresh.subscribe(client_id, sub)
    message = Message(topic, b"", qos)
    got = router.route(message, lambda _c: True)
    want = fresh.route(message, lambda _c: True)
    assert _plain(got) == _plain(want)
    assert sum(d.shared for d in got) == sum(d.shared for d in want)


@st.composite
def _stored_messages(draw: st.DrawFn) -> Message:
    packet = draw(publish_packets(5))
    created = draw(st.integers(0, 2**41)) / 1000
    expiry = packet.properties.message_expiry_interval
    return Message(
        topic=packet.topic or "t",
        payload=packet.payload,
        qos=packet.qos,
        retain=packet.retain,
        properties=replace(packet.properties, topic_alias=None, subscription_identifiers=[]),
        created_at=created,
        expires_at=None if expiry is None else created + expiry,
        publisher_id=draw(st.text(max_size=8)),
        subscription_identifiers=tuple(draw(st.lists(st.integers(1, 2**28 - 1), max_size=2))),
    )


@_FAST
@given(
    _stored_messages(),
    st.lists(st.tuples(st.text(max_size=12), st.integers(0, 65535)), min_size=1, max_size=4),
    st.sampled_from([PUBLISH, PUBREL]),
)
def test_message_json_encoded_once_equals_message_to_json(
    message: Message, entries: list[tuple[str, int]], packet_type: str
) -> None:
    """The queue adapters encode a message once per batch (`MessageJson`) and once per
    entry before: the text is the same, and decoding through the memo gives the message
    `message_from_json` gives."""
    encoded = MessageJson(message, packet_type)
    decoded = DecodedMessages(max_entries=2)
    for client_id, packet_id in entries:
        text = encoded.for_entry(client_id, packet_id)
        expected = message_to_json(
            message, client_id=client_id, packet_id=packet_id, packet_type=packet_type
        )
        assert text == expected
        stored = message_from_json(expected)
        assert decoded.decode(text) == (stored.message, packet_type)
        assert decoded.decode(text.encode()) == (stored.message, packet_type)
