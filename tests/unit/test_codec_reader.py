"""Decoding exact spec byte strings, and every malformed case with its reason code."""

from __future__ import annotations

import pytest

from mqttq.codec import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PacketReader,
    PacketType,
    PingreqPacket,
    PingrespPacket,
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
    decode_packet,
    reader,
)
from mqttq.codec.primitives import decode_string, decode_u8, decode_varint
from mqttq.codec.writer import encode_packet
from mqttq.errors import Incomplete, MalformedPacket, PacketTooLarge, ProtocolError

MAX = 268_435_460
RC = ReasonCode

# (name, protocol level, wire bytes, packet). The writer test encodes the same packets and
# expects the same bytes, so each vector is in the writer's canonical (shortest) form.
VECTORS: list[tuple[str, int, bytes, Packet]] = [
    (
        "3.1.1 CONNECT, clean session, user name and password",
        4,
        b"\x10\x1b"
        b"\x00\x04MQTT\x04"  # protocol name, level 4
        b"\xc2\x00\x3c"  # flags: user name, password, clean session; keep alive 60
        b"\x00\x03cid"
        b"\x00\x04user"
        b"\x00\x04pass",
        ConnectPacket("cid", ProtocolLevel.MQTT_3_1_1, True, 60, "user", b"pass"),
    ),
    (
        "3.1 CONNECT with a QoS 2 will",
        3,
        b"\x10\x1c"
        b"\x00\x06MQIsdp\x03"
        b"\x14\x00\x0a"  # flags: will flag, will QoS 2; keep alive 10
        b"\x00\x03c31"
        b"\x00\x03w/t"
        b"\x00\x04gone",
        ConnectPacket("c31", ProtocolLevel.MQTT_3_1, False, 10, will=Will("w/t", b"gone", qos=2)),
    ),
    (
        "5.0 CONNECT with properties and will properties",
        5,
        b"\x10\x35"
        b"\x00\x04MQTT\x05"
        b"\xae\x00\x0a"  # user name, will retain, will QoS 1, will, clean start; keep alive 10
        b"\x0a"  # property length 10
        b"\x11\x00\x00\x00\x3c"  # session expiry interval 60
        b"\x17\x01"  # request problem information 1
        b"\x21\x00\x0a"  # receive maximum 10
        b"\x00\x02c1"
        b"\x0e"  # will property length 14
        b"\x01\x01"  # payload format indicator 1
        b"\x18\x00\x00\x00\x05"  # will delay interval 5
        b"\x26\x00\x01k\x00\x01v"  # user property k=v
        b"\x00\x03w/t"
        b"\x00\x03bye"
        b"\x00\x01u",
        ConnectPacket(
            "c1",
            ProtocolLevel.MQTT_5,
            True,
            10,
            username="u",
            will=Will(
                "w/t",
                b"bye",
                1,
                True,
                Properties(
                    payload_format_indicator=1, will_delay_interval=5, user_properties=[("k", "v")]
                ),
            ),
            properties=Properties(
                session_expiry_interval=60, request_problem_information=1, receive_maximum=10
            ),
        ),
    ),
    ("3.1.1 CONNACK, session present", 4, b"\x20\x02\x01\x00", ConnackPacket(True)),
    (
        "3.1.1 CONNACK, bad user name or password",
        4,
        b"\x20\x02\x00\x04",
        ConnackPacket(False, RC.BAD_USER_NAME_OR_PASSWORD),
    ),
    (
        "3.1 CONNACK, not authorized",
        3,
        b"\x20\x02\x00\x05",
        ConnackPacket(False, RC.NOT_AUTHORIZED),
    ),
    (
        "5.0 CONNACK with properties",
        5,
        b"\x20\x10\x00\x00"
        b"\x0d"  # property length 13
        b"\x12\x00\x03abc"  # assigned client identifier
        b"\x21\x00\x14"  # receive maximum 20
        b"\x24\x01"  # maximum QoS 1
        b"\x25\x00",  # retain not available
        ConnackPacket(
            False,
            RC.SUCCESS,
            Properties(
                assigned_client_identifier="abc",
                receive_maximum=20,
                maximum_qos=1,
                retain_available=0,
            ),
        ),
    ),
    (
        "5.0 CONNACK refused with 0x97",
        5,
        b"\x20\x03\x00\x97\x00",
        ConnackPacket(False, RC.QUOTA_EXCEEDED),
    ),
    ("3.1.1 PUBLISH QoS 0", 4, b"\x30\x0a\x00\x03a/bhello", PublishPacket("a/b", b"hello")),
    (
        "3.1.1 PUBLISH QoS 1, retain, DUP",
        4,
        b"\x3b\x07\x00\x03a/b\x00\x07",
        PublishPacket("a/b", b"", 1, True, True, 7),
    ),
    (
        "3.1 PUBLISH QoS 2",
        3,
        b"\x34\x08\x00\x01t\x12\x34xyz",
        PublishPacket("t", b"xyz", 2, packet_id=0x1234),
    ),
    (
        "5.0 PUBLISH QoS 0 without properties",
        5,
        b"\x30\x05\x00\x01t\x00!",
        PublishPacket("t", b"!"),
    ),
    (
        "5.0 PUBLISH with subscription identifiers and a user property",
        5,
        b"\x33\x17\x00\x03a/b\x00\x07"
        b"\x0d"  # property length 13
        b"\x0b\x01"  # subscription identifier 1
        b"\x0b\x80\x01"  # subscription identifier 128
        b"\x26\x00\x01k\x00\x02v1"  # user property k=v1
        b"hi",
        PublishPacket(
            "a/b",
            b"hi",
            1,
            True,
            False,
            7,
            Properties(subscription_identifiers=[1, 128], user_properties=[("k", "v1")]),
        ),
    ),
    ("3.1.1 PUBACK", 4, b"\x40\x02\x00\x07", PubackPacket(7)),
    ("3.1.1 PUBREC", 4, b"\x50\x02\xff\xff", PubrecPacket(65535)),
    ("3.1.1 PUBREL", 4, b"\x62\x02\x00\x07", PubrelPacket(7)),
    ("3.1 PUBCOMP", 3, b"\x70\x02\x00\x07", PubcompPacket(7)),
    ("5.0 PUBACK short form", 5, b"\x40\x02\x00\x07", PubackPacket(7)),
    (
        "5.0 PUBACK with reason code only",
        5,
        b"\x40\x03\x00\x07\x10",
        PubackPacket(7, RC.NO_MATCHING_SUBSCRIBERS),
    ),
    (
        "5.0 PUBREC with reason string",
        5,
        b"\x50\x08\x00\x07\x80\x04\x1f\x00\x01x",
        PubrecPacket(7, RC.UNSPECIFIED_ERROR, Properties(reason_string="x")),
    ),
    (
        "5.0 PUBREL packet id not found",
        5,
        b"\x62\x03\x00\x07\x92",
        PubrelPacket(7, RC.PACKET_IDENTIFIER_NOT_FOUND),
    ),
    ("5.0 PUBCOMP short form", 5, b"\x70\x02\x00\x07", PubcompPacket(7)),
    (
        "3.1.1 SUBSCRIBE two filters",
        4,
        b"\x82\x0e\x00\x0a\x00\x03a/b\x01\x00\x03c/#\x02",
        SubscribePacket(10, [SubscriptionRequest("a/b", 1), SubscriptionRequest("c/#", 2)]),
    ),
    (
        "5.0 SUBSCRIBE with options and a subscription identifier",
        5,
        b"\x82\x0b\x00\x0a"
        b"\x02\x0b\x05"  # property length 2: subscription identifier 5
        b"\x00\x03a/b"
        b"\x2d",  # retain handling 2, retain as published, no local, QoS 1
        SubscribePacket(
            10,
            [SubscriptionRequest("a/b", 1, True, True, 2)],
            Properties(subscription_identifiers=[5]),
        ),
    ),
    (
        "3.1.1 SUBACK with a failure",
        4,
        b"\x90\x04\x00\x0a\x01\x80",
        SubackPacket(10, [RC.GRANTED_QOS_1, RC.UNSPECIFIED_ERROR]),
    ),
    (
        "5.0 SUBACK",
        5,
        b"\x90\x06\x00\x0a\x00\x02\x87\xa2",
        SubackPacket(
            10, [RC.GRANTED_QOS_2, RC.NOT_AUTHORIZED, RC.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED]
        ),
    ),
    (
        "3.1.1 UNSUBSCRIBE",
        4,
        b"\xa2\x07\x00\x0b\x00\x03a/b",
        UnsubscribePacket(11, ["a/b"]),
    ),
    (
        "5.0 UNSUBSCRIBE with a user property",
        5,
        b"\xa2\x0d\x00\x0b\x07\x26\x00\x01k\x00\x01v\x00\x01x",
        UnsubscribePacket(11, ["x"], Properties(user_properties=[("k", "v")])),
    ),
    ("3.1.1 UNSUBACK", 4, b"\xb0\x02\x00\x0b", UnsubackPacket(11)),
    (
        "5.0 UNSUBACK",
        5,
        b"\xb0\x05\x00\x0b\x00\x00\x11",
        UnsubackPacket(11, [RC.SUCCESS, RC.NO_SUBSCRIPTION_EXISTED]),
    ),
    ("3.1.1 PINGREQ", 4, b"\xc0\x00", PingreqPacket()),
    ("5.0 PINGRESP", 5, b"\xd0\x00", PingrespPacket()),
    ("3.1.1 DISCONNECT", 4, b"\xe0\x00", DisconnectPacket()),
    ("5.0 DISCONNECT normal, short form", 5, b"\xe0\x00", DisconnectPacket()),
    (
        "5.0 DISCONNECT reason code only",
        5,
        b"\xe0\x01\x8b",
        DisconnectPacket(RC.SERVER_SHUTTING_DOWN),
    ),
    (
        "5.0 DISCONNECT with will, session expiry 10",
        5,
        b"\xe0\x07\x04\x05\x11\x00\x00\x00\x0a",
        DisconnectPacket(RC.DISCONNECT_WITH_WILL_MESSAGE, Properties(session_expiry_interval=10)),
    ),
    ("5.0 AUTH success, short form", 5, b"\xf0\x00", AuthPacket()),
    (
        "5.0 AUTH continue",
        5,
        b"\xf0\x0c\x18\x0a\x15\x00\x02m1\x16\x00\x02\x01\x02",
        AuthPacket(
            RC.CONTINUE_AUTHENTICATION,
            Properties(authentication_method="m1", authentication_data=b"\x01\x02"),
        ),
    ),
]


def decode(wire: bytes, level: int | None, max_packet_size: int = MAX) -> Packet:
    packet, consumed = decode_packet(memoryview(wire), level, max_packet_size)
    assert consumed == len(wire)
    return packet


@pytest.mark.parametrize(
    ("level", "wire", "expected"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
)
def test_spec_bytes_decode_to_the_packet(level: int, wire: bytes, expected: Packet) -> None:
    assert decode(wire, level) == expected


def test_the_fixed_header_constants_are_the_packet_types() -> None:
    """The reader's literal type numbers (inlined by the compiled module) and its decoder
    table follow PacketType."""
    assert (reader._CONNECT, reader._PUBLISH, reader._PUBACK, reader._AUTH) == (
        PacketType.CONNECT,
        PacketType.PUBLISH,
        PacketType.PUBACK,
        PacketType.AUTH,
    )
    names = [None if d is None else d.__name__ for d in reader._DECODERS]
    direct = {PacketType.PUBLISH, PacketType.PUBACK}  # decoded from the bytes, not the table
    assert names == [None] + [
        None if t in direct else f"_decode_{t.name.lower()}" for t in PacketType
    ]


def test_connect_is_decoded_before_the_level_is_known() -> None:
    for _, level, wire, packet in VECTORS:
        if isinstance(packet, ConnectPacket):
            assert decode(wire, None) == packet
            assert packet.protocol_level == level


def test_decode_reports_bytes_consumed_and_ignores_what_follows() -> None:
    packet, consumed = decode_packet(memoryview(b"\x40\x02\x00\x07\xc0\x00"), 4, MAX)
    assert (packet, consumed) == (PubackPacket(7), 4)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        (b"\x20\x02\x00\x00", RC.SUCCESS),
        (b"\x20\x02\x00\x01", RC.UNSUPPORTED_PROTOCOL_VERSION),
        (b"\x20\x02\x00\x02", RC.CLIENT_IDENTIFIER_NOT_VALID),
        (b"\x20\x02\x00\x03", RC.SERVER_UNAVAILABLE),
        (b"\x20\x02\x00\x04", RC.BAD_USER_NAME_OR_PASSWORD),
        (b"\x20\x02\x00\x05", RC.NOT_AUTHORIZED),
    ],
)
def test_3x_connack_return_codes_map_to_reason_codes(wire: bytes, expected: ReasonCode) -> None:
    assert decode(wire, 4) == ConnackPacket(False, expected)


def test_3_1_connack_ignores_the_reserved_first_byte() -> None:
    assert decode(b"\x20\x02\x01\x00", 3) == ConnackPacket(False, RC.SUCCESS)


def test_repeatable_properties_accumulate() -> None:
    wire = b"\x40\x0f\x00\x01\x00\x0b\x26\x00\x01a\x00\x00\x26\x00\x00\x00\x00"
    assert decode(wire, 5) == PubackPacket(
        1, properties=Properties(user_properties=[("a", ""), ("", "")])
    )


# --- primitives ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        (b"\x00", 0),
        (b"\x7f", 127),
        (b"\x80\x01", 128),
        (b"\xff\x7f", 16_383),
        (b"\x80\x80\x01", 16_384),
        (b"\xff\xff\x7f", 2_097_151),
        (b"\x80\x80\x80\x01", 2_097_152),
        (b"\xff\xff\xff\x7f", 268_435_455),
    ],
)
def test_variable_byte_integer(wire: bytes, value: int) -> None:
    assert decode_varint(memoryview(wire + b"\xaa"), 0) == (value, len(wire))
    for end in range(len(wire)):
        with pytest.raises(Incomplete):
            decode_varint(memoryview(wire[:end]), 0)


def test_byte() -> None:
    assert decode_u8(memoryview(b"\x01\xfe"), 1) == (0xFE, 2)
    with pytest.raises(Incomplete):
        decode_u8(memoryview(b"\x01"), 1)


def test_a_byte_property_is_read_with_decode_u8() -> None:
    # PUBLISH 5.0 with Payload Format Indicator 1 (property 0x01, one byte).
    publish = b"\x30\x06\x00\x01t\x02\x01\x01"
    packet = decode(publish, 5)
    assert packet.properties.payload_format_indicator == 1
    with pytest.raises(MalformedPacket):  # the byte cut off inside the property length
        decode(b"\x30\x05\x00\x01t\x02\x01", 5)


def test_variable_byte_integer_with_a_fifth_byte_is_malformed_before_it_arrives() -> None:
    with pytest.raises(MalformedPacket):
        decode_varint(memoryview(b"\xff\xff\xff\xff"), 0)
    with pytest.raises(MalformedPacket) as info:
        decode_packet(memoryview(b"\x30\xff\xff\xff\xff"), 4, MAX)
    assert info.value.reason_code == RC.MALFORMED_PACKET


@pytest.mark.parametrize(
    "raw",
    [
        b"\xc3\x28",  # invalid continuation byte
        b"\xed\xa0\x80",  # encoded surrogate U+D800 [MQTT-1.5.4-1]
        b"\xc0\x80",  # overlong U+0000
        b"a\x00b",  # U+0000 [MQTT-1.5.4-2]
        b"\xf4\x90\x80\x80",  # beyond U+10FFFF
        b"\xe2\x82",  # truncated sequence
    ],
)
def test_ill_formed_strings_are_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedPacket):
        decode_string(memoryview(len(raw).to_bytes(2, "big") + raw), 0)
    publish = b"\x30" + bytes((2 + len(raw),)) + len(raw).to_bytes(2, "big") + raw
    with pytest.raises(MalformedPacket):
        decode(publish, 4)


def test_well_formed_multibyte_string() -> None:
    raw = "zß水🍌".encode()
    assert decode_string(memoryview(b"\x00\x0a" + raw), 0) == ("zß水🍌", 12)


# --- malformed and refused packets ---------------------------------------------------------

MALFORMED = RC.MALFORMED_PACKET
PROTOCOL = RC.PROTOCOL_ERROR
UNSUPPORTED = RC.UNSUPPORTED_PROTOCOL_VERSION
CONNECT_311 = b"\x00\x04MQTT\x04"
CONNECT_5 = b"\x00\x04MQTT\x05"

BAD: list[tuple[str, int | None, bytes, ReasonCode]] = [
    ("packet type 0", 4, b"\x00\x00", MALFORMED),
    ("AUTH below 5.0", 4, b"\xf0\x00", MALFORMED),
    ("AUTH in 3.1", 3, b"\xf0\x00", MALFORMED),
    ("PUBREL flags 0000 [MQTT-3.6.1-1]", 4, b"\x60\x02\x00\x01", MALFORMED),
    ("SUBSCRIBE flags 0000 [MQTT-3.8.1-1]", 4, b"\x80\x06\x00\x01\x00\x01a\x00", MALFORMED),
    ("UNSUBSCRIBE flags 0000 [MQTT-3.10.1-1]", 4, b"\xa0\x05\x00\x01\x00\x01a", MALFORMED),
    ("PUBACK flags 0001", 4, b"\x41\x02\x00\x01", MALFORMED),
    ("PINGREQ flags 0010", 4, b"\xc2\x00", MALFORMED),
    ("CONNECT flags 1000", None, b"\x18\x00", MALFORMED),
    ("PUBLISH QoS 3", 4, b"\x36\x05\x00\x01t\x00\x01", MALFORMED),
    ("PUBLISH QoS 0 with DUP [MQTT-3.3.1-2]", 4, b"\x38\x03\x00\x01t", MALFORMED),
    ("PUBLISH packet id 0 [MQTT-2.2.1-3]", 4, b"\x32\x05\x00\x01t\x00\x00", MALFORMED),
    ("PUBACK packet id 0", 4, b"\x40\x02\x00\x00", MALFORMED),
    ("PUBREC packet id 0", 5, b"\x50\x02\x00\x00", MALFORMED),
    ("SUBSCRIBE packet id 0", 4, b"\x82\x06\x00\x00\x00\x01a\x00", MALFORMED),
    ("UNSUBSCRIBE packet id 0", 4, b"\xa2\x05\x00\x00\x00\x01a", MALFORMED),
    ("SUBACK packet id 0", 4, b"\x90\x03\x00\x00\x00", MALFORMED),
    ("UNSUBACK packet id 0", 4, b"\xb0\x02\x00\x00", MALFORMED),
    ("3.1.1 PUBACK with a leftover byte", 4, b"\x40\x03\x00\x01\x00", MALFORMED),
    ("3.1.1 UNSUBACK with a payload", 4, b"\xb0\x03\x00\x01\x00", MALFORMED),
    ("3.1.1 CONNACK with a leftover byte", 4, b"\x20\x03\x00\x00\x00", MALFORMED),
    ("PINGREQ with a body", 4, b"\xc0\x01\x00", MALFORMED),
    ("3.1.1 DISCONNECT with a body", 4, b"\xe0\x01\x00", MALFORMED),
    ("PUBACK shorter than a packet id", 4, b"\x40\x01\x00", MALFORMED),
    ("topic length past the remaining length", 4, b"\x30\x03\x00\x05a", MALFORMED),
    ("packet id past the remaining length", 4, b"\x32\x04\x00\x01t\x00", MALFORMED),
    (
        "5.0 property length past the remaining length",
        5,
        b"\x40\x05\x00\x01\x00\x05\x1f",
        MALFORMED,
    ),
    (
        "5.0 property past the property length",
        5,
        b"\x40\x09\x00\x01\x00\x02\x1f\x00\x01x\x00",
        MALFORMED,
    ),
    ("CONNACK 3.1.1 return code 6", 4, b"\x20\x02\x00\x06", MALFORMED),
    ("CONNACK 3.1.1 reserved flags", 4, b"\x20\x02\x02\x00", MALFORMED),
    ("CONNACK 5.0 reserved flags", 5, b"\x20\x03\x80\x00\x00", MALFORMED),
    ("CONNACK 5.0 without property length", 5, b"\x20\x02\x00\x00", MALFORMED),
    ("CONNACK 5.0 reason not for CONNACK", 5, b"\x20\x03\x00\x10\x00", MALFORMED),
    ("PUBACK 5.0 unknown reason code", 5, b"\x40\x03\x00\x01\x05", MALFORMED),
    ("PUBREL 5.0 reason not for PUBREL", 5, b"\x62\x03\x00\x01\x10", MALFORMED),
    ("DISCONNECT 5.0 unknown reason code", 5, b"\xe0\x01\x03", MALFORMED),
    ("AUTH 5.0 reason not for AUTH", 5, b"\xf0\x01\x87", MALFORMED),
    ("SUBACK 5.0 unknown reason code", 5, b"\x90\x04\x00\x01\x00\x03", MALFORMED),
    ("SUBACK 3.1.1 return code 3", 4, b"\x90\x03\x00\x01\x03", MALFORMED),
    ("UNSUBACK 5.0 unknown reason code", 5, b"\xb0\x04\x00\x01\x00\x01", MALFORMED),
    # SUBSCRIBE options [MQTT-3.8.3-4, MQTT-3.8.3-5]
    ("SUBSCRIBE 3.1.1 QoS 3", 4, b"\x82\x06\x00\x01\x00\x01a\x03", MALFORMED),
    ("SUBSCRIBE 3.1.1 upper bits set", 4, b"\x82\x06\x00\x01\x00\x01a\x04", MALFORMED),
    ("SUBSCRIBE 3.1 upper bits set", 3, b"\x82\x06\x00\x01\x00\x01a\x80", MALFORMED),
    ("SUBSCRIBE 5.0 QoS 3", 5, b"\x82\x07\x00\x01\x00\x00\x01a\x03", MALFORMED),
    ("SUBSCRIBE 5.0 reserved bit 6", 5, b"\x82\x07\x00\x01\x00\x00\x01a\x40", MALFORMED),
    ("SUBSCRIBE 5.0 reserved bit 7", 5, b"\x82\x07\x00\x01\x00\x00\x01a\x80", MALFORMED),
    ("SUBSCRIBE 5.0 retain handling 3", 5, b"\x82\x07\x00\x01\x00\x00\x01a\x30", MALFORMED),
    ("SUBSCRIBE filter without options", 4, b"\x82\x05\x00\x01\x00\x01a", MALFORMED),
    ("SUBSCRIBE 3.1.1 without filters [MQTT-3.8.3-3]", 4, b"\x82\x02\x00\x01", PROTOCOL),
    ("SUBSCRIBE 5.0 without filters", 5, b"\x82\x03\x00\x01\x00", PROTOCOL),
    ("UNSUBSCRIBE 3.1.1 without filters [MQTT-3.10.3-2]", 4, b"\xa2\x02\x00\x01", PROTOCOL),
    ("UNSUBSCRIBE 5.0 without filters", 5, b"\xa2\x03\x00\x01\x00", PROTOCOL),
    # CONNECT [MQTT-3.1.2]
    ("CONNECT MQTT level 6", None, b"\x10\x0c\x00\x04MQTT\x06\x02\x00\x00\x00\x00", UNSUPPORTED),
    ("CONNECT MQTT level 3", None, b"\x10\x0c\x00\x04MQTT\x03\x02\x00\x00\x00\x00", UNSUPPORTED),
    (
        "CONNECT MQIsdp level 4",
        None,
        b"\x10\x0e\x00\x06MQIsdp\x04\x02\x00\x00\x00\x00",
        UNSUPPORTED,
    ),
    (
        "CONNECT bridge level 0x84",
        None,
        b"\x10\x0c\x00\x04MQTT\x84\x02\x00\x00\x00\x00",
        UNSUPPORTED,
    ),
    ("CONNECT name HTTP", None, b"\x10\x0c\x00\x04HTTP\x04\x02\x00\x00\x00\x00", UNSUPPORTED),
    ("CONNECT name lower case", None, b"\x10\x0c\x00\x04mqtt\x04\x02\x00\x00\x00\x00", UNSUPPORTED),
    ("CONNECT name past its packet", None, b"\x10\x04\x00\x04MQ", MALFORMED),
    (
        "CONNECT reserved flag [MQTT-3.1.2-3]",
        None,
        b"\x10\x0c" + CONNECT_311 + b"\x03\x00\x00\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT will QoS without will flag",
        None,
        b"\x10\x0c" + CONNECT_311 + b"\x08\x00\x00\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT will retain without will flag",
        None,
        b"\x10\x0c" + CONNECT_311 + b"\x20\x00\x00\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT will QoS 3",
        None,
        b"\x10\x11" + CONNECT_311 + b"\x1c\x00\x00\x00\x00\x00\x01t\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT 3.1.1 password without user name [MQTT-3.1.2-22]",
        None,
        b"\x10\x0f" + CONNECT_311 + b"\x40\x00\x00\x00\x00\x00\x01p",
        MALFORMED,
    ),
    (
        "CONNECT 3.1 password without user name",
        None,
        b"\x10\x11\x00\x06MQIsdp\x03\x40\x00\x00\x00\x00\x00\x01p",
        MALFORMED,
    ),
    (
        "CONNECT user name flag without user name",
        None,
        b"\x10\x0c" + CONNECT_311 + b"\x80\x00\x00\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT with a leftover byte",
        None,
        b"\x10\x0d" + CONNECT_311 + b"\x02\x00\x00\x00\x00\x00",
        MALFORMED,
    ),
    (
        "CONNECT client id not UTF-8",
        None,
        b"\x10\x0e" + CONNECT_311 + b"\x02\x00\x00\x00\x02\xc3\x28",
        MALFORMED,
    ),
    (
        "CONNECT 5.0 without property length",
        None,
        b"\x10\x0c" + CONNECT_5 + b"\x02\x00\x00\x00\x00",
        MALFORMED,
    ),
    # Before CONNECT only CONNECT may arrive.
    ("PUBLISH before CONNECT", None, b"\x30\x03\x00\x01t", PROTOCOL),
    ("PINGREQ before CONNECT", None, b"\xc0\x00", PROTOCOL),
    ("AUTH before CONNECT", None, b"\xf0\x00", PROTOCOL),
    # 5.0 properties [MQTT-2.2.2]
    (
        "property not allowed in CONNECT (topic alias)",
        None,
        b"\x10\x10" + CONNECT_5 + b"\x02\x00\x00\x03\x23\x00\x01\x00\x00",
        MALFORMED,
    ),
    (
        "property not allowed in PUBACK (session expiry)",
        5,
        b"\x40\x09\x00\x01\x00\x05\x11\x00\x00\x00\x01",
        MALFORMED,
    ),
    (
        "will delay interval outside the will",
        None,
        b"\x10\x12" + CONNECT_5 + b"\x02\x00\x00\x05\x18\x00\x00\x00\x01\x00\x00",
        MALFORMED,
    ),
    ("unknown property identifier", 5, b"\x40\x06\x00\x01\x00\x02\x7f\x00", MALFORMED),
    ("property identifier 0", 5, b"\x40\x06\x00\x01\x00\x02\x00\x00", MALFORMED),
    (
        "session expiry twice",
        5,
        b"\xe0\x0c\x00\x0a\x11\x00\x00\x00\x01\x11\x00\x00\x00\x02",
        PROTOCOL,
    ),
    ("reason string twice", 5, b"\x40\x0c\x00\x01\x00\x08\x1f\x00\x01a\x1f\x00\x01b", PROTOCOL),
    (
        "subscription identifier twice in SUBSCRIBE",
        5,
        b"\x82\x0b\x00\x01\x04\x0b\x01\x0b\x02\x00\x01a\x00",
        PROTOCOL,
    ),
    ("subscription identifier 0", 5, b"\x33\x08\x00\x01t\x00\x01\x02\x0b\x00", PROTOCOL),
    (
        "subscription identifier 0 in SUBSCRIBE",
        5,
        b"\x82\x09\x00\x01\x02\x0b\x00\x00\x01a\x00",
        PROTOCOL,
    ),
    (
        "subscription identifier of 5 bytes",
        5,
        b"\x30\x0a\x00\x01t\x06\x0b\xff\xff\xff\xff\x01",
        MALFORMED,
    ),
    ("receive maximum 0", 5, b"\x20\x06\x00\x00\x03\x21\x00\x00", PROTOCOL),
    ("maximum packet size 0", 5, b"\x20\x08\x00\x00\x05\x27\x00\x00\x00\x00", PROTOCOL),
    ("payload format indicator 2", 5, b"\x30\x06\x00\x01t\x02\x01\x02", PROTOCOL),
    (
        "request problem information 2",
        None,
        b"\x10\x0f" + CONNECT_5 + b"\x02\x00\x00\x02\x17\x02\x00\x00",
        PROTOCOL,
    ),
    (
        "request response information 2",
        None,
        b"\x10\x0f" + CONNECT_5 + b"\x02\x00\x00\x02\x19\x02\x00\x00",
        PROTOCOL,
    ),
    ("maximum QoS 2", 5, b"\x20\x05\x00\x00\x02\x24\x02", PROTOCOL),
    ("retain available 2", 5, b"\x20\x05\x00\x00\x02\x25\x02", PROTOCOL),
    ("wildcard subscription available 2", 5, b"\x20\x05\x00\x00\x02\x28\x02", PROTOCOL),
    ("subscription identifiers available 2", 5, b"\x20\x05\x00\x00\x02\x29\x02", PROTOCOL),
    ("shared subscription available 2", 5, b"\x20\x05\x00\x00\x02\x2a\x02", PROTOCOL),
    ("authentication data without method", 5, b"\xf0\x07\x18\x05\x16\x00\x02\x01\x02", PROTOCOL),
    (
        "user property with a bad string",
        5,
        b"\x40\x0a\x00\x01\x00\x06\x26\x00\x01\x00\x00\x00",
        MALFORMED,
    ),
]


@pytest.mark.parametrize(("level", "wire", "reason"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_packets_raise_protocol_error_with_reason(
    level: int | None, wire: bytes, reason: ReasonCode
) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_packet(memoryview(wire), level, MAX)
    assert info.value.reason_code == reason
    if reason == MALFORMED:
        assert isinstance(info.value, MalformedPacket)


def test_valid_variants_next_to_the_refused_ones() -> None:
    """The rules above are exact: their permitted neighbours decode."""
    # 5.0 allows a password without a user name.
    assert decode(b"\x10\x10" + CONNECT_5 + b"\x40\x00\x00\x00\x00\x00\x00\x01p", None) == (
        ConnectPacket("", ProtocolLevel.MQTT_5, False, 0, password=b"p")
    )
    # PUBLISH may repeat the subscription identifier; 5.0 SUBSCRIBE options 0x2e are valid.
    assert decode(b"\x30\x08\x00\x01t\x04\x0b\x01\x0b\x02", 5) == PublishPacket(
        "t", properties=Properties(subscription_identifiers=[1, 2])
    )
    assert decode(b"\x82\x07\x00\x01\x00\x00\x01a\x2e", 5) == SubscribePacket(
        1, [SubscriptionRequest("a", 2, True, True, 2)]
    )
    # Maximum subscription identifier.
    assert decode(b"\x30\x09\x00\x01t\x05\x0b\xff\xff\xff\x7f", 5) == PublishPacket(
        "t", properties=Properties(subscription_identifiers=[268_435_455])
    )
    # AUTH with a reason code and no properties (Remaining Length 1).
    assert decode(b"\xf0\x01\x19", 5) == AuthPacket(RC.RE_AUTHENTICATE)


def test_packet_too_large_is_raised_from_the_fixed_header_alone() -> None:
    with pytest.raises(PacketTooLarge) as info:
        decode_packet(memoryview(b"\x30\xff\x7f"), 4, 1000)  # 16383 bytes announced
    assert info.value.reason_code == RC.PACKET_TOO_LARGE
    # The limit counts the whole packet: fixed header plus remaining length.
    wire = b"\x30\x05\x00\x01t!!"
    assert decode(wire, 4, max_packet_size=7) == PublishPacket("t", b"!!")
    with pytest.raises(PacketTooLarge):
        decode_packet(memoryview(wire), 4, 6)


@pytest.mark.parametrize("level", [3, 4, 5])
def test_truncated_packet_is_incomplete(level: int) -> None:
    for end in range(4):
        with pytest.raises(Incomplete):
            decode_packet(memoryview(b"\x40\x02\x00\x07"[:end]), level, MAX)


# --- PacketReader --------------------------------------------------------------------------


def test_reader_sets_the_level_from_connect_and_decodes_at_it() -> None:
    connect_5 = VECTORS[2][2]
    reader = PacketReader(MAX)
    assert reader.protocol_level is None
    reader.feed(connect_5 + b"\x40\x03\x00\x07\x10")
    assert isinstance(reader.next_packet(), ConnectPacket)
    assert reader.protocol_level == 5
    assert reader.next_packet() == PubackPacket(7, RC.NO_MATCHING_SUBSCRIBERS)
    assert reader.next_packet() is None


def test_reader_refuses_anything_before_connect() -> None:
    reader = PacketReader(MAX)
    reader.feed(b"\xc0\x00")
    with pytest.raises(ProtocolError) as info:
        reader.next_packet()
    assert info.value.reason_code == RC.PROTOCOL_ERROR


def test_reader_with_a_given_level_decodes_server_packets() -> None:
    reader = PacketReader(MAX, protocol_level=4)
    reader.feed(b"\x20\x02\x00\x00\x90\x03\x00\x01")
    assert reader.next_packet() == ConnackPacket()
    assert reader.next_packet() is None
    reader.feed(b"\x80")
    assert reader.next_packet() == SubackPacket(1, [RC.UNSPECIFIED_ERROR])
    assert reader.buffered == 0


def test_reader_byte_by_byte_and_past_the_compaction_point() -> None:
    publish = b"\x32\x0e\x00\x03a/b\x00\x01payload"
    count = 70_000 // len(publish) + 5
    reader = PacketReader(MAX, protocol_level=4)
    reader.feed(publish * count)
    decoded = 0
    while reader.next_packet() is not None:
        decoded += 1
    assert decoded == count
    for byte in publish:
        assert reader.next_packet() is None
        reader.feed(bytes((byte,)))
    assert reader.next_packet() == PublishPacket("a/b", b"payload", 1, packet_id=1)
    assert reader.buffered == 0


def test_reader_raises_packet_too_large_before_the_body_arrives() -> None:
    reader = PacketReader(100, protocol_level=5)
    reader.feed(b"\x30\xe8\x07")  # remaining length 1000
    with pytest.raises(PacketTooLarge):
        reader.next_packet()


def test_reader_checks_the_fixed_header_of_a_packet_still_arriving() -> None:
    """A packet split over reads is decoded once whole, and what its fixed header shows is
    refused as soon as it is there."""
    reader = PacketReader(100, protocol_level=5)
    for part in (b"\x30", b"\xe8"):
        reader.feed(part)
        assert reader.next_packet() is None
    reader.feed(b"\x07")  # remaining length 1000, over two reads
    with pytest.raises(PacketTooLarge):
        reader.next_packet()
    reader = PacketReader(MAX, protocol_level=4)
    reader.feed(b"\x60")
    reader.feed(b"\x02\x00")  # PUBREL without its reserved flags, one body byte short
    with pytest.raises(MalformedPacket):
        reader.next_packet()


def test_reader_decodes_a_split_packet_and_the_ones_after_it() -> None:
    publish = encode_packet(PublishPacket("a/b", b"x" * 300, 1, packet_id=7), 5)
    puback = encode_packet(PubackPacket(7), 5)
    reader = PacketReader(MAX, ProtocolLevel.MQTT_5)
    reader.feed(publish[:2])
    assert reader.next_packet() is None
    reader.feed(publish[2:200])
    assert reader.next_packet() is None
    reader.feed(publish[200:] + puback + puback[:1])
    assert reader.next_packet() == PublishPacket("a/b", b"x" * 300, 1, packet_id=7)
    assert reader.next_packet() == PubackPacket(7)
    assert reader.next_packet() is None
    reader.feed(puback[1:])
    assert reader.next_packet() == PubackPacket(7)
    assert reader.next_packet() is None and reader.buffered == 0


def test_reader_copies_a_mutable_buffer_it_is_fed() -> None:
    """An empty reader keeps fed `bytes` as they are, but copies a bytearray, which its
    owner may reuse."""
    data = bytearray(encode_packet(PingreqPacket(), ProtocolLevel.MQTT_5))
    second = encode_packet(PingrespPacket(), ProtocolLevel.MQTT_5)
    reader = PacketReader(MAX, ProtocolLevel.MQTT_5)
    reader.feed(data[:1])
    data[:] = b"\xff\xff"
    reader.feed(b"\x00" + second)
    assert reader.next_packet() == PingreqPacket()
    assert reader.next_packet() == PingrespPacket()
    assert reader.next_packet() is None and reader.buffered == 0
