"""The connection follows protocol/state.py's table for every (state, packet type) pair.

For a pair in TRANSITIONS the packet is accepted (or refused for its content with a
ProtocolError) and the state becomes the table's; for a pair missing from it the outcome is
always a ProtocolError. A CLOSED connection reads nothing more.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mqttq.codec.enums import PacketType, ProtocolLevel
from mqttq.codec.packets import (
    AuthPacket,
    ConnackPacket,
    ConnectPacket,
    DisconnectPacket,
    Packet,
    PingreqPacket,
    PingrespPacket,
    PubackPacket,
    PubcompPacket,
    PublishPacket,
    PubrecPacket,
    PubrelPacket,
    SubackPacket,
    SubscribePacket,
    SubscriptionRequest,
    UnsubackPacket,
    UnsubscribePacket,
)
from mqttq.codec.writer import encode_packet
from mqttq.errors import ProtocolError
from mqttq.protocol.connection import ConnectionLimits, MqttConnection
from mqttq.protocol.state import STAYS_CONNECTED, TRANSITIONS, ConnState, next_state
from mqttq.reasons import ReasonCode
from tests.property.strategies import packet_strategies

V5 = ProtocolLevel.MQTT_5

MINIMAL: dict[PacketType, Packet] = {
    PacketType.CONNECT: ConnectPacket("c", V5),
    PacketType.CONNACK: ConnackPacket(),
    PacketType.PUBLISH: PublishPacket("t", b"x"),
    PacketType.PUBACK: PubackPacket(1),
    PacketType.PUBREC: PubrecPacket(1),
    PacketType.PUBREL: PubrelPacket(1),
    PacketType.PUBCOMP: PubcompPacket(1),
    PacketType.SUBSCRIBE: SubscribePacket(1, [SubscriptionRequest("a/+")]),
    PacketType.SUBACK: SubackPacket(1, [ReasonCode.GRANTED_QOS_0]),
    PacketType.UNSUBSCRIBE: UnsubscribePacket(1, ["a/+"]),
    PacketType.UNSUBACK: UnsubackPacket(1, [ReasonCode.SUCCESS]),
    PacketType.PINGREQ: PingreqPacket(),
    PacketType.PINGRESP: PingrespPacket(),
    PacketType.DISCONNECT: DisconnectPacket(),
    PacketType.AUTH: AuthPacket(),
}
"""One valid packet of each type, accepted wherever the table allows its type."""

RANDOM = packet_strategies(V5)


def connection_in(state: ConnState) -> MqttConnection:
    conn = MqttConnection(ConnectionLimits(), 0.0)
    if state is ConnState.AWAIT_CONNECT:
        return conn
    feed(conn, MINIMAL[PacketType.CONNECT])
    conn.accept(ConnackPacket(), 0)
    if state is ConnState.CLOSED:
        feed(conn, MINIMAL[PacketType.DISCONNECT])
    assert conn.state is state
    return conn


def feed(conn: MqttConnection, packet: Packet) -> list[Packet]:
    conn.receive_data(encode_packet(packet, V5), 0.0)
    out = []
    while (got := conn.next_packet()) is not None:
        out.append(got)
    return out


def test_table_function_matches_table() -> None:
    for state in ConnState:
        for packet_type in PacketType:
            try:
                assert next_state(state, packet_type) == TRANSITIONS[state, packet_type]
            except ProtocolError as error:
                assert (state, packet_type) not in TRANSITIONS
                assert error.reason_code == ReasonCode.PROTOCOL_ERROR


def test_publish_and_puback_stay_connected() -> None:
    """`MqttConnection.next_packet` skips the table for them by their class."""
    assert {PacketType.PUBLISH, PacketType.PUBACK} <= STAYS_CONNECTED


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(list(ConnState)), st.data())
def test_every_pair_gives_the_tables_state_or_a_protocol_error(
    state: ConnState, data: st.DataObject
) -> None:
    packet_type = data.draw(st.sampled_from(sorted(RANDOM)))
    packet = data.draw(RANDOM[packet_type])
    conn = connection_in(state)
    if state is ConnState.CLOSED:
        assert feed(conn, packet) == []
        assert conn.state is ConnState.CLOSED
        return
    allowed = TRANSITIONS.get((state, packet_type))
    try:
        got = feed(conn, packet)
    except ProtocolError:
        return  # refused: by the table, or (allowed pairs only) for the packet's content
    assert allowed is not None, f"{packet_type.name} accepted in {state.name}"
    assert conn.state is allowed
    if packet_type != PacketType.PUBLISH:  # a QoS 2 re-send may be answered, not returned
        assert [type(p) for p in got] == [type(packet)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list(PacketType)), max_size=10))
def test_any_sequence_follows_the_table_until_the_first_missing_pair(
    sequence: list[PacketType],
) -> None:
    conn = MqttConnection(ConnectionLimits(), 0.0)
    state = ConnState.AWAIT_CONNECT
    for packet_type in sequence:
        if state is ConnState.CLOSED:
            assert feed(conn, MINIMAL[packet_type]) == []
            continue
        expected = TRANSITIONS.get((state, packet_type))
        if expected is None:
            try:
                feed(conn, MINIMAL[packet_type])
            except ProtocolError:
                return
            raise AssertionError(f"{packet_type.name} accepted in {state.name}")
        [got] = feed(conn, MINIMAL[packet_type])
        assert got.packet_type == packet_type
        if packet_type == PacketType.CONNECT:
            conn.accept(ConnackPacket(), 0)
        state = expected
        assert conn.state is state
