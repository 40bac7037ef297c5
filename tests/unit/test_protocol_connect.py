"""CONNECT negotiation: client identifiers, keep alive, session expiry, CONNACK properties."""

from __future__ import annotations

import pytest

from mqttq.codec.enums import SESSION_EXPIRY_NEVER, ProtocolLevel
from mqttq.codec.packets import ConnectPacket, Will
from mqttq.codec.properties import Properties
from mqttq.errors import ProtocolError
from mqttq.protocol.connect import ConnectPolicy, negotiate
from mqttq.reasons import ReasonCode

V5 = ProtocolLevel.MQTT_5
V311 = ProtocolLevel.MQTT_3_1_1
V31 = ProtocolLevel.MQTT_3_1


def new_id() -> str:
    return "assigned-1"


def refused(packet: ConnectPacket, policy: ConnectPolicy | None = None) -> ReasonCode:
    with pytest.raises(ProtocolError) as info:
        negotiate(packet, policy or ConnectPolicy(), new_id)
    return info.value.reason_code


def test_empty_id_on_5_0_is_assigned_and_announced() -> None:
    decision = negotiate(ConnectPacket("", V5), ConnectPolicy(), new_id)
    assert decision.client_id == "assigned-1"
    assert decision.connack_properties.assigned_client_identifier == "assigned-1"


def test_empty_id_on_311_with_clean_session_is_assigned_silently() -> None:
    decision = negotiate(ConnectPacket("", V311, clean_start=True), ConnectPolicy(), new_id)
    assert decision.client_id == "assigned-1"
    assert decision.connack_properties.assigned_client_identifier is None


@pytest.mark.parametrize(
    "packet",
    [ConnectPacket("", V311, clean_start=False), ConnectPacket("", V31, clean_start=True)],
)
def test_empty_id_refused_where_3_x_requires_one(packet: ConnectPacket) -> None:
    assert refused(packet) == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID


def test_client_id_longer_than_the_limit_is_0x85() -> None:
    policy = ConnectPolicy(max_client_id_length=4)
    assert refused(ConnectPacket("abcde", V5), policy) == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
    assert negotiate(ConnectPacket("abcd", V5), policy, new_id).client_id == "abcd"


@pytest.mark.parametrize("level", [V5, V311, V31])
def test_an_integration_session_id_is_0x85_for_any_client(level: ProtocolLevel) -> None:
    assert refused(ConnectPacket("$integration/hook", level)) == (
        ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
    )
    assert negotiate(ConnectPacket("integration/hook", level), ConnectPolicy(), new_id)


def test_authentication_method_is_0x8c() -> None:
    packet = ConnectPacket("c", V5, properties=Properties(authentication_method="SCRAM"))
    assert refused(packet) == ReasonCode.BAD_AUTHENTICATION_METHOD


def test_will_beyond_capabilities_is_refused() -> None:
    policy = ConnectPolicy(maximum_qos=1, retain_available=False)
    assert refused(ConnectPacket("c", V5, will=Will("w", b"", qos=2)), policy) == (
        ReasonCode.QOS_NOT_SUPPORTED
    )
    assert refused(ConnectPacket("c", V5, will=Will("w", b"", retain=True)), policy) == (
        ReasonCode.RETAIN_NOT_SUPPORTED
    )


@pytest.mark.parametrize(
    ("asked", "enforced", "announced"), [(0, 60, 60), (61, 60, 60), (30, 30, None)]
)
def test_server_keep_alive_caps_5_0_clients(
    asked: int, enforced: int, announced: int | None
) -> None:
    decision = negotiate(
        ConnectPacket("c", V5, keep_alive=asked), ConnectPolicy(max_keep_alive=60), new_id
    )
    assert decision.keep_alive == enforced
    assert decision.connack_properties.server_keep_alive == announced


def test_311_keep_alive_is_kept_as_sent() -> None:
    decision = negotiate(
        ConnectPacket("c", V311, keep_alive=0), ConnectPolicy(max_keep_alive=60), new_id
    )
    assert decision.keep_alive == 0


def test_session_expiry_capped_and_announced() -> None:
    packet = ConnectPacket("c", V5, properties=Properties(session_expiry_interval=7200))
    decision = negotiate(packet, ConnectPolicy(max_session_expiry_interval=3600), new_id)
    assert decision.session_expiry_interval == 3600
    assert decision.connack_properties.session_expiry_interval == 3600
    assert decision.persistent


def test_3_x_clean_session_decides_persistence() -> None:
    persistent = negotiate(ConnectPacket("c", V311, clean_start=False), ConnectPolicy(), new_id)
    assert persistent.session_expiry_interval == SESSION_EXPIRY_NEVER
    clean = negotiate(ConnectPacket("c", V311, clean_start=True), ConnectPolicy(), new_id)
    assert clean.session_expiry_interval == 0 and not clean.persistent


def test_connack_advertises_limits() -> None:
    policy = ConnectPolicy(
        receive_maximum=10,
        max_packet_size=5000,
        topic_alias_maximum=3,
        maximum_qos=1,
        retain_available=False,
        shared_subscription_available=False,
    )
    props = negotiate(ConnectPacket("c", V5), policy, new_id).connack_properties
    assert (props.receive_maximum, props.maximum_packet_size, props.topic_alias_maximum) == (
        10,
        5000,
        3,
    )
    assert (props.maximum_qos, props.retain_available) == (1, 0)
    assert props.shared_subscription_available == 0
    assert props.wildcard_subscription_available == 1
    assert props.session_expiry_interval is None  # not capped: not sent
