"""Hostile and broken clients on raw sockets. For each: the server answers per the spec (with the
5.0 reason code where the spec names one) or closes the connection, and a well-behaved client
connected before the attack keeps publishing and receiving normally afterwards."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from .helpers import (
    Clients,
    MakeBystander,
)
from .waiting import (
    BrokerFactory,
    BrokerUnderTest,
)
from .wire import (
    AUTH,
    CONNACK,
    PUBLISH,
    RC,
    SUBACK,
    ConnectionClosed,
    Packet,
    Prop,
    assert_disconnected_with,
    connect_packet,
    encode_props,
    packet,
    publish_packet,
    sub_options,
    subscribe_packet,
    utf8,
)

GARBAGE = {
    "ff": b"\xff" * 64,
    "http": b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    "random": random.Random(1883).randbytes(4096),
    "zero-type": b"\x00\x00",
}


def refused(packets: list[Packet]) -> bool:
    """No successful CONNACK among what the server sent before closing."""
    return not any(p.type == CONNACK and p.reason_code == 0 for p in packets)


def after_connect(
    clients: Clients, broker: BrokerUnderTest, level: int, data: bytes
) -> list[Packet]:
    """Connect well, send `data`, return what the server sent until it closed."""
    client = clients.connected(broker, f"hostile{level}", level=level)
    client.send_quietly(data)
    return client.wait_closed()


def expect_error_close(packets: list[Packet], level: int, reasons: int | set[int]) -> None:
    """5.0: DISCONNECT with one of `reasons` then close; 3.1.1: close, nothing sent."""
    if level == 5:
        assert_disconnected_with(packets, reasons)
    else:
        assert packets == [], packets


FIRST_PACKETS = {
    **GARBAGE,
    "publish": publish_packet("bystander/echo", b"sneaky", v5=False),
    "auth": packet(AUTH, 0, bytes([RC.REAUTHENTICATE]) + encode_props([(0x15, "x")])),
}


def test_first_packet_not_connect(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander, subtests: pytest.Subtests
) -> None:
    """Anything but CONNECT as the first packet closes the connection without an answer
    [MQTT-3.1.0-1]; a PUBLISH sent that way is not routed."""
    witness = bystander(broker)
    for name, data in FIRST_PACKETS.items():
        with subtests.test(case=name):
            client = clients.raw(broker)
            client.send_quietly(data)
            assert client.wait_closed() == []
            witness.check()
    assert b"sneaky" not in witness.client.payloads()


@pytest.mark.parametrize("level", [4, 5])
def test_garbage_after_connect(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander, level: int
) -> None:
    """Packet type 0 is reserved: Malformed Packet [MQTT-2.1.2] -> close (5.0: 0x81/0x82)."""
    witness = bystander(broker)
    packets = after_connect(clients, broker, level, GARBAGE["zero-type"] + GARBAGE["random"])
    expect_error_close(packets, level, {RC.MALFORMED_PACKET, RC.PROTOCOL_ERROR})
    witness.check()


BAD_CONNECTS = {
    # A wrong protocol name, also 3.1's MQIsdp with level 4 [MQTT-3.1.2-1].
    "name MQTX": connect_packet("badname", level=4, protocol_name="MQTX"),
    "name mqtt": connect_packet("badname", level=4, protocol_name="mqtt"),
    "name MQIsdp level 4": connect_packet("badname", level=4, protocol_name="MQIsdp"),
    # CONNECT flags bit 0 is reserved and must be 0 [MQTT-3.1.2-3].
    "reserved flag": connect_packet("reserved", level=4, reserved_flag=True),
    # An ill-formed UTF-8 client id (a surrogate) [MQTT-1.5.4-1].
    "bad utf-8 id 3.1.1": connect_packet(b"id\xed\xa0\x80", level=4),
    "bad utf-8 id 5.0": connect_packet(b"id\xed\xa0\x80", level=5),
}


def test_malformed_connect(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander, subtests: pytest.Subtests
) -> None:
    """A malformed CONNECT is not accepted: the server closes, at most after a refusing
    CONNACK."""
    witness = bystander(broker)
    for name, data in BAD_CONNECTS.items():
        with subtests.test(case=name):
            client = clients.raw(broker)
            client.v5 = name.endswith("5.0")
            client.send(data)
            assert refused(client.wait_closed())
            witness.check()


RESERVED_BITS: dict[str, Callable[[bool], bytes]] = {
    "subscribe-flags": lambda v5: subscribe_packet(1, [("t", 0)], v5=v5, flags=0),
    "publish-qos3": lambda v5: packet(
        PUBLISH, 0x06, utf8("t") + b"\x00\x01" + (encode_props(()) if v5 else b"")
    ),
}


@pytest.mark.parametrize("level", [4, 5])
def test_reserved_fixed_header_bits(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """Wrong fixed-header flags are a Malformed Packet [MQTT-2.1.3-1] [MQTT-3.3.1-4]: close
    (5.0: DISCONNECT 0x81)."""
    witness = bystander(broker)
    for kind, build in RESERVED_BITS.items():
        with subtests.test(case=kind):
            packets = after_connect(clients, broker, level, build(level == 5))
            expect_error_close(packets, level, RC.MALFORMED_PACKET)
            witness.check()


@pytest.mark.mqttq_only
@pytest.mark.parametrize("level", [4, 5])
def test_pingreq_reserved_flags(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander, level: int
) -> None:
    """PINGREQ with flags 0001 is malformed [MQTT-2.1.3-1]. (mosquitto 2.0.11 answers it.)"""
    witness = bystander(broker)
    expect_error_close(after_connect(clients, broker, level, b"\xc1\x00"), level, 0x81)
    witness.check()


@pytest.mark.parametrize("level", [4, 5])
def test_bad_utf8_topic(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """U+0000 and UTF-16 surrogates (ED A0 80) in a topic make a Malformed Packet
    [MQTT-1.5.4-1] [MQTT-1.5.4-2]: 5.0 DISCONNECT 0x81, then close."""
    witness = bystander(broker)
    for name, topic in {"U+0000": b"a/\x00/b", "surrogate": b"a/\xed\xa0\x80/b"}.items():
        with subtests.test(case=name):
            data = publish_packet(topic, b"x", v5=level == 5, qos=1, packet_id=1)
            expect_error_close(after_connect(clients, broker, level, data), level, 0x81)
            witness.check()


@pytest.mark.parametrize("level", [4, 5])
def test_oversize_packet(
    broker_factory: BrokerFactory, clients: Clients, bystander: MakeBystander, level: int
) -> None:
    """[mqtt] max_packet_size = 1024 is advertised (5.0) and a larger PUBLISH closes the
    connection: 5.0 DISCONNECT 0x95 Packet too large [MQTT-3.2.2-15]."""
    broker = broker_factory(config="[mqtt]\nmax_packet_size = 1024\n")
    witness = bystander(broker)
    client = clients.raw(broker)
    connack = client.connect("big", level=level)
    if level == 5:
        assert connack.props.get(Prop.MAXIMUM_PACKET_SIZE) == 1024
    client.send_quietly(publish_packet("big/t", b"x" * 2000, v5=level == 5, qos=1, packet_id=1))
    expect_error_close(client.wait_closed(), level, RC.PACKET_TOO_LARGE)
    witness.check()


@pytest.mark.parametrize("level", [4, 5])
def test_second_connect(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander, level: int
) -> None:
    """A second CONNECT is a Protocol Error [MQTT-3.1.0-2]: 5.0 DISCONNECT 0x82, then close."""
    witness = bystander(broker)
    packets = after_connect(clients, broker, level, connect_packet("again", level=level))
    expect_error_close(packets, level, RC.PROTOCOL_ERROR)
    witness.check()


def expect_filter_refused(
    clients: Clients, broker: BrokerUnderTest, level: int, topic_filter: str
) -> None:
    """The filter is refused in the SUBACK (0x80 / 0x8F) or the connection is closed."""
    client = clients.connected(broker, "badfilter", level=level)
    client.send(subscribe_packet(5, [(topic_filter, 1)], v5=level == 5))
    try:
        answer: Packet | None = client.recv()
    except ConnectionClosed:
        answer = None
    if answer is not None and answer.type == SUBACK:
        assert answer.reason_codes in ((RC.TOPIC_FILTER_INVALID,), (0x80,)), answer
        client.ping()
        client.close()
    else:
        packets = ([answer] if answer else []) + client.wait_closed()
        expect_error_close(
            packets, level, {RC.TOPIC_FILTER_INVALID, RC.MALFORMED_PACKET, RC.PROTOCOL_ERROR}
        )


@pytest.mark.parametrize("level", [4, 5])
def test_invalid_topic_filter(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """An invalid filter is refused in the SUBACK (0x80 / 0x8F) or the connection is closed
    [MQTT-4.7.1-1] [MQTT-4.7.1-2] [MQTT-4.7.3-1] [MQTT-4.8.2-2]."""
    witness = bystander(broker)
    for topic_filter in ["a/#/b", "a/b#", "+a", "", "$share/g+/t"]:
        with subtests.test(topic_filter=topic_filter):
            expect_filter_refused(clients, broker, level, topic_filter)
            witness.check()


@pytest.mark.mqttq_only
@pytest.mark.parametrize("level", [4, 5])
def test_invalid_shared_filter(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """A share name needs at least one character and a filter after it [MQTT-4.8.2-1]
    [MQTT-4.8.2-2] (mqttq applies this at 3.1.1 too). (mosquitto 2.0.11 grants these as plain
    filters.)"""
    witness = bystander(broker)
    for topic_filter in ["$share/g", "$share//t"]:
        with subtests.test(topic_filter=topic_filter):
            expect_filter_refused(clients, broker, level, topic_filter)
            witness.check()


@pytest.mark.mqttq_only
def test_no_local_on_shared_subscription(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander
) -> None:
    """No Local on a shared subscription is a Protocol Error [MQTT-3.8.3-4]: DISCONNECT 0x82.
    (mosquitto 2.0.11 grants it.)"""
    witness = bystander(broker)
    data = subscribe_packet(1, [("$share/g/t", sub_options(1, no_local=True))], v5=True)
    expect_error_close(after_connect(clients, broker, 5, data), 5, RC.PROTOCOL_ERROR)
    witness.check()


def test_subscription_identifier_zero(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander
) -> None:
    """A Subscription Identifier of 0 is a Protocol Error (MQTT 5.0 section 3.8.2.1.2)."""
    witness = bystander(broker)
    data = subscribe_packet(1, [("t", 1)], v5=True, props=[(Prop.SUBSCRIPTION_IDENTIFIER, 0)])
    packets = after_connect(clients, broker, 5, data)
    expect_error_close(packets, 5, {RC.PROTOCOL_ERROR, RC.MALFORMED_PACKET})
    witness.check()


@pytest.mark.parametrize("level", [4, 5])
def test_publish_to_wildcard_topic(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """A PUBLISH topic must not contain wildcards [MQTT-3.3.2-2]: close (5.0: DISCONNECT 0x90
    Topic Name invalid, or 0x82)."""
    witness = bystander(broker)
    for topic in ["a/+/b", "a/#", "+"]:
        with subtests.test(topic=topic):
            data = publish_packet(topic, b"x", v5=level == 5, qos=1, packet_id=1)
            packets = after_connect(clients, broker, level, data)
            expect_error_close(packets, level, {RC.TOPIC_NAME_INVALID, RC.PROTOCOL_ERROR})
            witness.check()


@pytest.mark.parametrize("level", [4, 5])
def test_packet_id_zero(
    broker: BrokerUnderTest,
    clients: Clients,
    bystander: MakeBystander,
    subtests: pytest.Subtests,
    level: int,
) -> None:
    """Packet identifier 0 is not allowed [MQTT-2.2.1-3]: close (5.0: DISCONNECT 0x81/0x82)."""
    witness = bystander(broker)
    v5 = level == 5
    cases = {
        "publish": publish_packet("pid/t", b"x", v5=v5, qos=1, packet_id=0),
        "subscribe": subscribe_packet(0, [("pid/t", 1)], v5=v5),
    }
    for kind, data in cases.items():
        with subtests.test(case=kind):
            packets = after_connect(clients, broker, level, data)
            expect_error_close(packets, level, {RC.MALFORMED_PACKET, RC.PROTOCOL_ERROR})
            witness.check()


def test_remaining_length_too_long(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander
) -> None:
    """A Variable Byte Integer of more than 4 bytes is malformed [MQTT-1.5.5]: close."""
    witness = bystander(broker)
    packets = after_connect(clients, broker, 5, b"\x30\xff\xff\xff\xff\x7f")
    assert_disconnected_with(packets, {RC.MALFORMED_PACKET, RC.PACKET_TOO_LARGE})
    witness.check()


@pytest.mark.mqttq_only
def test_silent_connection_times_out(
    broker_factory: BrokerFactory, clients: Clients, bystander: MakeBystander
) -> None:
    """[mqtt] connect_timeout = 1: a TCP connection that never sends CONNECT is closed."""
    broker = broker_factory(config="[mqtt]\nconnect_timeout = 1\n")
    witness = bystander(broker)
    client = clients.raw(broker)
    assert client.wait_closed() == []
    witness.check()


@pytest.mark.mqttq_only
def test_partial_connect_times_out(
    broker_factory: BrokerFactory, clients: Clients, bystander: MakeBystander
) -> None:
    """connect_timeout also covers a CONNECT that starts but never completes."""
    broker = broker_factory(config="[mqtt]\nconnect_timeout = 1\n")
    witness = bystander(broker)
    client = clients.raw(broker)
    client.send(connect_packet("slowloris", level=5)[:7])
    assert client.wait_closed() == []
    witness.check()


def test_half_open_client(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander
) -> None:
    """A client that stops reading and writing (its socket stays open) while messages pile up
    for it does not stall the broker, and keep alive closes it [MQTT-3.1.2-24]."""
    witness = bystander(broker)
    stuck = clients.raw(broker, rcvbuf=4096)
    stuck.connect("stuck", level=5, keepalive=2)
    stuck.subscribe(("flood/#", 0))
    payload = b"z" * 4096
    for _ in range(500):
        witness.client.publish("flood/x", payload, 0)
    witness.check()
    packets = stuck.wait_closed(timeout=20)
    tail = [p for p in packets if p.topic != "flood/x"]
    assert_disconnected_with(tail, RC.KEEP_ALIVE_TIMEOUT)
    witness.check()


def test_unicode_topic_roundtrip(
    broker: BrokerUnderTest, clients: Clients, bystander: MakeBystander
) -> None:
    """Control: valid multi-byte UTF-8 (incl. U+FEFF and 4-byte forms) is accepted."""
    witness = bystander(broker)
    topic = "uni/ü/\ufeff/𝄞"
    client = clients.connected(broker, "unicode", level=5)
    client.subscribe((utf8(topic)[2:], 1))
    client.publish(topic, b"ok", qos=1)
    [message] = client.receive_messages(1)
    assert message.topic == topic
    witness.check()
