"""CONNECT / CONNACK end to end: protocol levels, sessions, client ids, takeover, keep alive,
advertised capabilities and refused connections."""

from __future__ import annotations

import pytest

from tests.harness import let_time_pass

from .helpers import (
    Clients,
)
from .waiting import (
    BrokerFactory,
    BrokerUnderTest,
)
from .wire import (
    AUTH,
    CONNACK,
    PINGRESP,
    RC,
    Prop,
    Will,
    assert_disconnected_with,
    connect_packet,
    encode_props,
    packet,
)


@pytest.mark.parametrize(("level", "name"), [(3, "MQIsdp"), (4, "MQTT"), (5, "MQTT")])
def test_protocol_levels_accepted(
    broker: BrokerUnderTest, clients: Clients, level: int, name: str
) -> None:
    """3.1 (MQIsdp/3), 3.1.1 (MQTT/4) and 5.0 (MQTT/5) CONNECTs are accepted [MQTT-3.1.2-2]."""
    client = clients.raw(broker)
    connack = client.connect(f"lvl{level}", level=level)
    assert connack.reason_code == 0
    assert connack.session_present is False
    if level < 5:
        assert connack.body == b"\x00\x00", "3.x CONNACK has exactly two bytes"
    client.ping()


@pytest.mark.parametrize("level", [4, 5])
def test_session_present_flag(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """Session present is 0 for a new or clean session and 1 when a stored one is resumed
    [MQTT-3.2.2-1] [MQTT-3.2.2-2] [MQTT-3.2.2-3]."""
    keep = [(Prop.SESSION_EXPIRY_INTERVAL, 300)] if level == 5 else []
    first = clients.raw(broker)
    assert first.connect("sp", level=level, clean=False, props=keep).session_present is False
    first.subscribe(("sp/t", 1))
    first.disconnect()

    again = clients.raw(broker)
    assert again.connect("sp", level=level, clean=False, props=keep).session_present is True
    again.disconnect()

    clean = clients.raw(broker)
    assert clean.connect("sp", level=level, clean=True, props=keep).session_present is False
    clean.disconnect()


def test_empty_client_id_v5_gets_assigned_identifier(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """A 5.0 client with an empty id gets a unique Assigned Client Identifier [MQTT-3.2.2-16]."""
    ids = []
    for _ in range(2):
        client = clients.raw(broker)
        connack = client.connect("", level=5)
        assigned = connack.props.get(Prop.ASSIGNED_CLIENT_IDENTIFIER)
        assert assigned, f"no Assigned Client Identifier in {connack.props}"
        ids.append(assigned)
        client.ping()
    assert ids[0] != ids[1]


def test_empty_client_id_v311_clean_session_accepted(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """3.1.1: a zero-length client id with clean session 1 is accepted [MQTT-3.1.3-6]."""
    client = clients.raw(broker)
    assert client.connect("", level=4, clean=True).reason_code == 0
    client.ping()


def test_empty_client_id_v311_persistent_rejected(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """3.1.1: empty client id with clean session 0 -> CONNACK 0x02, then close [MQTT-3.1.3-8]."""
    client = clients.raw(broker)
    connack = client.connect("", level=4, clean=False, expect_success=False)
    assert connack.body == b"\x00\x02"
    assert client.wait_closed() == []


def test_takeover_v5(broker: BrokerUnderTest, clients: Clients) -> None:
    """A second connection with the same id takes over: the first gets DISCONNECT 0x8E and is
    closed [MQTT-3.1.4-3]; the new one works."""
    first = clients.connected(broker, "twin", level=5)
    second = clients.connected(broker, "twin", level=5)
    packets = first.wait_closed()
    assert_disconnected_with(packets, RC.SESSION_TAKEN_OVER)
    second.subscribe(("twin/t", 1))
    second.publish("twin/t", b"still here", qos=1)
    [message] = second.receive_messages(1)
    assert message.payload == b"still here"


def test_takeover_v311(broker: BrokerUnderTest, clients: Clients) -> None:
    """3.1.1 takeover: the first connection is closed (a 3.1.1 server sends no DISCONNECT)."""
    first = clients.connected(broker, "twin", level=4)
    second = clients.connected(broker, "twin", level=4)
    assert first.wait_closed() == []
    second.subscribe(("twin/t", 1))
    second.publish("twin/t", b"still here", qos=1)
    [message] = second.receive_messages(1)
    assert message.payload == b"still here"


@pytest.mark.manual_clock
def test_keepalive_enforced_v311_publishes_will(broker: BrokerUnderTest, clients: Clients) -> None:
    """A silent client is disconnected after 1.5 x keep alive [MQTT-3.1.2-24], which is an
    abnormal disconnect: its Will is published [MQTT-3.1.2-8]."""
    observer = clients.connected(broker, "observer", level=4)
    observer.subscribe(("ka/will", 1))
    silent = clients.raw(broker)
    silent.connect("silent", level=4, keepalive=1, will=Will("ka/will", b"timed out", qos=1))
    let_time_pass(broker, 2.0)  # past 1.5 x keep alive
    assert silent.wait_closed() == []
    [will] = observer.receive_messages(1)
    assert will.payload == b"timed out"


@pytest.mark.manual_clock
def test_keepalive_enforced_v5_disconnect_reason(broker: BrokerUnderTest, clients: Clients) -> None:
    """5.0: the silent client is told why: DISCONNECT 0x8D Keep Alive timeout, then closed."""
    silent = clients.raw(broker)
    silent.connect("silent5", level=5, keepalive=1)
    let_time_pass(broker, 2.0)  # past 1.5 x keep alive
    packets = silent.wait_closed()
    assert_disconnected_with(packets, RC.KEEP_ALIVE_TIMEOUT)


@pytest.mark.manual_clock
def test_keepalive_respected_when_client_pings(broker: BrokerUnderTest, clients: Clients) -> None:
    """A client that pings within its keep alive is not disconnected (no premature close):
    3 s, twice the 1.5 x keep alive, pinging every 0.3 s."""
    client = clients.raw(broker)
    client.connect("pinger", level=5, keepalive=1)
    for _ in range(10):
        client.ping()
        let_time_pass(broker, 0.3)
    client.ping()


@pytest.mark.parametrize(
    "cap",
    # mosquitto refuses a max_keepalive below 10.
    [pytest.param(5, marks=pytest.mark.mqttq_only), 10],
)
def test_server_keep_alive_cap(broker_factory: BrokerFactory, clients: Clients, cap: int) -> None:
    """[mqtt] max_keep_alive caps the keep alive: a 5.0 client asking 60 gets the cap as
    Server Keep Alive [MQTT-3.2.2-21]."""
    broker = broker_factory(config=f"[mqtt]\nmax_keep_alive = {cap}\n")
    client = clients.raw(broker)
    connack = client.connect("capped", level=5, keepalive=60)
    assert connack.props.get(Prop.SERVER_KEEP_ALIVE) == cap
    client.ping()


@pytest.mark.mqttq_only
@pytest.mark.manual_clock
def test_server_keep_alive_is_enforced(broker_factory: BrokerFactory, clients: Clients) -> None:
    """The keep alive the server imposed is the one it enforces: a client that asked for 60 s
    but was given 1 s and stays silent is disconnected with 0x8D [MQTT-3.2.2-22]."""
    broker = broker_factory(config="[mqtt]\nmax_keep_alive = 1\n")
    client = clients.raw(broker)
    assert client.connect("imposed", level=5, keepalive=60).props.get(Prop.SERVER_KEEP_ALIVE) == 1
    let_time_pass(broker, 2.0)  # past 1.5 x the imposed keep alive, well short of 60 s
    assert_disconnected_with(client.wait_closed(), RC.KEEP_ALIVE_TIMEOUT)


@pytest.mark.mqttq_only
def test_server_keep_alive_replaces_zero(broker_factory: BrokerFactory, clients: Clients) -> None:
    """mqttq replaces a 5.0 keep alive of 0 (no keep alive) by the cap as well."""
    broker = broker_factory(config="[mqtt]\nmax_keep_alive = 5\n")
    client = clients.raw(broker)
    connack = client.connect("zero", level=5, keepalive=0)
    assert connack.props.get(Prop.SERVER_KEEP_ALIVE) == 5


def test_connack_values_are_consistent(broker: BrokerUnderTest, clients: Clients) -> None:
    """Whatever capabilities the CONNACK states are well-formed [MQTT-3.2.2.3]."""
    client = clients.raw(broker)
    props = client.connect("caps", level=5).props
    assert props.get(Prop.RECEIVE_MAXIMUM, 65535) > 0
    assert props.get(Prop.MAXIMUM_PACKET_SIZE, 1) > 0
    assert props.get(Prop.MAXIMUM_QOS, 2) in (0, 1, 2)
    for flag in (
        Prop.RETAIN_AVAILABLE,
        Prop.WILDCARD_SUBSCRIPTION_AVAILABLE,
        Prop.SUBSCRIPTION_IDENTIFIER_AVAILABLE,
        Prop.SHARED_SUBSCRIPTION_AVAILABLE,
    ):
        assert props.get(flag, 1) in (0, 1)


@pytest.mark.mqttq_only
def test_connack_advertises_configured_capabilities(
    broker_factory: BrokerFactory, clients: Clients
) -> None:
    """mqttq advertises its limits and features explicitly in every 5.0 CONNACK."""
    broker = broker_factory(
        config="[mqtt]\nreceive_maximum = 7\nmax_packet_size = 4096\ntopic_alias_maximum = 9\n"
    )
    client = clients.raw(broker)
    props = client.connect("caps", level=5).props
    assert props.get(Prop.RECEIVE_MAXIMUM) == 7
    assert props.get(Prop.MAXIMUM_PACKET_SIZE) == 4096
    assert props.get(Prop.TOPIC_ALIAS_MAXIMUM) == 9
    assert props.get(Prop.SHARED_SUBSCRIPTION_AVAILABLE) == 1
    assert props.get(Prop.WILDCARD_SUBSCRIPTION_AVAILABLE) == 1
    assert props.get(Prop.SUBSCRIPTION_IDENTIFIER_AVAILABLE) == 1


@pytest.mark.parametrize("level", [2, 6, 0x7F])
def test_unsupported_protocol_level(broker: BrokerUnderTest, clients: Clients, level: int) -> None:
    """An unsupported level is refused: CONNACK return code 1 (3.1.1 form) or 0x84 (5.0 form),
    then the connection is closed [MQTT-3.1.2-2]."""
    client = clients.raw(broker)
    client.send(connect_packet("badlevel", level=level))
    packets = client.wait_closed()
    assert len(packets) == 1, packets
    assert packets[0].type == CONNACK
    assert packets[0].body in (b"\x00\x01", b"\x00\x84\x00"), packets[0]


def test_connect_with_authentication_method_refused(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """Enhanced authentication is not offered: CONNACK 0x8C Bad authentication method, then
    close [MQTT-4.12.0-1]."""
    client = clients.raw(broker)
    connack = client.connect(
        "auth",
        level=5,
        props=[(Prop.AUTHENTICATION_METHOD, "SCRAM-SHA-1"), (Prop.AUTHENTICATION_DATA, b"x")],
        expect_success=False,
    )
    assert connack.reason_code == RC.BAD_AUTHENTICATION_METHOD
    assert client.wait_closed() == []


def test_auth_after_plain_connect_is_protocol_error(
    broker: BrokerUnderTest, clients: Clients
) -> None:
    """AUTH on a connection that did not start enhanced authentication (no Authentication
    Method in CONNECT) is a Protocol Error: DISCONNECT 0x82 (MQTT 5.0 sections 4.12, 4.13)."""
    client = clients.connected(broker, "reauth", level=5)
    client.send(
        packet(
            AUTH,
            0,
            bytes([RC.REAUTHENTICATE])
            + encode_props([(Prop.AUTHENTICATION_METHOD, "SCRAM-SHA-1")]),
        )
    )
    packets = client.wait_closed()
    assert_disconnected_with(packets, RC.PROTOCOL_ERROR)


def test_pingreq_pingresp(broker: BrokerUnderTest, clients: Clients) -> None:
    """PINGREQ is answered with PINGRESP (two bytes) [MQTT-3.12.4-1]."""
    client = clients.connected(broker, "ping", level=4)
    client.send(b"\xc0\x00")
    pong = client.recv()
    assert (pong.type, pong.flags, pong.body) == (PINGRESP, 0, b"")


def test_normal_disconnect_closes_connection(broker: BrokerUnderTest, clients: Clients) -> None:
    """After DISCONNECT the server closes the network connection [MQTT-3.14.4-1]."""
    client = clients.connected(broker, "bye", level=5)
    client.send(b"\xe0\x00")
    assert client.wait_closed() == []
