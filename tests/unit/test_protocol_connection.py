"""MqttConnection with no I/O: bytes in -> packets, packets -> bytes out, time passed in."""

from __future__ import annotations

import pytest

from mqttq.codec.enums import ProtocolLevel
from mqttq.codec.packets import (
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PingreqPacket,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    SubscribePacket,
    SubscriptionRequest,
)
from mqttq.codec.properties import Properties
from mqttq.codec.reader import PacketReader
from mqttq.codec.writer import encode_packet
from mqttq.errors import ProtocolError
from mqttq.protocol.connection import ConnectionLimits, MqttConnection
from mqttq.protocol.state import ConnState
from mqttq.reasons import ReasonCode

V5 = ProtocolLevel.MQTT_5
V311 = ProtocolLevel.MQTT_3_1_1


def wire(packet: Packet, level: int = V5) -> bytes:
    return encode_packet(packet, level)


def sent(conn: MqttConnection, level: int = V5) -> list[Packet]:
    """Decode everything the connection queued, as the client would."""
    reader = PacketReader(1 << 20, level)
    reader.feed(bytes(conn.data_to_send()))
    out = []
    while (packet := reader.next_packet()) is not None:
        out.append(packet)
    return out


def packets(conn: MqttConnection, data: bytes, now: float = 0.0) -> list[Packet]:
    conn.receive_data(data, now)
    out = []
    while (packet := conn.next_packet()) is not None:
        out.append(packet)
    return out


def connected(
    level: ProtocolLevel = V5,
    *,
    limits: ConnectionLimits | None = None,
    keep_alive: int = 0,
    properties: Properties | None = None,
) -> MqttConnection:
    conn = MqttConnection(limits or ConnectionLimits(), 0.0)
    connect = ConnectPacket("c1", level, True, keep_alive, properties=properties or Properties())
    [packet] = packets(conn, wire(connect, level))
    assert isinstance(packet, ConnectPacket)
    conn.accept(ConnackPacket(), keep_alive)
    conn.data_to_send()
    return conn


def fail_bytes(conn: MqttConnection, error: ProtocolError, level: int = V5) -> list[Packet]:
    conn.fail(error)
    assert conn.state is ConnState.CLOSED
    return sent(conn, level)


def test_connect_then_connack_bytes() -> None:
    conn = MqttConnection(ConnectionLimits(), 0.0)
    [packet] = packets(conn, wire(ConnectPacket("dev-1", V311, True, 30), V311))
    assert isinstance(packet, ConnectPacket) and packet.client_id == "dev-1"
    assert conn.state is ConnState.CONNECTED
    conn.accept(ConnackPacket(session_present=False), 30)
    assert bytes(conn.data_to_send()) == b"\x20\x02\x00\x00"


def test_bytes_split_anywhere_give_the_same_packets() -> None:
    data = wire(ConnectPacket("c", V5)) + wire(PingreqPacket())
    conn = MqttConnection(ConnectionLimits(), 0.0)
    got: list[Packet] = []
    for byte in data:
        got += packets(conn, bytes([byte]))
    assert [type(p) for p in got] == [ConnectPacket, PingreqPacket]


def test_packet_before_connect_is_refused_silently() -> None:
    conn = MqttConnection(ConnectionLimits(), 0.0)
    with pytest.raises(ProtocolError) as info:
        packets(conn, wire(PingreqPacket()))
    assert fail_bytes(conn, info.value) == []


def test_second_connect_is_a_protocol_error_disconnect_0x82() -> None:
    conn = connected()
    with pytest.raises(ProtocolError) as info:
        packets(conn, wire(ConnectPacket("c1", V5)))
    assert info.value.reason_code == ReasonCode.PROTOCOL_ERROR
    [disconnect] = fail_bytes(conn, info.value)
    assert isinstance(disconnect, DisconnectPacket)
    assert disconnect.reason_code == ReasonCode.PROTOCOL_ERROR


def test_second_connect_on_311_just_closes() -> None:
    conn = connected(V311)
    with pytest.raises(ProtocolError) as info:
        packets(conn, wire(ConnectPacket("c1", V311), V311))
    assert fail_bytes(conn, info.value, V311) == []


def test_unsupported_level_gets_311_return_code_1() -> None:
    raw = bytearray(wire(ConnectPacket("c", V311), V311))
    raw[8] = 9  # protocol level byte after 0x10, length, 0x00 0x04 "MQTT"
    conn = MqttConnection(ConnectionLimits(), 0.0)
    with pytest.raises(ProtocolError) as info:
        packets(conn, bytes(raw))
    assert info.value.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION
    conn.fail(info.value)
    assert bytes(conn.data_to_send()) == b"\x20\x02\x00\x01"


def test_bad_protocol_name_at_level_5_gets_5_0_connack_0x84() -> None:
    raw = bytearray(wire(ConnectPacket("c", V5)))
    raw[7] = ord("X")  # "MQTT" -> "MQTX"
    conn = MqttConnection(ConnectionLimits(), 0.0)
    with pytest.raises(ProtocolError) as info:
        packets(conn, bytes(raw))
    [connack] = fail_bytes(conn, info.value)
    assert isinstance(connack, ConnackPacket)
    assert connack.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION


def test_malformed_311_connect_closes_without_answer() -> None:
    raw = bytearray(wire(ConnectPacket("c", V311), V311))
    raw[9] |= 0x01  # reserved connect flag [MQTT-3.1.2-3]
    conn = MqttConnection(ConnectionLimits(), 0.0)
    with pytest.raises(ProtocolError) as info:
        packets(conn, bytes(raw))
    assert fail_bytes(conn, info.value, V311) == []


def test_pingreq_is_answered() -> None:
    conn = connected()
    [packet] = packets(conn, wire(PingreqPacket()))
    assert isinstance(packet, PingreqPacket)
    assert bytes(conn.data_to_send()) == b"\xd0\x00"


def test_connect_timeout_before_connect() -> None:
    conn = MqttConnection(ConnectionLimits(connect_timeout=5.0), 100.0)
    assert conn.get_timer() == 105.0
    conn.handle_timer(104.9)
    with pytest.raises(ProtocolError):
        conn.handle_timer(105.0)
    assert fail_bytes(conn, ProtocolError(ReasonCode.MAXIMUM_CONNECT_TIME, "x")) == []


def test_keep_alive_enforced_at_one_and_a_half_times() -> None:
    conn = connected(keep_alive=10)
    packets(conn, wire(PingreqPacket()), now=50.0)
    assert conn.get_timer() == 65.0
    conn.handle_timer(64.0)
    packets(conn, wire(PingreqPacket()), now=64.0)  # any traffic restarts the clock
    conn.handle_timer(70.0)
    with pytest.raises(ProtocolError) as info:
        conn.handle_timer(79.0)
    assert info.value.reason_code == ReasonCode.KEEP_ALIVE_TIMEOUT
    conn.data_to_send()  # the PINGRESPs
    [disconnect] = fail_bytes(conn, info.value)
    assert isinstance(disconnect, DisconnectPacket)
    assert disconnect.reason_code == ReasonCode.KEEP_ALIVE_TIMEOUT


def test_keep_alive_zero_has_no_timer() -> None:
    assert connected(keep_alive=0).get_timer() is None


def publish(
    packet_id: int | None, qos: int, topic: str = "t", properties: Properties | None = None
) -> bytes:
    return wire(
        PublishPacket(topic, b"p", qos, packet_id=packet_id, properties=properties or Properties())
    )


def test_receive_maximum_exceeded_is_0x93() -> None:
    conn = connected(limits=ConnectionLimits(receive_maximum=2))
    assert len(packets(conn, publish(1, 1) + publish(2, 2))) == 2
    with pytest.raises(ProtocolError) as info:
        packets(conn, publish(3, 1))
    assert info.value.reason_code == ReasonCode.RECEIVE_MAXIMUM_EXCEEDED


def test_acks_sent_free_the_receive_window() -> None:
    conn = connected(limits=ConnectionLimits(receive_maximum=2))
    packets(conn, publish(1, 1) + publish(2, 2))
    conn.send(PubackPacket(1))
    conn.send(PubrecPacket(2))
    assert len(packets(conn, publish(3, 1))) == 1  # PUBACK freed one slot
    with pytest.raises(ProtocolError):
        packets(conn, publish(4, 1))  # the QoS 2 one counts until PUBCOMP


def test_pubrel_completes_qos2_and_frees_the_window() -> None:
    conn = connected(limits=ConnectionLimits(receive_maximum=1))
    packets(conn, publish(9, 2))
    conn.send(PubrecPacket(9))
    conn.data_to_send()
    packets(conn, wire(PubrelPacket(9)))
    [pubcomp] = sent(conn)
    assert isinstance(pubcomp, PubcompPacket) and pubcomp.reason_code == ReasonCode.SUCCESS
    assert len(packets(conn, publish(10, 1))) == 1


def test_qos2_resend_is_acknowledged_again_not_returned() -> None:
    conn = connected()
    [first] = packets(conn, publish(7, 2))
    assert isinstance(first, PublishPacket)
    conn.send(PubrecPacket(7))
    conn.data_to_send()
    assert packets(conn, wire(PublishPacket("t", b"p", 2, dup=True, packet_id=7))) == []
    [pubrec] = sent(conn)
    assert isinstance(pubrec, PubrecPacket) and pubrec.packet_id == 7
    packets(conn, wire(PubrelPacket(7)))
    conn.data_to_send()
    # After PUBCOMP the id is free: the same id is a new message [MQTT-4.3.3-12].
    assert len(packets(conn, publish(7, 2))) == 1


def test_qos2_resend_before_first_pubrec_waits_for_it() -> None:
    conn = connected()
    packets(conn, publish(7, 2))
    assert packets(conn, publish(7, 2)) == []
    assert sent(conn) == []  # the broker's pending PUBREC answers both


def test_error_pubrec_releases_the_id() -> None:
    conn = connected()
    packets(conn, publish(5, 2))
    conn.send(PubrecPacket(5, ReasonCode.UNSPECIFIED_ERROR))
    assert len(packets(conn, publish(5, 2))) == 1  # a new publication [MQTT-4.3.3-9]


def test_pubrel_for_unknown_id_gets_pubcomp_0x92() -> None:
    conn = connected()
    packets(conn, wire(PubrelPacket(44)))
    [pubcomp] = sent(conn)
    assert isinstance(pubcomp, PubcompPacket)
    assert pubcomp.reason_code == ReasonCode.PACKET_IDENTIFIER_NOT_FOUND


def test_topic_alias_is_resolved() -> None:
    conn = connected(limits=ConnectionLimits(topic_alias_maximum=4))
    [a] = packets(conn, publish(None, 0, "sensors/1", Properties(topic_alias=3)))
    [b] = packets(conn, publish(None, 0, "", Properties(topic_alias=3)))
    assert isinstance(a, PublishPacket) and isinstance(b, PublishPacket)
    assert (a.topic, b.topic) == ("sensors/1", "sensors/1")
    assert b.properties.topic_alias is None  # the alias never travels with the message


@pytest.mark.parametrize("alias", [0, 5])
def test_topic_alias_out_of_range_is_0x94(alias: int) -> None:
    conn = connected(limits=ConnectionLimits(topic_alias_maximum=4))
    raw = bytearray(publish(None, 0, "t", Properties(topic_alias=1)))
    raw[-2] = alias  # properties: ... 0x23 0x00 <alias>, then payload "p"
    with pytest.raises(ProtocolError) as info:
        packets(conn, bytes(raw))
    assert info.value.reason_code == ReasonCode.TOPIC_ALIAS_INVALID


def test_unknown_topic_alias_with_empty_topic_is_0x82() -> None:
    conn = connected(limits=ConnectionLimits(topic_alias_maximum=4))
    with pytest.raises(ProtocolError) as info:
        packets(conn, publish(None, 0, "", Properties(topic_alias=2)))
    assert info.value.reason_code == ReasonCode.PROTOCOL_ERROR


def test_qos_above_maximum_is_0x9b_and_retain_unavailable_0x9a() -> None:
    conn = connected(limits=ConnectionLimits(maximum_qos=1))
    with pytest.raises(ProtocolError) as info:
        packets(conn, publish(1, 2))
    assert info.value.reason_code == ReasonCode.QOS_NOT_SUPPORTED
    conn = connected(limits=ConnectionLimits(retain_available=False))
    with pytest.raises(ProtocolError) as info:
        packets(conn, wire(PublishPacket("t", b"x", 0, retain=True)))
    assert info.value.reason_code == ReasonCode.RETAIN_NOT_SUPPORTED


def test_outbound_aliases_name_a_topic_once() -> None:
    conn = connected(properties=Properties(topic_alias_maximum=1))
    for topic in ("a/b", "a/b", "c/d"):
        assert conn.send_publish(PublishPacket(topic, b"x"))
    first, second, third = sent(conn)
    assert isinstance(first, PublishPacket) and isinstance(second, PublishPacket)
    assert isinstance(third, PublishPacket)
    assert (first.topic, first.properties.topic_alias) == ("a/b", 1)
    assert (second.topic, second.properties.topic_alias) == ("", 1)
    assert (third.topic, third.properties.topic_alias) == ("c/d", None)  # table full


def test_publish_larger_than_client_maximum_is_not_sent() -> None:
    conn = connected(properties=Properties(maximum_packet_size=50))
    assert not conn.send_publish(PublishPacket("t", b"x" * 100, 1, packet_id=1))
    assert conn.pending_bytes == 0
    assert conn.send_publish(PublishPacket("t", b"x" * 10, 1, packet_id=1))


def test_too_large_first_use_of_a_topic_binds_no_alias() -> None:
    props = Properties(maximum_packet_size=40, topic_alias_maximum=5)
    conn = connected(properties=props)
    assert not conn.send_publish(PublishPacket("big", b"x" * 100))
    assert conn.send_publish(PublishPacket("big", b"x"))
    [packet] = sent(conn)
    assert isinstance(packet, PublishPacket) and packet.topic == "big"


def test_client_receive_maximum_is_taken_from_connect() -> None:
    assert connected(properties=Properties(receive_maximum=7)).client_receive_maximum == 7
    assert connected(V311).client_receive_maximum == 65535


def test_reason_string_dropped_when_problem_information_not_requested() -> None:
    conn = connected(properties=Properties(request_problem_information=0))
    conn.send(PubackPacket(1, ReasonCode.QUOTA_EXCEEDED, Properties(reason_string="full")))
    [puback] = sent(conn)
    assert isinstance(puback, PubackPacket)
    assert puback.reason_code == ReasonCode.QUOTA_EXCEEDED
    assert puback.properties.reason_string is None


def test_subscription_identifier_from_a_client_publish_is_a_protocol_error() -> None:
    conn = connected()
    raw = wire(
        SubscribePacket(1, [SubscriptionRequest("x")], Properties(subscription_identifiers=[3]))
    )
    assert len(packets(conn, raw)) == 1  # fine on SUBSCRIBE
    with pytest.raises(ProtocolError) as info:
        packets(conn, publish(None, 0, "t", Properties(subscription_identifiers=[3])))
    assert info.value.reason_code == ReasonCode.PROTOCOL_ERROR  # [MQTT-3.3.4-6]


def test_nothing_is_sent_after_disconnect() -> None:
    conn = connected()
    conn.disconnect(ReasonCode.SERVER_SHUTTING_DOWN)
    [disconnect] = sent(conn)
    assert isinstance(disconnect, DisconnectPacket)
    assert disconnect.reason_code == ReasonCode.SERVER_SHUTTING_DOWN
    conn.send(PingreqPacket())
    assert not conn.send_publish(PublishPacket("t"))
    assert conn.pending_bytes == 0


def test_packets_queued_one_after_another_come_out_in_order_and_once() -> None:
    """The send buffer starts empty, holds one packet as encoded and grows for more; taking
    it leaves nothing behind for the next call."""
    conn = connected()
    assert conn.pending_bytes == 0 and conn.data_to_send() == b""
    conn.send_publish_ack(1, 1, ReasonCode.SUCCESS)
    assert bytes(conn.data_to_send()) == b"\x40\x02\x00\x01"
    for packet_id in (2, 3, 4):
        conn.send_publish_ack(1, packet_id, ReasonCode.SUCCESS)
    assert conn.pending_bytes == 12
    assert bytes(conn.data_to_send()) == b"\x40\x02\x00\x02\x40\x02\x00\x03\x40\x02\x00\x04"
    assert conn.pending_bytes == 0 and conn.data_to_send() == b""


def test_inbound_topic_alias_table_is_made_on_first_use() -> None:
    conn = connected()
    first = PublishPacket("a/b", b"1", properties=Properties(topic_alias=3))
    again = PublishPacket("", b"2", properties=Properties(topic_alias=3))
    plain = PublishPacket("c", b"3")
    got = packets(conn, wire(plain) + wire(first) + wire(again))
    assert [(p.topic, p.payload) for p in got if isinstance(p, PublishPacket)] == [
        ("c", b"3"),
        ("a/b", b"1"),
        ("a/b", b"2"),
    ]
