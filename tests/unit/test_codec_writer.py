"""Encoding: exact bytes, the shortest 5.0 forms, 3.x down-mapping, and refused values."""

from __future__ import annotations

import pytest

from mqttq.codec import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    Properties,
    ProtocolLevel,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    ReasonCode,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
    UnsubackPacket,
    UnsubscribePacket,
    Will,
    encode_packet,
)
from mqttq.codec.primitives import encode_string, encode_varint
from mqttq.codec.writer import encode_publish

from .test_codec_reader import VECTORS

RC = ReasonCode


@pytest.mark.parametrize(
    ("level", "wire", "packet"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_packets_encode_to_the_spec_bytes(level: int, wire: bytes, packet: Packet) -> None:
    assert encode_packet(packet, level) == wire


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_151, b"\xff\xff\x7f"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_variable_byte_integer_uses_the_fewest_bytes(value: int, wire: bytes) -> None:
    assert encode_varint(value) == wire


@pytest.mark.parametrize("value", [-1, 268_435_456])
def test_variable_byte_integer_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize("text", ["a\x00b", "\ud800", "x" * 65_536])
def test_strings_the_wire_cannot_carry(text: str) -> None:
    with pytest.raises(ValueError):
        encode_string(text)


@pytest.mark.parametrize("topic", ["a\x00b", "\x00", "x" * 65_536])
def test_publish_topics_the_wire_cannot_carry(topic: str) -> None:
    """The delivery path's `encode_publish` refuses what `encode_packet` refuses."""
    with pytest.raises(ValueError):
        encode_publish(topic, b"p", 1, False, False, 1, Properties(), 5)
    with pytest.raises(ValueError):
        encode_packet(PublishPacket(topic, b"p", 1, packet_id=1), 5)


def test_publish_with_a_two_byte_remaining_length() -> None:
    wire = encode_packet(PublishPacket("t", b"\xab" * 200, 1, packet_id=1), 4)
    assert wire[:8] == b"\x32\xcd\x01\x00\x01t\x00\x01"  # remaining length 205
    assert wire[8:] == b"\xab" * 200


# --- 5.0 shortest forms [MQTT-3.4.2.1, MQTT-3.14.2.1, MQTT-3.15.2.1] ----------------------


@pytest.mark.parametrize(
    ("packet", "wire"),
    [
        (PubackPacket(7), b"\x40\x02\x00\x07"),
        (PubrecPacket(7), b"\x50\x02\x00\x07"),
        (PubrelPacket(7), b"\x62\x02\x00\x07"),
        (PubcompPacket(7), b"\x70\x02\x00\x07"),
        (PubackPacket(7, RC.QUOTA_EXCEEDED), b"\x40\x03\x00\x07\x97"),
        (
            PubackPacket(7, properties=Properties(reason_string="r")),
            b"\x40\x08\x00\x07\x00\x04\x1f\x00\x01r",
        ),
        (DisconnectPacket(), b"\xe0\x00"),
        (DisconnectPacket(RC.SESSION_TAKEN_OVER), b"\xe0\x01\x8e"),
        (
            DisconnectPacket(properties=Properties(reason_string="r")),
            b"\xe0\x06\x00\x04\x1f\x00\x01r",
        ),
        (AuthPacket(), b"\xf0\x00"),
        (AuthPacket(RC.RE_AUTHENTICATE), b"\xf0\x01\x19"),
    ],
)
def test_5_0_writes_the_shortest_form(packet: Packet, wire: bytes) -> None:
    assert encode_packet(packet, 5) == wire


def test_5_0_writes_only_the_properties_a_packet_may_carry() -> None:
    props = Properties(reason_string="r", session_expiry_interval=5, topic_alias=3)
    assert encode_packet(PubackPacket(7, properties=props), 5) == (
        b"\x40\x08\x00\x07\x00\x04\x1f\x00\x01r"
    )
    publish = PublishPacket("t", properties=Properties(topic_alias=3, reason_string="r"))
    assert encode_packet(publish, 5) == b"\x30\x07\x00\x01t\x03\x23\x00\x03"


# --- 3.x: what the level cannot carry is dropped or mapped ---------------------------------


@pytest.mark.parametrize(
    ("reason", "return_code"),
    [
        (RC.SUCCESS, 0),
        (RC.UNSUPPORTED_PROTOCOL_VERSION, 1),
        (RC.CLIENT_IDENTIFIER_NOT_VALID, 2),
        (RC.SERVER_UNAVAILABLE, 3),
        (RC.BAD_USER_NAME_OR_PASSWORD, 4),
        (RC.NOT_AUTHORIZED, 5),
        (RC.UNSPECIFIED_ERROR, 3),
        (RC.QUOTA_EXCEEDED, 3),
        (RC.BANNED, 3),
        (RC.SERVER_BUSY, 3),
        (RC.CONNECTION_RATE_EXCEEDED, 3),
    ],
)
@pytest.mark.parametrize("level", [3, 4])
def test_3x_connack_maps_reason_codes_to_return_codes(
    level: int, reason: ReasonCode, return_code: int
) -> None:
    assert encode_packet(ConnackPacket(False, reason), level) == bytes((0x20, 2, 0, return_code))


def test_3x_connack_session_present_only_in_3_1_1_and_only_on_success() -> None:
    assert encode_packet(ConnackPacket(True), 4) == b"\x20\x02\x01\x00"
    assert encode_packet(ConnackPacket(True), 3) == b"\x20\x02\x00\x00"
    assert encode_packet(ConnackPacket(True, RC.NOT_AUTHORIZED), 4) == b"\x20\x02\x00\x05"
    assert encode_packet(ConnackPacket(True, RC.NOT_AUTHORIZED), 5) == b"\x20\x03\x00\x87\x00"


def test_3x_connack_refuses_a_non_error_reason_without_return_code() -> None:
    with pytest.raises(ValueError):
        encode_packet(ConnackPacket(False, RC.GRANTED_QOS_1), 4)


def test_3x_suback_writes_any_error_as_0x80() -> None:
    packet = SubackPacket(
        10, [RC.GRANTED_QOS_0, RC.GRANTED_QOS_2, RC.NOT_AUTHORIZED, RC.QUOTA_EXCEEDED]
    )
    assert encode_packet(packet, 4) == b"\x90\x06\x00\x0a\x00\x02\x80\x80"
    assert encode_packet(packet, 3) == b"\x90\x06\x00\x0a\x00\x02\x80\x80"


@pytest.mark.parametrize("level", [3, 4])
def test_3x_drops_5_0_only_fields(level: int) -> None:
    props = Properties(reason_string="r", user_properties=[("k", "v")])
    assert encode_packet(UnsubackPacket(11, [RC.NO_SUBSCRIPTION_EXISTED], props), level) == (
        b"\xb0\x02\x00\x0b"
    )
    assert encode_packet(DisconnectPacket(RC.SERVER_SHUTTING_DOWN, props), level) == b"\xe0\x00"
    assert encode_packet(PubackPacket(7, RC.NOT_AUTHORIZED, props), level) == b"\x40\x02\x00\x07"
    publish = PublishPacket("t", b"!", properties=Properties(message_expiry_interval=9))
    assert encode_packet(publish, level) == b"\x30\x04\x00\x01t!"
    subscribe = SubscribePacket(
        1, [SubscriptionRequest("a", 1, True, True, 2)], Properties(subscription_identifiers=[4])
    )
    assert encode_packet(subscribe, level) == b"\x82\x06\x00\x01\x00\x01a\x01"
    will = Will("w", b"", properties=Properties(will_delay_interval=5))
    connect = ConnectPacket(
        "c", ProtocolLevel(level), will=will, properties=Properties(receive_maximum=5)
    )
    name = b"\x00\x04MQTT\x04" if level == 4 else b"\x00\x06MQIsdp\x03"
    assert encode_packet(connect, level) == (
        bytes((0x10, len(name) + 11)) + name + b"\x06\x00\x3c\x00\x01c\x00\x01w\x00\x00"
    )


@pytest.mark.parametrize("level", [3, 4])
def test_auth_cannot_be_written_below_5_0(level: int) -> None:
    with pytest.raises(ValueError):
        encode_packet(AuthPacket(), level)


# --- values no level can carry -------------------------------------------------------------

REFUSED: list[tuple[str, Packet, int]] = [
    ("packet id 0", PubackPacket(0), 4),
    ("packet id 65536", PubackPacket(65536), 5),
    ("QoS 1 PUBLISH without packet id", PublishPacket("t", qos=1), 4),
    ("QoS 0 PUBLISH with a packet id", PublishPacket("t", packet_id=1), 4),
    ("QoS 0 PUBLISH with DUP", PublishPacket("t", dup=True), 5),
    ("PUBLISH QoS 3", PublishPacket("t", qos=3, packet_id=1), 4),
    ("topic with U+0000", PublishPacket("a\x00", qos=0), 4),
    ("SUBSCRIBE without filters", SubscribePacket(1, []), 4),
    ("UNSUBSCRIBE without filters", UnsubscribePacket(1, []), 5),
    ("subscription QoS 3", SubscribePacket(1, [SubscriptionRequest("a", 3)]), 4),
    ("retain handling 3", SubscribePacket(1, [SubscriptionRequest("a", 0, retain_handling=3)]), 5),
    (
        "two subscription ids in SUBSCRIBE",
        SubscribePacket(1, [SubscriptionRequest("a")], Properties(subscription_identifiers=[1, 2])),
        5,
    ),
    (
        "subscription id 0",
        PublishPacket("t", properties=Properties(subscription_identifiers=[0])),
        5,
    ),
    ("receive maximum too big", ConnackPacket(properties=Properties(receive_maximum=70_000)), 5),
    ("PUBACK with a SUBACK-only code", PubackPacket(1, RC.GRANTED_QOS_2), 5),
    ("PUBREL with a PUBACK-only code", PubrelPacket(1, RC.QUOTA_EXCEEDED), 5),
    ("CONNACK with a DISCONNECT-only code", ConnackPacket(False, RC.SESSION_TAKEN_OVER), 5),
    ("SUBACK 3.x with NO_SUBSCRIPTION_EXISTED", SubackPacket(1, [RC.NO_SUBSCRIPTION_EXISTED]), 4),
    ("3.1.1 password without user name", ConnectPacket("c", ProtocolLevel(4), password=b"p"), 4),
    ("CONNECT written at another level", ConnectPacket("c", ProtocolLevel.MQTT_5), 4),
    ("will QoS 3", ConnectPacket("c", will=Will("w", b"", qos=3)), 5),
    ("keep alive 65536", ConnectPacket("c", keep_alive=65_536), 5),
    ("unknown protocol level", PubackPacket(1), 6),
]


@pytest.mark.parametrize(("packet", "level"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_unencodable_values_raise_value_error(packet: Packet, level: int) -> None:
    with pytest.raises(ValueError):
        encode_packet(packet, level)
